"""``ConcurrentAdmission``: Kueue's variant controller (``concurrent-admission-controller``), as pure rules.

Kueue's workload controller labels each workload of a ClusterQueue with a ``concurrentAdmissionPolicy`` (not itself
a variant) a parent (``kueue.x-k8s.io/concurrent-admission-parent: "true"``; ``ParentLabelled``); a parent is never
queued itself. The variant controller then pursues it through one variant Workload per flavor of the ClusterQueue's
first resource group and keeps the family in step, in its order:

* a missing variant is made (``VariantCreated``, Kueue's name: :func:`variant_name`), one whose flavor left the
  ClusterQueue deleted (``VariantDeleted``);
* an evicted variant still holding quota gives it back (its admission is cleared, ``Requeued`` set as the eviction's
  reason has it: True only for ``Preempted`` and ``NodeFailures``), since no Job of its own is stopped for it; while
  its parent holds quota the parent is evicted first (``VariantEvicted``, "Admitted variant was evicted") and the
  variant waits for it; nothing else is done for the family meanwhile;
* the variants are deactivated and activated (``VariantActivation``) as the migration policy has it (:func:`_activation`);
* the parent shows its admitted variant's admission (``ParentAdmitted``), or is evicted once none is admitted
  (``ConcurrentAdmission``, "No variant is running"); a finished parent finishes its variants (``VariantFinished``);
  the admitted variant shows the parent's ``PodsReady`` condition, when the parent has one (``VariantPodsReadySynced``:
  its pods are the parent's Job's);
* one blocked variant has its ``kueue.x-k8s.io/concurrent-admission`` preemption gate opened
  (``VariantPreemptionGateOpened``), and a parent listing preemption gates of its own shows whether a variant is
  blocked (``ParentPreemptionSignal``; :mod:`kueue_es.scheduler.variant_gates`).

A parent's variants are the Workloads it owns by UID (:func:`projections.variants.variants_of`, from the fold's
index). Not modelled: the parent's own gates' positions copied onto its variants (a MultiKueue worker's copy whose
manager opens its gate: here its variants keep theirs).
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterable

from events import objects as o
from events import schema as ev
from kueue_es.scheduler import variant_gates
from projections.cluster import ClusterState
from projections.variants import (
    NO_VARIANT_ADMITTED,
    VARIANT_EVICTED,
    parent_name,
    same_parent,
    variant_flavor,
    variants_of,
)
from projections.workloads import ADMITTED, FINISHED, PENDING, WorkloadInfo, is_parent

REQUEUED_REASONS = frozenset({"Preempted", "NodeFailures"})
"""Eviction reasons whose cleared variant is Requeued=True (any other: Requeued=False with that reason)."""
CONCURRENT_ADMISSION = NO_VARIANT_ADMITTED
NO_VARIANT_RUNNING = "No variant is running"
"""The Evicted reason and message of an admitted parent none of whose variants is admitted any more."""
VARIANT_EVICTED_MESSAGE = "Admitted variant was evicted"


def parent_of(state: ClusterState, wl: WorkloadInfo) -> WorkloadInfo | None:
    """The parent Workload of variant ``wl`` as the projection holds it (None: no variant, or no such parent: none
    of its name, or one made again under that name)."""
    name = parent_name(wl)
    parent = state.workloads.get(f"{wl.namespace}/{name}") if name else None
    return parent if parent is not None and same_parent(wl, parent) else None


def evicted_variant(state: ClusterState, wl: WorkloadInfo, base: dict) -> ev.Decision | None:
    """What the variant controller does for ``wl``, evicted while it holds quota (None: ``wl`` is no variant, or
    nothing is to be done until its parent lets go of its quota)."""
    if not parent_name(wl):
        return None
    parent = parent_of(state, wl)
    if parent is not None and parent.reserving:
        if parent.evicted:
            return None  # the parent lets go of its quota first
        return ev.WorkloadEvicted(key=parent.key, uid=parent.uid, reason=VARIANT_EVICTED,
                                  message=VARIANT_EVICTED_MESSAGE, **base)
    evicted = wl.condition("Evicted")
    reason = wl.evicted
    return ev.WorkloadRequeued(key=wl.key, uid=wl.uid, status=reason in REQUEUED_REASONS, reason=reason,
                               message=evicted.message if evicted is not None else "", release=True, **base)


# --- the family: labelling, variants, activation ---------------------------------------------------------------

VARIANT_HASH_LENGTH = 5
VARIANT_PREFIX_MAX, VARIANT_SHORT_PREFIX_MAX = 252 - VARIANT_HASH_LENGTH, 62 - VARIANT_HASH_LENGTH
"""How much of ``<parent's base name>-variant-<flavor>`` a variant's name keeps (``ShortWorkloadNames``: the
short one)."""


def variant_name(parent: str, parent_uid: str, flavor: str, *, short: bool = False) -> str | None:
    """Kueue's name for the variant of Workload ``parent`` (``parent_uid``) on ``flavor``: the parent's name
    without its last ``-`` part (its hash), ``-variant-<flavor>``, cut to leave room for ``-`` and the first 5 hex
    digits of SHA-1 over ``Workload\\nkueue.x-k8s.io\\n<parent>\\n<parent uid>\\n<flavor>``. None for a parent
    name without ``-``, for which Kueue's controller fails and makes none."""
    cut = parent.rfind("-")
    if cut < 0:
        return None
    prefix = f"{parent[:cut]}-variant-{flavor}"[:VARIANT_SHORT_PREFIX_MAX if short else VARIANT_PREFIX_MAX]
    digest = hashlib.sha1(f"Workload\nkueue.x-k8s.io\n{parent}\n{parent_uid}\n{flavor}".encode()).hexdigest()
    return f"{prefix}-{digest[:VARIANT_HASH_LENGTH]}"


def policy_cluster_queue(state: ClusterState, wl: WorkloadInfo) -> o.ClusterQueue | None:
    """The ClusterQueue ``wl``'s LocalQueue points at, when it exists (None otherwise)."""
    lq = state.local_queues.get(f"{wl.namespace}/{wl.queue_name}")
    if lq is None or not lq.spec.cluster_queue:
        return None
    return state.cluster_queues.get(lq.spec.cluster_queue)


def family_keys(state: ClusterState, touched: Iterable[str] | None) -> list[str]:
    """The parents (by key) whose families a pass looks at: every workload's when ``touched`` is None, else those
    of the touched workloads (a variant stands for its parent)."""
    wls = state.workloads
    keys = wls if touched is None else touched
    out: dict[str, None] = {}
    for key in keys:
        wl = wls.get(key)
        if wl is None:
            continue
        name = parent_name(wl)
        out[f"{wl.namespace}/{name}" if name else key] = None
    return sorted(out)


def family(found: list[WorkloadInfo], flavors: list[str]) -> list[WorkloadInfo]:
    """The unfinished variants among ``found``, in the order of their flavors in ``flavors`` (a flavor not there
    first, as Kueue's controller ranks it)."""
    rank = {f: i for i, f in enumerate(flavors)}
    return sorted((w for w in found if w.phase != FINISHED), key=lambda w: (rank.get(variant_flavor(w), 0), w.key))


def reconcile_families(state: ClusterState, base: dict, touched: Iterable[str] | None, *,
                       short_names: bool = False) -> list[ev.Decision]:
    """The workload controller's labelling and the variant controller's decisions for the families a pass looks
    at (:func:`family_keys`), under ``ConcurrentAdmission``."""
    out: list[ev.Decision] = []
    wls = state.workloads
    for key in family_keys(state, touched):
        wl = wls.get(key)
        if wl is None:
            continue
        if wl.phase == FINISHED:
            if is_parent(wl):
                reason, message = _finished_with(wl)
                out.extend(ev.VariantFinished(key=v.key, uid=v.uid, reason=reason, message=message, **base)
                           for v in variants_of(state, wl) if v.phase != FINISHED)
            continue
        cq = policy_cluster_queue(state, wl)
        if not is_parent(wl):
            if cq is not None and cq.spec.concurrent_admission_policy is not None:
                out.append(ev.ParentLabelled(key=key, uid=wl.uid, **base))
            continue
        if cq is None or not cq.spec.resource_groups:
            continue  # Kueue's controller finds no ClusterQueue (or no flavors) for it and makes nothing
        out.extend(_family_decisions(state, wl, variants_of(state, wl), cq, base, short_names))
    return out


def _family_decisions(state: ClusterState, parent: WorkloadInfo, found: list[WorkloadInfo], cq: o.ClusterQueue,
                      base: dict, short_names: bool) -> list[ev.Decision]:
    flavors = [f.name for f in cq.spec.resource_groups[0].flavors]
    variants = family(found, flavors)
    have = {variant_flavor(v) for v in variants}
    out: list[ev.Decision] = []
    for flavor in flavors:
        if flavor in have:
            continue
        name = variant_name(parent.name, parent.uid, flavor, short=short_names)
        if name is None:
            return out
        out.append(ev.VariantCreated(key=f"{parent.namespace}/{name}", uid="", parent=parent.name,
                                     parent_uid=parent.uid, flavor=flavor, **base))
    for v in variants:
        if variant_flavor(v) not in flavors:
            out.append(ev.VariantDeleted(key=v.key, uid=v.uid, parent=parent.name, flavor=variant_flavor(v), **base))
    variants = [v for v in variants if variant_flavor(v) in flavors]
    for v in variants:
        if v.evicted and v.reserving:  # it gives its quota back first, the rest waits for the next pass
            cleared = evicted_variant(state, v, base)
            if cleared is not None:
                out.append(cleared)
            return out
    switched = _activation(parent, variants, cq, flavors, base)
    out.extend(switched)
    active = {d.key: d.active for d in switched if isinstance(d, ev.VariantActivation)}
    out.extend(variant_gates.signal(parent, variants, active, base))
    admitted = next((v for v in variants if v.phase == ADMITTED), None)
    if admitted is not None:
        out.extend(_pods_ready_copied(parent, admitted, base))
    # an inactive parent is not shown admitted again: its admitted variant, deactivated with it, is on its way out
    # (the fold released the parent at its deactivation; Kueue's job reconciler does once its Job stopped, by when
    # the variant is evicted, and the controller clears it first)
    if admitted is not None and admitted.admission is not None and parent.phase == PENDING and parent.active:
        out.append(ev.ParentAdmitted(key=parent.key, uid=parent.uid, admission=admitted.admission,
                                     variant=admitted.name, message=f"The variant {admitted.name} is admitted",
                                     **base))
    elif admitted is None and parent.phase == ADMITTED and not parent.evicted:
        out.append(ev.WorkloadEvicted(key=parent.key, uid=parent.uid, reason=CONCURRENT_ADMISSION,
                                      message=NO_VARIANT_RUNNING, **base))
    out.extend(variant_gates.open_gate(variants, active, base))
    return out


def _pods_ready_copied(parent: WorkloadInfo, admitted: WorkloadInfo, base: dict) -> list[ev.Decision]:
    """The admitted variant takes the parent's ``PodsReady`` condition when the parent has one and the variant shows
    it otherwise (its status, reason or message: Kueue's ``SetStatusCondition`` changes nothing else)."""
    theirs = parent.condition("PodsReady")
    if theirs is None:
        return []
    mine = admitted.condition("PodsReady")
    if mine is not None and (mine.status, mine.reason, mine.message) == (theirs.status, theirs.reason, theirs.message):
        return []
    return [ev.VariantPodsReadySynced(key=admitted.key, uid=admitted.uid, status=theirs.status == "True",
                                      reason=theirs.reason, message=theirs.message,
                                      since=theirs.last_transition_time, **base)]


def _finished_with(parent: WorkloadInfo) -> tuple[str, str]:
    """The finished parent's Finished reason and message, which its variants finish with."""
    finished = parent.condition("Finished")
    return (finished.reason, finished.message) if finished is not None else ("", "")


def _activation(parent: WorkloadInfo, variants: list[WorkloadInfo], cq: o.ClusterQueue, flavors: list[str],
                base: dict) -> list[ev.Decision]:
    """Which variants the migration policy wants active now, as Kueue's controller deactivates, then activates
    them."""
    out: list[ev.Decision] = []
    now_active = {v.key: v.active for v in variants}

    def switch(v: WorkloadInfo, active: bool, why: str) -> None:
        if now_active[v.key] != active:
            now_active[v.key] = active
            what = "activated" if active else "deactivated"
            out.append(ev.VariantActivation(key=v.key, uid=v.uid, active=active,
                                            message=f"Variant Workload {what} due to {why}", **base))

    if not parent.active:
        for v in variants:
            switch(v, False, f'Parent Workload "{parent.key}" not active')
        return out
    admitted = next((v for v in variants if v.phase == ADMITTED), None)
    if admitted is None:
        for v in variants:
            switch(v, True, "no other Variant being admitted")
        return out
    rank = {f: i for i, f in enumerate(flavors)}

    def idx(v: WorkloadInfo) -> int:
        return rank.get(variant_flavor(v), 0)

    policy = cq.spec.concurrent_admission_policy
    migration = policy.migration if policy is not None else o.ConcurrentAdmissionMigration()
    if migration.mode == "RetainFirstAdmission":
        for v in variants:
            if v.key != admitted.key:
                switch(v, False, f'RetainFirstAdmission: another Variant "{admitted.key}" is admitted')
        return out
    last = migration.constraints.last_acceptable_flavor_name if migration.constraints is not None else None
    if last is not None:
        for v in variants:
            if v.key != admitted.key and idx(v) > rank.get(last, 0):
                switch(v, False, f'being below lastAcceptableFlavor: "{last}" and another Variant admitted '
                                 f'"{admitted.key}"')
    for v in variants:
        if idx(v) > idx(admitted):
            switch(v, False, f'being lower priority than admitted Variant "{admitted.key}"')
    for v in variants:
        if last is not None:
            if idx(v) <= rank.get(last, 0) and idx(v) < idx(admitted):
                switch(v, True, f'being at least lastAcceptableFlavor: "{last}" and higher priority than admitted '
                                f'Variant "{admitted.key}"')
        elif idx(v) < idx(admitted):
            switch(v, True, f'being higher priority than admitted Variant "{admitted.key}"')
    return out
