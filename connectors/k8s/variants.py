"""Carry out the ``ConcurrentAdmission`` decisions about a family of Workloads (a parent and its variants) that are
not status writes: the parent label, the variants' creation and their ``spec.active``.

Level-triggered, as the status writer: for a workload with such a decision pending, what the projection holds is
what the Workload should show, and the write goes only when the Workload (as last observed) differs:

* ``ParentLabelled`` — a merge patch of ``metadata.labels`` (``kueue.x-k8s.io/concurrent-admission-parent:
  "true"``), conditioned on the Workload's uid;
* ``VariantCreated`` — the parent is read from the apiserver and its copy created as Kueue's variant controller
  makes it: the parent's spec with the ``kueue.x-k8s.io/concurrent-admission`` preemption gate added, its labels
  but the parent label, its annotations with ``kueue.x-k8s.io/workload-allowed-resource-flavors`` naming the
  flavor, controller-owned by the parent (its uid as the decision names it). Already there (409 AlreadyExists)
  rejects the decision (``AlreadyExists``: Kueue skips such a variant and records no ``CreatedVariant``), and so
  does the parent gone (404), or another one of its name. The outcomes of the decisions carried out with a
  creation name the variant's uid from the create's answer (its Events' involved object);
* ``VariantActivation`` — a merge patch of ``spec.active``, conditioned on the variant's uid;
* ``VariantDeleted`` — the variant is deleted, conditioned on its uid (already gone counts as done).

Each decision ends in one ``DecisionApplied`` (or ``DecisionRejected``). The status writer leaves a variant
whose creation is pending alone until the watch shows it (:mod:`connectors.k8s.writer`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import msgspec
import structlog

from connectors.k8s.client import uid_of
from connectors.k8s.decision_workers import MarkedKeysWorker
from connectors.k8s.errors import Conflict, NotFound
from connectors.k8s.resources import BY_KIND
from events import schema as ev
from projections.preemption_gates import CONCURRENT_ADMISSION_GATE
from projections.variants import parent_name, variant_flavor
from projections.workloads import (
    ALLOWED_FLAVORS_ANNOTATION,
    CONCURRENT_ADMISSION_PARENT_LABEL,
    WorkloadInfo,
    is_parent,
)

log = structlog.get_logger("kueue_es.k8s.variants")
TAGS = frozenset({"ParentLabelled", "VariantCreated", "VariantActivation", "VariantDeleted"})
WORKLOAD_API = "kueue.x-k8s.io/v1beta2"


@dataclass
class VariantStats:
    labelled: int = 0
    created: int = 0
    deleted: int = 0
    activations: int = 0
    rejected: int = 0
    errors: int = 0


def variant_body(parent: dict[str, Any], name: str, flavor: str) -> dict[str, Any]:
    """The variant of ``parent`` (the Workload as the apiserver holds it) on ``flavor``, named ``name``."""
    meta = parent.get("metadata") or {}
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k != CONCURRENT_ADMISSION_PARENT_LABEL}
    annotations = {**(meta.get("annotations") or {}), ALLOWED_FLAVORS_ANNOTATION: flavor}
    spec = dict(parent.get("spec") or {})
    gates = list(spec.get("preemptionGates") or [])
    if not any(g.get("name") == CONCURRENT_ADMISSION_GATE for g in gates):
        gates.append({"name": CONCURRENT_ADMISSION_GATE})
    spec["preemptionGates"] = gates
    out_meta: dict[str, Any] = {
        "name": name, "namespace": meta.get("namespace", ""),
        "ownerReferences": [{"apiVersion": WORKLOAD_API, "kind": "Workload", "name": meta.get("name", ""),
                             "uid": meta.get("uid", ""), "controller": True, "blockOwnerDeletion": True}],
    }
    if labels:
        out_meta["labels"] = labels
    out_meta["annotations"] = annotations
    return {"apiVersion": WORKLOAD_API, "kind": "Workload", "metadata": out_meta, "spec": spec}


class VariantWriter(MarkedKeysWorker):
    dirty = "dirty_variants"
    what = "variant write"
    log = log

    stats_type = VariantStats

    async def sync(self, key: str) -> None:
        pending = self.mirror.pending.get(key, {})
        offsets = self.unreported(key, TAGS)
        if not offsets:
            return
        wl = self.mirror.state.workloads.get(key)
        uid = wl.uid if wl is not None else ""
        reject = None
        exists: tuple[str, str] | None = None
        if "VariantDeleted" in {pending[o] for o in offsets}:
            await self._delete(key)
        elif wl is None:
            reject = ("NotFound", "the Workload no longer exists")
        elif wl.owner and not self.mirror.workloads.get(key) and "VariantCreated" in {pending[o] for o in offsets}:
            reject, exists, uid = await self._create(wl)
        else:
            reject = await self._patch(key, wl)
        t = int(time.time() * 1000)
        self._reported.update(offsets)
        if reject is not None:
            self.stats.rejected += 1
            await self.append([ev.DecisionRejected(time=t, key=key, uid=uid, decision=off, reason=reject[0],
                                                   message=reject[1], id=f"rejected-{off}") for off in offsets])
            return
        out: list[ev.AnyEvent] = []
        for off in offsets:
            if exists is not None and pending[off] == "VariantCreated":
                out.append(ev.DecisionRejected(time=t, key=key, uid=uid, decision=off, reason=exists[0],
                                               message=exists[1], id=f"rejected-{off}"))
            else:
                out.append(ev.DecisionApplied(time=t, key=key, uid=uid, decision=off, id=f"applied-{off}"))
        await self.append(out)

    async def _create(self, wl: WorkloadInfo) -> tuple[tuple[str, str] | None, tuple[str, str] | None, str]:
        """Create variant ``wl``: (why the decisions are rejected, or None; why its creation is, there already, or
        None; the variant's uid, the create's answer's). Kueue's ``createVariants`` skips a variant that exists
        already (AlreadyExists), recording no ``CreatedVariant``: its ``VariantCreated`` is rejected, the decisions
        made with it carried out."""
        parent = parent_name(wl)
        try:
            raw = msgspec.json.decode(await self.client.get(BY_KIND["Workload"], parent, wl.namespace))
        except NotFound:
            return ("NotFound", f"the parent Workload {wl.namespace}/{parent} no longer exists"), None, wl.uid
        observed_parent = self.mirror.state.workloads.get(f"{wl.namespace}/{parent}")
        if observed_parent is None or raw["metadata"].get("uid") != observed_parent.uid:
            return ("Conflict", f"the parent Workload {wl.namespace}/{parent} was replaced"), None, wl.uid
        try:
            made = await self.client.create(BY_KIND["Workload"], variant_body(raw, wl.name, variant_flavor(wl)),
                                            wl.namespace)
        except Conflict:
            return None, ("AlreadyExists", f"the variant Workload {wl.key} exists already"), wl.uid
        self.stats.created += 1
        log.info("created variant", workload=wl.key, parent=parent, flavor=variant_flavor(wl))
        return None, None, uid_of(made) or wl.uid

    async def _delete(self, key: str) -> None:
        obs = self.mirror.workloads.get(key)
        if obs is None:
            return  # gone already
        try:
            await self.client.delete(BY_KIND["Workload"], obs.metadata.name, obs.metadata.namespace,
                                     uid=obs.metadata.uid)
        except (NotFound, Conflict):
            return  # gone already, or another one of its name: not ours to delete
        self.stats.deleted += 1
        log.info("deleted variant whose flavor left its ClusterQueue", workload=key)

    async def _patch(self, key: str, wl: WorkloadInfo) -> tuple[str, str] | None:
        obs = self.mirror.workloads.get(key)
        if obs is None:
            return "NotFound", "the Workload no longer exists"
        meta: dict[str, Any] = {"uid": obs.metadata.uid}
        body: dict[str, Any] = {"metadata": meta}
        if is_parent(wl) and obs.metadata.labels.get(CONCURRENT_ADMISSION_PARENT_LABEL) != "true":
            meta["labels"] = {CONCURRENT_ADMISSION_PARENT_LABEL: "true"}
            self.stats.labelled += 1
        if wl.owner and obs.spec.active != wl.active:
            body["spec"] = {"active": wl.active}
            self.stats.activations += 1
        if len(body) == 1 and len(meta) == 1:
            return None  # shown already
        try:
            await self.client.patch(BY_KIND["Workload"], obs.metadata.name, body, obs.metadata.namespace)
        except NotFound:
            return "NotFound", "the Workload no longer exists"
        except Conflict:
            return "Conflict", "the Workload was replaced"
        return None
