"""The Workload webhook's MultiKueue rule on ``status.clusterName``: set by an update, it names a worker the old
object nominated, under any dispatcher (Kueue #7278), but for a workload slice replacing another under
``ElasticJobsViaWorkloadSlices`` (Kueue's ``workload_webhook_test.go``, "ClusterName doesn't have to be one of the
nominatedClusterNames with ElasticJobs feature gate")."""

from __future__ import annotations

import copy
from typing import Any

import msgspec
import pytest

from connectors.k8s.validating import refusal, review

V1B2 = "kueue.x-k8s.io/v1beta2"
REPLACEMENT_FOR = "kueue.x-k8s.io/workload-slice-replacement-for"
NOT_NOMINATED = ('Workload team/w: field `status.clusterName`: Invalid value: "worker1": when setting clusterName '
                 "it must be one of the nominatedClusterNames")


def _wl(*, nominated: list[str] | None = None, cluster: str | None = None, reserved: bool = True,
        annotations: dict[str, str] | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": V1B2, "kind": "Workload", "metadata": {"name": "w", "namespace": "team"},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}}}]},
        "status": {}}
    if annotations:
        doc["metadata"]["annotations"] = annotations
    if reserved:
        doc["status"]["conditions"] = [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                                        "lastTransitionTime": "2024-01-01T00:00:00Z"}]
        doc["status"]["admission"] = {"clusterQueue": "cq", "podSetAssignments": [
            {"name": "main", "flavors": {"cpu": "a"}, "resourceUsage": {"cpu": "1"}, "count": 1}]}
    if nominated is not None:
        doc["status"]["nominatedClusterNames"] = nominated
    if cluster is not None:
        doc["status"]["clusterName"] = cluster
    return doc


def _update(new: dict, old: dict, gates: dict[str, bool] | None = None) -> str | None:
    return refusal("Workload", "UPDATE", copy.deepcopy(new), copy.deepcopy(old), gates or {})


def test_a_cluster_name_outside_the_old_nominations_is_refused_in_kueue_s_words() -> None:
    assert _update(_wl(cluster="worker1"), _wl(nominated=["worker2"])) == NOT_NOMINATED
    assert _update(_wl(cluster="worker1"), _wl()) == NOT_NOMINATED, "nothing nominated"
    assert _update(_wl(cluster="worker1"), _wl(reserved=False, nominated=["worker2"])) == NOT_NOMINATED, (
        "whether or not the old object held quota")


def test_a_nominated_worker_may_be_set() -> None:
    assert _update(_wl(cluster="worker1"), _wl(nominated=["worker2", "worker1"])) is None


@pytest.mark.parametrize("old, new", [
    (_wl(cluster="worker1"), _wl(cluster="worker1")),  # already set: not this rule's
    (_wl(nominated=["worker2"]), _wl(nominated=["worker2", "worker3"])),  # no clusterName set
    (_wl(cluster="worker1"), _wl()),  # cleared (an eviction)
], ids=["kept", "unset", "cleared"])
def test_only_an_update_that_sets_the_cluster_name_is_held_to_it(old: dict, new: dict) -> None:
    assert _update(new, old) is None


def test_a_replacement_slice_is_placed_without_nomination_under_elastic_jobs() -> None:
    """Kueue's elastic scale-up puts the new slice straight on the worker of the slice it replaces."""
    slice_ = _wl(cluster="worker1", annotations={REPLACEMENT_FOR: "team/w-old", "kueue.x-k8s.io/elastic-job": "true"})
    assert _update(slice_, _wl(reserved=False)) is None
    assert _update(slice_, _wl(reserved=False), {"ElasticJobsViaWorkloadSlices": False}) == NOT_NOMINATED
    assert _update(_wl(cluster="worker1", annotations={REPLACEMENT_FOR: ""}), _wl(reserved=False)) is None, (
        "the annotation present is enough, whatever its value (Kueue's ReplacementForKey)")


CRD_RULE = 'field `status`: Invalid value: "object": '
IMMUTABLE = f"Workload team/w: {CRD_RULE}clusterName is immutable once set"
EXCLUSIVE = f"Workload team/w: {CRD_RULE}clusterName and nominatedClusterNames are mutually exclusive"


def test_a_cluster_name_once_set_is_not_changed_as_the_crd_refuses_it() -> None:
    """The CRD's transition rule on ``status`` (``apis/kueue/v1beta2/workload_types.go``): set, it may be
    cleared (an eviction), never changed, whatever the old object nominated."""
    assert _update(_wl(cluster="worker2"), _wl(cluster="worker1")) == IMMUTABLE
    assert _update(_wl(cluster="worker2", nominated=[]), _wl(cluster="worker1")) == IMMUTABLE


def test_a_cluster_name_beside_nominations_is_refused_as_the_crd_refuses_it() -> None:
    """The CRD's rule on ``status``: no nominations beside a ``clusterName`` (an empty list is none), whether
    the update sets the name (the webhook's own rule met: worker1 was nominated) or keeps it."""
    both = _wl(cluster="worker1", nominated=["worker2"])
    assert _update(both, _wl(nominated=["worker1", "worker2"])) == EXCLUSIVE
    assert _update(both, _wl(cluster="worker1")) == EXCLUSIVE
    assert _update(_wl(cluster="worker1", nominated=[]), _wl(nominated=["worker1"])) is None


def test_the_crd_rules_on_the_cluster_name_are_the_apiserver_s_422() -> None:
    request = {"uid": "u", "operation": "UPDATE", "object": _wl(cluster="worker2"),
               "oldObject": _wl(cluster="worker1")}
    response = review(msgspec.json.encode({"request": request}), "Workload", {})["response"]
    assert response["allowed"] is False
    status = response["status"]
    assert (status["code"], status["reason"]) == (422, "Invalid")
    assert status["details"]["causes"] == [
        {"reason": "FieldValueInvalid", "field": "status",
         "message": 'Invalid value: "object": clusterName is immutable once set'}]


def test_a_workload_stored_with_both_stays_updatable_while_its_status_is_left_as_it_was() -> None:
    """The apiserver ratchets a rule whose value the update leaves as it was (no ``oldSelf`` in it): a
    Workload stored before the rule held (kueue-es's generated CRDs do not carry it) may still lose its
    finalizer."""
    stored = _wl(cluster="worker1", nominated=["worker2"])
    stored["metadata"]["finalizers"] = ["kueue.x-k8s.io/resource-in-use"]
    assert _update(_wl(cluster="worker1", nominated=["worker2"]), stored) is None
