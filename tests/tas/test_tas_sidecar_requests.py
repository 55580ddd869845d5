"""Topology placement and node usage count a pod as Kubernetes totals it: a sidecar declared after a regular init
container is not added to that container's peak (KEP-753; Kueue's pkg/resources PodRequests)."""

from __future__ import annotations

from events import objects as o
from projections.topology import TASFold
from projections.workloads import pod_set_info


def istio_spec(node: str = "") -> o.PodSpec:
    """istio-init (4 cpu), then the istio-proxy sidecar (1 cpu), main 1 cpu: the pod needs max(1 + 1, 4) = 4 cpu."""
    cpu = {"cpu": "4"}
    return o.PodSpec(
        node_name=node,
        init_containers=[o.Container(name="setup", resources=o.ResourceRequirements(requests=cpu)),
                         o.Container(name="proxy", restart_policy="Always",
                                     resources=o.ResourceRequirements(requests={"cpu": "1"}))],
        containers=[o.Container(name="c", resources=o.ResourceRequirements(requests={"cpu": "1"}))])


def test_a_pod_set_is_placed_with_the_kubernetes_total_per_pod() -> None:
    ps = pod_set_info(o.PodSet(name="main", count=2, template=o.PodTemplateSpec(spec=istio_spec())))
    assert ps.placement_requests == (("cpu", 4000),)


def test_a_running_pod_outside_tas_uses_the_kubernetes_total_on_its_node() -> None:
    fold = TASFold()
    pod = o.Pod(metadata=o.ObjectMeta(name="p", namespace="team"), spec=istio_spec("n0"),
                status=o.PodStatus(phase="Running"))
    fold.pod_changed("team/p", pod)
    assert fold.node_usage == {"n0": {"cpu": 4000, "pods": 1}}
