"""ClusterQueue specs compiled once for the scheduler's hot path.

A :class:`ClusterQueueInfo` holds what a scheduling cycle asks of a ClusterQueue over and over — which resource
group covers a resource, the flavors of each group in order with their ``flavor/resource`` keys, whether
``pods`` is covered, whether the queue is active (Kueue's Active condition) and which admission checks apply —
so a cycle reads it instead of walking the spec for every head. The projection compiles an info on first use
and drops every info when anything it depends on changes (see ``ClusterState.spec_generation``); the infos are
derived data, never part of a snapshot.
"""

from __future__ import annotations

from collections.abc import Mapping

from events import objects as o
from projections.admissionchecks import (
    MULTIKUEUE_CONTROLLER,
    PROVISIONING_CONTROLLER,
    MultiKueueWorld,
    check_active,
)
from projections.cohorts import CohortForest


class FlavorSlot:
    """One flavor of a resource group."""

    __slots__ = ("flavor", "frs", "name", "plain")

    def __init__(self, name: str, covered: list[str], flavor: o.ResourceFlavor | None, tas: bool = True) -> None:
        self.name = name
        self.frs: dict[str, str] = {r: f"{name}/{r}" for r in covered}
        """resource -> ``flavor/resource``."""
        self.flavor = flavor
        """The ResourceFlavor object, or None when it does not exist."""
        self.plain = (flavor is not None and not flavor.spec.node_labels
                      and not (tas and flavor.spec.topology_name)
                      and not any(t.effect in ("NoSchedule", "NoExecute") for t in flavor.spec.node_taints))
        """True when every pod set not asking for a topology may use the flavor (it exists, is no TAS flavor while
        TAS is on, has no labels to match and no taints)."""


class GroupInfo:
    __slots__ = ("covered", "flavors")

    def __init__(self, rg: o.ResourceGroup, flavors: Mapping[str, o.ResourceFlavor], tas: bool = True) -> None:
        self.covered: list[str] = list(rg.covered_resources)
        self.flavors: list[FlavorSlot] = [FlavorSlot(fq.name, self.covered, flavors.get(fq.name), tas)
                                          for fq in rg.flavors]


class ClusterQueueInfo:
    __slots__ = ("check_rules", "covers_pods", "eligibility", "group_of", "groups", "inactive", "inactive_reasons",
                 "multikueue_checks", "name", "obj", "plans", "provisioning_checks", "spec", "strict_fifo", "tas",
                 "tas_levels", "tas_only", "_namespaces")

    def __init__(self, name: str, obj: o.ClusterQueue, flavors: Mapping[str, o.ResourceFlavor],
                 admission_checks: Mapping[str, o.AdmissionCheck], topologies: Mapping[str, o.Topology],
                 forest: CohortForest, provisioning_configs: Mapping[str, o.ProvisioningRequestConfig] | None = None,
                 tas: bool = True, multikueue: MultiKueueWorld | None = None,
                 concurrent: bool = False) -> None:
        spec = obj.spec
        self.name = name
        self.obj = obj
        self.spec = spec
        self.tas = tas
        """Kueue's TopologyAwareScheduling gate: off, no flavor counts as a TAS flavor here — topology requests
        are not looked at, a TAS flavor serves any pod set on quota alone, and a missing Topology is no reason to
        stop admitting."""
        self.groups = [GroupInfo(rg, flavors, tas) for rg in spec.resource_groups]
        self.group_of: dict[str, GroupInfo] = {}
        """resource -> the (first) group covering it."""
        for g in self.groups:
            for r in g.covered:
                self.group_of.setdefault(r, g)
        self.covers_pods = "pods" in self.group_of
        self.strict_fifo = spec.queueing_strategy == "StrictFIFO"
        rules = spec.admission_checks_strategy.admission_checks if spec.admission_checks_strategy else []
        self.check_rules: list[tuple[str, frozenset[str]]] = [(r.name, frozenset(r.on_flavors)) for r in rules]
        self.provisioning_checks: list[tuple[str, frozenset[str]]] = [
            (n, on) for n, on in self.check_rules
            if (ac := admission_checks.get(n)) is not None and ac.spec.controller_name == PROVISIONING_CONTROLLER]
        """The ProvisioningRequest checks (name, onFlavors): they delay the topology of the flavors they cover."""
        self.multikueue_checks: list[str] = multikueue_checks(self.check_rules, admission_checks)
        """The MultiKueue checks (one, on a queue that may admit): on a manager, topology is always delayed, since
        it is placed on the worker."""
        self.tas_levels: dict[str, tuple[str, ...] | None] = {}
        """TAS flavor -> its Topology's level keys, highest first (None while the Topology is not known); empty
        while TAS is off."""
        all_tas = tas and bool(self.groups)
        for g in self.groups if tas else ():
            for slot in g.flavors:
                f = slot.flavor
                if f is None or not f.spec.topology_name:
                    all_tas = False
                    continue
                topo = topologies.get(f.spec.topology_name)
                self.tas_levels[slot.name] = (tuple(lv.node_label for lv in topo.spec.levels)
                                              if topo is not None else None)
        self.tas_only = all_tas
        """Every flavor of every resource group is a TAS flavor: pod sets without a topology request get one implied."""
        self.inactive_reasons = inactive_reasons(obj, flavors, admission_checks, topologies, forest,
                                                 provisioning_configs or {}, tas, multikueue, concurrent)
        """Every reason the queue cannot admit, in Kueue's order, each with the part of the message it adds."""
        self.inactive = self.inactive_reasons[0][0] if self.inactive_reasons else None
        """Kueue's first Active=False reason, or None when the queue can admit."""
        self.eligibility: dict[tuple[object, ...], str | None] = {}
        """(flavor slot, pod set, ...) -> why the flavor cannot serve the pod set; the scheduler's memo (by slot:
        what TAS allows depends on the group the flavor serves)."""
        self.plans: dict[tuple[int, int, bool], object] = {}
        """The scheduler's memo of what a pod set of some count requests from this queue (see flavors._plan)."""
        self._namespaces: dict[str, bool] = {}

    def namespace_matches(self, namespace: str, labels: dict[str, str] | None) -> bool:
        """Whether the queue's namespaceSelector selects ``namespace`` (with these labels)."""
        found = self._namespaces.get(namespace)
        if found is None:
            found = self._namespaces[namespace] = selector_matches(self.spec.namespace_selector, labels)
        return found

    def required_checks(self, flavors: set[str] | frozenset[str]) -> list[str]:
        """Admission checks that apply to an admission using ``flavors``."""
        if not self.check_rules:
            return []
        return sorted(n for n, on in self.check_rules if not on or flavors & on)


TERMINATING = "Terminating"
COHORT_CYCLE = "CohortCycleDetected"


def multikueue_checks(rules: list[tuple[str, frozenset[str]]], admission_checks: Mapping[str, o.AdmissionCheck]
                      ) -> list[str]:
    """The names of a queue's checks of the MultiKueue controller, sorted."""
    return sorted({n for n, _ in rules
                   if (ac := admission_checks.get(n)) is not None and ac.spec.controller_name == MULTIKUEUE_CONTROLLER})


def inactive_reasons(obj: o.ClusterQueue, flavors: Mapping[str, o.ResourceFlavor],
                     admission_checks: Mapping[str, o.AdmissionCheck], topologies: Mapping[str, o.Topology],
                     forest: CohortForest, configs: Mapping[str, o.ProvisioningRequestConfig],
                     tas: bool = True, multikueue: MultiKueueWorld | None = None,
                     concurrent: bool = False) -> list[tuple[str, str]]:
    """Why the ClusterQueue cannot admit: (reason, what Kueue's Active message says of it), first reason first.

    A ClusterQueue being deleted (held by its finalizer) is only ``Terminating``. One whose Cohort's parent
    links loop (its Cohort in the loop or leading into it) is ``CohortCycleDetected``, the message naming its own
    Cohort (Kueue #13774). A TAS flavor whose Topology is missing counts only with ``tas``
    (Kueue's TopologyAwareScheduling gate). With ``concurrent`` (Kueue's ConcurrentAdmission gate) a queue
    with a ``concurrentAdmissionPolicy`` may not carry a MultiKueue check: concurrent admission runs on the
    workers."""
    name, spec = obj.metadata.name, obj.spec
    if obj.metadata.deletion_timestamp:
        return [(TERMINATING, "")]
    reasons: list[tuple[str, str]] = []
    if spec.stopped:
        reasons.append(("Stopped", "is stopped"))
    if "cq:" + name in forest.cyclic:
        reasons.append((COHORT_CYCLE, f'Cohort "{spec.cohort_name}" has a cycle in hierarchy'))
    missing = [fq.name for rg in spec.resource_groups for fq in rg.flavors if fq.name not in flavors]
    if missing:
        reasons.append(("FlavorNotFound", f"references missing ResourceFlavor(s): {','.join(missing)}"))
    checks = spec.admission_checks_strategy.admission_checks if spec.admission_checks_strategy else []
    missing_checks = sorted({c.name for c in checks if c.name not in admission_checks})
    if missing_checks:
        reasons.append(("AdmissionCheckNotFound",
                        f"references missing AdmissionCheck(s): {','.join(missing_checks)}"))
    inactive_checks = sorted({c.name for c in checks if c.name in admission_checks
                              and not check_active(admission_checks[c.name], configs, multikueue)[0]})
    if inactive_checks:
        reasons.append(("AdmissionCheckInactive",
                        f"references inactive AdmissionCheck(s): {','.join(inactive_checks)}"))
    every_flavor = frozenset(fq.name for rg in spec.resource_groups for fq in rg.flavors)
    reasons.extend(_multikueue_reasons(checks, admission_checks, every_flavor))
    with_multikueue = any((ac := admission_checks.get(c.name)) is not None
                          and ac.spec.controller_name == MULTIKUEUE_CONTROLLER for c in checks)
    if concurrent and with_multikueue and spec.concurrent_admission_policy is not None:
        reasons.append(("MultiKueueWithConcurrentAdmission",
                        "Cannot use ConcurrentAdmission on a ClusterQueue with a MultiKueue AdmissionCheck"))
    if tas and (reasons or not with_multikueue):
        reasons.extend(_missing_topologies(spec, flavors, topologies))
    return reasons


def _missing_topologies(spec: o.ClusterQueueSpec, flavors: Mapping[str, o.ResourceFlavor],
                        topologies: Mapping[str, o.Topology]) -> list[tuple[str, str]]:
    """A ``TopologyNotFound`` entry for each TAS flavor whose Topology does not exist, in resource-group order
    (Kueue walks a map here: random order with two or more).

    On a MultiKueue manager the topology is placed on the worker, so a missing one never stops the queue alone
    (:func:`inactive_reasons` asks only when some other reason already does); but Kueue's message for a queue
    stopped by something else still names each missing Topology, after the other reasons."""
    return [("TopologyNotFound", f'there is no Topology "{f.spec.topology_name}" for TAS flavor "{fq.name}"')
            for rg in spec.resource_groups for fq in rg.flavors
            if (f := flavors.get(fq.name)) is not None and f.spec.topology_name
            and f.spec.topology_name not in topologies]


def _multikueue_reasons(checks: list[o.AdmissionCheckStrategyRule], admission_checks: Mapping[str, o.AdmissionCheck],
                        every_flavor: frozenset[str]) -> list[tuple[str, str]]:
    """Kueue's rules for MultiKueue checks on a ClusterQueue: one at most, on every flavor, and never with a
    ProvisioningRequest check.

    "On every flavor" compares sets (Kueue #6785): an empty ``onFlavors`` stands for ``every_flavor`` (the flavors
    of the resource groups in force), and a list naming exactly those, in any order, is the same; a list leaving
    one out or naming another is per flavor. A check named twice is taken by its last rule, as Kueue's map of
    checks keeps it."""
    def controller(name: str) -> str:
        ac = admission_checks.get(name)
        return ac.spec.controller_name if ac is not None else ""

    flavors_of = {c.name: frozenset(c.on_flavors) or every_flavor for c in checks}
    mk = sorted({c.name for c in checks if controller(c.name) == MULTIKUEUE_CONTROLLER})
    per_flavor = [name for name in mk if flavors_of[name] != every_flavor]
    provisioning = sorted({c.name for c in checks if controller(c.name) == PROVISIONING_CONTROLLER})
    reasons = []
    if len(mk) > 1:
        reasons.append(("MultipleMultiKueueAdmissionChecks",
                        f"Cannot use multiple MultiKueue AdmissionChecks on the same ClusterQueue, found: {','.join(mk)}"))
    if per_flavor:
        reasons.append(("MultiKueueAdmissionCheckAppliedPerFlavor",
                        f"Cannot specify MultiKueue AdmissionCheck per flavor, found: {','.join(per_flavor)}"))
    if mk and provisioning:
        reasons.append(("MultiKueueWithProvisioningRequest",
                        "Cannot use both MultiKueue and ProvisioningRequest AdmissionChecks together, found: "
                        f"{','.join(mk)}, {','.join(provisioning)}"))
    return reasons


def active_condition(reasons: list[tuple[str, str]]) -> tuple[str, str, str]:
    """Kueue's ClusterQueue ``Active`` condition (status, reason, message) for these inactive reasons."""
    if not reasons:
        return "True", "Ready", "Can admit new workloads"
    if reasons[0][0] == TERMINATING:
        return "False", TERMINATING, "Can't admit new workloads; clusterQueue is terminating"
    parts = [m for _, m in reasons if m]
    if not parts:
        return "False", reasons[0][0], "Can't admit new workloads."
    return "False", reasons[0][0], f"Can't admit new workloads: {', '.join(parts)}."


def selector_matches(selector: o.LabelSelector | None, labels: dict[str, str] | None) -> bool:
    """Kubernetes label-selector semantics; a nil selector matches nothing, ``{}`` everything."""
    if selector is None or labels is None:
        return False
    for k, v in selector.match_labels.items():
        if labels.get(k) != v:
            return False
    for req in selector.match_expressions:
        present = req.key in labels
        match req.operator:
            case "In":
                if not present or labels[req.key] not in req.values:
                    return False
            case "NotIn":
                if present and labels[req.key] in req.values:
                    return False
            case "Exists":
                if not present:
                    return False
            case "DoesNotExist":
                if present:
                    return False
            case _:
                return False
    return True
