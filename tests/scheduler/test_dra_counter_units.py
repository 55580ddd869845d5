"""A counter-based DRA resource (a ``deviceClassMappings`` entry whose sources are counters, e.g. ``gpu.memory``) is
a byte count: Kueue writes its amounts in binary units (``50Gi``, not ``53687091200``) wherever it formats a
quantity — the admission's ``resourceUsage``, the ClusterQueue's and LocalQueue's usage, the quota messages and
``status.resourceRequests`` (kubernetes-sigs/kueue#12989, in v0.18.x and later: the mapper registers the names of
counter-sourced mappings for BinarySI formatting). A capacity-sourced resource is not registered and stays in
decimal units. The amounts are Kueue's DRA Partitionable Devices integration test's ("Should borrow counter-based
gpu.memory quota from another ClusterQueue in the cohort": 50Gi used, 20Gi borrowed)."""

from __future__ import annotations

from pathlib import Path

from fixtures import fastyaml

from events.timefmt import parse_time
from kueue_es.scheduler import settle
from kueue_es.statefile import load_state
from projections.queue_status import cluster_queue_status, local_queue_status
from projections.workloads import status_of

START = parse_time("2024-01-01T00:00:00Z")
SELECTOR = {"cel": {"expression": "device.driver == 'gpu.example.com'"}}


def _config(kind: str) -> dict:
    gates = {"KueueDRAIntegrationConsumableCapacity": True} if kind == "capacity" else {}
    return {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "featureGates": gates,
            "resources": {"deviceClassMappings": [{
                "name": "gpu.memory", "deviceClassNames": ["mig.example.com"],
                "sources": [{kind: {"name": "memory", "driver": "gpu.example.com", "deviceSelector": SELECTOR}}]}]}}


def _device(i: int) -> dict:
    return {"name": f"mig-{i}", "attributes": {"type": {"string": "mig"}},
            "consumesCounters": [{"counterSet": "gpu-0", "counters": {"memory": {"value": "10Gi"}}}],
            "capacity": {"memory": {"value": "10Gi"}}, "allowMultipleAllocations": True}


def _cq(name: str) -> dict:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name},
            "spec": {"cohortName": "pd", "namespaceSelector": {}, "resourceGroups": [{
                "coveredResources": ["gpu.memory"],
                "flavors": [{"name": "default", "resources": [{"name": "gpu.memory", "nominalQuota": "30Gi"}]}]}]}}


def _workload(name: str, queue: str, count: int, second: int) -> dict:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": name, "namespace": "team", "uid": f"uid-{name}",
                         "creationTimestamp": f"2024-01-01T00:00:0{second}Z"},
            "spec": {"queueName": queue, "podSets": [{"name": "main", "count": count, "template": {"spec": {
                "containers": [{"name": "c"}],
                "resourceClaims": [{"name": "mig", "resourceClaimTemplateName": "mig"}]}}}]}}


def _objects(*workloads: dict) -> list[dict]:
    slice_ = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "node-a"},
              "spec": {"driver": "gpu.example.com", "nodeName": "node-a",
                       "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 1},
                       "sharedCounters": [{"name": "gpu-0", "counters": {"memory": {"value": "80Gi"}}}],
                       "devices": [_device(i) for i in range(7)]}}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "mig.example.com"},
         "spec": {"selectors": [{"cel": {"expression": "device.attributes['gpu.example.com'].type == 'mig'"}}]}},
        slice_,
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
         "metadata": {"name": "mig", "namespace": "team"},
         "spec": {"spec": {"devices": {"requests": [{"name": "mig",
                                                     "exactly": {"deviceClassName": "mig.example.com"}}]}}}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default"}},
        _cq("prod"), _cq("dev"),
        *({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
           "metadata": {"name": name, "namespace": "team"}, "spec": {"clusterQueue": name}} for name in ("prod", "dev")),
        *workloads,
    ]


def _settled(tmp_path: Path, kind: str, *workloads: dict):
    (tmp_path / "state.yaml").write_text(fastyaml.safe_dump_all(_objects(*workloads)))
    (tmp_path / "config.yaml").write_text(fastyaml.safe_dump(_config(kind)))
    loaded = load_state(str(tmp_path / "state.yaml"), str(tmp_path / "config.yaml"), START)
    settle(loaded.state, loaded.config, now=START)
    return loaded.state


def _usage(state, key: str) -> dict:
    return status_of(state.workloads[key], state.byte_valued())["admission"]["podSetAssignments"][0]["resourceUsage"]


def test_a_counter_based_resource_is_written_in_binary_units(tmp_path: Path) -> None:
    state = _settled(tmp_path, "counter", _workload("borrow", "prod", 5, 0))
    assert _usage(state, "team/borrow") == {"gpu.memory": "50Gi"}
    used = [{"name": "default", "resources": [{"name": "gpu.memory", "total": "50Gi", "borrowed": "20Gi"}]}]
    cq = cluster_queue_status(state, "prod", START)
    assert (cq["flavorsUsage"], cq["flavorsReservation"]) == (used, used)
    lq = local_queue_status(state, "team/prod", START)
    assert lq["flavorsUsage"] == [{"name": "default", "resources": [{"name": "gpu.memory", "total": "50Gi"}]}]


def test_the_quota_messages_and_resource_requests_of_a_counter_based_resource_are_in_binary_units(
        tmp_path: Path) -> None:
    state = _settled(tmp_path, "counter", _workload("prod-full", "prod", 3, 0), _workload("dev-full", "dev", 3, 1),
                     _workload("over", "prod", 1, 2))
    status = status_of(state.workloads["team/over"], state.byte_valued())
    reserved = next(c for c in status["conditions"] if c["type"] == "QuotaReserved")
    assert reserved["message"] == ("couldn't assign flavors to pod set main: insufficient unused quota for "
                                   "gpu.memory in flavor default, 10Gi more needed")
    assert status["resourceRequests"] == [{"name": "main", "resources": {"gpu.memory": "10Gi"}}]


def test_a_capacity_based_resource_stays_in_decimal_units(tmp_path: Path) -> None:
    state = _settled(tmp_path, "capacity", _workload("borrow", "prod", 5, 0))
    assert _usage(state, "team/borrow") == {"gpu.memory": "53687091200"}
