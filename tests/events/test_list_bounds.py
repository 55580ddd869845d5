"""The CRD's bounds on the length of Kueue's lists, refused as the apiserver words them: a Workload holds at most
18 pod sets (Kueue v0.19.0, #12819); a ClusterQueue's and a Cohort's resource groups, covered resources, flavors and
quotas, the last three never empty (Kueue's v1beta2 ``clusterqueue_types.go``/``cohort_types.go``). The generated CRDs carry the same bounds.
They are admission rules: the watch folds a stored object past them (written before its CRD had them), as the
projections do not need them."""

from __future__ import annotations

import copy
from typing import Any

import msgspec
import pytest

from connectors.k8s.crds import object_schema
from connectors.k8s.resources import KUEUE_RESOURCES
from events import objects as o
from events.errors import InvalidInput
from events.field_errors import CEL_NOT_CHECKED
from events.manifests import check_foldable, decode_object

V1B2 = "kueue.x-k8s.io/v1beta2"
POD_SET = {"count": 1, "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}


def _refusal(doc: dict[str, Any], where: str) -> str:
    with pytest.raises(InvalidInput) as refused:
        decode_object(doc, where)
    return str(refused.value)


def workload(pod_sets: int) -> dict[str, Any]:
    return {"apiVersion": V1B2, "kind": "Workload", "metadata": {"name": "w", "namespace": "team"}, "spec": {
        "queueName": "lq", "podSets": [{"name": f"ps{i}", **copy.deepcopy(POD_SET)} for i in range(pod_sets)]}}


def _spec(resource_kind: str, version: str = "v1beta2") -> dict[str, Any]:
    resource = next(r for r in KUEUE_RESOURCES if r.kind == resource_kind)
    return object_schema(resource, version)["properties"]["spec"]["properties"]


# --- Workload ---------------------------------------------------------------------------------------------------


def test_a_workload_holds_at_most_eighteen_pod_sets() -> None:
    decode_object(workload(18), "Workload team/w")
    assert _refusal(workload(19), "Workload team/w") == (
        "Workload team/w: field `spec.podSets`: Too many: 19: must have at most 18 items")


def test_the_watch_folds_a_stored_workload_past_the_pod_set_bound() -> None:
    check_foldable(msgspec.convert(workload(19), o.KueueObject, strict=False), "Workload team/w")


@pytest.mark.parametrize("version", ["v1beta2", "v1beta1"])
def test_the_workload_crd_bounds_its_pod_sets(version: str) -> None:
    assert _spec("Workload", version)["podSets"]["maxItems"] == 18


# --- ClusterQueue, Cohort ---------------------------------------------------------------------------------------


def queue(kind: str, *, groups: int = 1, covered: int = 1, flavors: int = 1) -> dict[str, Any]:
    """``groups`` groups, each covering ``covered`` resources in ``flavors`` flavors (every name unique)."""
    spec = {"resourceGroups": [{"coveredResources": [f"example.com/r{g}-{c}" for c in range(covered)], "flavors": [
        {"name": f"f{g}-{f}", "resources": [{"name": f"example.com/r{g}-{c}", "nominalQuota": 1}
                                            for c in range(covered)]} for f in range(flavors)]}
        for g in range(groups)]}
    return {"apiVersion": V1B2, "kind": kind, "metadata": {"name": "q"}, "spec": spec}


@pytest.mark.parametrize("kind", ["ClusterQueue", "Cohort"])
def test_a_queue_holds_at_most_sixteen_groups_of_sixty_four(kind: str) -> None:
    decode_object(queue(kind, groups=16), f"{kind} q")
    decode_object(queue(kind, covered=64, flavors=4), f"{kind} q")
    decode_object(queue(kind, flavors=64), f"{kind} q")
    assert _refusal(queue(kind, groups=17), f"{kind} q") == (
        f"{kind} q: [field `spec.resourceGroups`: Too many: 17: must have at most 16 items, "
        f"{CEL_NOT_CHECKED}]")
    assert _refusal(queue(kind, flavors=65), f"{kind} q") == (
        f"{kind} q: [field `spec.resourceGroups[0].flavors`: Too many: 65: must have at most 64 items, "
        f"{CEL_NOT_CHECKED}]")
    assert _refusal(queue(kind, covered=65), f"{kind} q") == (
        f"{kind} q: [field `spec.resourceGroups[0].coveredResources`: Too many: 65: must have at most 64 items, "
        f"field `spec.resourceGroups[0].flavors[0].resources`: Too many: 65: must have at most 64 items, "
        f"{CEL_NOT_CHECKED}]")


@pytest.mark.parametrize("kind", ["ClusterQueue", "Cohort"])
@pytest.mark.parametrize("size", [{"groups": 17}, {"flavors": 65}, {"covered": 65}])
def test_the_watch_folds_a_stored_queue_past_the_list_bounds(kind: str, size: dict[str, int]) -> None:
    check_foldable(msgspec.convert(queue(kind, **size), o.KueueObject, strict=False), f"{kind} q")


@pytest.mark.parametrize("version", ["v1beta2", "v1beta1"])
@pytest.mark.parametrize("kind", ["ClusterQueue", "Cohort"])
def test_the_queue_crds_bound_their_groups(kind: str, version: str) -> None:
    groups = _spec(kind, version)["resourceGroups"]
    group = groups["items"]["properties"]
    assert (groups["maxItems"], group["coveredResources"]["maxItems"], group["flavors"]["maxItems"],
            group["flavors"]["items"]["properties"]["resources"]["maxItems"]) == (16, 64, 64, 64)


def _emptied(kind: str) -> dict[str, Any]:
    """A queue of two groups: the first covering nothing, its flavors quoting nothing; the second with no flavor."""
    doc = queue(kind, groups=2)
    first, second = doc["spec"]["resourceGroups"]
    first["coveredResources"] = []
    first["flavors"].append({"name": "f0-1", "resources": []})
    first["flavors"][0]["resources"] = []
    second["flavors"] = []
    return doc


@pytest.mark.parametrize("kind", ["ClusterQueue", "Cohort"])
def test_a_queue_s_covered_resources_flavors_and_quotas_are_never_empty(kind: str) -> None:
    """Kueue's CRD has ``MinItems=1`` on a group's ``coveredResources`` and ``flavors`` and on a flavor's
    ``resources``; the apiserver (kube-apiserver v1.36, a CRD with the bound) words each as below, in the object's
    order, before the list-map duplicates."""
    doc = _emptied(kind)
    doc["spec"]["resourceGroups"][0]["flavors"][1]["name"] = "f0-0"

    def empty(at: str) -> str:
        return f"field `{at}`: Invalid value: 0: {at} in body should have at least 1 items"

    assert _refusal(doc, f"{kind} q") == f"{kind} q: [" + ", ".join([
        empty("spec.resourceGroups[0].coveredResources"), empty("spec.resourceGroups[0].flavors[0].resources"),
        empty("spec.resourceGroups[0].flavors[1].resources"), empty("spec.resourceGroups[1].flavors"),
        'field `spec.resourceGroups[0].flavors[1]`: Duplicate value: map[string]interface {}{"name":"f0-0"}']) + "]"


@pytest.mark.parametrize("kind", ["ClusterQueue", "Cohort"])
def test_the_watch_folds_a_stored_queue_with_empty_lists(kind: str) -> None:
    check_foldable(msgspec.convert(_emptied(kind), o.KueueObject, strict=False), f"{kind} q")


@pytest.mark.parametrize("version", ["v1beta2", "v1beta1"])
@pytest.mark.parametrize("kind", ["ClusterQueue", "Cohort"])
def test_the_queue_crds_keep_their_lists_from_being_empty(kind: str, version: str) -> None:
    group = _spec(kind, version)["resourceGroups"]["items"]["properties"]
    assert (group["coveredResources"].get("minItems"), group["flavors"].get("minItems"),
            group["flavors"]["items"]["properties"]["resources"].get("minItems")) == (1, 1, 1)
