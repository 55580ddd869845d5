"""The StatefulSets' status revisions, listed and watched for the pod integration (Kueue's ``statefulset`` one).

Kueue's StatefulSet reconciler (:func:`connectors.k8s.pod_group.let_go_by_statefulset`,
:func:`connectors.k8s.pod_group.queue_relabel`) decides from the StatefulSet that holds a pod group: its
``status.currentRevision`` and ``status.updateRevision``, its queue name and replica count, or that it is gone. The
log keeps no StatefulSets (nothing the scheduler decides on depends on them), so, as the pod integration does for its
Pods, this keeps its own list+watch of them (an :class:`~connectors.k8s.list_watch.Informer`): key -> (uid,
revisions, replica count, and the labels and annotations: its queue name, and whether it is a MultiKueue copy), and
``on_change`` called with the keys where any of those changed, or that came or went (a StatefulSet's other status
changes, each of its pods becoming ready, change nothing here). Until the first list is in
(:attr:`StatefulSetRevisions.synced`), nothing is known of any StatefulSet, and none may be taken as gone.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec
import structlog

from connectors.k8s.client import KubeClient
from connectors.k8s.job_events import QUEUE_LABEL
from connectors.k8s.list_watch import Informer
from connectors.k8s.pod_group import StatefulSetView
from connectors.k8s.resources import STATEFUL_SETS
from connectors.k8s.statefulset_multikueue import copied_workload

log = structlog.get_logger("kueue_es.k8s.statefulsets")


class _Meta(msgspec.Struct, frozen=True, rename="camel", forbid_unknown_fields=False):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}


class _Status(msgspec.Struct, frozen=True, rename="camel", forbid_unknown_fields=False):
    current_revision: str = ""
    update_revision: str = ""


class _Spec(msgspec.Struct, frozen=True, forbid_unknown_fields=False):
    replicas: int | None = None


class StatefulSetRevision(msgspec.Struct, frozen=True, forbid_unknown_fields=False):
    """What is read of a StatefulSet."""

    metadata: _Meta = _Meta()
    spec: _Spec = _Spec()
    status: _Status = _Status()

    @property
    def key(self) -> str:
        return f"{self.metadata.namespace}/{self.metadata.name}"

    @property
    def copied_workload(self) -> str:
        """The Workload a MultiKueue copy of a set runs on, here on the worker ("" for any other set:
        :func:`connectors.k8s.statefulset_multikueue.copied_workload`)."""
        meta = self.metadata
        return copied_workload({"labels": meta.labels, "annotations": meta.annotations})

    @property
    def view(self) -> StatefulSetView:
        replicas = self.spec.replicas
        return StatefulSetView(current_revision=self.status.current_revision,
                               update_revision=self.status.update_revision,
                               queue=self.metadata.labels.get(QUEUE_LABEL, ""),
                               replicas=1 if replicas is None else replicas)


def decode(raw: msgspec.Raw | bytes) -> StatefulSetRevision | None:
    """A StatefulSet as read here (None: it does not decode)."""
    try:
        return msgspec.json.decode(raw, type=StatefulSetRevision)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        log.warning("statefulset skipped: cannot decode", error=str(exc))
        return None


class StatefulSetRevisions(Informer[StatefulSetRevision]):
    """key (``<namespace>/<name>``) -> the StatefulSet's revisions, kept in step with the apiserver by :meth:`run`;
    ``on_change`` gets the keys whose uid or revisions changed, or that came or went."""

    def __init__(self, client: KubeClient, on_change: Callable[[set[str]], None], watch_timeout_s: int = 300,
                 backoff_s: float = 1.0) -> None:
        super().__init__(client, STATEFUL_SETS, decode, on_change, what="statefulsets", log=log,
                         watch_timeout_s=watch_timeout_s, backoff_s=backoff_s)

    def get(self, key: str, uid: str) -> StatefulSetRevision | None:
        """The StatefulSet ``key`` of that ``uid`` as last listed or watched (None: not seen, or another one)."""
        sts = self.known.get(key)
        return sts if sts is not None and sts.metadata.uid == uid else None
