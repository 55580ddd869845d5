"""Which gated pods of a TAS pod set go to which topology domain (Kueue's topology ungater, §3 rule 2).

For one pod-set assignment with a ``topologyAssignment`` and the pod set's live pods (non-terminal, carrying
the workload annotation and the pod-set label), :func:`plan` returns the pods to ungate now and the node
selector each gets: the assignment's level labels with the domain's values (for a hostname topology that is the
hostname alone, since such an assignment lists only that level).

* **Rank mode** when the pod set has a ``podIndexLabel`` and every live pod carries a valid, distinct index
  below the pod count (with a ``subGroupIndexLabel``, as a JobSet's pod sets have, the rank is the index within
  the pod's Job plus the Job's index times the Job's size, as Kueue's ungater reads it; no ranks without a Job
  size: no ``subGroupCount``, 0, or more Jobs than pods), and every pod already
  ungated sits in the domain its rank implies (a ``kueue.x-k8s.io/pod-index-offset`` on the pods, as an MPIJob's
  Workers carry when its launcher runs as a worker, is taken off each index: rank = index − offset — and so is,
  in a pod-set group of two, the leader's count from the workers' indexes (:func:`group_offsets`); Kueue reads
  the annotation off one pod, here the first by name; one ``strconv.Atoi`` cannot read leaves every pod set of
  the workload gated, as Kueue's ungater then fails the pass before patching any): rank r goes to the
  domain whose cumulative range, in assignment order, contains r. (After a node replacement the re-sorted
  assignment often breaks that last condition; greedy mode then fills the freed slot.)
* **Greedy mode** otherwise: count the ungated pods per domain (by their node selector) and fill each domain's
  free slots, in assignment order, with the gated pods in name order (Kueue leaves this order to its cache; a
  fixed one keeps the result reproducible).

A pod whose domain's node is listed in ``status.unhealthyNodes`` stays gated until the node is replaced.

Which pods are a workload's (Kueue lists them by workload-slice name): those of its slice chain
(:func:`pod_chain`, :func:`workload_chain`). An elastic Job's pods carry ``kueue.x-k8s.io/workload-slice-name``,
the name of the chain's first slice, and keep the ``kueue.x-k8s.io/workload`` annotation of the slice the Job was
started on; so after a scale-up the admitted slice counts the pods already running (ungated, in the domains the
old slice placed them, which its assignment keeps) with the added ones, and only the added ones are ungated, into
the slots those pods leave. Any other workload's chain is its own name, its pods' the workload annotation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from connectors.k8s.podsetinfo import SLICE_NAME_ANNOTATION
from events import objects as o
from events.goint import parse_int
from events.tas_assignment import decode
from projections.workloads import WORKLOAD_ANNOTATION, topology_gated

HOSTNAME = "kubernetes.io/hostname"
TERMINAL = ("Succeeded", "Failed")


class Ungate(NamedTuple):
    pod: o.Pod
    node_selector: dict[str, str]


def pod_chain(pod: o.Pod) -> str | None:
    """``namespace/name`` of the workload-slice chain the pod is counted in: its ``kueue.x-k8s.io/workload-slice-name``
    annotation when it has one, else its ``kueue.x-k8s.io/workload`` annotation (None: no name)."""
    annotations = pod.metadata.annotations
    name = annotations[SLICE_NAME_ANNOTATION] if SLICE_NAME_ANNOTATION in annotations else \
        annotations.get(WORKLOAD_ANNOTATION)
    return f"{pod.metadata.namespace}/{name}" if name else None


def workload_chain(wl: o.Workload) -> str:
    """``namespace/name`` of the workload's slice chain, whose pods are its own (:func:`pod_chain`): its
    ``kueue.x-k8s.io/workload-slice-name`` annotation when it has one (an elastic Job's slice: the chain's first
    slice), else its own name."""
    annotations = wl.metadata.annotations
    name = annotations[SLICE_NAME_ANNOTATION] if SLICE_NAME_ANNOTATION in annotations else wl.metadata.name
    return f"{wl.metadata.namespace}/{name}"


def gated(pod: o.Pod) -> bool:
    return topology_gated(pod.spec.scheduling_gates)


def _index(pod: o.Pod, label: str, bound: int) -> int | None:
    text = pod.metadata.labels.get(label)
    if text is None or not (text.isascii() and text.isdigit()):
        return None
    value = int(text)
    return value if value < bound else None


POD_INDEX_OFFSET = "kueue.x-k8s.io/pod-index-offset"


def index_offset(pods: list[o.Pod]) -> int | None:
    """The pod-index offset of a pod set's pods, read off the first (its pods share their template's): 0 without
    one, None when Kueue's ``strconv.Atoi`` cannot read it (an annotation is free text: a sign, then ASCII digits
    only — ``"²"`` passes ``str.isdigit`` and ``" 1"`` passes ``int``, neither passes Atoi)."""
    text = pods[0].metadata.annotations.get(POD_INDEX_OFFSET) if pods else None
    if text is None:
        return 0
    return parse_int(text, 64)


def group_offsets(assignments: Sequence[o.PodSetAssignment],
                  requests: Mapping[str, o.PodSetTopologyRequest | None]) -> dict[str, int]:
    """Pod set name -> the rank offset its pod-set group gives it (Kueue's ungater): in a group of two, the
    workers (the larger count; the second member on a tie) rank after the leader, so their pod indexes start at
    the leader's count (an LWS's workers from 1) and that count is taken off them; none for the rest."""
    groups: dict[str, list[o.PodSetAssignment]] = {}
    for psa in assignments:
        request = requests.get(psa.name)
        name = request.pod_set_group_name if request is not None else None
        if name is not None:
            groups.setdefault(name, []).append(psa)
    out: dict[str, int] = {}
    for members in groups.values():
        if len(members) < 2:
            continue
        leader, workers = members[0], members[1]
        if (leader.count or 0) > (workers.count or 0):
            leader, workers = workers, leader
        out[workers.name] = leader.count or 0
    return out


def _ranks(pods: list[o.Pod], request: o.PodSetTopologyRequest | None, size: int, count: int, offset: int = 0
           ) -> dict[int, o.Pod] | None:
    """Each pod's rank (None: not every pod has a valid, distinct one) among the ``size`` pods of the pod set, below
    ``count``: its index less ``offset``. With a sub-group (a JobSet's replicated Job: its Jobs, each of
    ``size / subGroupCount`` pods), the index is the pod's within its Job plus its Job's index times that Job size,
    as Kueue's ungater ranks them. A sub-group label without a usable Job size (no count, a count of 0, or
    more Jobs than pods: an unvalidated annotation can say so) ranks nothing: Kueue then places the pods
    greedily."""
    if request is None or not request.pod_index_label:
        return None
    sub_label, sub_count = request.sub_group_index_label, request.sub_group_count
    job_size = size // sub_count if sub_label and sub_count else 0
    if sub_label and not job_size:
        return None
    out: dict[int, o.Pod] = {}
    for pod in pods:
        if job_size:
            index, job = _index(pod, request.pod_index_label, job_size), _index(pod, sub_label, sub_count)
            rank = index + job * job_size - offset if index is not None and job is not None else None
        else:
            index = _index(pod, request.pod_index_label, count + offset)
            rank = index - offset if index is not None else None
        if rank is None or not 0 <= rank < count or rank in out:
            return None
        out[rank] = pod
    return out


def plan(psa: o.PodSetAssignment, request: o.PodSetTopologyRequest | None, pods: list[o.Pod],
         unhealthy: tuple[str, ...] = (), group_offset: int = 0) -> list[Ungate] | None:
    """The pods of one pod set to ungate now (see the module docstring); ``group_offset``: the rank offset its
    pod-set group gives it (:func:`group_offsets`), added to the pods' own. None when the pods' pod-index offset
    cannot be read: Kueue's ungater then fails the whole workload's pass, ungating none of its pod sets."""
    ta = psa.topology_assignment
    if ta is None:
        return []
    levels = list(ta.levels)
    domains = [(tuple(d.values), d.count) for d in decode(ta)]
    count = psa.count if psa.count is not None else sum(c for _, c in domains)
    live = sorted((p for p in pods if p.status.phase not in TERMINAL), key=lambda p: p.metadata.name)
    down = set(unhealthy) if levels and levels[-1] == HOSTNAME else set()

    def selector(values: tuple[str, ...]) -> dict[str, str]:
        return dict(zip(levels, values, strict=True))

    def placed(pod: o.Pod) -> tuple[str | None, ...]:
        return tuple(pod.spec.node_selector.get(level) for level in levels)

    offset = index_offset(live)
    if offset is None:
        return None
    offset += group_offset
    by_rank: list[tuple[str, ...]] = [values for values, c in domains for _ in range(c)]
    ranks = _ranks(live, request, count, min(count, len(by_rank)), offset)
    if ranks is not None and all(gated(p) or placed(p) == by_rank[r] for r, p in ranks.items()):
        return [Ungate(p, selector(by_rank[r])) for r, p in sorted(ranks.items())
                if gated(p) and by_rank[r][-1] not in down]

    waiting = [p for p in live if gated(p)]
    ungated: dict[tuple[str | None, ...], int] = {}
    for p in live:
        if not gated(p):
            ungated[placed(p)] = ungated.get(placed(p), 0) + 1
    out: list[Ungate] = []
    for values, c in domains:
        if values[-1] in down:
            continue
        free = max(c - ungated.get(values, 0), 0)
        take, waiting = waiting[:free], waiting[free:]
        out.extend(Ungate(p, selector(values)) for p in take)
    return out
