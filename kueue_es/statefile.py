"""A STATE.yaml — objects as a user would ``kubectl apply`` them — folded into a ClusterState.

Used by ``schedule`` and ``explain``: the Kueue Configuration given (if any) is recorded first, as a scheduler
records the one it runs with, so that what it does to requests (``resources``) holds from the start; then the
objects become observed events in document order (namespaces, flavors and queues first, so a workload's queue
exists when it arrives), all at one time, ``now``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from events import objects as o
from events import schema as ev
from events.errors import InvalidInput
from events.manifests import UNGATED, Checks, Manifest, load_file, validate_gated
from events.template_digest import stamped_from_document
from events.timefmt import parse_time
from kueue_es.scheduler import config_record
from kueue_es.scheduler.config import DEFAULT, SchedulerConfig, load_config
from projections.cluster import ClusterState

_FIRST = ("Namespace", "PriorityClass", "WorkloadPriorityClass", "LimitRange", "RuntimeClass", "ResourceClaimTemplate",
          "DeviceClass", "ResourceSlice", "ResourceClaim", "DeviceTaintRule", "ResourceFlavor", "Topology", "AdmissionCheck", "ProvisioningRequestConfig", "PreemptionConfig", "MultiKueueConfig",
          "MultiKueueCluster", "Cohort", "ClusterQueue", "LocalQueue", "Node", "Pod", "Job")


@dataclass
class LoadedState:
    state: ClusterState
    config: SchedulerConfig
    now: int


def latest_time(manifest: Manifest) -> int:
    """The latest timestamp written anywhere in the objects: a deterministic stand-in for "now"."""
    latest = 0
    for obj in manifest.objects:
        ts = obj.metadata.creation_timestamp
        if ts:
            latest = max(latest, parse_time(ts))
        if isinstance(obj, o.Workload):
            for c in obj.status.conditions:
                if c.last_transition_time:
                    latest = max(latest, parse_time(c.last_transition_time))
    return latest


def load_state(path: str, config_path: str | None = None, now: int | None = None,
               record: Callable[[ev.Record], None] | None = None) -> LoadedState:
    """``record``: also given every event folded (e.g. :class:`projections.owners.WorkloadOwners`)."""
    manifest = load_file(path, checks=UNGATED)  # the gated checks once the configuration is known (below)
    configs = [(path, c) for c in manifest.configs]
    if config_path is not None:
        extra = load_file(config_path)
        if extra.objects:
            raise InvalidInput(f"{config_path}: expected only a Configuration document")
        configs += [(config_path, c) for c in extra.configs]
    if len(configs) > 1:
        raise InvalidInput(f"{configs[1][0]}: more than one Configuration given")
    config = load_config(configs[0][1], configs[0][0]) if configs else DEFAULT
    checks = Checks.under(config.gate)  # the webhooks' checks under their gates, now the gates are known
    for obj in manifest.objects:
        validate_gated(obj, f"{path}: {type(obj).__struct_config__.tag} {obj.key}", checks)  # type: ignore[attr-defined]
    t = latest_time(manifest) if now is None else now
    rank = {k: i for i, k in enumerate(_FIRST)}
    objects = sorted(manifest.objects, key=lambda obj: rank.get(type(obj).__struct_config__.tag, len(rank)))
    state = ClusterState()
    if configs:
        recorded = config_record.record(state, configs[0][1], writer="kueue-es", source=configs[0][0])
        if recorded is not None:
            state.apply(ev.Record(0, msgspec.structs.replace(recorded, time=t)))
    seen: set[tuple[str, str]] = set()
    for i, obj in enumerate(objects, state.offset + 1):
        kind = type(obj).__struct_config__.tag  # type: ignore[attr-defined]
        if (kind, obj.key) in seen:
            raise InvalidInput(f"{path}: {kind} {obj.key} is given more than once")
        seen.add((kind, obj.key))
        if isinstance(obj, o.Workload) and not obj.metadata.uid:
            obj = o.Workload(api_version=obj.api_version, spec=obj.spec, status=obj.status,
                             metadata=_with_uid(obj.metadata))
        rec = ev.Record(i, ev.ObjectUpserted(time=t, key=obj.key, uid=obj.metadata.uid, obj=obj))
        state.apply(rec)
        if record is not None:
            record(rec)
    return LoadedState(state, config, t)


def _with_uid(meta: o.ObjectMeta) -> o.ObjectMeta:
    return msgspec.structs.replace(meta, uid=f"{meta.namespace}/{meta.name}")


class ObjectFolder:
    """Objects written as a user would (``kubectl apply`` dicts), each folded into ``state`` as observed at
    ``time``, at the next offset: how benchmarks and tests set a cluster up without a log or a file."""

    def __init__(self, time: int, state: ClusterState | None = None) -> None:
        self.time = time
        self.state = state if state is not None else ClusterState()

    def put(self, obj: Mapping[str, Any]) -> None:
        view = stamped_from_document(msgspec.convert(obj, o.KueueObject), obj)  # as a watch would decode it
        self.state.apply(ev.Record(self.state.offset + 1, ev.ObjectUpserted(time=self.time, key=view.key, obj=view)))

