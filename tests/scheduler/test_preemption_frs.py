"""Which flavor-resources of an assignment need preemption (Kueue's ``flavorResourcesNeedPreemption``): the ones
whose own mode is Preempt, not every resource of a pod set that has one. A TAS pod set whose placement must preempt
turns all of its resources to Preempt, as Kueue turns all of the pod set's flavors.

The scenarios ``preempt-per-resource-*`` and ``fair-sharing-*-per-resource`` show what it changes in a cycle."""

from __future__ import annotations

from kueue_es.scheduler.flavors import Assignment, Granular, Mode, PodSetResult


def _assignment(modes: dict[str, int]) -> tuple[Assignment, PodSetResult]:
    """One pod set on flavor ``default`` for cpu and memory, ``modes`` its resources' own modes (absent: Fit)."""
    ps = PodSetResult("main", 1, {"cpu": 1000, "memory": 1024})
    ps.flavors = {"cpu": "default", "memory": "default"}
    ps.modes = dict(modes)
    ps.mode = min(modes.values(), default=Granular.FIT)
    return Assignment([ps], Mode.PREEMPT, 1, {"default/cpu": 1000, "default/memory": 1024}, "", ""), ps


def test_a_resource_that_fits_by_borrowing_is_not_contested():
    a, _ = _assignment({"memory": Granular.RECLAIM})
    assert a.needs_preemption_frs() == {"default/memory": 1024}


def test_every_preempt_mode_counts_even_without_candidates():
    for mode in (Granular.NO_CANDIDATES, Granular.PREEMPT, Granular.RECLAIM):
        a, _ = _assignment({"cpu": mode, "memory": Granular.RECLAIM})
        assert a.needs_preemption_frs() == {"default/cpu": 1000, "default/memory": 1024}


def test_a_pod_set_that_fits_contests_nothing():
    a, _ = _assignment({})
    assert a.needs_preemption_frs() == {}


def test_demoting_a_topology_pod_set_contests_all_its_resources():
    a, ps = _assignment({"memory": Granular.RECLAIM})
    ps.demote(Granular.PREEMPT)
    assert ps.mode == Granular.PREEMPT
    assert ps.modes == {"cpu": Granular.PREEMPT, "memory": Granular.PREEMPT}
    assert a.needs_preemption_frs() == {"default/cpu": 1000, "default/memory": 1024}
