"""Topology-aware placement, case by case (``cases/*.yaml``), ported in behaviour from Kueue's TAS tests.

Each case describes nodes (labels, allocatable, readiness, taints), a topology, TAS flavors, bound pods and
admitted workloads; they become events folded into a ClusterState, so the projection is exercised too. Then
the pod sets are placed in order (later ones see the usage of earlier ones), or a node is replaced, and each
pod set's domains (``want``: [values..., count]) or Kueue's failure message (``wantReason``) is checked.
``gates`` sets the feature gates placement reads (``TASBalancedPlacement``, ``TASMultiLayerTopology``,
``TASHandleOverlappingFlavors``, ``TASProfileMixed``, ``TASAssignmentsEncodingByHostnamePrefix``,
``TASRespectNodeAffinityPreferred`` with a pod set's ``preferredAffinity`` terms), as a Kueue Configuration's
``featureGates`` would; level names in ``topologyRequest`` (also in its slice layers) may be the
short aliases of ``fixtures.tasbuild``. ``wantSlices`` is how many v1beta2 slices the placement is written in.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
from fixtures import fastyaml
from fixtures.tasbuild import (
    HOSTNAME,
    admitted_workload_obj,
    flavor_obj,
    label,
    node_obj,
    pod_obj,
    topology_obj,
    upsert,
)

from events import objects as o
from events import schema as ev
from events.quantity import to_int
from kueue_es.scheduler.config import load_config
from kueue_es.scheduler.tas import (
    NoPlacement,
    Placement,
    PodSetRequest,
    TASOptions,
    place_workload,
    replace_node,
)
from kueue_es.scheduler.tasplace import tas_options
from projections.cluster import ClusterState
from projections.topology import tas_snapshots

CASES_DIR = Path(__file__).parent / "cases"


def _load() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted(CASES_DIR.glob("*.yaml")):
        doc = fastyaml.safe_load(path.read_text())
        for case in doc["cases"]:
            out.append((f"{path.stem}: {case['name']}", case))
    return out


CASES = _load()


def build_state(case: dict[str, Any]) -> ClusterState:
    levels = case["levels"]
    events: list[ev.Event] = [upsert(topology_obj("default", levels)),
                              upsert(flavor_obj("tas", "default", case.get("flavorLabels"),
                                                case.get("flavorTolerations")))]
    for extra in case.get("extraFlavors") or []:
        events.append(upsert(topology_obj(f"topo-{extra['name']}", extra["levels"])))
        events.append(upsert(flavor_obj(extra["name"], f"topo-{extra['name']}", extra.get("nodeLabels"))))
    events += [upsert(node_obj(n)) for n in case["nodes"]]
    events += [upsert(pod_obj(p)) for p in case.get("pods") or []]
    events += [upsert(admitted_workload_obj(w, levels)) for w in case.get("admitted") or []]
    state = ClusterState()
    for i, e in enumerate(events):
        state.apply(ev.Record(i, e))
    return state


def _levels_named(value: Any) -> Any:
    if isinstance(value, str):
        return label(value)
    if isinstance(value, list):
        return [{**layer, "topology": label(layer["topology"])} if "topology" in layer else layer for layer in value]
    return value


def request_of(spec: dict[str, Any], index: int) -> PodSetRequest:
    topo = spec.get("topologyRequest")
    topology = None
    if topo is not None:
        topology = msgspec.convert({k: _levels_named(v) for k, v in topo.items()}, o.PodSetTopologyRequest)
    affinity = spec.get("affinity")
    preferred = spec.get("preferredAffinity") or []
    return PodSetRequest(
        name=spec.get("name", f"ps{index}"),
        count=spec["count"],
        requests=tuple(sorted((r, to_int(r, q)) for r, q in (spec.get("requests") or {}).items())),
        topology=topology,
        implied=spec.get("implied", topo is None),
        node_selector=tuple(sorted((k, str(v)) for k, v in (spec.get("nodeSelector") or {}).items())),
        tolerations=tuple(msgspec.convert(spec.get("tolerations") or [], list[o.Toleration])),
        affinity_terms=None if affinity is None else tuple(msgspec.convert(affinity, list[o.NodeSelectorTerm])),
        preferred_terms=tuple(msgspec.convert(preferred, list[o.PreferredSchedulingTerm])),
    )


def _domains(want: list[list[Any]]) -> tuple[tuple[tuple[str, ...], int], ...]:
    return tuple((tuple(str(x) for x in d[:-1]), int(d[-1])) for d in want)


def _levels(case: dict[str, Any], want: list[list[Any]]) -> tuple[str, ...]:
    full = tuple(label(lv) for lv in case["levels"])
    if full[-1] == HOSTNAME:
        return (HOSTNAME,)
    return full


def _want(case: dict[str, Any], want: list[list[Any]], options: TASOptions) -> Placement:
    return Placement(_levels(case, want), _domains(want), options.hostname_prefix_encoding)


def _check_slices(spec: dict[str, Any], placement: Placement) -> None:
    if "wantSlices" in spec:
        written = placement.encode()
        assert len(written.slices) == spec["wantSlices"], written
        assert Placement.decode(written).domains == placement.domains


@pytest.mark.parametrize("case", [c for _, c in CASES], ids=[n for n, _ in CASES])
def test_case(case: dict[str, Any]) -> None:
    state = build_state(case)
    options = tas_options(load_config({"featureGates": case.get("gates") or {}}))
    snaps = tas_snapshots(state, options.overlapping_flavors)
    specs = case["podSets"]
    requests = [(s.get("flavor", "tas"), request_of(s, i)) for i, s in enumerate(specs)]
    replace = case.get("replace")
    if replace is not None:
        assert len(specs) == 1, "a replacement case has one pod set"
        flavor, req = requests[0]
        current = Placement(_levels(case, replace["current"]), _domains(replace["current"]))
        res = replace_node(snaps[flavor], req, current, replace["node"], options=options,
                           listed=frozenset(replace.get("listed") or ()))
        if "wantReason" in specs[0]:
            assert isinstance(res, NoPlacement), f"expected a failure, got {res}"
            assert res.message == specs[0]["wantReason"]
        else:
            assert not isinstance(res, NoPlacement), res.message
            assert res.placement == _want(case, specs[0]["want"], options)
            _check_slices(specs[0], res.placement)
        return
    result = place_workload(snaps, requests, simulate_empty=bool(case.get("simulateEmpty")), options=options)
    for spec, (_, req) in zip(specs, requests, strict=True):
        if "wantReason" in spec:
            assert result.failed == req.name, f"{req.name}: expected a failure, got {result}"
            assert result.message == spec["wantReason"]
            break
        assert result.failed != req.name, f"{req.name}: {result.message}"
        assert result.placements.get(req.name) == _want(case, spec["want"], options)
        _check_slices(spec, result.placements[req.name])
