"""The topology ungater: lift the TAS scheduling gate of an admitted workload's pods, domain by domain.

For every workload that is admitted (not evicted) with at least one ``topologyAssignment``, each time it or one
of its pods changes in the log: take its live pods from the log (pods carry the ``kueue.x-k8s.io/workload``
annotation and the ``kueue.x-k8s.io/podset`` label, whichever integration started them, a Job's or Kueue's plain
Pods'; an elastic Job's also ``kueue.x-k8s.io/workload-slice-name``, and a slice's pods are all those of its chain,
whichever slice they were started on: :func:`connectors.k8s.ungating.pod_chain`; :mod:`connectors.k8s.trim` keeps
exactly what is needed of them), ask :func:`connectors.k8s.ungating.plan` which gated pods go where, and patch each: the gate removed and
the domain's level labels merged into ``spec.nodeSelector``, conditioned on the pod's resourceVersion.

A pod is never ungated twice: after a patch, the workload is not planned again until the log shows every pod
patched for it at (at least) the version the patch produced, or gone (Kueue's expectations).

A conflict means the pod changed since the version in the log, but not necessarily in a way the log keeps: the
watch drops an update that changes nothing of the kept view (a label or annotation not Kueue's, a finalizer, an
ownerReference: :func:`connectors.k8s.trim.same_content`), so the log may hold a stale resourceVersion for good and
nothing would bring the workload back (Kueue's ungater patches from an informer cache that has every version, and
requeues on error). So the pod is read: the same pod whose kept view is still the one planned from is patched
again on its live version; one changed in a kept way, re-created or gone is left to its newer version (or its
deletion) the watch appends, which brings the workload back; one that keeps changing between the read and the
patch is retried later.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec
import structlog

from connectors.k8s import trim
from connectors.k8s.client import KubeClient, resource_version_number, resource_version_of
from connectors.k8s.errors import Conflict, Invalid, NotFound
from connectors.k8s.integration_log import record_gate_removal
from connectors.k8s.journal import Journal
from connectors.k8s.pod_roles import group_name
from connectors.k8s.resources import BY_KIND
from connectors.k8s.ungating import group_offsets, plan, pod_chain, workload_chain
from connectors.k8s.workers import KeyedWorkers, Retries
from events import objects as o
from events import schema as ev
from projections import gates as feature_gates
from projections.workloads import ADMITTED, TOPOLOGY_GATE, WorkloadInfo

log = structlog.get_logger("kueue_es.k8s.ungater")
PODS = BY_KIND["Pod"]
PODSET_LABEL = "kueue.x-k8s.io/podset"
REREADS = 3
"""Conflicts met on a pod unchanged in its kept view, each answered by reading it again, before the workload is
left to a retry."""


@dataclass
class UngaterStats:
    ungated: int = 0
    conflicts: int = 0
    errors: int = 0


def admitted_by_tas(wl: WorkloadInfo | None) -> bool:
    return (wl is not None and wl.phase == ADMITTED and not wl.evicted and wl.admission is not None
            and any(p.topology_assignment is not None for p in wl.admission.pod_set_assignments))


class Ungater:
    def __init__(self, client: KubeClient, journal: Journal, *, retry_s: float = 1.0, concurrency: int = 16) -> None:
        self.client = client
        self.journal = journal
        self.mirror = journal.mirror
        self.state = journal.mirror.state
        self.concurrency = concurrency
        self.stats = UngaterStats()
        self._retry = Retries(retry_s)
        self._pods_of: dict[str, set[str]] = {}
        """Slice chain -> keys of the pods in the log counted in it (:func:`pod_chain`)."""
        self._owner: dict[str, str] = {}
        """Pod key -> the slice chain it is counted in."""
        self._slices_of: dict[str, set[str]] = {}
        """Slice chain -> keys of the workloads in the log of that chain (:func:`workload_chain`)."""
        self._chain: dict[str, str] = {}
        """Workload key -> its slice chain (a workload not in the mirror: its own key)."""
        self._expected: dict[str, dict[str, tuple[str, int]]] = {}
        """Workload key -> pod key -> (uid, resourceVersion) the log must reach before planning again."""
        self._dirty: set[str] = set()
        for key, pod in self.state.pods.items():
            self._index(key, pod)
        for key, obj in self.mirror.workloads.items():
            self._index_workload(key, obj)
        self._dirty.update(k for k, wl in self.state.workloads.items() if admitted_by_tas(wl))
        self.mirror.listeners.append(self._on_applied)

    # --- what changed --------------------------------------------------------------------------------------

    def _index(self, key: str, pod: o.Pod | None) -> set[str]:
        """Index the pod; answer the workloads whose pods it was or is among."""
        old = self._owner.pop(key, None)
        if old is not None:
            self._pods_of.get(old, set()).discard(key)
        chain = pod_chain(pod) if pod is not None else None
        if chain is not None:
            self._owner[key] = chain
            self._pods_of.setdefault(chain, set()).add(key)
        return {wl for c in {old, chain} if c is not None for wl in self._slices_of.get(c, {c})}

    def _index_workload(self, key: str, obj: o.Workload | None) -> None:
        old = self._chain.pop(key, None)
        if old is not None:
            self._slices_of.get(old, set()).discard(key)
        if obj is not None:
            chain = workload_chain(obj)
            self._chain[key] = chain
            self._slices_of.setdefault(chain, set()).add(key)

    def _on_applied(self, records: list[ev.Record]) -> None:
        for r in records:
            e = r.event
            if isinstance(e, ev.ObjectUpserted):
                if isinstance(e.obj, o.Pod):
                    self._dirty.update(self._index(e.key, e.obj))
                elif isinstance(e.obj, o.Workload):
                    self._index_workload(e.key, e.obj)
                    self._dirty.add(e.key)
            elif isinstance(e, ev.ObjectDeleted):
                if e.kind == "Pod":
                    self._dirty.update(self._index(e.key, None))
                elif e.kind == "Workload":
                    self._index_workload(e.key, None)
                    self._dirty.add(e.key)
            elif isinstance(e, ev.Decision):
                self._dirty.add(e.key)

    def _take(self) -> set[str]:
        keys = self._dirty | self._retry.due()
        self._dirty = set()
        return keys

    async def run(self) -> None:
        await KeyedWorkers(self.sync_guarded, self.concurrency).run(
            self._take, self.journal.subscribe(), self._retry.timeout)

    async def sync_guarded(self, key: str) -> None:
        await self._retry.attempt(self.sync, key, what="ungate", stats=self.stats, log=log, workload=key)

    # --- one workload --------------------------------------------------------------------------------------

    def _waiting_for_log(self, key: str) -> bool:
        """Some pod patched for ``key`` is not in the log at its patched version yet."""
        expected = self._expected.get(key)
        if not expected:
            return False
        for pod_key, (uid, rv) in list(expected.items()):
            pod = self.state.pods.get(pod_key)
            if pod is None or pod.metadata.uid != uid or resource_version_number(pod.metadata.resource_version) >= rv:
                del expected[pod_key]
        if not expected:
            del self._expected[key]
            return False
        return True

    async def sync(self, key: str) -> None:
        wl = self.state.workloads.get(key)
        if not self.state.tas_enabled or not admitted_by_tas(wl):  # Kueue runs no ungater with TAS off
            self._expected.pop(key, None)
            return
        assert wl is not None and wl.admission is not None
        if self._waiting_for_log(key):
            return
        chain = self._pods_of.get(self._chain.get(key, key), ())
        pods = [self.state.pods[k] for k in sorted(chain) if k in self.state.pods]
        requests = {ps.name: ps.topology for ps in wl.pod_sets}
        offsets = group_offsets(wl.admission.pod_set_assignments, requests)
        planned = []  # every pod set planned before any pod is patched: one unreadable offset stops them all
        for psa in wl.admission.pod_set_assignments:
            if psa.topology_assignment is None:
                continue
            mine = [p for p in pods if p.metadata.labels.get(PODSET_LABEL) == psa.name]
            ungates = plan(psa, requests.get(psa.name), mine, wl.unhealthy_nodes, offsets.get(psa.name, 0))
            if ungates is None:
                log.error("pod-index-offset annotation is not an integer: no pod of the workload ungated",
                          workload=key, pod_set=psa.name)
                return
            planned += ungates
        admission = wl.admission
        for ungate in planned:
            if wl.admission is not admission or not admitted_by_tas(wl):
                break  # changed (a node replaced) or evicted meanwhile: the change's record brings a new plan
            await self._ungate(wl, ungate.pod, ungate.node_selector)

    async def _ungate(self, wl: WorkloadInfo, pod: o.Pod, node_selector: dict[str, str]) -> None:
        key, m = wl.key, pod.metadata
        gates = [g for g in pod.spec.scheduling_gates if g.get("name") != TOPOLOGY_GATE]
        rv = m.resource_version
        for attempt in range(REREADS + 1):
            body = {"metadata": {"uid": m.uid, "resourceVersion": rv},
                    "spec": {"schedulingGates": gates or None, "nodeSelector": node_selector}}
            try:
                raw = await self.client.patch(PODS, m.name, body, m.namespace)
                break
            except Conflict:
                self.stats.conflicts += 1
                if attempt == REREADS:  # it keeps changing under us: read it again on the next pass
                    self._retry.later(key)
                    return
            except NotFound:
                return
            except Invalid as exc:  # refused for good (the pod is no longer gated by us, ...): the next change decides
                self.stats.errors += 1
                log.error("ungating refused by the apiserver", workload=key, pod=pod.key, error=str(exc))
                return
            live_rv = await self._unchanged(pod)
            if live_rv is None:  # changed in a kept way, re-created or gone: the watch brings its news
                return
            rv = live_rv
        patched = resource_version_of(raw)
        self._expected.setdefault(key, {})[pod.key] = (m.uid, resource_version_number(patched))
        self.stats.ungated += 1
        log.info("ungated pod", workload=key, pod=pod.key, node_selector=node_selector)
        if len(gates) < len(pod.spec.scheduling_gates):  # the gate was there to remove (the patch's view)
            await self._removed(wl, pod)

    async def _removed(self, wl: WorkloadInfo, pod: o.Pod) -> None:
        """Record the gate's removal (``pod_scheduling_gate_removal_seconds``): ``is_group`` for a plain pod
        group's Pod, read as the pod integration reads its group."""
        m = pod.metadata
        named_in = m.annotations if self.state.gate(feature_gates.WORKLOAD_IDENTIFIER_ANNOTATIONS) else None
        group = bool(group_name(m.labels, named_in))
        if not await record_gate_removal(self.journal.append, log, pod.key, m.uid, TOPOLOGY_GATE, wl,
                                         group=group):
            self.stats.errors += 1

    async def _unchanged(self, pod: o.Pod) -> str | None:
        """The live resourceVersion of ``pod`` when the apiserver still has it as the log keeps it (same uid, same
        kept view: what the plan was made from), else None."""
        m = pod.metadata
        try:
            raw = await self.client.get(PODS, m.name, m.namespace)
        except NotFound:
            return None
        live = trim.view(msgspec.json.decode(raw, type=PODS.view))
        if live is None or not trim.same_content(trim.kept_view(pod), live):
            return None
        return live.metadata.resource_version
