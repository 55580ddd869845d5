"""kueue-es's own settings (not Kueue's ``Configuration``): where the log is, how to reach Kafka, how the
scheduler service behaves.

Sources, later ones win: the defaults here, a YAML file (``--config FILE`` or ``KUEUE_ES_CONFIG``), the
environment (``KUEUE_ES_<SECTION>_<FIELD>``, e.g. ``KUEUE_ES_KAFKA_BOOTSTRAP``,
``KUEUE_ES_KAFKA_SASL_PASSWORD``, ``KUEUE_ES_SCHEDULER_TICKS``), then command-line flags. Keys are the field
names below (snake_case). Every error names the setting by its path (``$.kafka.bootstrap``) and its source;
the CLI exits with 2.

Example::

    log: kafka://kafka-0.kafka:9093,kafka-1.kafka:9093/kueue-es.log
    kafka:
      security_protocol: SASL_SSL
      tls: {ca_file: /etc/kueue-es/ca.pem}
      sasl: {mechanism: SCRAM-SHA-512, username: kueue-es, password_file: /var/run/secrets/kafka/password}
      replication_factor: 3
      min_insync_replicas: 2
    scheduler:
      kueue_config: /etc/kueue/config.yaml
    metrics:
      port: 8080
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import msgspec
import yaml

from connectors.k8s.settings import KubeSettings
from connectors.kafka.settings import KafkaSettings, is_kafka_url, validate
from events.bounded_input import read_bounded
from events.errors import InvalidInput
from events.manifests import decode_text

ENV_PREFIX = "KUEUE_ES_"
CONFIG_ENV = "KUEUE_ES_CONFIG"
DEFAULT_EMBEDDED_LOG = "kueue-es-log"


class SchedulerSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    kueue_config: str = ""
    """Kueue's Configuration (config.kueue.x-k8s.io) as YAML; empty: Kueue's defaults."""
    snapshot_every_events: int = 50_000
    snapshot_interval_s: float = 60.0
    """A snapshot of the state once this many events (or this many seconds, if any event came) have passed since
    the last: on Kafka a shard's snapshot (what a replica taking over restores), on the embedded log a checkpoint
    (what a restart and a replay start from, :mod:`kueue_es.checkpoints`)."""
    checkpoints_kept: int = 10
    """Embedded log: how many checkpoints stay beside it, the oldest removed first; 0: none is written."""
    ticks: bool = True
    """Append clock ticks when a controller deadline (requeue backoff, waitForPodsReady, a maximum execution time,
    retention, the 30 s wait on a NotReady node under TASReplaceNodeOnPodTermination off) has passed."""
    instance_id: str = ""
    """Name of this replica in reports and in the group; empty: ``<hostname>-<pid>``."""
    stats_interval_s: float = 60.0
    """Report cycle timings (decide, transaction, read-back) this often; 0: never."""
    batches_per_transaction: int = 8
    """Kafka: decision batches one transaction may hold, each decided on the state after the previous one."""
    offsets_commit_interval_ms: int = 100
    """Kafka: the group's consumer offset goes into a decision transaction at most this often (as Kafka Streams'
    ``commit.interval.ms`` under exactly-once), and into a transaction of its own once the shard has been quiet
    that long; 0: into every decision transaction. Nothing reads it back to resume (a replica resumes from its
    snapshot and the log): it tells consumer-lag monitoring where the scheduler is."""


class MetricsSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    port: int = 0
    """Serve Kueue's Prometheus metrics on ``http://ADDRESS:PORT/metrics`` (plain HTTP; Kueue serves them over
    HTTPS on 8443); 0: not served."""
    address: str = "0.0.0.0"


class Settings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    log: str = ""
    """``kafka://HOST:PORT[,HOST:PORT]/TOPIC`` or a directory (the embedded log); empty: ./kueue-es-log."""
    kafka: KafkaSettings = KafkaSettings()
    scheduler: SchedulerSettings = SchedulerSettings()
    kube: KubeSettings = KubeSettings()
    metrics: MetricsSettings = MetricsSettings()

    @property
    def uses_kafka(self) -> bool:
        return is_kafka_url(self.log)


def load(path: str | None = None, env: Mapping[str, str] | None = None,
         overrides: Mapping[str, Any] | None = None) -> Settings:
    """Defaults ← YAML file ← ``KUEUE_ES_*`` environment ← ``overrides`` (a nested dict, e.g. from flags)."""
    env = os.environ if env is None else env
    path = path or env.get(CONFIG_ENV) or None
    doc: dict[str, Any] = _read_yaml(path) if path else {}
    env_doc, env_names = _from_env(env)
    merged = _merge(_merge(doc, env_doc), dict(overrides or {}))
    try:
        settings = msgspec.convert(merged, Settings, strict=False)
    except msgspec.ValidationError as exc:
        raise InvalidInput(_explain(str(exc), path, env_names)) from None
    if settings.uses_kafka or settings.kafka.bootstrap:
        _check_kafka(settings, path, env_names)
    if settings.kafka.static_membership and not settings.scheduler.instance_id:
        raise InvalidInput(_where("$.scheduler.instance_id", path, env_names)
                           + "kafka.static_membership needs a stable instance id (e.g. the pod name)")
    if settings.scheduler.snapshot_every_events < 1:
        raise InvalidInput(_where("$.scheduler.snapshot_every_events", path, env_names) + "must be at least 1")
    if settings.scheduler.checkpoints_kept < 0:
        raise InvalidInput(_where("$.scheduler.checkpoints_kept", path, env_names) + "must not be negative")
    if settings.scheduler.batches_per_transaction < 1:
        raise InvalidInput(_where("$.scheduler.batches_per_transaction", path, env_names) + "must be at least 1")
    if settings.scheduler.offsets_commit_interval_ms < 0:
        raise InvalidInput(_where("$.scheduler.offsets_commit_interval_ms", path, env_names)
                           + "must not be negative")
    if not 0 <= settings.metrics.port <= 65535:
        raise InvalidInput(_where("$.metrics.port", path, env_names)
                           + f"must be a port number (0-65535), not {settings.metrics.port}")
    if settings.scheduler.snapshot_interval_s <= 0:
        raise InvalidInput(_where("$.scheduler.snapshot_interval_s", path, env_names) + "must be positive")
    return settings


def _check_kafka(settings: Settings, path: str | None, env_names: dict[str, str]) -> None:
    from connectors.kafka.settings import parse_url

    try:
        if settings.uses_kafka:
            parse_url(settings.log, settings.kafka)
        else:
            validate(settings.kafka)
    except InvalidInput as exc:
        msg = str(exc)
        field = msg.split(":", 1)[0]
        if field.startswith("$."):
            raise InvalidInput(_where(field, path, env_names) + msg.split(":", 1)[1].strip()) from None
        raise


def _read_yaml(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            doc = yaml.safe_load(decode_text(read_bounded(f, path), path))
    except OSError as exc:
        raise InvalidInput(f"{path}: {exc.strerror or exc}") from None
    except RecursionError:
        raise InvalidInput(f"{path}: nested too deeply (or an alias holds itself)") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise InvalidInput(f"{path}:{where}: not valid YAML: {getattr(exc, 'problem', None) or exc}") from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise InvalidInput(f"{path}: $: expected a mapping of settings, not {type(doc).__name__}")
    return doc


# --- environment -------------------------------------------------------------------------------------------


def _struct_fields(tp: Any) -> dict[str, Any] | None:
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        return {f.name: f.type for f in msgspec.structs.fields(tp)}
    return None


def _from_env(env: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    """``KUEUE_ES_A_B_C=v`` → ``{"a": {"b_c": v}}`` when Settings has those fields. Variables naming an
    existing section but no field in it are errors (typos); others (``KUEUE_ES_CACHE``) are not settings."""
    doc: dict[str, Any] = {}
    names: dict[str, str] = {}
    top = _struct_fields(Settings) or {}
    for var in sorted(env):
        if not var.startswith(ENV_PREFIX) or var == CONFIG_ENV:
            continue
        rest = var[len(ENV_PREFIX):].lower()
        path = _resolve(rest, Settings)
        if path is None:
            section = next((name for name, t in top.items()
                            if rest.startswith(name + "_") and _struct_fields(t) is not None), None)
            if section is not None:
                raise InvalidInput(f"{var}: no such setting (under $.{section}: "
                                   f"{', '.join(_leaf_names(top[section]))})")
            continue
        node = doc
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = env[var]
        names["$." + ".".join(path)] = var
    return doc, names


def _resolve(rest: str, tp: Any) -> list[str] | None:
    fields = _struct_fields(tp)
    if fields is None:
        return None
    for name in sorted(fields, key=len, reverse=True):
        if rest == name and _struct_fields(fields[name]) is None:
            return [name]
        if rest.startswith(name + "_"):
            sub = _resolve(rest[len(name) + 1:], fields[name])
            if sub is not None:
                return [name, *sub]
    return None


def _leaf_names(tp: Any, prefix: str = "") -> list[str]:
    out = []
    for name, t in (_struct_fields(tp) or {}).items():
        if _struct_fields(t) is not None:
            out.extend(_leaf_names(t, f"{prefix}{name}."))
        else:
            out.append(prefix + name)
    return out


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in extra.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


def _where(field: str, path: str | None, env_names: dict[str, str]) -> str:
    if field in env_names:
        return f"{env_names[field]} ({field}): "
    return f"{path}: {field}: " if path else f"{field}: "


def _explain(msg: str, path: str | None, env_names: dict[str, str]) -> str:
    text, sep, where = msg.partition(" - at `")
    if not sep:
        return f"{path}: {msg}" if path else msg
    field = where.rstrip("`")
    if text.startswith("Object contains unknown field"):
        name = text.split("`")[1] if "`" in text else "?"
        return _where(f"{field}.{name}", path, env_names) + "unknown setting"
    return _where(field, path, env_names) + text
