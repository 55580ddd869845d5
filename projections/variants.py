"""``ConcurrentAdmission``: folding the decisions of Kueue's workload and variant controllers about a family of
Workloads (a parent and its variants, :mod:`kueue_es.scheduler.variants`).

* :class:`events.schema.ParentLabelled` — the workload carries the parent label from now on, so it leaves its queue.
* :class:`events.schema.VariantCreated` — the variant is the parent's copy as Kueue makes it: the same spec (so the
  same pod sets, priority, queue and ``spec.active``), the parent's labels but the parent label, its annotations
  with the allowed-flavors one naming the variant's flavor, controller-owned by the parent, created at the
  decision's time, with no status (Kueue's controller copies the parent's status into the object it creates, but
  the apiserver drops a create's status). It is queued as any new workload.
* :class:`events.schema.VariantDeleted` — the variant is gone, as when the watch shows it deleted.
* :class:`events.schema.VariantActivation` — ``spec.active`` as decided; a deactivated variant leaves its queue (one
  holding quota is then evicted by the workload controller's rule for inactive workloads), an activated one
  joins it.
* :class:`events.schema.VariantPreemptionGateOpened` — its ``kueue.x-k8s.io/concurrent-admission`` gate shows
  ``Open`` from the decision's time; with none of its gates closed it may preempt, and goes back to its queue.
  A variant is made with that gate closed (listed in its spec, not yet in its status).
* :class:`events.schema.ParentPreemptionSignal` — the parent's ``BlockedOnPreemptionGates`` as decided (a True one
  dated as the blocked variant's).
* :class:`events.schema.VariantPodsReadySynced` — the admitted variant shows its parent's ``PodsReady`` (Kueue's
  ``SetStatusCondition``: the parent's ``lastTransitionTime`` when the status changes), and is ready as it says.

A variant keeps its parent's UID (:attr:`WorkloadInfo.owner_uid`, the UID its owner reference names; the decision's
parent's for one the fold made) and is indexed under its parent's key (:attr:`ClusterState.variants_of`, derived):
a parent's variants are those of that index owned by its UID (Kueue lists them by owner-reference UID), so a parent
made again under the same name has none of the old one's. A variant the fold made has no uid until the watch brings
it back; that read adopts it (:func:`adopts`): the workload takes the uid and keeps what the log decided of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from events import objects as o
from events import schema as ev
from events.timefmt import format_time
from projections.preemption_gates import (
    BLOCKED_ON_PREEMPTION_GATES,
    CLOSED,
    CONCURRENT_ADMISSION_GATE,
    opened_in,
)
from projections.workloads import (
    CONCURRENT_ADMISSION_PARENT_LABEL,
    PENDING,
    WorkloadInfo,
    grouped_owner,
    is_parent,
    owner_uid_of,
)

if TYPE_CHECKING:
    from projections.cluster import ClusterState

VARIANT_OWNER = ("kueue.x-k8s.io/v1beta2", "Workload")
"""(apiVersion, kind) of a variant's controller owner, its parent."""
VARIANT_EVICTED = "VariantEvicted"
NO_VARIANT_ADMITTED = "ConcurrentAdmission"
PARENT_EVICTIONS = frozenset({VARIANT_EVICTED, NO_VARIANT_ADMITTED})
"""The Evicted reasons Kueue's variant controller gives a parent: its admitted variant was evicted, or none of its
variants is admitted any more."""


def condition_only_eviction(wl: WorkloadInfo, e: ev.AnyEvent) -> bool:
    """Whether ``e`` is the variant controller's eviction of parent ``wl``. Kueue's controller sets the Evicted
    condition and nothing else (``SetEvictedCondition``, not the eviction helper the scheduler and the workload
    controller use): no ``schedulingStats.evictions`` entry, no admission check reset or preemption gate closed, no
    ``EvictedDueTo<reason>`` Event, no ``evicted_workloads_total``."""
    return type(e) is ev.WorkloadEvicted and e.reason in PARENT_EVICTIONS and is_parent(wl)


def owner_parent(owner: tuple[str, ...]) -> str:
    """The name ``owner`` (:func:`projections.workloads.owner_of`'s answer) gives when it is a Workload (empty
    otherwise)."""
    return owner[2] if owner and owner[1] == VARIANT_OWNER[1] and owner[0] == VARIANT_OWNER[0] else ""


def parent_name(wl: WorkloadInfo) -> str:
    """The name of the Workload that owns ``wl`` (empty: ``wl`` is no variant; Kueue's ``IsVariant``)."""
    return owner_parent(wl.owner)


def same_parent(wl: WorkloadInfo, parent: WorkloadInfo) -> bool:
    """Whether ``parent`` is the Workload variant ``wl`` is owned by: of its name and, where both are known, of the
    UID its owner reference names (one restored from a snapshot before version 33 keeps none until its next read)."""
    return (parent_name(wl) == parent.name and wl.namespace == parent.namespace
            and (not wl.owner_uid or not parent.uid or wl.owner_uid == parent.uid))


def siblings(wl: WorkloadInfo, other: WorkloadInfo) -> bool:
    """Whether variants ``wl`` and ``other`` have one parent: its name and, where both know it, its UID."""
    return (parent_name(wl) == parent_name(other) and wl.namespace == other.namespace
            and (not wl.owner_uid or not other.owner_uid or wl.owner_uid == other.owner_uid))


def variants_of(state: ClusterState, parent: WorkloadInfo) -> list[WorkloadInfo]:
    """The variants of ``parent`` the projection holds (finished ones too), in key order, from the fold's index."""
    keys = state.variants_of.get(parent.key)
    if not keys:
        return []
    wls = state.workloads
    return [v for v in (wls[k] for k in sorted(keys)) if same_parent(v, parent)]


# --- the parent -> variants index (ClusterState.variants_of) ----------------------------------------------------

def index(state: ClusterState, wl: WorkloadInfo) -> None:
    """``wl`` joins its parent's entry of the index, if it is a variant."""
    name = parent_name(wl)
    if name:
        state.variants_of.setdefault(f"{wl.namespace}/{name}", {})[wl.key] = None


def unindex(state: ClusterState, wl: WorkloadInfo, owner: tuple[str, ...] | None = None) -> None:
    """``wl`` (whose owner was ``owner``, by default its own) leaves its parent's entry of the index."""
    name = owner_parent(wl.owner if owner is None else owner)
    if not name:
        return
    parent = f"{wl.namespace}/{name}"
    members = state.variants_of.get(parent)
    if members is not None:
        members.pop(wl.key, None)
        if not members:
            del state.variants_of[parent]


def reindex(state: ClusterState, wl: WorkloadInfo, meta: o.ObjectMeta, before: tuple[str, ...]) -> None:
    """A read of ``wl`` (its owner before it: ``before``): its place in the index and its parent's UID follow its
    owner references."""
    was, now = owner_parent(before), parent_name(wl)
    if was != now:
        unindex(state, wl, before)
        index(state, wl)
    if now:
        wl.owner_uid = owner_uid_of(meta)
    elif was and not grouped_owner(wl.owner):
        wl.owner_uid = ""


def kept_uid(meta: o.ObjectMeta, owner: tuple[str, ...]) -> str:
    """The UID a new Workload whose owner is ``owner`` keeps for it as a variant (empty: no variant)."""
    return owner_uid_of(meta) if owner_parent(owner) else ""


def adopts(old: WorkloadInfo, meta: o.ObjectMeta) -> bool:
    """Whether the Workload read (``meta``, with a uid) is the variant ``old`` the fold made (it has no uid yet) as
    the apiserver holds it: the workload takes its uid and keeps its state (conditions, gates, admission)."""
    return (not old.uid and bool(meta.uid) and bool(parent_name(old))
            and (not old.owner_uid or old.owner_uid == owner_uid_of(meta)))


def variant_flavor(wl: WorkloadInfo) -> str:
    """The flavor a variant pursues: the first its allowed-flavors annotation names (empty: none)."""
    allowed = wl.allowed_flavors
    return allowed[0] if allowed else ""


def charges_nothing(wl: WorkloadInfo) -> bool:
    """A parent shown admitted through its variant (:func:`on_parent_admitted`): it holds no quota and is no
    ClusterQueue's holder, though its phase says admitted. (A parent admitted with the gate off holds quota.)"""
    return not wl.usage and wl.labels.get(CONCURRENT_ADMISSION_PARENT_LABEL) == "true"


def _known(state: ClusterState, key: str, uid: str) -> WorkloadInfo | None:
    wl = state.workloads.get(key)
    return None if wl is None or (uid and wl.uid and uid != wl.uid) else wl


def on_parent_labelled(state: ClusterState, e: ev.ParentLabelled) -> None:
    wl = _known(state, e.key, e.uid)
    if wl is None or wl.labels.get(CONCURRENT_ADMISSION_PARENT_LABEL) == "true":
        return
    wl.labels = {**wl.labels, CONCURRENT_ADMISSION_PARENT_LABEL: "true"}
    wl.scan = None
    if wl.phase == PENDING:
        state.requeue(wl)


def on_variant_created(state: ClusterState, e: ev.VariantCreated) -> None:
    if e.key in state.workloads:
        return  # observed already (the connector's create came back first)
    namespace, name = e.key.split("/", 1)
    parent = _known(state, f"{namespace}/{e.parent}", e.parent_uid)
    if parent is None:
        return
    labels = {k: v for k, v in parent.labels.items() if k != CONCURRENT_ADMISSION_PARENT_LABEL}
    wl = WorkloadInfo(
        key=e.key, uid=e.uid, namespace=namespace, name=name, queue_name=parent.queue_name, created=e.time,
        priority=parent.priority, priority_class=parent.priority_class, pod_sets=parent.pod_sets,
        active=parent.active, labels=labels,
        max_execution_seconds=parent.max_execution_seconds, provreq_parameters=parent.provreq_parameters,
        spec_pod_sets=parent.spec_pod_sets, admission_gate=parent.admission_gate, boost=parent.boost,
        boost_annotation=parent.boost_annotation, metric_annotations=parent.metric_annotations,
        replaces=parent.replaces, owner=(*VARIANT_OWNER, parent.name), elastic=parent.elastic,
        component_index=parent.component_index, allowed_flavors=(e.flavor,), owner_uid=parent.uid,
        # its spec lists the parent's gates, whose positions it shows as the parent does, and the concurrent-admission
        # gate, closed until the controller opens it
        preemption_gated=True, gate_states=parent.gate_states,
        spec_gates=tuple(dict.fromkeys((*parent.spec_gates, CONCURRENT_ADMISSION_GATE))),
    )
    state.add_workload(wl, parent.key)


def on_variant_activation(state: ClusterState, e: ev.VariantActivation) -> None:
    wl = _known(state, e.key, e.uid)
    if wl is None or wl.active == e.active:
        return
    wl.active = e.active
    wl.scan = None
    if wl.phase == PENDING:
        state.requeue(wl)
    elif not e.active and wl.cluster_queue:
        state.flush_queue(wl.cluster_queue)


def on_parent_admitted(state: ClusterState, e: ev.ParentAdmitted) -> None:
    """The parent shows its variant's admission and is admitted, charging nothing: Kueue's cache counts the variant's
    quota, never a parent's, so the parent joins no ClusterQueue's holders (no victim; the workload controller's
    rules for a workload holding quota still look at it: :func:`kueue_es.scheduler.reconcile._admitted_parents`)."""
    wl = _known(state, e.key, e.uid)
    if wl is None or wl.phase not in (PENDING,):
        return
    cq = e.admission.cluster_queue
    state.take_admission(wl, e.admission, e.time)
    wl.set_condition("QuotaReserved", "True", "QuotaReserved", f"Quota reserved in ClusterQueue {cq}", e.time)
    wl.set_condition("Admitted", "True", "Admitted", e.message, e.time)
    for t in ("Evicted", "Preempted"):
        c = wl.condition(t)
        if c is not None and c.status == "True":
            wl.set_condition(t, "False", "QuotaReserved", f"Previously: {c.message}", e.time)


def on_variant_gate_opened(state: ClusterState, e: ev.VariantPreemptionGateOpened) -> None:
    """The gate opens: the variant may preempt once no other gate it lists is closed: none its status shows closed,
    none of its parent's (the gates it inherits; a read of it brings its own spec's)."""
    wl = _known(state, e.key, e.uid)
    if wl is None:
        return
    wl.gate_states = opened_in(wl.gate_states, e.gate, format_time(e.time))
    parent = _known(state, f"{wl.namespace}/{parent_name(wl)}", wl.owner_uid) if parent_name(wl) else None
    gated = any(g.position == CLOSED for g in wl.gate_states) or (parent is not None and parent.preemption_gated)
    if gated != wl.preemption_gated:
        wl.preemption_gated = gated
        if wl.phase == PENDING:
            state.requeue(wl)


def _copy_condition(wl: WorkloadInfo, type_: str, e: ev.ParentPreemptionSignal | ev.VariantPodsReadySynced,
                    generation: int | None = None) -> None:
    """``wl``'s condition ``type_`` as ``e`` has it; a new status is dated ``e.since`` when given (the time of the
    workload it is copied from), else the decision's time. Its observedGeneration is ``generation`` when
    given, else ``wl``'s own."""
    status = "True" if e.status else "False"
    current = wl.condition(type_)
    wl.set_condition(type_, status, e.reason, e.message, e.time, generation)
    if e.since and (current is None or current.status != status):
        dated = msgspec.structs.replace(wl.condition(type_), last_transition_time=e.since)
        wl.conditions = tuple(c if c.type != type_ else dated for c in wl.conditions)


def on_parent_signal(state: ClusterState, e: ev.ParentPreemptionSignal) -> None:
    """The parent's ``BlockedOnPreemptionGates`` as its variants have it (a new True one dated as the variant's)."""
    wl = _known(state, e.key, e.uid)
    if wl is not None:
        _copy_condition(wl, BLOCKED_ON_PREEMPTION_GATES, e)


def on_variant_pods_ready(state: ClusterState, e: ev.VariantPodsReadySynced) -> None:
    """The variant shows its parent's ``PodsReady`` (a new status dated as the parent's), and its pods count as
    ready as it says: the waitForPodsReady timeout reads it."""
    wl = _known(state, e.key, e.uid)
    if wl is not None:
        parent = state.workloads.get(f"{wl.namespace}/{parent_name(wl)}")
        theirs = parent.condition("PodsReady") if parent is not None else None
        # Kueue sets the parent's condition itself on the variant: the parent's observedGeneration with it
        _copy_condition(wl, "PodsReady", e, theirs.observed_generation if theirs is not None else None)
        wl.pods_ready = e.status


def on_variant_deleted(state: ClusterState, e: ev.VariantDeleted) -> None:
    if _known(state, e.key, e.uid) is not None:
        state.delete_workload(e.key)


HANDLERS = {
    ev.VariantDeleted: on_variant_deleted,
    ev.ParentAdmitted: on_parent_admitted,
    ev.ParentLabelled: on_parent_labelled,
    ev.VariantCreated: on_variant_created,
    ev.VariantActivation: on_variant_activation,
    ev.VariantPreemptionGateOpened: on_variant_gate_opened,
    ev.ParentPreemptionSignal: on_parent_signal,
    ev.VariantPodsReadySynced: on_variant_pods_ready,
}
"""Event type -> its fold (:data:`projections.cluster._HANDLERS` takes them in)."""
