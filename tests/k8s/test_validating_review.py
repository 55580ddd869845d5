"""The validating webhooks for Kueue's kinds: their answer to an AdmissionReview (the checks kueue-es holds every
object to, the gated ones under the Configuration's gates, and on update the fields Kueue keeps immutable), and
the ValidatingWebhookConfiguration that registers them."""

from __future__ import annotations

import base64
import copy
from typing import Any

import msgspec
import pytest

from connectors.k8s.certs import self_signed
from connectors.k8s.validating import HOOKS, PATHS, configuration, refusal, review
from events.field_errors import CEL_NOT_CHECKED

V1B2 = "kueue.x-k8s.io/v1beta2"
TIME = "2024-01-01T00:00:00Z"


def _review(kind: str, obj: dict, old: dict | None = None, gates: dict | None = None, op: str = "") -> dict:
    request: dict[str, Any] = {"uid": "u-1", "operation": op or ("UPDATE" if old else "CREATE"), "object": obj}
    if old is not None:
        request["oldObject"] = old
    body = msgspec.json.encode({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
    out = review(body, kind, gates or {})
    assert out["kind"] == "AdmissionReview" and out["response"]["uid"] == "u-1"
    words = refusal(kind, request["operation"], copy.deepcopy(obj), copy.deepcopy(old), gates or {})
    assert (words is None) is out["response"]["allowed"]
    return out["response"] if words is None else {**out["response"], "words": words}


def _message(resp: dict) -> str:
    """A refusal's reason in kueue-es's words (``refusal``'s: what ``kueue-es import`` prints too), whichever
    status answers it: Kueue's webhook's 403 Forbidden, which carries those words, or the 422 Invalid of a CRD's
    rules (:func:`_invalid`), in the apiserver's."""
    assert resp["allowed"] is False and (resp["status"]["code"], resp["status"]["reason"]) in (
        (403, "Forbidden"), (422, "Invalid"))
    if resp["status"]["code"] == 403:
        assert resp["status"]["message"] == resp["words"]
    return resp["words"]


def _forbidden(resp: dict) -> str:
    """The message of a refusal for a rule of Kueue's webhook: 403 Forbidden, in kueue-es's words."""
    assert resp["allowed"] is False and resp["status"]["code"] == 403 and resp["status"]["reason"] == "Forbidden"
    return resp["status"]["message"]


def cq(on_flavors: list[str] | None = None, flavors: tuple[str, ...] = ("a",), **spec: Any) -> dict:
    doc: dict[str, Any] = {"apiVersion": V1B2, "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": {
        "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
            {"name": f, "resources": [{"name": "cpu", "nominalQuota": 1}]} for f in flavors]}], **spec}}
    if on_flavors is not None:
        doc["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": "ac", "onFlavors": on_flavors}]}
    return doc


def wl(count: int = 2, image: str = "busybox", reserved: bool = False, admitted: bool = False, **spec: Any) -> dict:
    doc: dict[str, Any] = {
        "apiVersion": V1B2, "kind": "Workload", "metadata": {"name": "w", "namespace": "team"},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": count, "template": {"spec": {
            "containers": [{"name": "c", "image": image, "resources": {"requests": {"cpu": "1"}}}]}}}], **spec},
        "status": {}}
    if reserved:
        doc["status"]["conditions"] = [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                                        "lastTransitionTime": "2024-01-01T00:00:00Z"}]
        doc["status"]["admission"] = {"clusterQueue": "cq", "podSetAssignments": [
            {"name": "main", "flavors": {"cpu": "a"}, "resourceUsage": {"cpu": "2"}, "count": count}]}
    if admitted:
        doc["status"]["conditions"].append({"type": "Admitted", "status": "True", "reason": "Admitted",
                                            "lastTransitionTime": "2024-01-01T00:00:00Z"})
    return doc


# --- create -----------------------------------------------------------------------------------------------------


def test_an_invalid_cluster_queue_is_refused_naming_object_and_field() -> None:
    assert _review("ClusterQueue", cq(["a"])) == {"uid": "u-1", "allowed": True}
    assert _message(_review("ClusterQueue", cq(queueingStrategy="Sometimes"))) == (
        'ClusterQueue cq: [field `spec.queueingStrategy`: Unsupported value: "Sometimes": supported values: '
        f'"StrictFIFO", "BestEffortFIFO", {CEL_NOT_CHECKED}]')
    assert _message(_review("ClusterQueue", cq(["a", "z"]))) == (
        'ClusterQueue cq: field `spec.admissionChecksStrategy.admissionChecks[0].onFlavors[1]`: Unsupported value: '
        '"z": supported values: "a"')


def test_a_new_cluster_queue_s_on_flavors_are_checked_whatever_the_gate() -> None:
    """Kueue's ClusterQueue webhook: the gate only lets an update keep an invalid entry."""
    assert "onFlavors[0]" in _message(_review("ClusterQueue", cq(["z"]),
                                              gates={"RejectUpdatesToCQWithInvalidOnFlavors": False}))


def test_an_invalid_workload_is_refused_and_its_gated_checks_follow_the_configuration() -> None:
    assert _review("Workload", wl())["allowed"] is True
    assert _message(_review("Workload", wl(count=-1))) == "Workload team/w: field `spec.podSets[0].count` must be >= 0"
    sliced = wl()
    sliced["spec"]["podSets"][0]["topologyRequest"] = {"podSetSliceRequiredTopology": "rack"}
    assert _message(_review("Workload", sliced)) == (
        "Workload team/w: field `spec.podSets[0].topologyRequest.podSetSliceSize`: Required value: must be set when "
        "podSetSliceRequiredTopology is set")
    assert _review("Workload", sliced, gates={"TASValidateWorkloadSliceSize": False})["allowed"] is True
    labelled = wl()
    labelled["spec"]["podSets"][0]["template"]["metadata"] = {"labels": {"app": "a b"}}
    assert "field `spec.podSets[0].template.metadata.labels`" in _message(_review("Workload", labelled))
    assert _review("Workload", labelled, gates={"WorkloadValidationForPodSetMetadata": False})["allowed"] is True
    boosted = wl()
    boosted["metadata"]["annotations"] = {"kueue.x-k8s.io/priority-boost": "ten"}
    assert _review("Workload", boosted)["allowed"] is True, "PriorityBoost is off by default"
    assert "priority-boost" in _message(_review("Workload", boosted, gates={"PriorityBoost": True}))


def test_the_workload_checks_under_kueue_s_webhook_gates_follow_the_configuration() -> None:
    """WorkloadValidateResourcesAreNonNegative, AdmissionGatedBy and PartialAdmission, all on by default."""
    negative = wl()
    negative["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "-1"}
    assert _message(_review("Workload", negative)) == (
        'Workload team/w: field `spec.podSets[0].template.spec.containers[0].resources.requests[cpu]`: Invalid value: '
        '"-1": must be greater than or equal to 0')
    assert _review("Workload", negative, gates={"WorkloadValidateResourcesAreNonNegative": False})["allowed"] is True
    assert _review("Workload", negative, wl(), gates={"WorkloadValidateResourcesAreNonNegative": False})["allowed"]
    gated = wl()
    gated["metadata"]["annotations"] = {"kueue.x-k8s.io/admission-gated-by": "example.com/a,example.com/a"}
    assert "duplicate gate name: example.com/a" in _message(_review("Workload", gated))
    assert "duplicate gate name" in _message(_review("Workload", gated, wl()))
    assert _review("Workload", gated, gates={"AdmissionGatedBy": False})["allowed"] is True
    partial = wl()
    partial["spec"]["podSets"].append({**partial["spec"]["podSets"][0], "name": "second"})
    for ps in partial["spec"]["podSets"]:
        ps["minCount"] = 1
    assert "at most one podSet can use minCount" in _message(_review("Workload", partial))
    assert _review("Workload", partial, gates={"PartialAdmission": False})["allowed"] is True


def test_deletes_and_malformed_requests_are_let_through() -> None:
    assert _review("ClusterQueue", cq(queueingStrategy="Sometimes"), op="DELETE")["allowed"] is True
    assert refusal("Workload", "CREATE", None, None, {}) is None


# --- update -----------------------------------------------------------------------------------------------------


def test_an_update_may_keep_an_invalid_on_flavors_entry_only_with_the_gate_off() -> None:
    off = {"RejectUpdatesToCQWithInvalidOnFlavors": False}
    legacy = cq(["z"])
    relabelled = copy.deepcopy(legacy)
    relabelled["metadata"]["labels"] = {"team": "a"}
    assert "onFlavors[0]" in _message(_review("ClusterQueue", relabelled, legacy))
    assert _review("ClusterQueue", relabelled, legacy, off)["allowed"] is True
    assert "onFlavors[0]" in _message(_review("ClusterQueue", cq(["z", "y"]), legacy, off)), "the entry changed"
    assert "onFlavors[0]" in _message(_review("ClusterQueue", cq(["z"], ("a", "b")), legacy, off)), \
        "the ClusterQueue's flavors changed"


def test_a_cluster_queue_s_concurrent_admission_policy_follows_the_gate_and_never_changes() -> None:
    """ConcurrentAdmission (alpha, off): on, the webhook holds a ClusterQueue with a policy to one resource group of
    at most 32 flavors, not StrictFIFO; the policy is immutable whatever the gate."""
    policy = {"migration": {"mode": "TryPreferredFlavors"}}
    strict = cq(concurrentAdmissionPolicy=policy, queueingStrategy="StrictFIFO")
    assert _review("ClusterQueue", strict)["allowed"] is True, "gate off: the webhook does not look at the policy"
    assert _message(_review("ClusterQueue", strict, gates={"ConcurrentAdmission": True})).endswith(
        'field `spec.queueingStrategy`: Invalid value: "StrictFIFO": StrictFIFO queueing strategy cannot be used '
        "when ConcurrentAdmissionPolicy is defined")
    both = cq(flavors=tuple(f"f{i}" for i in range(33)), concurrentAdmissionPolicy=policy, queueingStrategy="StrictFIFO")
    assert _message(_review("ClusterQueue", both, gates={"ConcurrentAdmission": True})) == (
        "ClusterQueue cq: [field `spec.resourceGroups[0].flavors`: Invalid value: 33: cannot have more than 32 "
        "resource flavors in the ResourceGroup when ConcurrentAdmissionPolicy is defined, field "
        '`spec.queueingStrategy`: Invalid value: "StrictFIFO": StrictFIFO queueing strategy cannot be used when '
        "ConcurrentAdmissionPolicy is defined]"), "every broken rule, in one aggregated message"
    for gates in ({}, {"ConcurrentAdmission": True}):
        assert _message(_review("ClusterQueue", cq(concurrentAdmissionPolicy=policy), cq(), gates)).endswith(
            "field `spec.concurrentAdmissionPolicy`: field is immutable")
        assert _review("ClusterQueue", cq(flavors=("a", "b"), concurrentAdmissionPolicy=policy),
                       cq(concurrentAdmissionPolicy=policy), gates)["allowed"] is True


def test_a_workload_holding_quota_keeps_its_pod_sets_but_may_lose_pods() -> None:
    before = wl(reserved=True)
    assert _message(_review("Workload", wl(image="other", reserved=True), before)) == (
        "Workload team/w: field `spec.podSets.0`: field is immutable")
    more, fewer = copy.deepcopy(before), copy.deepcopy(before)
    more["spec"]["podSets"][0]["count"], fewer["spec"]["podSets"][0]["count"] = 3, 1
    assert "spec.podSets.0`" in _message(_review("Workload", more, before))
    assert _review("Workload", fewer, before)["allowed"] is True
    respelled = copy.deepcopy(before)  # the same CPU, written another way: semantically equal, as Kueue compares
    respelled["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1000m"
    assert _review("Workload", respelled, before)["allowed"] is True
    more_cpu = copy.deepcopy(respelled)
    more_cpu["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1001m"
    assert "spec.podSets.0`" in _message(_review("Workload", more_cpu, before))
    assert _review("Workload", wl(image="other"), wl())["allowed"] is True, "no quota held: anything goes"
    two = wl(reserved=True)
    two["spec"]["podSets"].append({**two["spec"]["podSets"][0], "name": "second"})
    two["status"]["admission"]["podSetAssignments"].append(
        {**two["status"]["admission"]["podSetAssignments"][0], "name": "second"})
    assert "field `spec.podSets`: field is immutable" in _message(_review("Workload", two, before))


def test_a_workload_holding_quota_loses_pods_only_under_elastic_jobs() -> None:
    """Kueue's "workload.podSets[].count is immutable" and "... is mutable with ElasticJobs feature gate": a pod
    set's count may come down while quota is reserved only under ``ElasticJobsViaWorkloadSlices``, whichever the
    Workload; off, the pod set is as immutable as the rest (the other pod set, unchanged, is not named)."""
    def two(second: int) -> dict:
        doc = wl(count=3, reserved=True)
        ps, psa = doc["spec"]["podSets"][0], doc["status"]["admission"]["podSetAssignments"][0]
        psa["resourceUsage"] = {"cpu": "3"}
        doc["spec"]["podSets"].append({**copy.deepcopy(ps), "name": "second", "count": second})
        doc["status"]["admission"]["podSetAssignments"].append({**copy.deepcopy(psa), "name": "second", "count": 4,
                                                                 "resourceUsage": {"cpu": "4"}})
        return doc
    off = {"ElasticJobsViaWorkloadSlices": False}
    assert _message(_review("Workload", two(3), two(4), off)) == (
        "Workload team/w: field `spec.podSets.1`: field is immutable")
    assert _review("Workload", two(3), two(4), {"ElasticJobsViaWorkloadSlices": True})["allowed"] is True
    assert _review("Workload", two(3), two(4))["allowed"] is True, "the gate's default: on"
    assert _review("Workload", two(4), two(4), off)["allowed"] is True


def test_a_workload_holding_quota_keeps_its_queue_and_priority_class() -> None:
    before = wl(reserved=True, priorityClassRef={"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass",
                                                  "name": "low"}, priority=1)
    moved = copy.deepcopy(before)
    moved["spec"]["queueName"] = "other"
    assert _message(_review("Workload", moved, before)) == (
        "Workload team/w: field `spec.queueName`: queueName is immutable while workload quota reserved")
    released = copy.deepcopy(moved)
    del released["status"]["conditions"], released["status"]["admission"]
    assert _review("Workload", released, before)["allowed"] is True, "quota released in the same update"
    renamed = copy.deepcopy(before)
    renamed["spec"]["priorityClassRef"]["name"] = "high"
    assert _review("Workload", renamed, before)["allowed"] is True, "a WorkloadPriorityClass may be renamed"
    regrouped = copy.deepcopy(before)
    regrouped["spec"]["priorityClassRef"] = {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "low"}
    assert "priorityClassRef.group is immutable" in _message(_review("Workload", regrouped, before))
    dropped = copy.deepcopy(before)
    del dropped["spec"]["priorityClassRef"]
    assert "field `spec.priorityClassRef`" in _message(_review("Workload", dropped, before))


def test_a_workload_holding_quota_neither_loses_nor_gains_a_queue_name() -> None:
    """Kueue #12594 (issue #12552, before v0.20): the CRD rule reads a missing ``queueName`` as "", so removing it
    from a Workload holding quota, or adding one to a Workload that has none, is refused as a change; with the quota
    released in the same update it is not."""
    immutable = "Workload team/w: field `spec.queueName`: queueName is immutable while workload quota reserved"
    before = wl(reserved=True)
    removed = copy.deepcopy(before)
    del removed["spec"]["queueName"]
    assert _message(_review("Workload", removed, before)) == immutable
    assert _message(_review("Workload", before, removed)) == immutable, "added"
    released = copy.deepcopy(removed)
    del released["status"]["conditions"], released["status"]["admission"]
    assert _review("Workload", released, before)["allowed"] is True
    assert _review("Workload", wl(), removed)["allowed"] is True, "quota released, queue named again"


def test_an_admission_is_set_or_cleared_never_changed_but_for_its_placement_under_tas() -> None:
    before = wl(reserved=True)
    assert _review("Workload", before, wl())["allowed"] is True, "set"
    reflavored = wl(reserved=True)
    reflavored["status"]["admission"]["podSetAssignments"][0]["flavors"] = {"cpu": "b"}
    assert _message(_review("Workload", reflavored, before)) == (
        "Workload team/w: field `status.admission`: field is immutable")
    placed = wl(reserved=True)
    placed["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"] = {
        "levels": ["kubernetes.io/hostname"], "slices": [{"domainCount": 1, "valuesPerLevel": [{"universal": "x1"}],
                                                          "podCounts": {"universal": 2}}]}
    placed["status"]["admission"]["podSetAssignments"][0]["delayedTopologyRequest"] = "Ready"
    assert _review("Workload", placed, before)["allowed"] is True
    assert "status.admission" in _message(_review("Workload", placed, before, {"TopologyAwareScheduling": False}))


def test_reclaimable_pods_only_grow_while_quota_is_held() -> None:
    before = wl(count=4, reserved=True)
    before["status"]["reclaimablePods"] = [{"name": "main", "count": 2}]
    more, fewer, gone = (copy.deepcopy(before) for _ in range(3))
    more["status"]["reclaimablePods"][0]["count"] = 3
    fewer["status"]["reclaimablePods"][0]["count"] = 1
    gone["status"]["reclaimablePods"] = []
    assert _review("Workload", more, before)["allowed"] is True
    assert _message(_review("Workload", fewer, before)) == (
        "Workload team/w: field `status.reclaimablePods[main].count`: Invalid value: 1: cannot be less then 2")
    assert _message(_review("Workload", gone, before)) == (
        "Workload team/w: field `status.reclaimablePods[main]`: Required value: cannot be removed")
    released = copy.deepcopy(gone)
    del released["status"]["conditions"], released["status"]["admission"]
    assert _review("Workload", released, before)["allowed"] is True


def _reserved_without_admission(**meta: Any) -> dict:
    doc = wl(reserved=True)
    del doc["status"]["admission"]
    doc["metadata"].update(meta)
    return doc


def test_only_an_update_into_quota_reserved_without_admission_is_refused() -> None:
    """Kueue's "a workload already in that state stays updatable so it can be removed": a Workload stored with
    QuotaReserved=True and no admission (written before Kueue checked it, or while no webhook answered) may still
    lose its finalizer or change a label; only an update moving a Workload into that state is refused."""
    stuck = _reserved_without_admission(finalizers=["kueue.x-k8s.io/resource-in-use"])
    assert _review("Workload", _reserved_without_admission(), stuck)["allowed"] is True, "finalizer dropped"
    assert _review("Workload", _reserved_without_admission(labels={"a": "b"}), stuck)["allowed"] is True
    required = ("Workload team/w: field `status.admission`: Required value: must be set while the "
                "QuotaReserved condition is True")  # Kueue's error type: field.Required (its test's)
    assert _message(_review("Workload", _reserved_without_admission(), wl())) == required, "into it: refused"
    assert _message(_review("Workload", _reserved_without_admission(), wl(reserved=True))) == required
    assert _message(_review("Workload", _reserved_without_admission())) == required, "created so: refused"
    stuck_pods = _limiting_pods(copy.deepcopy(stuck))
    assert _message(_review("Workload", _limiting_pods(_reserved_without_admission()), stuck_pods)) == (
        f"Workload team/w: {PODS_LIMIT}"), "the object's other errors stand"


def test_max_execution_time_and_ready_pod_set_updates_are_kept() -> None:
    before = wl(reserved=True, admitted=True, maximumExecutionTimeSeconds=60)
    longer = copy.deepcopy(before)
    longer["spec"]["maximumExecutionTimeSeconds"] = 120
    assert "maximumExecutionTimeSeconds is immutable" in _message(_review("Workload", longer, before))
    checked = wl()
    checked["status"]["admissionChecks"] = [{"name": "ac", "state": "Ready", "lastTransitionTime":
                                             "2024-01-01T00:00:00Z", "podSetUpdates": [{"name": "main"}]}]
    changed = copy.deepcopy(checked)
    changed["status"]["admissionChecks"][0]["podSetUpdates"][0]["labels"] = {"a": "b"}
    assert _message(_review("Workload", changed, checked)) == (
        "Workload team/w: field `status.admissionChecks[0].podSetUpdates`: field is immutable")
    changed["status"]["admissionChecks"][0]["state"] = "Pending"
    assert _review("Workload", changed, checked)["allowed"] is True


def test_a_local_queue_keeps_its_cluster_queue_and_a_tas_flavor_its_spec() -> None:
    lq = {"apiVersion": V1B2, "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": "team"},
          "spec": {"clusterQueue": "cq"}}
    moved = {**lq, "spec": {"clusterQueue": "other"}}
    assert _message(_review("LocalQueue", moved, lq)) == (
        'LocalQueue team/lq: field `spec.clusterQueue`: Invalid value: "string": field is immutable')
    assert _review("LocalQueue", {**lq, "spec": {"clusterQueue": "cq", "stopPolicy": "Hold"}}, lq)["allowed"]
    rf = {"apiVersion": V1B2, "kind": "ResourceFlavor", "metadata": {"name": "tas"},
          "spec": {"nodeLabels": {"pool": "a"}, "topologyName": "default"}}
    moved = {**rf, "spec": {"nodeLabels": {"pool": "a"}, "topologyName": "other"}}
    assert "topologyName is immutable once set" in _message(_review("ResourceFlavor", moved, rf))
    # Kueue #9427: past the fields the topology tree is built from, a TAS flavor's spec may change
    weighted = {**rf, "spec": {**rf["spec"], "resourceWeights": {"cpu": "2"}}}
    assert _review("ResourceFlavor", weighted, rf)["allowed"] is True
    # Kueue v0.20 (#13738, #13622, #13647): a TAS flavor's node labels, taints and tolerations may change
    relabelled = {**rf, "spec": {"nodeLabels": {"pool": "b"}, "topologyName": "default",
                                 "nodeTaints": [{"key": "k", "effect": "NoSchedule"}],
                                 "tolerations": [{"key": "k", "operator": "Exists"}]}}
    assert _review("ResourceFlavor", relabelled, rf)["allowed"] is True
    plain = {**rf, "spec": {"nodeLabels": {"pool": "a"}}}
    assert _review("ResourceFlavor", {**plain, "spec": {"nodeLabels": {"pool": "b"}}}, plain)["allowed"] is True


def test_a_topology_keeps_its_levels_unless_hostname_stays_the_lowest() -> None:
    def topology(*labels: str) -> dict:
        return {"apiVersion": V1B2, "kind": "Topology", "metadata": {"name": "t"},
                "spec": {"levels": [{"nodeLabel": label} for label in labels]}}

    before = topology("block", "rack")
    assert _message(_review("Topology", topology("block"), before)) == (
        "Topology t: field `spec.levels`: field is immutable")
    relabelled = {**before, "metadata": {"name": "t", "labels": {"a": "b"}}}
    assert _review("Topology", relabelled, before)["allowed"] is True
    hosts = topology("block", "rack", "kubernetes.io/hostname")
    assert _review("Topology", topology("rack", "kubernetes.io/hostname"), hosts)["allowed"] is True, \
        "hostname lowest before and after (the reference, kueue-tas-admissionchecks-lifecycle.md §1.1)"
    assert "field is immutable" in _message(_review("Topology", before, hosts))
    assert _message(_review("Topology", topology("rack", "rack"))) == "Topology t: field `spec.levels`: must be unique"


def test_an_admission_check_keeps_its_controller() -> None:
    ac = {"apiVersion": V1B2, "kind": "AdmissionCheck", "metadata": {"name": "ac"},
          "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request"}}
    moved = {**ac, "spec": {"controllerName": "example.com/other"}}
    assert _message(_review("AdmissionCheck", moved, ac)) == (
        'AdmissionCheck ac: field `spec.controllerName`: Invalid value: "string": field is immutable')
    assert "spec.controllerName" in _message(_review("AdmissionCheck", {**ac, "spec": {"controllerName": ""}}))


def test_kueue_s_ungated_rules_refuse_on_create_and_update() -> None:
    """A resource Kueue keeps for itself, a flavor's taint Kueue's CRD refuses: refused whatever the gates."""
    reserved = wl()
    reserved["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["limits"] = {"pods": "1"}
    assert _message(_review("Workload", reserved, gates={"AllBeta": False})) == (
        "Workload team/w: field `spec.podSets[0].template.spec.containers[0].resources.limits[pods]`: Invalid value: "
        '"pods": the key is reserved for internal kueue use')
    assert "limits[pods]" in _message(_review("Workload", reserved, wl()))
    rf = {"apiVersion": V1B2, "kind": "ResourceFlavor", "metadata": {"name": "rf"},
          "spec": {"nodeTaints": [{"key": "spot", "effect": "Soon"}]}}
    assert _message(_review("ResourceFlavor", rf)).startswith(
        'ResourceFlavor rf: field `spec.nodeTaints`: Invalid value: "array": supported taint effect values')


def test_kueue_s_crd_rules_on_names_tolerations_and_conditions_refuse_whatever_the_gates() -> None:
    queued = wl(queueName="Team_Q")
    assert _message(_review("Workload", queued, gates={"AllBeta": False})).startswith(
        'Workload team/w: field `spec.queueName`: Invalid value: "Team_Q": spec.queueName in body '
        'should match')
    keyless = {"apiVersion": V1B2, "kind": "ResourceFlavor", "metadata": {"name": "rf"},
               "spec": {"tolerations": [{"operator": "Equal", "value": "x"}]}}
    assert _message(_review("ResourceFlavor", keyless)) == (
        'ResourceFlavor rf: field `spec.tolerations`: Invalid value: "array": operator must be Exists when '
        "'key' is empty, which means 'match all values and all keys'")
    unreasoned = wl(reserved=True)
    del unreasoned["status"]["conditions"][0]["reason"]
    assert _message(_review("Workload", unreasoned, wl(reserved=True))) == (
        "Workload team/w: field `status.conditions[0].reason`: Required value")


def test_an_update_of_an_object_that_no_longer_decodes_is_judged_on_the_new_one() -> None:
    broken = cq()
    broken["spec"]["resourceGroups"] = "not a list"
    assert _review("ClusterQueue", cq(), broken)["allowed"] is True


# --- configuration ----------------------------------------------------------------------------------------------


def test_configuration_registers_kueues_kinds_on_create_and_update() -> None:
    ca = self_signed(["127.0.0.1"]).ca_pem
    doc = configuration(ca, url="https://127.0.0.1:9443/")
    assert doc["kind"] == "ValidatingWebhookConfiguration"
    hooks = {h["name"]: h for h in doc["webhooks"]}
    kubeflow = ["vjaxjob.kb.io", "vpaddlejob.kb.io", "vpytorchjob.kb.io", "vtfjob.kb.io", "vxgboostjob.kb.io"]
    assert sorted(hooks) == sorted(["vadmissioncheck.kb.io", "vappwrapper.kb.io", "vclusterqueue.kb.io", "vcohort.kb.io",
                                    "vdeployment.kb.io", "vjob.kb.io", "vjobset.kb.io", "vleaderworkerset.kb.io",
                                    "vlocalqueue.kb.io", "vmpijob.kb.io", "vmultikueuecluster.kb.io",
                                    "vmultikueueconfig.kb.io", "vpod.kb.io", "vraycluster.kb.io",
                                    "vrayjob.kb.io", "vrayservice.kb.io", "vresourceflavor.kb.io", "vsparkapplication.kb.io",
                                    "vstatefulset.kb.io",
                                    "vtopology.kb.io", "vtrainjob.kb.io", "vworkload.kb.io", *kubeflow])
    del hooks["vjob.kb.io"]  # Jobs': tests/k8s/test_job_validation_review.py
    del hooks["vpod.kb.io"]  # Pods': tests/k8s/test_pod_validation_review.py
    del hooks["vdeployment.kb.io"]  # Deployments': tests/k8s/test_deployment_webhook.py
    del hooks["vstatefulset.kb.io"]  # StatefulSets': tests/k8s/test_statefulset_webhook.py
    del hooks["vjobset.kb.io"]  # JobSets': tests/k8s/test_jobset_webhook.py
    del hooks["vmpijob.kb.io"]  # MPIJobs': tests/k8s/test_mpijob_webhook.py
    del hooks["vrayjob.kb.io"], hooks["vraycluster.kb.io"]  # Ray's: tests/k8s/test_ray_webhook.py
    del hooks["vrayservice.kb.io"]  # RayServices': tests/k8s/test_rayservice_webhook.py
    del hooks["vsparkapplication.kb.io"]  # SparkApplications': tests/k8s/test_spark_webhook.py
    del hooks["vleaderworkerset.kb.io"]  # LeaderWorkerSets': tests/k8s/test_lws_webhook.py
    del hooks["vappwrapper.kb.io"]  # AppWrappers': tests/k8s/test_appwrapper_webhook.py
    del hooks["vtrainjob.kb.io"]  # TrainJobs': tests/k8s/test_trainjob_webhook.py
    for hook in kubeflow:  # the training operator's jobs': tests/k8s/test_kubeflow_webhook.py
        del hooks[hook]
    for h in hooks.values():
        assert h["failurePolicy"] == "Fail" and h["sideEffects"] == "None"
        assert base64.b64decode(h["clientConfig"]["caBundle"]) == ca
        assert h["rules"][0]["operations"] == ["CREATE", "UPDATE"] and h["rules"][0]["apiVersions"] == ["v1beta2"]
        assert "namespaceSelector" not in h and "objectSelector" not in h
    assert hooks["vworkload.kb.io"]["rules"][0]["resources"] == ["workloads", "workloads/status"]
    assert hooks["vclusterqueue.kb.io"]["clientConfig"]["url"] == (
        "https://127.0.0.1:9443/validate-kueue-x-k8s-io-v1beta2-clusterqueue")
    by_service = configuration(ca, service=("kueue-es-webhook", "kueue-system", 443), object_selector={})
    assert by_service["webhooks"][3]["clientConfig"]["service"] == {
        "name": "kueue-es-webhook", "namespace": "kueue-system", "port": 443,
        "path": "/validate-kueue-x-k8s-io-v1beta2-workload"}
    assert by_service["webhooks"][0]["objectSelector"] == {}
    assert PATHS == {h.path: h.kind for h in HOOKS}
    with pytest.raises(ValueError, match="url or a service"):
        configuration(ca)


def test_topology_spreading_is_checked_under_its_gate_on_update_only_where_it_changed() -> None:
    ann = "kueue.x-k8s.io/podset-topology-spreading"
    staged = wl()
    ps = staged["spec"]["podSets"][0]
    ps["topologyRequest"] = {"required": "rack"}
    ps["template"]["metadata"] = {"annotations": {ann: '{"rules": []}'}}
    on = {"TASTopologySpreading": True}
    assert _review("Workload", staged)["allowed"] is True  # off by default: not looked at
    at = f"spec.podSets[0].template.metadata.annotations[{ann}]"
    assert _message(_review("Workload", staged, gates=on)) == (
        f'Workload team/w: field `{at}`: Invalid value: "{{\\"rules\\": []}}": topology spreading rules must contain '
        "between 1 and 2 entries: got 0")
    # staged while the gate was off: a write leaving it as it was is let through, one changing it is checked
    relabelled = copy.deepcopy(staged)
    relabelled["metadata"]["labels"] = {"app": "web"}
    assert _review("Workload", relabelled, old=staged, gates=on)["allowed"] is True
    rewritten = copy.deepcopy(staged)
    rewritten["spec"]["podSets"][0]["template"]["metadata"]["annotations"][ann] = '{"rules": [{}]}'
    assert "topologyKey" in _message(_review("Workload", rewritten, old=staged, gates=on))


PODS_LIMIT = ("field `spec.podSets[0].template.spec.containers[0].resources.limits[pods]`: Invalid value: \"pods\": "
              "the key is reserved for internal kueue use")


def _limiting_pods(doc: dict) -> dict:
    """``doc`` (a :func:`wl`) with a limit on the resource Kueue keeps for itself."""
    doc["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["limits"] = {"pods": "1"}
    return doc


def test_a_workload_is_refused_for_every_field_error_together_in_kueues_order() -> None:
    """As Kueue's webhook returns its whole ``field.ErrorList`` aggregated: every error of its own checks, pod sets
    first, then the admission; the CRD's rules broken are refused together before, without the webhook's."""
    both = _limiting_pods(wl(reserved=True))
    both["status"]["admission"]["podSetAssignments"][0]["resourceUsage"] = {"cpu": "3m"}
    assert _message(_review("Workload", both)) == (
        f"Workload team/w: [{PODS_LIMIT}, field `status.admission.podSetAssignments[0].resourceUsage[cpu]`: Invalid "
        'value: "3m": is not a multiple of 2]')
    schema = copy.deepcopy(both)
    schema["spec"]["queueName"] = "Team_Q"
    del schema["status"]["conditions"][0]["reason"]
    message = _message(_review("Workload", schema))
    assert (message.startswith('Workload team/w: [field `spec.queueName`: Invalid value: "Team_Q"')
            and message.endswith(", field `status.conditions[0].reason`: Required value]")), message
    assert "pods" not in message


def test_a_workload_update_is_refused_for_every_error_its_own_and_the_updates_in_kueues_order() -> None:
    """Kueue's ``ValidateWorkloadUpdate``: the new object's errors, then the update's (pod sets, then admission),
    all in one message; the CRD's transition rules join the CRD's other rules."""
    before = wl(reserved=True)
    changed = wl(image="other", reserved=True)
    changed["status"]["admission"]["podSetAssignments"][0]["flavors"] = {"cpu": "b"}
    assert _message(_review("Workload", changed, before)) == (
        "Workload team/w: [field `spec.podSets.0`: field is immutable, field `status.admission`: "
        "field is immutable]")
    reserved = _limiting_pods(copy.deepcopy(changed))
    assert _message(_review("Workload", reserved, before)) == (
        f"Workload team/w: [{PODS_LIMIT}, field `spec.podSets.0`: field is immutable, "
        "field `status.admission`: "
        "field is immutable]")
    moved = copy.deepcopy(reserved)
    moved["spec"]["queueName"] = "other"
    assert _message(_review("Workload", moved, before)) == (
        "Workload team/w: field `spec.queueName`: queueName is immutable while workload quota reserved"), (
        "the apiserver's transition rule refuses before the webhook's rules are asked")
    del moved["status"]["conditions"][0]["reason"]
    assert _message(_review("Workload", moved, before)) == (
        "Workload team/w: [field `status.conditions[0].reason`: Required value, field `spec.queueName`: "
        "queueName is immutable while workload quota reserved]")


def test_two_pod_sets_of_one_name_are_refused() -> None:
    """Kueue's "Shouldn't set podSet name if multiple": two pod sets whose names both default to ``main`` break
    the CRD's list map (``webhook/core/workload_test.go``)."""
    doc = wl()
    doc["spec"]["podSets"] *= 2
    assert _message(_review("Workload", doc)) == (
        'Workload team/w: field `spec.podSets[1]`: Duplicate value: map[string]interface {}{"name":"main"}')


def test_a_workload_stored_with_a_name_twice_stays_updatable_where_the_update_leaves_it() -> None:
    """kueue-es's CRDs carry no list types, so a Workload could be stored with two pod sets of one name: an update
    leaving that list as it was (its finalizer dropped) is let through, as the apiserver ratchets an unchanged
    value; one giving a name twice in a list it changes is refused."""
    stored = wl()
    stored["spec"]["podSets"] *= 2
    stored["metadata"]["finalizers"] = ["kueue.x-k8s.io/resource-in-use"]
    released = copy.deepcopy(stored)
    del released["metadata"]["finalizers"]
    assert _review("Workload", released, stored)["allowed"] is True
    checked = copy.deepcopy(stored)
    checked["status"]["admissionChecks"] = [{"name": "ac", "state": "Pending", "lastTransitionTime": TIME}] * 2
    assert _message(_review("Workload", checked, stored)) == (
        'Workload team/w: field `status.admissionChecks[1]`: Duplicate value: map[string]interface {}{"name":"ac"}')
    grown = copy.deepcopy(stored)
    grown["spec"]["podSets"].append(grown["spec"]["podSets"][0])
    assert "field `spec.podSets[2]`: Duplicate value" in _message(_review("Workload", grown, stored))


def test_multikueue_clusters_and_configs_are_held_to_kueue_s_crd_rules() -> None:
    """Kueue's MultiKueueCluster and MultiKueueConfig CRDs refuse a cluster with no source or two, a kubeconfig
    location empty or over 256 characters or of an unknown type, a config with no cluster, a cluster twice or over
    20 (``webhook/core/multikueue_cluster_test.go``, ``multikueue_config_test.go``): kueue-es's generated CRDs do
    not carry those rules, so its webhook answers for both kinds, as for LocalQueues and Topologies."""
    ca = self_signed(["127.0.0.1"]).ca_pem
    hooks = {h["name"]: h for h in configuration(ca, url="https://127.0.0.1:9443/")["webhooks"]}
    for name, resource in (("vmultikueuecluster.kb.io", "multikueueclusters"),
                           ("vmultikueueconfig.kb.io", "multikueueconfigs")):
        assert hooks[name]["rules"] == [{"operations": ["CREATE", "UPDATE"], "apiGroups": ["kueue.x-k8s.io"],
                                         "apiVersions": ["v1beta2"], "resources": [resource], "scope": "Cluster"}]
    source = {"kubeConfig": {"locationType": "Secret", "location": "worker-secret"}}
    cluster = {"apiVersion": V1B2, "kind": "MultiKueueCluster", "metadata": {"name": "worker"},
               "spec": {"clusterSource": source}}
    assert _review("MultiKueueCluster", cluster)["allowed"] is True
    both = copy.deepcopy(cluster)
    both["spec"]["clusterSource"]["clusterProfileRef"] = {"name": "worker-profile"}
    assert _message(_review("MultiKueueCluster", both, cluster)) == (
        "MultiKueueCluster worker: field `spec.clusterSource`: exactly one of kubeConfig or clusterProfileRef must "
        "be set")
    config = {"apiVersion": V1B2, "kind": "MultiKueueConfig", "metadata": {"name": "multikueue-config"},
              "spec": {"clusters": ["worker1", "worker2"]}}
    assert _review("MultiKueueConfig", config)["allowed"] is True
    twice = _invalid(_review("MultiKueueConfig", {**config, "spec": {"clusters": ["worker1", "worker1"]}}))
    assert twice["message"] == ('MultiKueueConfig.kueue.x-k8s.io "multikueue-config" is invalid: spec.clusters[1]: '
                                'Duplicate value: "worker1"')
    assert twice["details"]["causes"] == [
        {"reason": "FieldValueDuplicate", "message": 'Duplicate value: "worker1"', "field": "spec.clusters[1]"}]


def _slice(levels: list[str], suffix: int) -> dict:
    return {"domainCount": 1, "valuesPerLevel": [{"universal": f"{level}-{suffix}"} for level in levels],
            "podCounts": {"universal": 1}}


@pytest.mark.parametrize(("bad", "field", "message"), [
    ({"domainCount": 1, "valuesPerLevel": [{"universal": "block-2"}], "podCounts": {"universal": 1}}, "",
     "valuesPerLevel must have the same length as the number of levels in this TopologyAssignment"),
    ({"domainCount": 3, "valuesPerLevel": [{"universal": "block-2"}, {"universal": "rack-2"}],
      "podCounts": {"individual": [10, 20]}}, ".slices[1]",
     "podCounts.individual must have length equal to domainCount"),
    ({"domainCount": 3, "valuesPerLevel": [{"universal": "block-2"}, {"individual": {"roots": ["rack2-1", "rack2-2"]}}],
      "podCounts": {"individual": [10, 20, 30]}}, ".slices[1]",
     "valuesPerLevel.individual, if set, must have roots of length equal to domainCount of this "
     "TopologyAssignmentSlice"),
], ids=["levels", "pod-counts", "roots"])
def test_a_topology_assignment_breaking_a_crd_rule_is_refused_in_kueue_s_words(bad: dict, field: str,
                                                                                message: str) -> None:
    """Kueue's "kubebuilder XValidation rule set" (``webhook/core/workload_test.go``): the CEL rules of a
    TopologyAssignment (its slices' values one per level) and of a slice (its pod counts and each level's roots one
    per domain), at the object holding the rule, in the CRD's words."""
    levels = ["block", "rack"]
    before = wl()
    after = copy.deepcopy(before)
    after["status"] = {"admission": {"clusterQueue": "cq1", "podSetAssignments": [{"name": "main", "topologyAssignment": {
        "levels": levels, "slices": [_slice(levels, 1), bad, _slice(levels, 3)]}}]}}
    at = f"status.admission.podSetAssignments[0].topologyAssignment{field}"
    assert _message(_review("Workload", after, before, {"TopologyAwareScheduling": True})) == (
        f'Workload team/w: field `{at}`: Invalid value: "object": {message}')


# --- the answer's status: the CRD's rules as the apiserver answers them, the webhook's as Kueue's -----------------


def _invalid(resp: dict) -> dict:
    """The status of a refusal for the CRD's rules: 422 Invalid, as the apiserver's ``NewInvalid``."""
    assert resp["allowed"] is False and resp["status"]["code"] == 422 and resp["status"]["reason"] == "Invalid"
    return resp["status"]


def test_a_topology_request_s_crd_minimums_are_answered_422_invalid_whatever_the_gate() -> None:
    """Kueue's Workload CRD: ``podSetSliceSize`` at least 1 (#13634), even with TASValidateWorkloadSliceSize off
    (#12728), and ``subGroupCount`` at least 0 (v0.20, #13108); the apiserver refuses in its schema's words."""
    at = "spec.podSets[0].topologyRequest"
    for topology, field, value, minimum in (({"podSetSliceRequiredTopology": "rack", "podSetSliceSize": 0},
                                             "podSetSliceSize", 0, 1),
                                            ({"subGroupIndexLabel": "idx", "subGroupCount": -1}, "subGroupCount", -1, 0)):
        doc = wl()
        doc["spec"]["podSets"][0]["topologyRequest"] = topology
        body = f"Invalid value: {value}: {at}.{field} in body should be greater than or equal to {minimum}"
        for gates in ({}, {"TASValidateWorkloadSliceSize": False}):
            status = _invalid(_review("Workload", doc, gates=gates))
            assert status["details"]["causes"] == [{"reason": "FieldValueInvalid", "message": body,
                                                    "field": f"{at}.{field}"}]


def test_a_workload_refused_for_its_crd_s_rules_is_answered_422_invalid() -> None:
    """Kueue's CRD transition rule on ``queueName`` and its list maps: the apiserver refuses them itself, with
    ``Invalid`` (``BeInvalidError`` in Kueue's ``webhook/core/workload_test.go``), not a webhook's ``Forbidden``."""
    before = wl(reserved=True)
    moved = copy.deepcopy(before)
    moved["spec"]["queueName"] = "other"
    assert _invalid(_review("Workload", moved, before)) == {
        "code": 422, "reason": "Invalid", "status": "Failure",
        "message": 'Workload.kueue.x-k8s.io "w" is invalid: spec.queueName: queueName is immutable while workload '
                   "quota reserved",
        "details": {"name": "w", "group": "kueue.x-k8s.io", "kind": "Workload", "causes": [
            {"reason": "FieldValueInvalid", "message": "queueName is immutable while workload quota reserved",
             "field": "spec.queueName"}]}}
    twice = wl()
    twice["spec"]["podSets"] *= 2
    status = _invalid(_review("Workload", twice))
    assert status["message"] == ('Workload.kueue.x-k8s.io "w" is invalid: spec.podSets[1]: Duplicate value: '
                                 'map[string]interface {}{"name":"main"}')
    assert status["details"]["causes"] == [{"reason": "FieldValueDuplicate", "field": "spec.podSets[1]",
                                            "message": 'Duplicate value: map[string]interface {}{"name":"main"}'}]


def test_several_crd_errors_are_listed_as_the_apiserver_aggregates_them() -> None:
    doc = wl()
    doc["spec"]["queueName"] = "Bad_Q"
    doc["spec"]["podSets"] *= 2
    status = _invalid(_review("Workload", doc))
    assert status["message"].startswith('Workload.kueue.x-k8s.io "w" is invalid: [spec.queueName: ')
    assert status["message"].endswith(', spec.podSets[1]: Duplicate value: map[string]interface {}{"name":"main"}]')
    assert [c["field"] for c in status["details"]["causes"]] == ["spec.queueName", "spec.podSets[1]"]


def test_the_immutable_fields_of_kueue_s_crds_are_answered_422_invalid() -> None:
    lq = {"apiVersion": V1B2, "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": "team"},
          "spec": {"clusterQueue": "cq"}}
    status = _invalid(_review("LocalQueue", {**lq, "spec": {"clusterQueue": "other"}}, lq))
    assert status["message"] == ('LocalQueue.kueue.x-k8s.io "lq" is invalid: spec.clusterQueue: Invalid '
                                 'value: "string": field is immutable')
    assert status["details"] == {"name": "lq", "group": "kueue.x-k8s.io", "kind": "LocalQueue", "causes": [
        {"reason": "FieldValueInvalid", "message": 'Invalid value: "string": field is immutable',
         "field": "spec.clusterQueue"}]}
    topology = {"apiVersion": V1B2, "kind": "Topology", "metadata": {"name": "t"},
                "spec": {"levels": [{"nodeLabel": "block"}, {"nodeLabel": "rack"}]}}
    assert _invalid(_review("Topology", {**topology, "spec": {"levels": [{"nodeLabel": "block"}]}}, topology))[
        "details"]["causes"] == [{"reason": "FieldValueInvalid", "message": "field is immutable",
                                  "field": "spec.levels"}]
    ac = {"apiVersion": V1B2, "kind": "AdmissionCheck", "metadata": {"name": "ac"},
          "spec": {"controllerName": "example.com/one"}}
    assert _invalid(_review("AdmissionCheck", {**ac, "spec": {"controllerName": "example.com/two"}}, ac))[
        "message"] == ('AdmissionCheck.kueue.x-k8s.io "ac" is invalid: spec.controllerName: Invalid value: '
                       '"string": field is immutable')
    rf = {"apiVersion": V1B2, "kind": "ResourceFlavor", "metadata": {"name": "tas"},
          "spec": {"nodeLabels": {"pool": "a"}, "topologyName": "default"}}
    assert _invalid(_review("ResourceFlavor", {**rf, "spec": {**rf["spec"], "topologyName": "other"}}, rf))[
        "details"]["causes"][0]["field"] == "spec"


def test_kueue_s_own_webhook_rules_stay_403_forbidden() -> None:
    """Kueue's webhooks refuse through controller-runtime's ``Denied``: 403 Forbidden, no details."""
    odd = cq(fairSharing={"weight": "-1"})
    resp = _review("ClusterQueue", odd)
    assert resp["status"] == {"code": 403, "reason": "Forbidden", "message": (
        'ClusterQueue cq: field `spec.fairSharing`: Invalid value: "-1": must be greater than or equal to 0')}
    pods = wl()
    pods["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]["pods"] = "1"
    assert "the key is reserved for internal kueue use" in _forbidden(_review("Workload", pods))
    before = wl(reserved=True)
    reflavored = wl(reserved=True)
    reflavored["status"]["admission"]["podSetAssignments"][0]["flavors"] = {"cpu": "b"}
    assert _forbidden(_review("Workload", reflavored, before)) == (
        "Workload team/w: field `status.admission`: field is immutable")


def test_the_crd_s_rules_come_before_the_webhook_s_and_alone() -> None:
    """The apiserver calls no webhook for an object its CRD refuses: CRD errors alone, 422, even where the update
    breaks a rule of Kueue's webhook too."""
    before = wl(reserved=True)
    both = copy.deepcopy(before)
    both["spec"]["queueName"] = "other"
    both["status"]["admission"]["podSetAssignments"][0]["flavors"] = {"cpu": "b"}
    assert [c["field"] for c in _invalid(_review("Workload", both, before))["details"]["causes"]] == [
        "spec.queueName"]


def test_a_refusal_for_the_crd_s_rules_reads_as_before_on_import() -> None:
    """``refusal`` (what ``kueue-es import`` says too) keeps kueue-es's words, naming object and field."""
    before = wl(reserved=True)
    moved = copy.deepcopy(before)
    moved["spec"]["queueName"] = "other"
    assert refusal("Workload", "UPDATE", moved, before, {}) == (
        "Workload team/w: field `spec.queueName`: queueName is immutable while workload quota reserved")


def test_a_flavor_quoting_no_resource_is_answered_422_invalid() -> None:
    """Kueue's CRD has ``MinItems=1`` on a flavor's ``resources`` (session 40's int-whcore finding 6): the
    apiserver refuses ``resources: []`` itself, in the words of its schema validation."""
    for kind in ("ClusterQueue", "Cohort"):
        doc = {**cq(), "kind": kind}
        doc["spec"]["resourceGroups"] = [{"coveredResources": [], "flavors": [{"name": "foo", "resources": []}]}]
        at = "spec.resourceGroups[0].flavors[0].resources"
        body = f"Invalid value: 0: {at} in body should have at least 1 items"
        status = _invalid(_review(kind, doc))
        assert status["details"]["causes"][-1] == {"reason": "FieldValueInvalid", "message": body, "field": at}
        assert status["message"].endswith(f"{at}: {body}]")


QUANTITY = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
"""The pattern Kueue's CRDs (controller-gen) give a ``resource.Quantity``."""


def test_a_queue_quantity_that_is_none_is_answered_as_the_apiserver_refuses_its_pattern() -> None:
    """A LocalQueue's, ClusterQueue's or Cohort's fair sharing weight and a quota are ``resource.Quantity`` in
    Kueue's CRDs, strings held to the quantity pattern: the apiserver (v1.36, a CRD with the pattern) refuses
    ``"abc"`` with ``Invalid value: "abc": <path> in body should match '<pattern>'``, 422."""
    lq = {"apiVersion": V1B2, "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": "team"},
          "spec": {"clusterQueue": "cq", "fairSharing": {"weight": "abc"}}}
    at = "spec.fairSharing.weight"
    body = f"Invalid value: \"abc\": {at} in body should match '{QUANTITY}'"
    assert _invalid(_review("LocalQueue", lq)) == {
        "code": 422, "reason": "Invalid", "status": "Failure",
        "message": f'LocalQueue.kueue.x-k8s.io "lq" is invalid: {at}: {body}',
        "details": {"name": "lq", "group": "kueue.x-k8s.io", "kind": "LocalQueue", "causes": [
            {"reason": "FieldValueInvalid", "message": body, "field": at}]}}
    for kind in ("ClusterQueue", "Cohort"):
        doc = {**cq(fairSharing={"weight": "abc"}), "kind": kind}
        doc["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "lots"
        quota = "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"
        assert _invalid(_review(kind, doc))["details"]["causes"] == [
            {"reason": "FieldValueInvalid", "field": quota,
             "message": f"Invalid value: \"lots\": {quota} in body should match '{QUANTITY}'"},
            {"reason": "FieldValueInvalid", "message": body, "field": at}]


def test_a_flavor_s_resource_weights_are_held_to_kep_8902_and_a_stored_surplus_is_ratcheted() -> None:
    """A weight not above 0 is refused with the webhook's rules (403); one that is no quantity, or more than
    16, with the CRD's (422). A flavor stored with 17 (under a laxer CRD) may be updated leaving them as they
    were, as the apiserver ratchets an unchanged value; growing them is refused."""
    def rf(weights: dict[str, Any], **spec: Any) -> dict:
        return {"apiVersion": V1B2, "kind": "ResourceFlavor", "metadata": {"name": "spot"},
                "spec": {"resourceWeights": weights, **spec}}

    assert _review("ResourceFlavor", rf({"cpu": "250m", "nvidia.com/gpu": 8}))["allowed"] is True
    assert _forbidden(_review("ResourceFlavor", rf({"cpu": "0"}))) == (
        'ResourceFlavor spot: field `spec.resourceWeights[cpu]`: Invalid value: "0": must be greater than 0')
    assert "spec.resourceWeights[cpu]" in str(_invalid(_review("ResourceFlavor", rf({"cpu": "heavy"}))))
    many = {f"example.com/r{i}": "1" for i in range(17)}
    assert "Too many: 17: must have at most 16 items" in str(_invalid(_review("ResourceFlavor", rf(many))))
    labelled = rf(many, nodeLabels={"pool": "spot"})
    assert _review("ResourceFlavor", labelled, rf(many))["allowed"] is True
    grown = rf({**many, "example.com/r17": "1"})
    assert "Too many: 18" in str(_invalid(_review("ResourceFlavor", grown, rf(many))))
