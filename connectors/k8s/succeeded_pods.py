"""Succeeded Pods for Kueue v0.20's ``WaitForPodsReadyUnscheduledTimeout``, without watching terminal Pods.

Kueue's UnscheduledPodsTracker counts a ``Succeeded`` Pod of an admitted Workload as filling its slot (it needs no
replacement), where a ``Failed`` or deleted one fills none (:mod:`projections.pods_scheduled`). The Pod watch asks
for non-terminal Pods only (:mod:`connectors.k8s.trim`), and a Pod leaving that selection comes as a deletion that
carries the Pod as it was before (the apiserver's word for "no longer selected"): succeeded, failed and deleted look
alike. So, only while the fold tracks Pods' scheduling, when a Pod linked to a Workload that still waits for an
observation of its scheduling (admitted, not evicted, no ``PodsScheduled=True`` of this admission:
:func:`awaits`) leaves the watch, the watcher reads it once (:func:`left_succeeded`): found ``Succeeded`` (the same
Pod, by uid), its trimmed view is upserted with that phase instead of the deletion, and the fold counts it as
Kueue does. Any other Pod leaving is a deletion, as before.

A relist treats every Pod it does not list the same way (:func:`unlisted`): one the log holds, running or
succeeded, is kept as succeeded while its Workload waits and a read finds it ``Succeeded`` (a Pod that succeeded
during a watch gap too), and is deleted once not (its Workload waits no more, or it is gone); between relists its
later deletion is not seen (Kueue's cache would drop it), which only matters while its Workload still waits.

A read that fails is tried again by the watch (it resumes before the event) or the relist, with their backoff;
one Pod version whose reads keep failing (a GET forbidden for that Pod, a 5xx loop) counts as gone after
:data:`READ_ATTEMPTS` tries (:class:`Reads`), so it cannot hold back every later Pod event: Kueue's informer,
which watches terminal Pods too, reads nothing here.
"""

from __future__ import annotations

import msgspec
import structlog

from connectors.k8s.client import KubeClient
from connectors.k8s.errors import KubeError, NotFound
from connectors.k8s.resources import BY_KIND
from connectors.k8s.trim import kept_view
from events import objects as o
from projections import pods_scheduled
from projections.cluster import ClusterState
from projections.workloads import ADMITTED, WORKLOAD_ANNOTATION

PODS = BY_KIND["Pod"]
SUCCEEDED = "Succeeded"
READ_ATTEMPTS = 5
"""Failed reads of one Pod version in a row before it counts as gone (:class:`Reads`)."""
_decode = msgspec.json.Decoder(o.Pod).decode
log = structlog.get_logger("kueue_es.k8s.succeeded_pods")


def awaits(state: ClusterState, pod: o.Pod | None) -> bool:
    """Whether ``pod`` is linked to a Workload whose scheduling the fold still waits to observe as complete."""
    if pod is None or not state.tracks_pods_scheduled:
        return False
    name = pod.metadata.annotations.get(WORKLOAD_ANNOTATION)
    wl = state.workloads.get(f"{pod.metadata.namespace}/{name}") if name else None
    if wl is None or wl.phase != ADMITTED or wl.evicted:
        return False
    admitted = wl.condition("Admitted")
    if admitted is None or admitted.status != "True":
        return False
    now = pods_scheduled.current(wl)
    return now is None or now.status != "True"


async def left_succeeded(client: KubeClient, pod: o.Pod) -> o.Pod | None:
    """The kept view of ``pod`` as it is now when it is the same Pod and has succeeded; None otherwise (gone,
    recreated, failed, or still running)."""
    try:
        raw = await client.get(PODS, pod.metadata.name, pod.metadata.namespace)
    except NotFound:
        return None
    try:
        now = _decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if now.metadata.uid != pod.metadata.uid or now.status.phase != SUCCEEDED:
        return None
    return kept_view(now)


class Reads:
    """The watcher's reads of Pods leaving the watch or the list: a failed read is raised (the watch or the relist
    tries again) until one Pod version failed :data:`READ_ATTEMPTS` times in a row; then it counts as gone."""

    def __init__(self, attempts: int = READ_ATTEMPTS) -> None:
        self.attempts = attempts
        self.given_up = 0
        self._failures: dict[tuple[str, str], int] = {}

    async def left_succeeded(self, client: KubeClient, pod: o.Pod) -> o.Pod | None:
        """:func:`left_succeeded`, None once this version of ``pod`` failed to be read ``attempts`` times."""
        version = (pod.metadata.uid, pod.metadata.resource_version)
        try:
            found = await left_succeeded(client, pod)
        except KubeError as exc:
            failures = self._failures.pop(version, 0) + 1
            if failures < self.attempts:
                self._failures[version] = failures
                raise
            self.given_up += 1
            log.warning("reading a pod that left the watch keeps failing: it counts as gone", pod=pod.key,
                        attempts=failures, error=str(exc))
            return None
        self._failures.pop(version, None)
        return found

    async def unlisted(self, client: KubeClient, state: ClusterState, key: str) -> o.Pod | None:
        """A relist did not list Pod ``key`` (it is terminal or gone): its succeeded view to keep in the log when
        its Workload still waits and it is there, succeeded (whether the log last held it running, as after a
        watch gap, or succeeded already); None: it is deleted."""
        pod = state.pods.get(key)
        if not awaits(state, pod):
            return None
        return await self.left_succeeded(client, pod)
