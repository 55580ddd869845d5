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
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from events import objects as o
from events import schema as ev
from events.timefmt import format_time
from projections.preemption_gates import (
    BLOCKED_ON_PREEMPTION_GATES,
    CLOSED,
    CONCURRENT_ADMISSION_GATE,
    opened_in,
)
from projections.workloads import CONCURRENT_ADMISSION_PARENT_LABEL, PENDING, WorkloadInfo

if TYPE_CHECKING:
    from projections.cluster import ClusterState

VARIANT_OWNER = ("kueue.x-k8s.io/v1beta2", "Workload")
"""(apiVersion, kind) of a variant's controller owner, its parent."""


def parent_name(wl: WorkloadInfo) -> str:
    """The name of the Workload that owns ``wl`` (empty: ``wl`` is no variant; Kueue's ``IsVariant``)."""
    owner = wl.owner
    return owner[2] if owner and owner[1] == VARIANT_OWNER[1] and owner[0] == VARIANT_OWNER[0] else ""


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
        component_index=parent.component_index, allowed_flavors=(e.flavor,),
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
    quota, never a parent's, so the parent joins no ClusterQueue's holders (no rule of theirs, no victim)."""
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
    parent = _known(state, f"{wl.namespace}/{parent_name(wl)}", "") if parent_name(wl) else None
    gated = any(g.position == CLOSED for g in wl.gate_states) or (parent is not None and parent.preemption_gated)
    if gated != wl.preemption_gated:
        wl.preemption_gated = gated
        if wl.phase == PENDING:
            state.requeue(wl)


def on_parent_signal(state: ClusterState, e: ev.ParentPreemptionSignal) -> None:
    """The parent's ``BlockedOnPreemptionGates`` as its variants have it (a new True one dated as the variant's)."""
    wl = _known(state, e.key, e.uid)
    if wl is None:
        return
    status = "True" if e.status else "False"
    current = wl.condition(BLOCKED_ON_PREEMPTION_GATES)
    wl.set_condition(BLOCKED_ON_PREEMPTION_GATES, status, e.reason, e.message, e.time)
    if e.since and (current is None or current.status != status):
        wl.conditions = tuple(c if c.type != BLOCKED_ON_PREEMPTION_GATES else o.Condition(
            type=c.type, status=c.status, reason=c.reason, message=c.message, last_transition_time=e.since)
            for c in wl.conditions)


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
}
"""Event type -> its fold (:data:`projections.cluster._HANDLERS` takes them in)."""
