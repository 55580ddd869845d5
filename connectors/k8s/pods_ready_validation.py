"""What Kueue v0.20's job webhooks refuse of a job's ``kueue.x-k8s.io/wait-for-pods-ready`` annotation under
``WorkloadLevelWaitForPodsReady`` (alpha, off; KEP-4803's "Webhooks" section):

* the value is a JSON object whose ``timeoutSeconds`` is a whole number of seconds above 0, with an optional
  ``recoveryTimeoutSeconds`` of the same kind (a recovery timeout without a timeout is not supported);
* neither exceeds ``waitForPodsReady.maxTimeoutOnWorkload`` (2h when unset);
* the annotation does not change (nor appear, nor go) while the job runs: only an update that leaves it
  suspended may change it, as the KEP leaves the window between eviction cycles for that.

An update is held to the first two rules only when it changes the value, so a job admitted under a longer limit
stays writable. Kueue's source for these checks was not at hand: the details (the messages, and reading the gate
without asking whether ``waitForPodsReady`` is enabled) are kueue-es's, following the KEP. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from connectors.k8s.field_errors import invalid, required
from kueue_es.scheduler.config import SchedulerConfig, parse_duration_ns
from projections import gates
from projections.workload_pods_ready import (
    DEFAULT_MAX_TIMEOUT_ON_WORKLOAD,
    RECOVERY_KEY,
    TIMEOUT_KEY,
    WAIT_FOR_PODS_READY_ANNOTATION,
    parse,
    whole_seconds,
)

PATH = f"metadata.annotations[{WAIT_FOR_PODS_READY_ANNOTATION}]"
TIMEOUT, RECOVERY = TIMEOUT_KEY, RECOVERY_KEY
MALFORMED = f'must be a JSON object such as {{"{TIMEOUT}": 30, "{RECOVERY}": 40}}'
IMMUTABLE_RUNNING = "field is immutable while the job is not suspended"


@dataclass(frozen=True)
class PodsReadyRule:
    """The checks in force: the longest timeout a job may ask for, in seconds."""

    max_seconds: int

    @classmethod
    def of(cls, config: SchedulerConfig) -> PodsReadyRule | None:
        """Under ``WorkloadLevelWaitForPodsReady`` (and not ``DisableWaitForPodsReady``, which turns the feature
        off), the rule with ``maxTimeoutOnWorkload``; None: nothing is checked."""
        if not config.gate(gates.WORKLOAD_LEVEL_WAIT_FOR_PODS_READY) or config.gate(gates.DISABLE_WAIT_FOR_PODS_READY):
            return None
        pr = config.wait_for_pods_ready
        limit = (pr.max_timeout_on_workload if pr is not None else None) or DEFAULT_MAX_TIMEOUT_ON_WORKLOAD
        return cls(parse_duration_ns(limit) // 1_000_000_000)  # whole seconds within it: exact


def _annotation(job: Mapping[str, Any]) -> str | None:
    meta = job.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    value = annotations.get(WAIT_FOR_PODS_READY_ANNOTATION) if isinstance(annotations, dict) else None
    return value if isinstance(value, str) else None


def value_errors(value: str, rule: PodsReadyRule) -> list[str]:
    """The field errors of an annotation ``value``, read as the fold reads it
    (:func:`projections.workload_pods_ready.parse`)."""
    doc = parse(value)
    if doc is None:
        return [invalid(PATH, value, MALFORMED)]
    errors: list[str] = []
    if TIMEOUT not in doc:
        errors.append(required(PATH, f"{TIMEOUT} must be set (a {RECOVERY} alone is not supported)"))
    for key in (TIMEOUT, RECOVERY):
        if key not in doc:
            continue
        seconds = whole_seconds(doc[key])
        if seconds is None:
            errors.append(invalid(PATH, value, f"{key} must be a whole number of seconds greater than 0"))
        elif seconds > rule.max_seconds:
            errors.append(invalid(PATH, value, f"{key} must not exceed maxTimeoutOnWorkload ({rule.max_seconds}s)"))
    return errors


def create_errors(job: Mapping[str, Any], rule: PodsReadyRule | None) -> list[str]:
    """What the webhook refuses of a new job's annotation (none without ``rule``, the gate off)."""
    value = _annotation(job)
    return value_errors(value, rule) if rule is not None and value is not None else []


def update_errors(old: Mapping[str, Any], new: Mapping[str, Any], rule: PodsReadyRule | None, *,
                  old_suspended: bool, new_suspended: bool) -> list[str]:
    """What the webhook refuses of an update that changes the annotation: any change unless the job stays
    suspended, and a changed value as on creation."""
    before, after = _annotation(old), _annotation(new)
    if rule is None or before == after:
        return []
    if not (old_suspended and new_suspended):
        return [invalid(PATH, after or "", IMMUTABLE_RUNNING)]
    return value_errors(after, rule) if after is not None else []
