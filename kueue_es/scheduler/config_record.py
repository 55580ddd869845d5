"""The Kueue Configuration in the log: the event that records the one a scheduler runs with, and the one in force
at a point of the log.

Decisions depend on the configuration as much as on the cluster, so a scheduler records it (a
:class:`~events.schema.ConfigRecorded` before its first decision, whenever it differs from the one in force) and
everything that re-runs or explains a decision loads it back from the log instead of being told it again.
"""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec

from events import schema as ev
from events.errors import InvalidInput
from events.manifests import CONFIG_API_VERSIONS
from kueue_es.scheduler import config_fields
from kueue_es.scheduler.config import DEFAULT, ResourcesConfig, SchedulerConfig, load_config
from projections.cluster import ClusterState

DEFAULT_DOCUMENT: dict[str, Any] = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"}
"""What a scheduler started without a Configuration file records: Kueue's defaults."""


def document_of(config: SchedulerConfig) -> dict[str, Any]:
    """A document that loads as ``config``, for a caller holding a decoded configuration and not the document."""
    if config == DEFAULT:
        return dict(DEFAULT_DOCUMENT)
    return config_fields.in_version(msgspec.to_builtins(config), SchedulerConfig)


def fingerprint(document: dict[str, Any]) -> str:
    """A short stable name of a document (SHA-256 of its canonical JSON, 12 hex digits)."""
    return hashlib.sha256(msgspec.json.encode(document, order="sorted")).hexdigest()[:12]


def record(state: ClusterState, document: dict[str, Any], *, writer: str, source: str = "") -> ev.ConfigRecorded | None:
    """The event recording ``document`` — None when it is already the one in force in ``state``.

    Its time is the log's: recording a configuration lets no time pass."""
    current = state.config
    if current is not None and (current.document is document or current.document == document):
        return None
    return ev.ConfigRecorded(time=state.time, document=document, writer=writer, source=source,
                             id=f"config-{fingerprint(document)}")


def pending(state: ClusterState, document: dict[str, Any], *, writer: str, source: str = "") -> list[ev.AnyEvent]:
    """What a scheduler running with ``document`` appends before it decides anything more: the record of
    ``document`` when it is not the configuration in force in ``state`` (first start, restart with a changed
    configuration), else nothing. Appended and applied first, it is in force for the decisions that follow (their
    ``input`` is at or after it) and a change requeues what was parked, as Kueue's restart does. Shared by every
    scheduler loop (embedded, Kafka, ``--kube``) so that they record alike."""
    recorded = record(state, document, writer=writer, source=source)
    return [] if recorded is None else [recorded]


def load_recorded(event: ev.ConfigRecorded, offset: int) -> SchedulerConfig:
    """The recorded document, loaded; a document that is not a valid Configuration is an error naming its offset."""
    where = f"log offset {offset} (ConfigRecorded)"
    doc = event.document
    if doc.get("kind") != "Configuration" or doc.get("apiVersion") not in CONFIG_API_VERSIONS:
        raise InvalidInput(f"{where}: not a Kueue Configuration (apiVersion {doc.get('apiVersion')!r}, kind "
                           f"{doc.get('kind')!r}; expected kind Configuration, apiVersion "
                           f"{' or '.join(CONFIG_API_VERSIONS)})")
    return load_config(doc, where, strict=False)  # taken when it was recorded: loaded as it was


def in_force(state: ClusterState) -> SchedulerConfig | None:
    """The configuration recorded in force in ``state`` (None: none recorded). Loaded once per record."""
    recorded = state.config
    if recorded is None:
        return None
    memo = state.derived.get("config")
    if memo is not None and memo[0] == state.config_offset:
        return memo[1]
    config = load_recorded(recorded, state.config_offset)
    state.derived["config"] = (state.config_offset, config)
    return config


def describe(config: SchedulerConfig) -> str:
    """One line saying what in ``config`` departs from Kueue's defaults and changes decisions."""
    parts = []
    if config.fair_sharing is not None:
        strategies = config.fair_sharing.preemption_strategies
        parts.append("fairSharing" + (f" ({', '.join(strategies)})" if strategies else ""))
    afs = config.admission_fair_sharing
    if afs is not None:
        parts.append(f"admissionFairSharing (usageHalfLifeTime {afs.usage_half_life_time}, "
                     f"usageSamplingInterval {afs.usage_sampling_interval})")
    w = config.wait_for_pods_ready
    if w is not None and w.enable:
        parts.append(f"waitForPodsReady (timeout {w.timeout}" + (", blockAdmission" if w.block_admission else "")
                     + (f", recoveryTimeout {w.recovery_timeout}" if w.recovery_timeout else "") + ")")
    r = config.resources
    if r != ResourcesConfig():
        bits = []
        if r.exclude_resource_prefixes:
            bits.append(f"excludeResourcePrefixes {', '.join(r.exclude_resource_prefixes)}")
        if r.transformations:
            bits.append(f"{len(r.transformations)} transformation(s)")
        if r.quota_check_strategy != ResourcesConfig().quota_check_strategy:
            bits.append(f"quotaCheckStrategy {r.quota_check_strategy}")
        if r.device_class_mappings:
            bits.append(f"{len(r.device_class_mappings)} device class mapping(s)")
        parts.append(f"resources ({'; '.join(bits)})")
    retention = config.object_retention_policies.workloads if config.object_retention_policies else None
    if retention is not None and (retention.after_finished or retention.after_deactivated_by_kueue):
        bits = [f"{name} {value}" for name, value in (("afterFinished", retention.after_finished),
                                                     ("afterDeactivatedByKueue", retention.after_deactivated_by_kueue))
                if value]
        parts.append(f"objectRetentionPolicies.workloads ({', '.join(bits)})")
    if config.feature_gates:
        gates = ", ".join(f"{name}={str(on).lower()}" for name, on in sorted(config.feature_gates.items()))
        parts.append(f"featureGates ({gates})")
    return "; ".join(parts) or "Kueue's defaults"


def entry(event: ev.ConfigRecorded, offset: int, *, document: bool = True,
          invalid_ok: bool = False) -> dict[str, Any]:
    """A recorded configuration as plain data for reports: offset, fingerprint, a one-line summary, writer, source
    and (with ``document``) the document. An invalid one is an error naming its offset, or with ``invalid_ok``
    (it is not used) a summary saying so."""
    try:
        text = describe(load_recorded(event, offset))
    except InvalidInput as exc:
        if not invalid_ok:
            raise
        text = f"not a valid Configuration: {exc}"
    out: dict[str, Any] = {"offset": offset, "fingerprint": fingerprint(event.document), "summary": text}
    if event.writer:
        out["writer"] = event.writer
    if event.source:
        out["source"] = event.source
    if document:
        out["document"] = event.document
    return out


def summary(state: ClusterState, *, document: bool = True) -> dict[str, Any] | None:
    """The configuration in force in ``state`` as plain data for reports (None: none recorded)."""
    if state.config is None:
        return None
    return entry(state.config, state.config_offset, document=document)


def one_line(data: dict[str, Any] | None) -> str:
    """:func:`entry`/:func:`summary` data in a sentence, for text output."""
    if data is None:
        return "none recorded in the log (Kueue's defaults)"
    origin = ", ".join(f"{k} {data[k]}" for k in ("writer", "source") if k in data)
    return (f"recorded at offset {data['offset']} ({data['fingerprint']}{', ' + origin if origin else ''}): "
            f"{data['summary']}")
