"""Kueue's TAS node controller, its pod side: fail the pods pinned to a host they will never be bound to.

Which pods is :func:`kueue_es.scheduler.nodefailure.pods_to_fail` (the unhealthy-node list is the scheduler's);
here it is carried out. The pods looked at are those in the log that :func:`~kueue_es.scheduler.nodefailure.pinned_to`
names a host for (a TAS pod of a workload, ungated onto the host, not bound yet), each time it, the node on that
host or its workload changes, and again once a node not Ready has been so for 30 s (with
TASReplaceNodeOnPodTermination off; this process's clock, as Kueue's controller requeues on its own). Under the
Configuration recorded in the log: with TopologyAwareScheduling or TASFailedNodeReplacement off (Kueue then runs no
such controller) nothing is written. The write reads the live pod first (its current version, and whether it is
still pinned there and unbound: the log may lag, and a pod bound since is not failed), then patches its status
conditioned on that version: phase ``Failed`` and the condition ``TerminatedByKueue``; then it records Kueue's
Normal Event ``PodTerminatedByKueue`` on the pod (named from the pod's uid: a second try finds it there). A pod gone
counts as done; a conflict is tried again after the retry delay, on the pod read anew, as Kueue's reconciler is
requeued on a failed patch. The pod then leaves the log (it is terminal), so the ungater no longer counts it.
"""

from __future__ import annotations

import hashlib
import socket
import time
from dataclasses import dataclass
from typing import Any

import msgspec
import structlog

from connectors.k8s.client import KubeClient
from connectors.k8s.decision_events import NORMAL, TAS_CONTROLLER, Involved, make_event
from connectors.k8s.errors import AlreadyExists, KubeError, NotFound
from connectors.k8s.journal import Journal
from connectors.k8s.recorder import EVENTS, MAX_INSTANCE, micro_time
from connectors.k8s.resources import BY_KIND
from connectors.k8s.workers import KeyedWorkers, Retries, take_due, wake_after
from events import objects as o
from events import schema as ev
from events.timefmt import format_time
from kueue_es.scheduler import nodefailure as nf
from projections import gates
from projections.node_ready import not_ready_wait_ends
from projections.secondpass import HOSTNAME
from projections.workloads import WORKLOAD_ANNOTATION, topology_gated

log = structlog.get_logger("kueue_es.k8s.pinned_pods")
PODS = BY_KIND["Pod"]


@dataclass
class PinnedPodStats:
    failed: int = 0
    conflicts: int = 0
    errors: int = 0
    events: int = 0


def _now_ms() -> int:
    return int(time.time() * 1000)


def still_pinned(live: dict[str, Any], host: str) -> bool:
    """The pod as the apiserver returns it is still what :func:`~kueue_es.scheduler.nodefailure.pinned_to` chose it
    for: pinned to ``host``, unbound, ``Pending``, no topology gate."""
    spec, status = live.get("spec") or {}, live.get("status") or {}
    return ((spec.get("nodeSelector") or {}).get(HOSTNAME) == host and not spec.get("nodeName")
            and status.get("phase") == "Pending"
            and not topology_gated(spec.get("schedulingGates") or []))


def status_patch(live: dict[str, Any], at: str) -> dict[str, Any]:
    """The merge patch of the live pod's status: phase ``Failed`` and Kueue's condition added to those it has,
    conditioned on the pod's uid and resourceVersion."""
    meta = live.get("metadata") or {}
    condition = {"type": nf.TERMINATED_BY_KUEUE, "status": "True", "reason": nf.UNSCHEDULABLE_ON_ASSIGNED_NODE,
                 "message": nf.TERMINATED_MESSAGE, "lastTransitionTime": at}
    kept = list((live.get("status") or {}).get("conditions") or [])
    return {"metadata": {"uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion")},
            "status": {"phase": "Failed", "conditions": [*kept, condition]}}


def event_body(pod: o.Pod, micros: int, instance: str) -> dict[str, Any]:
    """Kueue's Event for a pod it failed (its TAS controllers' recorder), named from the pod's uid."""
    m = pod.metadata
    e = make_event(Involved(PODS.api_version, "Pod", m.namespace, m.name, m.uid), NORMAL, nf.TERMINATED_EVENT,
                   nf.TERMINATED_MESSAGE, TAS_CONTROLLER)
    digest = hashlib.blake2b(f"{m.uid}/{nf.TERMINATED_EVENT}".encode(), digest_size=8).hexdigest()
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": f"{m.name[: 253 - 17].rstrip('-.')}.{digest}", "namespace": m.namespace},
        "involvedObject": {"apiVersion": e.involved.api_version, "kind": "Pod", "namespace": m.namespace,
                           "name": m.name, "uid": m.uid},
        "type": e.type, "reason": e.reason, "action": e.action, "message": e.message,
        "reportingComponent": e.component,
        "reportingInstance": f"{e.component}-{instance}"[:MAX_INSTANCE],
        "eventTime": micro_time(micros),
    }


def _discard(index: dict[str, set[str]], at: str, key: str) -> None:
    keys = index.get(at)
    if keys is not None:
        keys.discard(key)
        if not keys:
            del index[at]


class PinnedPods:
    def __init__(self, client: KubeClient, journal: Journal, *, events: bool = True, instance: str = "",
                 retry_s: float = 1.0, concurrency: int = 4) -> None:
        self.client = client
        self.journal = journal
        self.state = journal.mirror.state
        self.events = events
        self.instance = instance or socket.gethostname()
        self.concurrency = concurrency
        self.stats = PinnedPodStats()
        self._retry = Retries(retry_s)
        self._on_host: dict[str, set[str]] = {}
        """Host -> keys of the pods pinned to it (:func:`~kueue_es.scheduler.nodefailure.pinned_to`)."""
        self._host_of: dict[str, str] = {}
        """Pod key -> the host it is indexed under."""
        self._of_workload: dict[str, set[str]] = {}
        """Workload key -> keys of its pinned pods."""
        self._workload_of: dict[str, str] = {}
        """Pod key -> the workload it is indexed under."""
        self._due: dict[str, int] = {}
        """Host -> when (ms, wall clock) the 30 s wait on its node, not Ready, ends."""
        self._dirty: set[str] = set()
        self._enabled_was: bool | None = None
        for key, pod in self.state.pods.items():
            self._index(key, pod)
        journal.mirror.listeners.append(self._on_applied)

    # --- what changed --------------------------------------------------------------------------------------

    def _index(self, key: str, pod: o.Pod | None) -> None:
        old = self._host_of.pop(key, None)
        if old is not None:
            _discard(self._on_host, old, key)
            self._dirty.add(old)
        wl_was = self._workload_of.pop(key, None)
        if wl_was is not None:
            _discard(self._of_workload, wl_was, key)
        host = nf.pinned_to(pod) if pod is not None else None
        if pod is None or host is None:
            return
        self._host_of[key] = host
        self._on_host.setdefault(host, set()).add(key)
        wl = f"{pod.metadata.namespace}/{pod.metadata.annotations[WORKLOAD_ANNOTATION]}"
        self._of_workload.setdefault(wl, set()).add(key)
        self._workload_of[key] = wl
        self._dirty.add(host)

    def _workload_changed(self, key: str) -> None:
        self._dirty.update(self._host_of[k] for k in self._of_workload.get(key, ()) if k in self._host_of)

    def _on_applied(self, records: list[ev.Record]) -> None:
        for r in records:
            e = r.event
            if isinstance(e, ev.ObjectUpserted):
                if isinstance(e.obj, o.Pod):
                    self._index(e.key, e.obj)
                elif isinstance(e.obj, o.Node):
                    self._dirty.update((e.key, e.obj.metadata.labels.get(HOSTNAME, e.key)))
                elif isinstance(e.obj, o.Workload):
                    self._workload_changed(e.key)
            elif isinstance(e, ev.ObjectDeleted):
                if e.kind == "Pod":
                    self._index(e.key, None)
                elif e.kind == "Node":
                    self._dirty.add(e.key)
                elif e.kind == "Workload":
                    self._workload_changed(e.key)
            elif isinstance(e, ev.Decision):
                self._workload_changed(e.key)

    def enabled(self) -> bool:
        return self.state.tas_enabled and self.state.gate(gates.TAS_FAILED_NODE_REPLACEMENT)

    def _take(self) -> set[str]:
        on = self.enabled()
        if on and not self._enabled_was:  # turned on: every pinned pod counts anew
            self._dirty.update(self._on_host)
        self._enabled_was = on
        hosts = self._dirty | take_due(self._due, _now_ms()) | self._retry.due()
        self._dirty = set()
        return {h for h in hosts if self._on_host.get(h)} if on else set()

    def _timeout(self) -> float | None:
        """Until the next wait ends or the next retry is due (at most a second: the gates may turn on)."""
        return wake_after(self._due, self._retry, _now_ms())

    async def run(self) -> None:
        await KeyedWorkers(self.sync_guarded, self.concurrency).run(
            self._take, self.journal.subscribe(), self._timeout)

    async def sync_guarded(self, host: str) -> None:
        await self._retry.attempt(self.sync, host, what="failing pinned pods", stats=self.stats, log=log, host=host)

    # --- one host ------------------------------------------------------------------------------------------

    async def sync(self, host: str) -> None:
        pods = [self.state.pods[k] for k in sorted(self._on_host.get(host, ())) if k in self.state.pods]
        if not pods:
            return
        now = _now_ms()
        taints = self.state.gate(gates.TAS_REPLACE_NODE_ON_NODE_TAINTS)
        on_pod_termination = self.state.gate(gates.TAS_REPLACE_NODE_ON_POD_TERMINATION)
        if not on_pod_termination:
            node = nf.node_by_hostname(self.state, host)
            ends = not_ready_wait_ends(node) if node is not None else None
            if ends is not None and now < ends:
                self._due[host] = ends
        for pod in nf.pods_to_fail(self.state, host, pods, now, taints=taints, on_pod_termination=on_pod_termination):
            await self._fail(host, pod)

    async def _fail(self, host: str, pod: o.Pod) -> None:
        """Fail ``pod`` if the live pod still calls for it (a conflicting write looks at its host again later)."""
        m = pod.metadata
        try:
            live = msgspec.json.decode(await self.client.get(PODS, m.name, m.namespace))
        except NotFound:
            return
        if (live.get("metadata") or {}).get("uid") != m.uid or not still_pinned(live, host):
            return  # another pod of that name, or bound (or gone terminal) since the log's view: it follows
        now = _now_ms()
        if not await self._retry.written(self.client.patch(PODS, m.name, status_patch(live, format_time(now)),
                                                           m.namespace, subresource="status"), host, self.stats):
            return
        self.stats.failed += 1
        log.info("failed pod pinned to a node it cannot run on", pod=pod.key, host=host)
        if self.events:
            await self._record(pod, now)

    async def _record(self, pod: o.Pod, now: int) -> None:
        """Kueue's Event; never in the way: a failure to record it is logged, not retried."""
        try:
            await self.client.create(EVENTS, event_body(pod, now * 1000, self.instance), pod.metadata.namespace)
        except AlreadyExists:
            return
        except KubeError as exc:
            log.warning("recording PodTerminatedByKueue failed", pod=pod.key, error=str(exc))
            return
        self.stats.events += 1
