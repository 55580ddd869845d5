"""Fair preemption's topology term (Kueue's TAS domain ranks, :class:`kueue_es.scheduler.taspreempt.DomainOrder`).

The YAML scenario ``tests/scheduler/scenarios/tas-fair-preemption-domain-ranks.yaml`` shows the victims it changes;
these tests pin the ranking: coverage of the preemptor's largest pod first, then fewer candidates, then the domain
id; candidates outside every domain last; only fully covering domains retried, at most eight.
"""

from __future__ import annotations

from types import SimpleNamespace

from events import objects as o
from events import tas_assignment
from kueue_es.scheduler.tas import PodSetRequest
from kueue_es.scheduler.taspreempt import MAX_DOMAIN_RETRIES, DomainOrder
from projections.workloads import PodSetInfo, WorkloadInfo

HOST = "kubernetes.io/hostname"


def _on(name: str, node: str, cpu: int, flavor: str = "tas") -> WorkloadInfo:
    """A workload holding quota with one pod of ``cpu`` millicores on ``node``."""
    ta = tas_assignment.encode([HOST], [o.TopologyDomainAssignment(values=[node], count=1)])
    psa = o.PodSetAssignment(name="main", count=1, flavors={"cpu": flavor}, topology_assignment=ta)
    ps = PodSetInfo(name="main", count=1, min_count=None, requests=(("cpu", cpu),))
    return WorkloadInfo(key=f"ns/{name}", uid="", namespace="ns", name=name, queue_name="", created=0, priority=0,
                        priority_class="", pod_sets=(ps,),
                        admission=o.Admission(cluster_queue="cq", pod_set_assignments=[psa]))


def _fit(*cpus: int) -> SimpleNamespace:
    return SimpleNamespace(requests=[("tas", PodSetRequest(name=f"ps{i}", count=1, requests=(("cpu", c),)))
                                     for i, c in enumerate(cpus)])


def test_domains_rank_by_how_much_of_the_largest_pod_they_free_then_by_fewer_candidates_then_by_id() -> None:
    cands = [_on("a", "n3", 1000), _on("b", "n1", 1000), _on("c", "n1", 1000), _on("d", "n2", 2000),
             _on("e", "n4", 500), _on("f", "n9", 4000, flavor="other")]
    order = DomainOrder(_fit(1000, 2000), cands)  # the largest pod asks for 2 cpu
    # n2 frees 2 cpu with one candidate, n1 with two: n2 first; n3 (1 cpu) and n4 (half a cpu) after; f is elsewhere
    assert order.ranks == {"ns/d": 0, "ns/b": 1, "ns/c": 1, "ns/a": 2, "ns/e": 3, "ns/f": 4}
    assert order.viable == [frozenset({"ns/d"}), frozenset({"ns/b", "ns/c"})]


def test_equal_domains_go_by_domain_id_and_at_most_eight_are_retried() -> None:
    cands = [_on(f"w{i}", f"n{i}", 1000) for i in range(9, -1, -1)]
    order = DomainOrder(_fit(1000), cands)
    assert [order.ranks[f"ns/w{i}"] for i in range(10)] == list(range(10))
    assert len(order.viable) == MAX_DOMAIN_RETRIES and order.viable[0] == frozenset({"ns/w0"})
