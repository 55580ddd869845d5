"""kueue.x-k8s.io v1beta1 <-> v1beta2 conversion (``events/conversion.py``): Kueue's own conversion test cases,
round trips of generated objects of every kind (fields we do not model included), and errors that name the
object and the field."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import msgspec
import pytest
from fixtures import fastyaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events import conversion
from events import objects as o
from events import tas_assignment as tas
from events.errors import InvalidInput

CASES = fastyaml.safe_load((Path(__file__).parent / "conversion_cases.yaml").read_text())
SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _with(doc: dict[str, Any], version: str) -> dict[str, Any]:
    return {"apiVersion": version, **doc}


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_kueue_conversion_cases(case: dict[str, Any]) -> None:
    v1, v2 = _with(case["v1beta1"], conversion.V1BETA1), _with(case["v1beta2"], conversion.V1BETA2)
    frozen = copy.deepcopy((v1, v2))
    if case["direction"] in ("to_v1beta2", "both"):
        assert conversion.convert(v1, conversion.V1BETA2) == v2
    if case["direction"] in ("to_v1beta1", "both"):
        assert conversion.convert(v2, conversion.V1BETA1) == v1
    assert (v1, v2) == frozen, "the input is never changed"


def test_same_version_is_returned_as_is() -> None:
    doc = {"apiVersion": conversion.V1BETA1, "kind": "ClusterQueue", "metadata": {"name": "cq"},
           "spec": {"cohort": "c"}}
    assert conversion.convert(doc, conversion.V1BETA1) is doc


def test_converted_v1beta1_objects_read_as_our_views() -> None:
    cq = conversion.convert({"apiVersion": conversion.V1BETA1, "kind": "ClusterQueue", "metadata": {"name": "cq"},
                             "spec": {"cohort": "all", "admissionChecks": ["prov"],
                                      "flavorFungibility": {"whenCanBorrow": "Borrow"}}}, conversion.V1BETA2)
    view = msgspec.convert(cq, o.KueueObject)
    assert isinstance(view, o.ClusterQueue)
    assert view.spec.cohort_name == "all"
    assert view.spec.admission_checks_strategy == o.AdmissionChecksStrategy(
        admission_checks=[o.AdmissionCheckStrategyRule(name="prov")])
    assert view.spec.flavor_fungibility.when_can_borrow == "MayStopSearch"
    wl = conversion.convert({"apiVersion": conversion.V1BETA1, "kind": "Workload",
                             "metadata": {"name": "w", "namespace": "ns"},
                             "spec": {"priorityClassName": "high", "priorityClassSource": conversion.
                                      WORKLOAD_PRIORITY_CLASS_SOURCE},
                             "status": {"accumulatedPastExexcutionTimeSeconds": 60}}, conversion.V1BETA2)
    view = msgspec.convert(wl, o.KueueObject)
    assert isinstance(view, o.Workload)
    assert view.spec.priority_class_ref == o.PriorityClassRef(group="kueue.x-k8s.io", kind="WorkloadPriorityClass",
                                                              name="high")
    assert view.status.accumulated_past_execution_time_seconds == 60


def test_a_v1beta1_workloads_eviction_record_reads_as_ours_and_converts_back_unchanged() -> None:
    stats = {"evictions": [{"reason": "Preempted", "underlyingCause": "", "count": 3},
                           {"reason": "PodsReadyTimeout", "underlyingCause": "WaitForStart", "count": 1}]}
    v1 = {"apiVersion": conversion.V1BETA1, "kind": "Workload", "metadata": {"name": "w", "namespace": "ns"},
          "spec": {"queueName": "lq"}, "status": {"schedulingStats": stats}}
    v2 = conversion.convert(v1, conversion.V1BETA2)
    view = msgspec.convert(v2, o.KueueObject)
    assert isinstance(view, o.Workload) and view.status.scheduling_stats is not None
    assert [(e.reason, e.underlying_cause, e.count) for e in view.status.scheduling_stats.evictions] == [
        ("Preempted", "", 3), ("PodsReadyTimeout", "WaitForStart", 1)]
    written = {**v2, "status": msgspec.to_builtins(view.status)}
    assert conversion.convert(written, conversion.V1BETA1)["status"]["schedulingStats"] == stats


# --- generated objects ----------------------------------------------------------------------------------------------

names = st.text("abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=10).filter(
    lambda s: s[0] != "-" and s[-1] != "-")
scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**6), names)
json_values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                            st.dictionaries(names, inner, max_size=3)), max_leaves=6)
UNKNOWN = ("futureField", "x-vendor", "vendorStats", "futureGates", "effectiveQuotas")
"""Field names neither version renames: they must pass through untouched."""


def unknown_fields() -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(st.sampled_from(UNKNOWN), json_values, max_size=2)


@st.composite
def merged(draw: st.DrawFn, *parts: st.SearchStrategy[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for p in parts:
        out.update(draw(p))
    return out


def optional(key: str, values: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(st.just({}), values.map(lambda v: {key: v}))


def obj(kind: str, version: str, spec: st.SearchStrategy[dict[str, Any]] | None,
        status: st.SearchStrategy[dict[str, Any]] | None, namespaced: bool = False) -> st.SearchStrategy[dict]:
    meta = st.builds(lambda n, ns, labels: {"name": n, **({"namespace": ns} if namespaced else {}),
                                            **({"labels": labels} if labels else {})},
                     names, names, st.dictionaries(names, names, max_size=2))
    parts: list[st.SearchStrategy[dict[str, Any]]] = [meta.map(lambda m: {"metadata": m}), unknown_fields()]
    if spec is not None:
        parts.append(optional("spec", merged(spec, unknown_fields())))
    if status is not None:
        parts.append(optional("status", merged(status, unknown_fields())))
    return merged(*parts).map(lambda d: {"apiVersion": version, "kind": kind, **d})


fungibility = st.fixed_dictionaries({}, optional={"whenCanBorrow": st.sampled_from(["MayStopSearch", "TryNextFlavor"]),
                                                  "whenCanPreempt": st.sampled_from(["MayStopSearch", "TryNextFlavor"])})
strategy = st.fixed_dictionaries({"admissionChecks": st.lists(st.fixed_dictionaries(
    {"name": names}, optional={"onFlavors": st.lists(names, max_size=2)}), max_size=3)})
resource_groups = st.lists(st.fixed_dictionaries({"coveredResources": st.just(["cpu"]), "flavors": st.lists(
    st.fixed_dictionaries({"name": names, "resources": st.just([{"name": "cpu", "nominalQuota": "4"}])}),
    min_size=1, max_size=2)}), max_size=2)


def cluster_queue_spec(cohort_key: str) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({}, optional={
        cohort_key: names, "resourceGroups": resource_groups, "flavorFungibility": fungibility,
        "admissionChecksStrategy": strategy, "queueingStrategy": st.sampled_from(["StrictFIFO", "BestEffortFIFO"])})


conditions = st.lists(st.fixed_dictionaries({"type": names, "status": st.sampled_from(["True", "False"]),
                                             "reason": names}), max_size=2)
cq_status = st.fixed_dictionaries({}, optional={"pendingWorkloads": st.integers(0, 9), "conditions": conditions,
                                                "flavorsUsage": st.lists(json_values, max_size=2)})
WPC = ("kueue.x-k8s.io", "WorkloadPriorityClass")
PC = ("scheduling.k8s.io", "PriorityClass")
priority_ref = st.builds(lambda gk, n: {"group": gk[0], "kind": gk[1], "name": n},
                         st.sampled_from([WPC, PC, ("example.com", "Tier")]), names)
pod_sets = st.lists(st.fixed_dictionaries({"name": names, "count": st.integers(0, 9)},
                                          optional={"template": unknown_fields()}), min_size=1, max_size=2)
domains = st.integers(1, 3).flatmap(lambda levels: st.lists(st.builds(
    lambda values, count: o.TopologyDomainAssignment(values=values, count=count),
    st.lists(names, min_size=levels, max_size=levels), st.integers(1, 4)), max_size=6).map(
    lambda ds: (levels, ds)))


def assignment(version: str) -> st.SearchStrategy[dict[str, Any]]:
    def build(psa: dict[str, Any], placed: tuple[int, list[o.TopologyDomainAssignment]] | None) -> dict[str, Any]:
        if placed is None:
            return psa
        levels = ["kubernetes.io/hostname"] if placed[0] == 1 else [f"level-{i}" for i in range(placed[0])]
        if version == conversion.V1BETA2:
            ta: Any = msgspec.to_builtins(tas.encode(levels, placed[1]))
        else:
            ta = msgspec.to_builtins(o.TopologyAssignmentV1Beta1(levels=levels, domains=placed[1]))
        return {**psa, "topologyAssignment": ta}

    psa = st.fixed_dictionaries({"name": names, "flavors": st.dictionaries(st.just("cpu"), names, max_size=1)},
                                optional={"count": st.integers(0, 9), "delayedTopologyRequest": st.just("Ready")})
    return st.builds(build, psa, st.one_of(st.none(), domains))


def workload_status(accumulated: str, version: str) -> st.SearchStrategy[dict[str, Any]]:
    admission = st.fixed_dictionaries({"clusterQueue": names,
                                       "podSetAssignments": st.lists(assignment(version), max_size=2)})
    return st.fixed_dictionaries({}, optional={accumulated: st.integers(0, 10**6), "admission": admission,
                                               "conditions": conditions})


flavor_spec = merged(optional("nodeLabels", st.dictionaries(names, names)),
                     optional("resourceWeights", st.dictionaries(names, st.sampled_from(["1", "250m", 8]))))
"""A ResourceFlavor's spec: its ``resourceWeights`` (KEP-8902) copied untouched either way."""

v1beta2_objects = st.one_of(
    obj("ClusterQueue", conversion.V1BETA2, cluster_queue_spec("cohortName"), cq_status),
    obj("Workload", conversion.V1BETA2, merged(
        st.fixed_dictionaries({"podSets": pod_sets}, optional={"queueName": names, "priority": st.integers(-9, 9),
                                                               "active": st.booleans()}),
        optional("priorityClassRef", priority_ref)),
        workload_status("accumulatedPastExecutionTimeSeconds", conversion.V1BETA2), namespaced=True),
    obj("LocalQueue", conversion.V1BETA2, optional("clusterQueue", names),
        optional("flavorsUsage", st.lists(json_values, max_size=2)), namespaced=True),
    obj("Cohort", conversion.V1BETA2, optional("parentName", names), optional("fairSharing", json_values)),
    obj("AdmissionCheck", conversion.V1BETA2, optional("controllerName", names), None),
    obj("ResourceFlavor", conversion.V1BETA2, flavor_spec, None),
)

sources = st.sampled_from([conversion.WORKLOAD_PRIORITY_CLASS_SOURCE, conversion.POD_PRIORITY_CLASS_SOURCE, ""])
v1beta1_objects = st.one_of(
    obj("ClusterQueue", conversion.V1BETA1, cluster_queue_spec("cohort"), cq_status),
    obj("Workload", conversion.V1BETA1, merged(
        st.fixed_dictionaries({"podSets": pod_sets}, optional={"queueName": names}),
        st.one_of(st.just({}), st.builds(lambda n, s: {"priorityClassName": n, "priorityClassSource": s},
                                         names, sources))),
        workload_status("accumulatedPastExexcutionTimeSeconds", conversion.V1BETA1), namespaced=True),
    obj("LocalQueue", conversion.V1BETA1, optional("clusterQueue", names),
        optional("flavorUsage", st.lists(json_values, max_size=2)), namespaced=True),
    obj("Cohort", conversion.V1BETA1, optional("parentName", names), None),
    obj("ResourceFlavor", conversion.V1BETA1, flavor_spec, None),
)


@SETTINGS
@given(v1beta2_objects)
def test_v1beta2_round_trips_through_v1beta1_exactly(doc: dict[str, Any]) -> None:
    frozen = copy.deepcopy(doc)
    v1 = conversion.convert(doc, conversion.V1BETA1)
    assert v1["apiVersion"] == conversion.V1BETA1
    assert not _only_v1beta2(v1), _only_v1beta2(v1)
    assert conversion.convert(v1, conversion.V1BETA2) == frozen
    assert doc == frozen


def _only_v1beta2(doc: dict[str, Any]) -> list[str]:
    """The v1beta2-only names ``doc`` still uses."""
    spec, status = doc.get("spec") or {}, doc.get("status") or {}
    found = [k for k in ("cohortName",) if doc["kind"] == "ClusterQueue" and k in spec]
    found += [k for k in ("accumulatedPastExecutionTimeSeconds",) if doc["kind"] == "Workload" and k in status]
    found += [k for k in ("flavorsUsage",) if doc["kind"] == "LocalQueue" and k in status]
    ref = spec.get("priorityClassRef") if doc["kind"] == "Workload" else None
    if ref is not None and (ref["group"], ref["kind"]) in (WPC, PC):
        found.append("priorityClassRef")
    for psa in ((status.get("admission") or {}).get("podSetAssignments") or []) if doc["kind"] == "Workload" else []:
        if "slices" in (psa.get("topologyAssignment") or {}):
            found.append("topologyAssignment.slices")
    return found


@SETTINGS
@given(v1beta1_objects)
def test_v1beta1_round_trips_through_v1beta2_exactly(doc: dict[str, Any]) -> None:
    """Objects without the forms Kueue folds (those are the golden cases)."""
    frozen = copy.deepcopy(doc)
    v2 = conversion.convert(doc, conversion.V1BETA2)
    assert conversion.convert(v2, conversion.V1BETA1) == frozen
    assert doc == frozen
    spec, status = v2.get("spec") or {}, v2.get("status") or {}
    assert "cohort" not in spec and spec.get("priorityClassSource", "") == ""
    assert "accumulatedPastExexcutionTimeSeconds" not in status and "flavorUsage" not in status
    for psa in (status.get("admission") or {}).get("podSetAssignments") or []:
        assert "domains" not in (psa.get("topologyAssignment") or {})


@SETTINGS
@given(v1beta1_objects)
def test_converted_objects_decode_into_our_views(doc: dict[str, Any]) -> None:
    v2 = conversion.convert(doc, conversion.V1BETA2)
    view = msgspec.convert(v2, o.KueueObject, strict=False)
    if isinstance(view, o.ClusterQueue):
        assert view.spec.cohort_name == (doc.get("spec") or {}).get("cohort", "")
    if isinstance(view, o.Workload):
        spec = doc.get("spec") or {}
        if spec.get("priorityClassSource"):
            assert view.spec.priority_class_ref is not None
            assert view.spec.priority_class_ref.name == spec["priorityClassName"]
        else:
            assert view.spec.priority_class_ref is None
        adm = (doc.get("status") or {}).get("admission") or {}
        for got, psa in zip(view.status.admission.pod_set_assignments if view.status.admission else [],
                            adm.get("podSetAssignments") or [], strict=True):
            if "topologyAssignment" in psa:
                want = msgspec.convert(psa["topologyAssignment"], o.TopologyAssignmentV1Beta1)
                assert got.topology_assignment is not None
                assert tas.decode(got.topology_assignment) == want.domains


# --- errors -----------------------------------------------------------------------------------------------------


def _cq(spec: Any) -> dict[str, Any]:
    return {"apiVersion": conversion.V1BETA1, "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": spec}


def _wl(version: str, psa: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": version, "kind": "Workload", "metadata": {"name": "w", "namespace": "team"},
            "spec": spec, "status": {"admission": {"clusterQueue": "cq", "podSetAssignments": [psa]}}}


@pytest.mark.parametrize(("doc", "to", "message"), [
    (_cq({"cohort": 5}), conversion.V1BETA2, "ClusterQueue cq: field `spec.cohort`: expected a string, got integer"),
    (_cq({"admissionChecks": "prov"}), conversion.V1BETA2,
     "ClusterQueue cq: field `spec.admissionChecks`: expected an array of names, got string"),
    (_cq({"admissionChecks": ["a", 1]}), conversion.V1BETA2,
     "ClusterQueue cq: field `spec.admissionChecks[1]`: expected a name, got integer"),
    (_cq("everything"), conversion.V1BETA2, "ClusterQueue cq: field `spec`: expected an object, got string"),
    (_cq({"flavorFungibility": []}), conversion.V1BETA2,
     "ClusterQueue cq: field `spec.flavorFungibility`: expected an object, got array"),
    (_wl(conversion.V1BETA1, {"name": "main", "topologyAssignment": {
        "levels": ["h"], "domains": [{"values": ["n1"], "count": "two"}]}}), conversion.V1BETA2,
     "Workload team/w: field `status.admission.podSetAssignments[0].topologyAssignment.domains[0].count`: "
     "expected `int`, got `str`"),
    (_wl(conversion.V1BETA1, {"name": "main", "topologyAssignment": {
        "levels": ["h"], "domains": [{"values": ["n1", "extra"], "count": 1}]}}), conversion.V1BETA2,
     "Workload team/w: field `status.admission.podSetAssignments[0].topologyAssignment.domains[0].values`: "
     "must have one value per level (1), has 2"),
    (_wl(conversion.V1BETA2, {"name": "main", "topologyAssignment": {"levels": ["h"], "slices": [{
        "domainCount": 2, "valuesPerLevel": [{"individual": {"roots": ["n1"]}}], "podCounts": {"universal": 1}}]}}),
     conversion.V1BETA1, "Workload team/w: field `status.admission.podSetAssignments[0].topologyAssignment.slices[0]"),
    (_wl(conversion.V1BETA2, {"name": "main"}, priorityClassRef="high"), conversion.V1BETA1,
     "Workload team/w: field `spec.priorityClassRef`: expected an object, got string"),
    (_wl(conversion.V1BETA1, "main"), conversion.V1BETA2,  # type: ignore[arg-type]
     "Workload team/w: field `status.admission.podSetAssignments[0]`: expected an object, got string"),
    ({"apiVersion": "kueue.x-k8s.io/v1alpha1", "kind": "Cohort", "metadata": {"name": "c"}}, conversion.V1BETA2,
     "Cohort c: field `apiVersion`: must be kueue.x-k8s.io/v1beta2 or kueue.x-k8s.io/v1beta1, "
     "not 'kueue.x-k8s.io/v1alpha1'"),
    ({"apiVersion": conversion.V1BETA1, "metadata": {"name": "c"}}, conversion.V1BETA2,
     "object c: field `kind` is required"),
    (_cq({}), "kueue.x-k8s.io/v1", "ClusterQueue cq: cannot convert to 'kueue.x-k8s.io/v1'"),
])
def test_bad_input_names_the_object_and_the_field(doc: Any, to: str, message: str) -> None:
    with pytest.raises(InvalidInput) as err:
        conversion.convert(doc, to)
    assert str(err.value).startswith(message), str(err.value)
