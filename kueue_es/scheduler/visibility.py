"""Kueue's visibility API — pending workloads on demand — as a pure function of the state.

``GET /apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/<cq>/pendingworkloads`` and
``.../namespaces/<ns>/localqueues/<lq>/pendingworkloads`` list the workloads waiting in a ClusterQueue: every one
of them, whether in the active heap or parked as inadmissible (a scheduler that decides between events has
none in flight when asked), in the queue's own order —

1. with Admission Fair Sharing on for the ClusterQueue, lower LocalQueue usage first (each LocalQueue's usage
   taken once per query, at the state's time);
2. the sticky preemptor (BestEffortFIFO's workload waiting for its preemptions);
3. higher (effective) priority; 4. earlier queue-order time; 5. UID.

Positions are Kueue's: on the ClusterQueue endpoint ``positionInClusterQueue`` is the index in that order and
``positionInLocalQueue`` counts the earlier entries of the same LocalQueue, namespace and name (before v0.20 Kueue
counted by ``spec.queueName`` alone, so same-named LocalQueues of two namespaces shared the count); on
the LocalQueue endpoint the list is filtered to the LocalQueue, ``positionInLocalQueue`` is ``offset`` plus the
index in the page and ``positionInClusterQueue`` the index in the whole ClusterQueue. ``limit`` (default 1000)
is clamped to 0..100000 and ``offset`` (default 0) to at least 0. An unknown ClusterQueue or LocalQueue is
None here (404 there); a LocalQueue whose ClusterQueue does not exist has nothing pending.

A page is read from the queue's sorted index (:mod:`projections.queues`) by bisection — a page deep in a
100,000-workload queue costs about what the first page does, which matters because the page is computed on the
service's event loop. With Admission Fair Sharing too: the LocalQueues are ranked by usage and the page read from
their own sorted lists, the whole order never sorted (:mod:`kueue_es.scheduler.visibility_order`).
:func:`straightforward` is the definition the pages must agree with.

The item's ``priority`` is the workload's base priority (``spec.priority``, as its class sets it), as Kueue shows
it: the boost its ``kueue.x-k8s.io/priority-boost`` annotation adds under the ``PriorityBoost`` gate is left out,
although the queue is ordered by the sum.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import msgspec

from events import objects as o
from events.timefmt import format_time
from kueue_es.scheduler import afs
from kueue_es.scheduler.config import SchedulerConfig
from kueue_es.scheduler.visibility_order import VisibilityOrder, window
from projections.cluster import ClusterState
from projections.queues import ClusterQueueQueue

GROUP = "visibility.kueue.x-k8s.io"
VERSIONS = ("v1beta2", "v1beta1")
"""Served versions, preferred first (the items are the same in both)."""
DEFAULT_LIMIT = 1000
MAX_LIMIT = 100_000
KIND = "PendingWorkloadsSummary"
T = TypeVar("T")

Owners = Callable[[str], Sequence[o.OwnerReference]]
"""Workload key -> its ownerReferences (the state keeps none: :mod:`projections.owners`)."""


class PendingWorkload(msgspec.Struct, frozen=True, kw_only=True):
    key: str
    name: str
    namespace: str
    created: int
    """creationTimestamp, ms."""
    priority: int
    local_queue: str
    """The LocalQueue's name (``spec.queueName``), in the workload's namespace."""
    position_in_cluster_queue: int
    position_in_local_queue: int


def bounded(limit: int | None, offset: int | None) -> tuple[int, int]:
    """Kueue's defaults and clamping: a missing or zero limit is 1000; limit in 0..100000; offset at least 0."""
    lim = DEFAULT_LIMIT if not limit else limit
    return min(max(lim, 0), MAX_LIMIT), max(offset or 0, 0)


def queue_order(state: ClusterState, config: SchedulerConfig, cq: str) -> list[str] | None:
    """Keys of every workload pending in ClusterQueue ``cq``, in queue order; None when there is no such
    ClusterQueue. Memoised on the state until its next record (pages of one queue, asked one after the other, sort
    it once)."""
    if cq not in state.cluster_queues:
        return None
    return _memoised(state, "visibility", config, cq, lambda: _order(state, config, cq))


def _memoised(state: ClusterState, table: str, config: SchedulerConfig, cq: str, compute: Callable[[], T]) -> T:
    """``compute()`` for ClusterQueue ``cq``, memoised in ``state.derived[table]`` while the state is at the same
    record and ``config`` the same object (at most 64 queues kept; all dropped at the state's next record)."""
    memo: dict[str, tuple[int, SchedulerConfig, T]] = state.derived.setdefault(table, {})
    hit = memo.get(cq)
    if hit is not None and hit[0] == state.offset and hit[1] is config:
        return hit[2]
    if len(memo) > 64 or any(v[0] != state.offset for v in memo.values()):
        memo.clear()
    value = compute()
    memo[cq] = (state.offset, config, value)
    return value


def _order(state: ClusterState, config: SchedulerConfig, cq: str) -> list[str]:
    q = state.queues.get(cq)
    if q is None:
        return []
    order = q.ordered()
    if not afs.enabled_for(config, state, cq) or len(order) < 2:
        return order
    fold = afs.fold(state, config)
    usage: dict[str, float] = {}
    workloads = state.workloads
    for key in order:
        wl = workloads[key]
        lq = f"{wl.namespace}/{wl.queue_name}"
        if lq not in usage:
            usage[lq] = afs.lq_usage(state, config, lq, cq, state.time, fold)
    rank = {key: i for i, key in enumerate(order)}
    return sorted(order, key=lambda k: (usage[f"{workloads[k].namespace}/{workloads[k].queue_name}"], rank[k]))


def _item(state: ClusterState, key: str, in_cq: int, in_lq: int) -> PendingWorkload:
    wl = state.workloads[key]
    return PendingWorkload(key=key, name=wl.name, namespace=wl.namespace, created=wl.created,
                           priority=wl.base_priority, local_queue=wl.queue_name, position_in_cluster_queue=in_cq,
                           position_in_local_queue=in_lq)


def order_of(state: ClusterState, config: SchedulerConfig, cq: str) -> VisibilityOrder | None:
    """ClusterQueue ``cq``'s visibility order, to read pages from (:mod:`kueue_es.scheduler.visibility_order`); None
    when nothing is queued there. Under Admission Fair Sharing each LocalQueue's usage is taken once, at the state's
    time. Memoised on the state until its next record, as :func:`queue_order` is."""
    q = state.queues.get(cq)
    if q is None:
        return None
    return _memoised(state, "visibility_order", config, cq, lambda: _visibility_order(state, config, cq, q))


def _visibility_order(state: ClusterState, config: SchedulerConfig, cq: str, q: ClusterQueueQueue) -> VisibilityOrder:
    usage = None
    if afs.enabled_for(config, state, cq):
        fold = afs.fold(state, config)

        def usage(lq: tuple[str, str]) -> float:
            return afs.lq_usage(state, config, f"{lq[0]}/{lq[1]}", cq, state.time, fold)
    return VisibilityOrder(q, usage)


def in_cluster_queue(state: ClusterState, config: SchedulerConfig, cq: str, *, limit: int | None = None,
                     offset: int | None = None) -> list[PendingWorkload] | None:
    """The page of ClusterQueue ``cq``'s pending workloads; None when there is no such ClusterQueue."""
    if cq not in state.cluster_queues:
        return None
    limit, offset = bounded(limit, offset)
    order = order_of(state, config, cq)
    if order is None:
        return []
    local_queue_of = order.q.local_queue_of
    seen_in_lq: dict[tuple[str, str], int] = {}
    out = []
    for index, sk in enumerate(order.page(offset, limit), offset):
        key = sk[3]
        lq = local_queue_of[key]
        in_lq = seen_in_lq.get(lq)
        if in_lq is None:
            in_lq = order.before_in_local_queue(sk)
        seen_in_lq[lq] = in_lq + 1
        out.append(_item(state, key, index, in_lq))
    return out


def in_local_queue(state: ClusterState, config: SchedulerConfig, namespace: str, name: str, *,
                   limit: int | None = None, offset: int | None = None) -> list[PendingWorkload] | None:
    """The page of LocalQueue ``namespace/name``'s pending workloads; None when there is no such LocalQueue or it
    is stopped (:func:`_served`)."""
    lq = _served(state, namespace, name)
    if lq is None:
        return None
    limit, offset = bounded(limit, offset)
    cq = lq.spec.cluster_queue
    order = order_of(state, config, cq) if cq in state.cluster_queues else None
    if order is None:
        return []
    keys = order.q.by_local_queue.get(name, {}).get(namespace)
    if keys is None:
        return []
    head = order.sticky if order.sticky_lq == (namespace, name) else None
    return [_item(state, sk[3], order.position(sk), index)
            for index, sk in enumerate(window(keys, head, offset, limit), offset)]


def straightforward(state: ClusterState, config: SchedulerConfig, cq: str = "", namespace: str = "",
                    name: str = "", *, limit: int | None = None,
                    offset: int | None = None) -> list[PendingWorkload] | None:
    """The page by definition — the whole order, then filtered and counted — for ClusterQueue ``cq`` or else
    LocalQueue ``namespace/name``. What the index-driven pages are checked against (and the path taken with
    Admission Fair Sharing)."""
    limit, offset = bounded(limit, offset)
    if cq:
        if cq not in state.cluster_queues:
            return None
        return _cq_page(state, queue_order(state, config, cq) or [], limit, offset)
    lq = _served(state, namespace, name)
    if lq is None:
        return None
    order = queue_order(state, config, lq.spec.cluster_queue) or []
    return _lq_page(state, order, namespace, name, limit, offset)


def _served(state: ClusterState, namespace: str, name: str) -> o.LocalQueue | None:
    """LocalQueue ``namespace/name`` if Kueue's queue manager holds it: a stopped one (``stopPolicy`` Hold or
    HoldAndDrain) is taken out of it, so Kueue's endpoint answers NotFound for it, not an empty page."""
    lq = state.local_queues.get(f"{namespace}/{name}")
    return lq if lq is not None and not lq.spec.stopped else None


def _cq_page(state: ClusterState, order: list[str], limit: int, offset: int) -> list[PendingWorkload]:
    workloads = state.workloads
    seen_in_lq: dict[tuple[str, str], int] = {}
    out = []
    for index, key in enumerate(order[:offset + limit]):
        wl = workloads[key]
        lq = (wl.namespace, wl.queue_name)
        in_lq = seen_in_lq.get(lq, 0)
        seen_in_lq[lq] = in_lq + 1
        if index >= offset:
            out.append(_item(state, key, index, in_lq))
    return out


def _lq_page(state: ClusterState, order: list[str], namespace: str, name: str, limit: int,
             offset: int) -> list[PendingWorkload]:
    workloads = state.workloads
    out: list[PendingWorkload] = []
    skipped = 0
    for index, key in enumerate(order):
        if len(out) >= limit:
            break
        wl = workloads[key]
        if wl.namespace != namespace or wl.queue_name != name:
            continue
        if skipped < offset:
            skipped += 1
            continue
        out.append(_item(state, key, index, offset + len(out)))
    return out


def summary(items: Sequence[PendingWorkload], version: str = VERSIONS[0],
            owners: Owners | None = None) -> dict[str, Any]:
    """The ``PendingWorkloadsSummary`` document, field for field as Kueue's server encodes it."""
    return {"kind": KIND, "apiVersion": f"{GROUP}/{version}", "metadata": {},
            "items": [_document(w, owners(w.key) if owners is not None else ()) for w in items]}


def _document(w: PendingWorkload, owners: Sequence[o.OwnerReference]) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": w.name, "namespace": w.namespace, "creationTimestamp": format_time(w.created)}
    if owners:
        meta["ownerReferences"] = [{"apiVersion": r.api_version, "kind": r.kind, "name": r.name, "uid": r.uid}
                                   for r in owners]
    return {"metadata": meta, "priority": w.priority, "localQueueName": w.local_queue,
            "positionInClusterQueue": w.position_in_cluster_queue,
            "positionInLocalQueue": w.position_in_local_queue}
