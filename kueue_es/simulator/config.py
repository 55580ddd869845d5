"""Scenario files: the format of Kueue's scheduler performance generator (``generator.yaml``).

Accepted as Kueue's runner reads it (``test/performance/scheduler/runner/generator``)::

    topology:        {name, levels: [{name, count, nodeLabel, capacity: {cpu, memory}}]}      # TAS only
    resourceFlavor:  {name, nodeLabel, topologyName}                                         # default: rf
    cohorts:
    - className, count,
      queuesSets:
      - className, count, nominalQuota, borrowingLimit, reclaimWithinCohort, withinClusterQueue,
        workloadsSets:
        - count, creationIntervalMs,
          workloads: [{className, runtimeMs, priority, request, podCount, tasConstraint, tasLevel, sliceSize}]

plus three kueue-es extensions: ``lendingLimit`` on a queues set, ``initialDelayMs`` on a workloads set and
``children`` on a cohort set (cohort sets nested under each cohort, created as Cohort objects with a parent).
Every key is checked: an unknown one is an error naming its path (exit code 2). DRA scenarios (``dra``,
``devices``, ``deviceNominalQuota``) are recognised and refused: the simulator does not model devices.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from events.errors import InvalidInput
from events.manifests import read_text
from events.quantity import QuantityError, parse_quantity, to_int

RECLAIM_POLICIES = ("Never", "LowerPriority", "Any")
WITHIN_CQ_POLICIES = ("Never", "LowerPriority", "LowerOrNewerEqualPriority")
TAS_CONSTRAINTS = ("required", "preferred", "balanced")
DEFAULT_FLAVOR = "rf"
DRA_KEYS = frozenset({"dra", "devices", "deviceNominalQuota", "deviceBorrowingLimit"})
BUNDLED = ("baseline", "large-scale", "tas", "demo")
"""Scenarios shipped in the package (``kueue_es/simulator/scenarios/<name>.yaml``)."""


@dataclass(frozen=True)
class WorkloadTemplate:
    class_name: str
    runtime_ms: int
    priority: int
    request: str
    """Per-pod cpu request, as written."""
    request_milli: int
    pod_count: int = 1
    tas_constraint: str = ""
    tas_level: str = ""
    slice_size: int = 0


@dataclass(frozen=True)
class WorkloadsSet:
    count: int
    creation_interval_ms: int
    workloads: tuple[WorkloadTemplate, ...]
    initial_delay_ms: int = 0


@dataclass(frozen=True)
class QueuesSet:
    class_name: str
    count: int
    nominal_quota: str
    borrowing_limit: str | None
    lending_limit: str | None
    reclaim_within_cohort: str
    within_cluster_queue: str
    workloads_sets: tuple[WorkloadsSet, ...]


@dataclass(frozen=True)
class CohortSet:
    class_name: str
    count: int
    queues_sets: tuple[QueuesSet, ...]
    children: tuple[CohortSet, ...] = ()


@dataclass(frozen=True)
class TopologyLevel:
    name: str
    count: int
    node_label: str
    cpu: str = "96"
    memory: str = "256Gi"


@dataclass(frozen=True)
class Topology:
    name: str
    levels: tuple[TopologyLevel, ...]


@dataclass(frozen=True)
class Flavor:
    name: str = DEFAULT_FLAVOR
    node_label: str = ""
    topology_name: str = ""


@dataclass(frozen=True)
class Scenario:
    name: str
    source: str
    cohorts: tuple[CohortSet, ...]
    flavor: Flavor
    topology: Topology | None = None


# --- loading -----------------------------------------------------------------------------------------------


INT32_MAX = 2**31 - 1
"""The largest count or priority a scenario may give (Kueue's priorities are int32)."""
YEAR_MS = 365 * 86_400_000
"""The longest time in ms a scenario may give: the simulated clock's times must stay 64-bit."""


def bundled_path(name: str) -> Path | None:
    if name not in BUNDLED:
        return None
    return Path(str(resources.files("kueue_es.simulator") / "scenarios" / f"{name}.yaml"))


def resolve(spec: str) -> Path:
    """A scenario argument: a file path, or the name of a bundled scenario (``baseline``, ``tas``, ...)."""
    p = Path(spec)
    if p.exists():
        if not p.is_file():
            raise InvalidInput(f"{spec}: not a scenario file")
        return p
    bundled = bundled_path(spec)
    if bundled is not None:
        return bundled
    raise InvalidInput(f"{spec}: no such scenario file (bundled scenarios: {', '.join(BUNDLED)})")


def load(spec: str) -> Scenario:
    path = resolve(spec)
    text = read_text(path, spec)
    name = path.stem if path.stem != "generator" else path.parent.name
    return parse_text(text, source=str(path) if bundled_path(spec) is None or Path(spec).exists() else "bundled",
                      name=name)


def parse_text(text: str, source: str = "<scenario>", name: str = "scenario") -> Scenario:
    try:
        doc = yaml.safe_load(text)
    except RecursionError:
        raise InvalidInput(f"{source}: nested too deeply (or an alias holds itself)") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}:" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InvalidInput(f"{source}:{where} malformed YAML: {problem}") from None
    return parse(doc, source, name)


def parse(doc: Any, source: str = "<scenario>", name: str = "scenario") -> Scenario:
    p = _Parser(source)
    d = p.mapping(doc, "", {"cohorts", "topology", "resourceFlavor"}, required=("cohorts",))
    topology = p.topology(d["topology"], "topology") if d.get("topology") is not None else None
    flavor = p.flavor(d["resourceFlavor"], "resourceFlavor") if d.get("resourceFlavor") is not None else Flavor()
    cohorts = tuple(p.cohort_set(c, f"cohorts[{i}]") for i, c in enumerate(p.seq(d["cohorts"], "cohorts")))
    if not cohorts:
        raise InvalidInput(f"{source}: `cohorts`: the scenario needs at least one cohort set")
    if flavor.topology_name and topology is not None and flavor.topology_name != topology.name:
        raise InvalidInput(f"{source}: `resourceFlavor.topologyName`: {flavor.topology_name!r} is not the "
                           f"topology of the scenario ({topology.name!r})")
    return Scenario(name=name, source=source, cohorts=cohorts, flavor=flavor, topology=topology)


class _Parser:
    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, path: str, message: str) -> InvalidInput:
        where = f"`{path}`: " if path else ""
        return InvalidInput(f"{self.source}: {where}{message}")

    def mapping(self, value: Any, path: str, allowed: set[str], required: tuple[str, ...] = ()) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(path, f"expected a mapping, got {_kind(value)}")
        for k in value:
            kp = f"{path}.{k}" if path else str(k)
            if not isinstance(k, str) or k not in allowed:
                if k in DRA_KEYS:
                    raise self.fail(kp, "DRA scenarios are not supported by the simulator (devices are not modelled)")
                raise self.fail(kp, f"unknown key (expected one of: {', '.join(sorted(allowed))})")
        for k in required:
            if value.get(k) is None:
                raise self.fail(f"{path}.{k}" if path else k, "required key is missing")
        return value

    def seq(self, value: Any, path: str) -> list[Any]:
        if not isinstance(value, list):
            raise self.fail(path, f"expected a list, got {_kind(value)}")
        return value

    def integer(self, d: dict[str, Any], key: str, path: str, default: int | None = None, minimum: int = 0,
                maximum: int = INT32_MAX) -> int:
        v = d.get(key)
        if v is None:
            if default is None:
                raise self.fail(f"{path}.{key}", "required key is missing")
            return default
        if isinstance(v, bool) or not isinstance(v, int):
            if isinstance(v, str) and v.isascii() and v.strip().lstrip("-").isdigit():
                v = int(v)
            else:
                raise self.fail(f"{path}.{key}", f"expected an integer, got {_kind(v)} {v!r}")
        if v < minimum:
            raise self.fail(f"{path}.{key}", f"must be >= {minimum}, got {v}")
        if v > maximum:
            raise self.fail(f"{path}.{key}", f"must be <= {maximum}, got {v}")
        return v

    def string(self, d: dict[str, Any], key: str, path: str, default: str | None = None) -> str:
        v = d.get(key)
        if v is None:
            if default is None:
                raise self.fail(f"{path}.{key}", "required key is missing")
            return default
        if not isinstance(v, str) or not v:
            raise self.fail(f"{path}.{key}", f"expected a non-empty string, got {_kind(v)} {v!r}")
        return v

    def quantity(self, d: dict[str, Any], key: str, path: str, required: bool = False) -> str | None:
        v = d.get(key)
        if v is None or v == "":
            if required:
                raise self.fail(f"{path}.{key}", "required key is missing")
            return None
        if isinstance(v, bool) or not isinstance(v, (str, int, float)):
            raise self.fail(f"{path}.{key}", f"expected a quantity such as 20 or \"500m\", got {_kind(v)}")
        text = str(v)
        try:
            if parse_quantity(text) < 0:
                raise self.fail(f"{path}.{key}", f"must not be negative, got {text}")
        except QuantityError:
            raise self.fail(f"{path}.{key}", f"not a quantity: {text!r}") from None
        return text

    def choice(self, d: dict[str, Any], key: str, path: str, choices: tuple[str, ...], default: str) -> str:
        v = d.get(key)
        if v is None or v == "":
            return default
        if v not in choices:
            raise self.fail(f"{path}.{key}", f"expected one of {', '.join(choices)}, got {v!r}")
        return v

    # --- sections ------------------------------------------------------------------------------------------

    def cohort_set(self, value: Any, path: str) -> CohortSet:
        d = self.mapping(value, path, {"className", "count", "queuesSets", "children"}, required=("className",))
        qsets = tuple(self.queues_set(q, f"{path}.queuesSets[{i}]")
                      for i, q in enumerate(self.seq(d.get("queuesSets") or [], f"{path}.queuesSets")))
        children = tuple(self.cohort_set(c, f"{path}.children[{i}]")
                         for i, c in enumerate(self.seq(d.get("children") or [], f"{path}.children")))
        return CohortSet(self.string(d, "className", path), self.integer(d, "count", path, 1), qsets, children)

    def queues_set(self, value: Any, path: str) -> QueuesSet:
        d = self.mapping(value, path, {"className", "count", "nominalQuota", "borrowingLimit", "lendingLimit",
                                       "reclaimWithinCohort", "withinClusterQueue", "workloadsSets"},
                         required=("className", "nominalQuota"))
        wsets = tuple(self.workloads_set(w, f"{path}.workloadsSets[{i}]")
                      for i, w in enumerate(self.seq(d.get("workloadsSets") or [], f"{path}.workloadsSets")))
        return QueuesSet(
            class_name=self.string(d, "className", path),
            count=self.integer(d, "count", path, 1),
            nominal_quota=self.quantity(d, "nominalQuota", path, required=True) or "0",
            borrowing_limit=self.quantity(d, "borrowingLimit", path),
            lending_limit=self.quantity(d, "lendingLimit", path),
            reclaim_within_cohort=self.choice(d, "reclaimWithinCohort", path, RECLAIM_POLICIES, "Never"),
            within_cluster_queue=self.choice(d, "withinClusterQueue", path, WITHIN_CQ_POLICIES, "Never"),
            workloads_sets=wsets,
        )

    def workloads_set(self, value: Any, path: str) -> WorkloadsSet:
        d = self.mapping(value, path, {"count", "creationIntervalMs", "initialDelayMs", "workloads"},
                         required=("workloads",))
        templates = tuple(self.workload(w, f"{path}.workloads[{i}]")
                          for i, w in enumerate(self.seq(d["workloads"], f"{path}.workloads")))
        return WorkloadsSet(
            count=self.integer(d, "count", path, 1),
            creation_interval_ms=self.integer(d, "creationIntervalMs", path, 0, maximum=YEAR_MS),
            workloads=templates,
            initial_delay_ms=self.integer(d, "initialDelayMs", path, 0, maximum=YEAR_MS),
        )

    def workload(self, value: Any, path: str) -> WorkloadTemplate:
        d = self.mapping(value, path, {"className", "runtimeMs", "priority", "request", "podCount",
                                       "tasConstraint", "tasLevel", "sliceSize"},
                         required=("className", "request"))
        request = self.quantity(d, "request", path, required=True) or "0"
        tas_level = d.get("tasLevel") or ""
        if tas_level and not isinstance(tas_level, str):
            raise self.fail(f"{path}.tasLevel", f"expected a node label, got {_kind(tas_level)}")
        constraint = self.choice(d, "tasConstraint", path, TAS_CONSTRAINTS, "required" if tas_level else "")
        if d.get("tasConstraint") and not tas_level:
            raise self.fail(f"{path}.tasConstraint", "needs `tasLevel` (the topology level to constrain to)")
        return WorkloadTemplate(
            class_name=self.string(d, "className", path),
            runtime_ms=self.integer(d, "runtimeMs", path, 0, maximum=YEAR_MS),
            priority=self.integer(d, "priority", path, 0, minimum=-(2**31)),
            request=request,
            request_milli=to_int("cpu", request),
            pod_count=self.integer(d, "podCount", path, 1, minimum=1),
            tas_constraint=constraint,
            tas_level=tas_level,
            slice_size=self.integer(d, "sliceSize", path, 0),
        )

    def topology(self, value: Any, path: str) -> Topology:
        d = self.mapping(value, path, {"name", "levels"}, required=("name", "levels"))
        levels = []
        for i, lv in enumerate(self.seq(d["levels"], f"{path}.levels")):
            lp = f"{path}.levels[{i}]"
            ld = self.mapping(lv, lp, {"name", "count", "nodeLabel", "capacity"}, required=("name", "nodeLabel"))
            cap = self.mapping(ld.get("capacity") or {}, f"{lp}.capacity", {"cpu", "memory"})
            levels.append(TopologyLevel(
                name=self.string(ld, "name", lp), count=self.integer(ld, "count", lp, 1, minimum=1),
                node_label=self.string(ld, "nodeLabel", lp),
                cpu=self.quantity(cap, "cpu", f"{lp}.capacity") or "96",
                memory=self.quantity(cap, "memory", f"{lp}.capacity") or "256Gi",
            ))
        if len(levels) < 2:
            raise self.fail(f"{path}.levels", f"a topology needs at least 2 levels, got {len(levels)}")
        return Topology(self.string(d, "name", path), tuple(levels))

    def flavor(self, value: Any, path: str) -> Flavor:
        d = self.mapping(value, path, {"name", "nodeLabel", "topologyName"}, required=("name",))
        f = Flavor(self.string(d, "name", path), self.string(d, "nodeLabel", path, ""),
                   self.string(d, "topologyName", path, ""))
        if f.topology_name and not f.node_label:
            raise self.fail(f"{path}.nodeLabel", "required when `topologyName` is set (TAS)")
        return f


def _kind(v: Any) -> str:
    if v is None:
        return "nothing"
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", int: "an integer",
            float: "a number"}.get(type(v), type(v).__name__)
