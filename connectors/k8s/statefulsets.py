"""The StatefulSets' status revisions, listed and watched for the pod integration (Kueue's ``statefulset`` one).

Kueue's StatefulSet reconciler (:func:`connectors.k8s.pod_group.let_go_by_statefulset`) decides from the StatefulSet
that holds a pod group: its ``status.currentRevision`` and ``status.updateRevision``, or that it is gone. The log
keeps no StatefulSets (nothing the scheduler decides on depends on them), so, as the pod integration does for its
Pods, this keeps its own list+watch of them: key -> (uid, revisions), a relist after 410 Gone, and
``on_change`` called with the keys whose uid or revisions changed, or that came or went (a StatefulSet's other
status changes, each of its pods becoming ready, change nothing here). Until the first list is in
(:attr:`StatefulSetRevisions.synced`), nothing is known of any StatefulSet, and none may be taken as gone.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import msgspec
import structlog

from connectors.k8s.client import KubeClient, resource_version_of
from connectors.k8s.list_watch import list_then_watch
from connectors.k8s.pod_group import StatefulSetView
from connectors.k8s.resources import STATEFUL_SETS

log = structlog.get_logger("kueue_es.k8s.statefulsets")


class _Meta(msgspec.Struct, frozen=True, rename="camel", forbid_unknown_fields=False):
    name: str = ""
    namespace: str = ""
    uid: str = ""


class _Status(msgspec.Struct, frozen=True, rename="camel", forbid_unknown_fields=False):
    current_revision: str = ""
    update_revision: str = ""


class StatefulSetRevision(msgspec.Struct, frozen=True, forbid_unknown_fields=False):
    """What is read of a StatefulSet."""

    metadata: _Meta = _Meta()
    status: _Status = _Status()

    @property
    def key(self) -> str:
        return f"{self.metadata.namespace}/{self.metadata.name}"

    @property
    def view(self) -> StatefulSetView:
        return StatefulSetView(current_revision=self.status.current_revision,
                               update_revision=self.status.update_revision)


def decode(raw: msgspec.Raw | bytes) -> StatefulSetRevision | None:
    """A StatefulSet as read here (None: it does not decode)."""
    try:
        return msgspec.json.decode(raw, type=StatefulSetRevision)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        log.warning("statefulset skipped: cannot decode", error=str(exc))
        return None


@dataclass
class StatefulSetRevisions:
    """key (``<namespace>/<name>``) -> the StatefulSet's revisions, kept in step with the apiserver by :meth:`run`."""

    client: KubeClient
    on_change: Callable[[set[str]], None]
    watch_timeout_s: int = 300
    backoff_s: float = 1.0

    def __post_init__(self) -> None:
        self.known: dict[str, StatefulSetRevision] = {}
        self.synced = asyncio.Event()
        self.relists = 0

    async def run(self) -> None:
        def gone() -> None:
            self.relists += 1

        await list_then_watch(self.relist, self._watch, log=log, what="statefulsets", backoff_s=self.backoff_s,
                              on_gone=gone)

    async def relist(self) -> str:
        listed = await self.client.list(STATEFUL_SETS)
        known = {s.key: s for s in map(decode, listed.items) if s is not None}
        changed = {k for k in known.keys() | self.known.keys() if known.get(k) != self.known.get(k)}
        self.known = known
        self.synced.set()
        self._changed(changed)
        return listed.metadata.resource_version

    async def _watch(self, rv: str) -> str:
        stream = self.client.watch(STATEFUL_SETS, rv, timeout_seconds=self.watch_timeout_s)
        async with contextlib.aclosing(stream):
            async for event in stream:
                rv = resource_version_of(event.object) or rv
                if event.type == "BOOKMARK":
                    continue
                sts = decode(event.object)
                if sts is None:
                    continue
                before = self.known.get(sts.key)
                if event.type == "DELETED":
                    if before is not None and before.metadata.uid == sts.metadata.uid:
                        del self.known[sts.key]
                        self._changed({sts.key})
                elif before != sts:
                    self.known[sts.key] = sts
                    self._changed({sts.key})
        return rv

    def _changed(self, keys: set[str]) -> None:
        if keys:
            self.on_change(keys)

    def get(self, key: str, uid: str) -> StatefulSetRevision | None:
        """The StatefulSet ``key`` of that ``uid`` as last listed or watched (None: not seen, or another one)."""
        sts = self.known.get(key)
        return sts if sts is not None and sts.metadata.uid == uid else None
