"""Which flavors a pod set's topology request allows, by resource group (Kueue v0.20, #8963: a TAS pod set may take
a flavor with no topology from a group covering none of the resources its pods request themselves)."""

from types import SimpleNamespace

from events import objects as o
from kueue_es.scheduler.tasflavor import tas_ineligible
from projections.workloads import PodSetInfo

TAS = o.ResourceFlavor(metadata=o.ObjectMeta(name="tas"), spec=o.ResourceFlavorSpec(topology_name="hosts"))
PLAIN = o.ResourceFlavor(metadata=o.ObjectMeta(name="credits"))
HOST = "kubernetes.io/hostname"


def _info(tas_only: bool = False, tas: bool = True) -> SimpleNamespace:
    return SimpleNamespace(tas=tas, tas_only=tas_only, tas_levels={"tas": (HOST,)})


def _pod_set(requests: dict[str, int], placement: dict[str, int] | None = None, topology: bool = True) -> PodSetInfo:
    """A pod set whose quota requests are ``requests`` and whose pods ask for ``placement`` (default: the same)."""
    return PodSetInfo("main", 1, None, tuple(sorted(requests.items())),
                      topology=o.PodSetTopologyRequest(required=HOST) if topology else None,
                      placement=tuple(sorted(placement.items())) if placement is not None else None)


def test_a_group_covering_only_what_the_rules_add_serves_a_tas_pod_set():
    ps = _pod_set({"cpu": 3000, "cpu_credits": 3}, placement={"cpu": 3000})
    assert tas_ineligible(_info(), "credits", PLAIN, ps, covered=("cpu_credits",)) is None


def test_a_group_covering_a_resource_the_pods_request_refuses_a_flavor_with_no_topology():
    ps = _pod_set({"cpu": 3000, "cpu_credits": 3}, placement={"cpu": 3000})
    assert tas_ineligible(_info(), "credits", PLAIN, ps, covered=("cpu_credits", "cpu")) == \
        'Flavor "credits" does not support TopologyAwareScheduling'
    plain_ps = _pod_set({"cpu": 1000, "memory": 1 << 30})
    assert tas_ineligible(_info(), "shared", PLAIN, plain_ps, covered=("memory",)) == \
        'Flavor "shared" does not support TopologyAwareScheduling'


def test_the_group_is_judged_by_the_pods_own_requests_not_the_quota_ones():
    # Replace: the pods ask for a GPU, quota sees only credits; a group covering the GPU still refuses the flavor
    ps = _pod_set({"credits": 10}, placement={"nvidia.com/gpu": 1})
    assert tas_ineligible(_info(), "credits", PLAIN, ps, covered=("credits",)) is None
    assert tas_ineligible(_info(), "gpus", PLAIN, ps, covered=("nvidia.com/gpu",)) is not None


def test_the_other_refusals_stay():
    no_topology = _pod_set({"cpu": 1000}, topology=False)
    assert tas_ineligible(_info(), "tas", TAS, no_topology, covered=("cpu",)) == \
        'Flavor "tas" supports only TopologyAwareScheduling'
    assert tas_ineligible(_info(), "credits", PLAIN, no_topology, covered=("cpu_credits",)) is None
    ps = _pod_set({"cpu": 1000})
    assert tas_ineligible(_info(tas=False), "credits", PLAIN, ps, covered=("cpu",)) is None  # gate off
    info = SimpleNamespace(tas=True, tas_only=False, tas_levels={"tas": ("cloud.example.com/rack",)})
    assert tas_ineligible(info, "tas", TAS, ps, covered=("cpu",)) == 'Flavor "tas" does not contain the requested level'
