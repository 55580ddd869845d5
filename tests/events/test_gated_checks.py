"""The checks Kueue's webhooks make only under a feature gate (``events.manifests.Checks``): each refuses what
Kueue refuses, naming the object and the field, only while its gate is on; the defaults are the gates'."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
from fixtures import fastyaml

from events.errors import InvalidInput
from events.labels import annotation_map_errors, label_value_problem, qualified_name_problem
from events.manifests import UNGATED, Checks, decode_object, load_text
from projections import gates

OFF = {"slice_size": Checks(slice_size=False), "pod_set_metadata": Checks(pod_set_metadata=False),
       "on_flavors": Checks(on_flavors=False), "non_negative": Checks(non_negative=False),
       "admission_gate": Checks(admission_gate=False), "min_count": Checks(min_count=False)}


def _workload(topology: dict[str, Any] | None = None, labels: dict | None = None,
              annotations: dict | None = None) -> dict[str, Any]:
    ps: dict[str, Any] = {"name": "main", "count": 2, "template": {
        "metadata": {"labels": labels or {}, "annotations": annotations or {}},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}
    if topology is not None:
        ps["topologyRequest"] = topology
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "w", "namespace": "team"}, "spec": {"queueName": "lq", "podSets": [ps]}}


def _cq(on_flavors: list[str], flavors: tuple[str, ...] = ("a",)) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": {
        "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
            {"name": f, "resources": [{"name": "cpu", "nominalQuota": 1}]} for f in flavors]}],
        "admissionChecksStrategy": {"admissionChecks": [{"name": "ac", "onFlavors": on_flavors}]}}}


def test_the_defaults_are_the_gates_defaults() -> None:
    assert Checks() == Checks.under(partial(gates.enabled, {}))
    assert Checks.under(partial(gates.enabled, {"AllBeta": False})) == UNGATED


@pytest.mark.parametrize(("topology", "message"), [
    ({"required": "rack", "podSetSliceSize": 2},
     "field `spec.podSets[0].topologyRequest.podSetSliceSize`: Forbidden: may only be set together with "
     "podSetSliceRequiredTopology"),
    ({"podSetSliceRequiredTopology": "rack"},
     "field `spec.podSets[0].topologyRequest.podSetSliceSize`: Required value: must be set when "
     "podSetSliceRequiredTopology is set"),
])
def test_slice_size_and_topology_come_as_a_pair_under_the_gate(topology: dict, message: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        decode_object(_workload(topology), "Workload team/w")
    assert str(refused.value) == f"Workload team/w: {message}"
    decode_object(_workload(topology), "Workload team/w", checks=OFF["slice_size"])
    decode_object(_workload({"podSetSliceRequiredTopology": "rack", "podSetSliceSize": 2}), "Workload team/w")


TOPOLOGY_REQUEST = "spec.podSets[0].topologyRequest"


@pytest.mark.parametrize(("topology", "field", "minimum"), [
    ({"podSetSliceRequiredTopology": "rack", "podSetSliceSize": 0}, "podSetSliceSize", 1),
    ({"podSetSliceRequiredTopology": "rack", "podSetSliceSize": -2}, "podSetSliceSize", 1),
    ({"required": "rack", "podSetSliceSize": 0}, "podSetSliceSize", 1),
    ({"required": "rack", "subGroupIndexLabel": "idx", "subGroupCount": -1}, "subGroupCount", 0),
], ids=["slice-size-0", "slice-size-negative", "slice-size-without-topology", "sub-group-count-negative"])
def test_the_crd_minimums_of_a_topology_request_hold_whatever_the_gates(topology: dict, field: str,
                                                                       minimum: int) -> None:
    """Kueue's Workload CRD holds ``podSetSliceSize`` to at least 1 (#13634; with TASValidateWorkloadSliceSize off
    too, #12728) and ``subGroupCount`` to at least 0 (v0.20, #13108): the apiserver refuses in its own words."""
    at = f"{TOPOLOGY_REQUEST}.{field}"
    value = topology[field]
    for checks in (Checks(), OFF["slice_size"], UNGATED):
        with pytest.raises(InvalidInput) as refused:
            decode_object(_workload(topology), "Workload team/w", checks=checks)
        assert str(refused.value) == (f"Workload team/w: field `{at}`: Invalid value: {value}: {at} in body should "
                                      f"be greater than or equal to {minimum}")


def test_a_sub_group_count_of_zero_is_accepted() -> None:
    decode_object(_workload({"required": "rack", "subGroupIndexLabel": "idx", "subGroupCount": 0}), "Workload team/w")


@pytest.mark.parametrize(("metadata", "message"), [
    ({"labels": {"app": "invalid value with spaces"}},
     'field `spec.podSets[0].template.metadata.labels`: Invalid value: "invalid value with spaces": a valid label '
     "must be an empty string or consist of alphanumeric characters"),
    ({"labels": {"@abc": "x"}},
     'field `spec.podSets[0].template.metadata.labels`: Invalid value: "@abc": name part must consist of'),
    ({"labels": {"a": "x" * 64}}, f'Invalid value: "{"x" * 64}": must be no more than 63 characters'),
    ({"annotations": {"invalid/annotation/key/too/long/invalid": "val"}},
     'field `spec.podSets[0].template.metadata.annotations`: Invalid value: "invalid/annotation/key/too/long/invalid"'
     ": a valid label key must consist of"),
    ({"annotations": {"big": "x" * (256 * 1024)}},
     "field `spec.podSets[0].template.metadata.annotations`: Too long: may not be more than 262144 bytes"),
])
def test_pod_set_template_metadata_is_checked_as_a_pods_under_the_gate(metadata: dict, message: str) -> None:
    doc = _workload(labels=metadata.get("labels"), annotations=metadata.get("annotations"))
    with pytest.raises(InvalidInput, match="^Workload team/w: ") as refused:
        decode_object(doc, "Workload team/w")
    assert message in str(refused.value)
    decode_object(doc, "Workload team/w", checks=OFF["pod_set_metadata"])


def test_well_formed_metadata_passes() -> None:
    decode_object(_workload(labels={"example.com/app": "a.b-c_d", "empty": ""},
                            annotations={"Example.com/Note": "anything at all, spaces too"}), "Workload team/w")


def test_on_flavors_name_the_cluster_queue_s_flavors_under_the_gate() -> None:
    with pytest.raises(InvalidInput) as refused:
        decode_object(_cq(["a", "b"], ("a", "c")), "ClusterQueue cq")
    assert str(refused.value) == ('ClusterQueue cq: field `spec.admissionChecksStrategy.admissionChecks[0].onFlavors[1]`:'
                                  ' Unsupported value: "b": supported values: "a", "c"')
    decode_object(_cq(["a", "b"]), "ClusterQueue cq", checks=OFF["on_flavors"])
    decode_object(_cq(["a"]), "ClusterQueue cq")
    decode_object(_cq([]), "ClusterQueue cq")


def test_every_broken_on_flavors_entry_and_webhook_rule_is_refused_together_in_kueue_s_order() -> None:
    doc = _cq(["b", "a", "z"], ("a", "c"))
    doc["spec"]["admissionChecksStrategy"]["admissionChecks"].append({"name": "ac2", "onFlavors": ["y"]})
    doc["spec"]["fairSharing"] = {"weight": "1n"}
    doc["spec"]["queueingStrategy"] = "StrictFIFO"
    doc["spec"]["concurrentAdmissionPolicy"] = {"migration": {"mode": "TryPreferredFlavors"}}
    at = "field `spec.admissionChecksStrategy.admissionChecks"
    supported = 'supported values: "a", "c"'
    with pytest.raises(InvalidInput) as refused:
        decode_object(doc, "ClusterQueue cq", checks=Checks(concurrent_admission=True))
    assert str(refused.value) == (
        'ClusterQueue cq: [field `spec.fairSharing`: Invalid value: "1n": '
        'When not 0, weight must be > 10e-9, '
        'field `spec.queueingStrategy`: Invalid value: "StrictFIFO": StrictFIFO queueing strategy cannot be used '
        "when ConcurrentAdmissionPolicy is defined, "
        f'{at}[0].onFlavors[0]`: Unsupported value: "b": {supported}, '
        f'{at}[0].onFlavors[2]`: Unsupported value: "z": {supported}, '
        f'{at}[1].onFlavors[0]`: Unsupported value: "y": {supported}]')


def test_load_text_takes_the_checks_it_is_given() -> None:
    text = fastyaml.safe_dump(_workload({"podSetSliceRequiredTopology": "rack"}))
    with pytest.raises(InvalidInput, match=r"document 1 \(Workload w\): field `spec.podSets\[0\].topologyRequest"):
        load_text(text, "in.yaml")
    assert len(load_text(text, "in.yaml", checks=UNGATED).objects) == 1


@pytest.mark.parametrize(("key", "ok"), [
    ("app", True), ("example.com/app", True), ("a.b_c-d", True), ("x" * 63, True), ("x" * 64, False),
    ("Example.com/app", False), ("/app", False), ("example.com/", False), ("a/b/c", False), ("-app", False),
    ("app_", False), ("", False), ("a" * 254 + "/b", False),
])
def test_qualified_names(key: str, ok: bool) -> None:
    assert (qualified_name_problem(key) is None) is ok


@pytest.mark.parametrize(("value", "ok"), [("", True), ("a", True), ("a-b.c_d", True), ("a b", False),
                                           ("-a", False), ("x" * 64, False)])
def test_label_values(value: str, ok: bool) -> None:
    assert (label_value_problem(value) is None) is ok


def test_annotation_keys_are_checked_lowercased() -> None:
    assert annotation_map_errors({"Example.COM/Key": "v"}) == []
    assert annotation_map_errors({"a b": "v"})[0].startswith('Invalid value: "a b": name part')


def _refused(doc: dict[str, Any]) -> str:
    with pytest.raises(InvalidInput, match="^Workload team/w: ") as refused:
        decode_object(doc, "Workload team/w")
    return str(refused.value)


@pytest.mark.parametrize(("place", "path"), [
    (("containers", 0, "requests"), "containers[0].resources.requests[cpu]"),
    (("containers", 0, "limits"), "containers[0].resources.limits[cpu]"),
    (("initContainers", 0, "requests"), "initContainers[0].resources.requests[cpu]"),
    (("resources", None, "limits"), "resources.limits[cpu]"),
])
def test_no_negative_request_or_limit_under_the_gate(place: tuple, path: str) -> None:
    doc = _workload()
    pod = doc["spec"]["podSets"][0]["template"]["spec"]
    field, index, part = place
    if index is None:
        pod[field] = {part: {"cpu": "-500m"}}
    else:
        pod.setdefault(field, [{"name": "i"}])[index].setdefault("resources", {})[part] = {"cpu": "-500m"}
    assert _refused(doc) == (f'Workload team/w: field `spec.podSets[0].template.spec.{path}`: Invalid value: "-500m": '
                             "must be greater than or equal to 0")
    decode_object(doc, "Workload team/w", checks=OFF["non_negative"])


def test_a_workload_s_negative_overhead_is_taken_whatever_the_gate_a_pod_s_negative_request_never() -> None:
    doc = _workload()
    doc["spec"]["podSets"][0]["template"]["spec"]["overhead"] = {"cpu": "-1"}
    doc["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "0"}
    decode_object(doc, "Workload team/w")  # Kueue's webhook does not look at the overhead
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team"},
           "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "-1"}}}]}}
    with pytest.raises(InvalidInput, match="must not be negative"):
        decode_object(pod, "Pod team/p", checks=UNGATED)  # the apiserver's own rule


@pytest.mark.parametrize(("value", "message"), [
    ("example.com/a,,example.com/b", 'Invalid value: "example.com/a,,example.com/b": cannot contain empty gate names'),
    ("example.com/a, example.com/a", 'Invalid value: "example.com/a, example.com/a": duplicate gate name: '
                                     "example.com/a"),
    ("my-gate", 'Invalid value: "my-gate": must be a domain-prefixed path (such as "acme.io/foo")'),
    ("example.com/", 'Invalid value: "example.com/": must be a domain-prefixed path'),
    ("Example.com/a", 'Invalid value: "Example.com": a lowercase RFC 1123 subdomain must consist of lower case '
                      "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"),
    ("example.com/a b", 'Invalid value: "a b": Invalid path (regex used for validation is'),
    ("example.com/" + "g" * 52, "Too long: may not be more than 63 bytes"),
])
def test_the_admission_gate_annotation_is_a_list_of_gates_under_the_gate(value: str, message: str) -> None:
    for good in ("example.com/a", " example.com/a , kueue.x-k8s.io/b:c ", "", "  ", "example.com/" + "g" * 51):
        taken = _workload()
        taken["metadata"]["annotations"] = {"kueue.x-k8s.io/admission-gated-by": good}
        decode_object(taken, "Workload team/w")
    doc = _workload()
    doc["metadata"]["annotations"] = {"kueue.x-k8s.io/admission-gated-by": value}
    assert _refused(doc).startswith(
        f"Workload team/w: field `metadata.annotations[kueue.x-k8s.io/admission-gated-by]`: {message}")
    decode_object(doc, "Workload team/w", checks=OFF["admission_gate"])


def test_every_problem_of_a_workloads_admission_gate_is_listed_as_kueues_webhook_lists_them() -> None:
    doc = _workload()
    doc["metadata"]["annotations"] = {"kueue.x-k8s.io/admission-gated-by": "example.com/a,,example.com/a"}
    at = "field `metadata.annotations[kueue.x-k8s.io/admission-gated-by]`"
    value = '"example.com/a,,example.com/a"'
    assert _refused(doc) == (f"Workload team/w: [{at}: Invalid value: {value}: cannot contain empty gate names, "
                             f"{at}: Invalid value: {value}: duplicate gate name: example.com/a]")


def _partial(*counts: tuple[int, int | None], elastic: bool = False) -> dict[str, Any]:
    doc = _workload()
    template = doc["spec"]["podSets"][0]["template"]
    doc["spec"]["podSets"] = [{"name": f"ps{i}", "count": count, "template": template,
                               **({"minCount": minimum} if minimum is not None else {})}
                              for i, (count, minimum) in enumerate(counts)]
    if elastic:
        doc["metadata"]["annotations"] = {"kueue.x-k8s.io/elastic-job": "true"}
    return doc


@pytest.mark.parametrize(("doc", "message"), [
    (_partial((4, 2), (4, 1)), "field `spec.podSets`: Invalid value: 2: at most one podSet can use minCount"),
    (_partial((0, 1)), "field `spec.podSets[0]`: minCount should be positive and less or equal to count"),
    (_partial((4, 2), elastic=True), "field `spec.podSets`: Invalid value: 1: partial admission and elastic job "
                                     "cannot be used together"),
])
def test_min_count_rules_under_partial_admission(doc: dict[str, Any], message: str) -> None:
    for taken in (_partial((4, 2), (3, None)), _partial((4, 4)), _partial((4, None), elastic=True)):
        decode_object(taken, "Workload team/w")
    assert _refused(doc) == f"Workload team/w: {message}"
    decode_object(doc, "Workload team/w", checks=OFF["min_count"])  # Kueue's defaulting dropped minCount


def test_an_elastic_workload_may_carry_min_counts_under_partial_scale_up() -> None:
    """ElasticJobsViaWorkloadSlicesWithPartialReplicaScaleUp: a scaled-up slice of an elastic job carries the old
    slice's granted counts as ``minCount``, in as many pod sets as grow; a Workload that is not elastic keeps the
    one-pod-set rule, and a ``minCount`` above its count is refused either way."""
    scale_up = Checks(elastic_min_count=True)
    assert Checks.under(partial(gates.enabled, {gates.ELASTIC_PARTIAL_SCALE_UP: True})) == scale_up
    assert not Checks.under(partial(gates.enabled, {gates.ELASTIC_PARTIAL_SCALE_UP: True,
                                                    gates.ELASTIC_JOBS_VIA_WORKLOAD_SLICES: False})).elastic_min_count
    for taken in (_partial((4, 2), elastic=True), _partial((4, 2), (20, 9), elastic=True)):
        decode_object(taken, "Workload team/w", checks=scale_up)
    with pytest.raises(InvalidInput, match="at most one podSet can use minCount"):
        decode_object(_partial((4, 2), (4, 1)), "Workload team/w", checks=scale_up)
    with pytest.raises(InvalidInput, match="minCount should be positive and less or equal to count"):
        decode_object(_partial((0, 1), elastic=True), "Workload team/w", checks=scale_up)


def test_a_min_count_of_zero_lets_a_pod_set_be_cut_to_no_pods() -> None:
    """Kueue v0.20 (#14720): ``minCount`` may be 0 (a pod set admitted with no replicas); below 0 it is refused."""
    decode_object(_partial((4, 0)), "Workload team/w")
    decode_object(_partial((2, None), (0, 0)), "Workload team/w")
    assert _refused(_partial((4, -1))) == "Workload team/w: field `spec.podSets[0].minCount` must be >= 0"


def test_a_min_count_above_its_count_breaks_the_crds_rule_in_its_words_and_only_under_the_gate() -> None:
    """Kueue's PodSet CEL rule (``minCount <= count``, on the pod set: the apiserver names ``spec.podSets[i]``)
    in its own words, whatever the count; off, Kueue's defaulting webhook drops ``minCount`` before the CRD sees
    it, so the Workload is taken (kueue-es keeps it and does not use it)."""
    for counts in ((4, 5), (0, 1)):
        assert _refused(_partial(counts)) == ("Workload team/w: field `spec.podSets[0]`: minCount should be "
                                              "positive and less or equal to count")
        decode_object(_partial(counts), "Workload team/w", checks=OFF["min_count"])


@pytest.mark.parametrize("doc", [
    _partial((0, 1), (4, 2)),  # the webhook would add "at most one podSet can use minCount"
    _partial((0, 1), elastic=True),  # ... and "partial admission and elastic job cannot be used together"
])
def test_a_min_count_above_its_count_is_the_crds_error_alone_as_the_apiserver_refuses_before_the_webhook(
        doc: dict[str, Any]) -> None:
    assert _refused(doc) == ("Workload team/w: field `spec.podSets[0]`: minCount should be positive and less or "
                             "equal to count")


def test_the_crds_min_count_rule_leaves_no_other_webhook_error() -> None:
    doc = _partial((0, 1), (0, 1))
    doc["metadata"]["annotations"] = {"kueue.x-k8s.io/admission-gated-by": "example.com/a,,example.com/a"}
    assert _refused(doc) == ("Workload team/w: [field `spec.podSets[0]`: minCount should be positive and less or "
                             "equal to count, field `spec.podSets[1]`: minCount should be positive and less or "
                             "equal to count]")
