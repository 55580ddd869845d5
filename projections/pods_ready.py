"""Whether waitForPodsReady is in force under a Kueue Configuration: one reading for the scheduler and the projection.

The scheduler decides by it (timeouts, evictions, blockAdmission: ``kueue_es.scheduler.config``); the metrics fold
needs it too, because Kueue writes the PodsReady condition, and observes the ready wait times, only while it is in
force (:mod:`projections.metrics`). The fold has only the recorded document, and may not import the scheduler, so
the Configuration's ``waitForPodsReady`` stanza (:class:`WaitForPodsReadyConfig`, the type
``SchedulerConfig.wait_for_pods_ready`` holds) and the rule (:func:`pods_ready_in_force`, which
``SchedulerConfig.pods_ready`` applies) live here; the gate is read through :mod:`projections.gates`.

Kueue's rule (config v1beta2): a Configuration without a ``waitForPodsReady`` stanza gets one by defaulting, so
waitForPodsReady is on unless the ``DisableWaitForPodsReady`` gate (alpha, off by default) turns it off; a stanza
with ``enable: false`` (v1beta1's switch: a v1beta2 file with it is refused, but a log may have recorded one)
turns it off too. v1beta2's defaulting (Kueue v0.19+, ``apis/config/v1beta2/defaults.go``) gives a ``timeout``
that is unset or zero 30 minutes, and an unset ``recoveryTimeout`` the ``timeout`` (Kueue v0.16, #8493) — so with
no Configuration at all, or a stanza that sets neither, a workload waits 30 minutes for its pods to start and 30
minutes for a lost one to come back (:func:`pods_ready_in_force`); ``recoveryTimeout: 0s`` is the way to wait for
ever. A v1beta1 document is read with v1beta1's meaning (:mod:`projections.config_version`): off unless its stanza
says ``enable: true``; enabled, its own defaults (a 5-minute ``timeout``, no ``recoveryTimeout``), as Kueue's
decoder defaults the version it reads before converting.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from projections import config_version, gates, go_duration

DEFAULT_TIMEOUT = "30m"
"""v1beta2's ``waitForPodsReady.timeout`` when unset or zero (Kueue's ``DefaultWaitForPodsReadyTimeout``)."""


class RequeuingStrategy(msgspec.Struct, kw_only=True, rename="camel", frozen=True, forbid_unknown_fields=False):
    timestamp: str = "Eviction"
    """What a PodsReady-timeout eviction does to the queue-order time (``Eviction``: restarts it; ``Creation``:
    nothing). The projection reads it from the recorded document: :mod:`projections.queue_order`."""
    backoff_limit_count: int | None = None
    backoff_base_seconds: int = 60
    backoff_max_seconds: int = 3600


class WaitForPodsReadyConfig(msgspec.Struct, kw_only=True, rename="camel", frozen=True, forbid_unknown_fields=False):
    """The Configuration's ``waitForPodsReady`` stanza, as ``kueue_es.scheduler.config.SchedulerConfig`` decodes it."""

    enable: bool = True
    timeout: str = DEFAULT_TIMEOUT
    """v1beta2 defaults it to 30 minutes (a v1beta1 document has its own 5 written out by
    :func:`projections.config_version.as_hub`)."""
    block_admission: bool = False
    recovery_timeout: str | None = None
    """How long an admitted workload whose pods were ready may wait for them to recover, as decoded (unset:
    :func:`pods_ready_in_force` gives it the ``timeout`` under v1beta2; zero, or unset under v1beta1: no limit)."""
    requeuing_strategy: RequeuingStrategy = RequeuingStrategy()
    unscheduled_timeout: str | None = None
    """Kueue v0.20's timeout for an admitted workload's pods to be scheduled, read under its
    ``WaitForPodsReadyUnscheduledTimeout`` gate (:mod:`projections.pods_scheduled`); unset or zero: none."""
    max_timeout_on_workload: str | None = None
    """The longest timeout a job's ``kueue.x-k8s.io/wait-for-pods-ready`` annotation may set (unset: 2h), under
    ``WorkloadLevelWaitForPodsReady`` (:mod:`projections.workload_pods_ready`)."""


DEFAULT = WaitForPodsReadyConfig(recovery_timeout=DEFAULT_TIMEOUT)
"""The stanza v1beta2 defaults in when there is none (or no Configuration at all)."""
OFF = WaitForPodsReadyConfig(enable=False)


def pods_ready_in_force(stanza: WaitForPodsReadyConfig | None, feature_gates: Mapping[str, bool],
                        api_version: str | None = None) -> WaitForPodsReadyConfig:
    """waitForPodsReady as in force under a Configuration's stanza (None: none, Kueue's defaults) and its
    ``featureGates``: off altogether under the ``DisableWaitForPodsReady`` gate (no timeout, no eviction, no
    blockAdmission); otherwise with v1beta2's defaulting (module docstring) unless ``api_version`` is v1beta1."""
    if _disabled(feature_gates):
        return OFF
    if stanza is None:
        return DEFAULT
    if not stanza.enable or api_version == config_version.V1BETA1:
        return stanza
    return v1beta2_defaulted(stanza)


def v1beta2_defaulted(stanza: WaitForPodsReadyConfig) -> WaitForPodsReadyConfig:
    """``stanza`` with v1beta2's defaults: a zero ``timeout`` is 30 minutes, an unset ``recoveryTimeout`` the
    ``timeout``."""
    timeout = DEFAULT_TIMEOUT if _zero(stanza.timeout) else stanza.timeout
    recovery = timeout if stanza.recovery_timeout is None else stanza.recovery_timeout
    if timeout == stanza.timeout and recovery == stanza.recovery_timeout:
        return stanza
    return msgspec.structs.replace(stanza, timeout=timeout, recovery_timeout=recovery)


def _zero(duration: str) -> bool:
    """Whether Go reads ``duration`` as zero, which v1beta2's defaulting replaces: ``"0s"``, ``"-0m0s"``, and a
    fraction of a nanosecond (``"0.5ns"``, Go truncates it). One Go refuses is not zero: left as it is, it is
    refused by the Configuration's checks with its field named (a recorded document was checked when recorded;
    one kueue-es recorded before it read durations as Go does may have spaces around it, or be empty)."""
    try:
        return go_duration.parse_ns(duration.strip() or "0") == 0
    except go_duration.DurationError:
        return False


def _disabled(feature_gates: Mapping[str, bool]) -> bool:
    return bool(feature_gates) and gates.enabled(feature_gates, gates.DISABLE_WAIT_FOR_PODS_READY)


def waits_for_pods_ready(document: dict[str, Any] | None) -> bool:
    """Whether waitForPodsReady is in force under a recorded Configuration document (None: none recorded, Kueue's
    defaults: on)."""
    return recorded_in_force(document).enable


def recorded_in_force(document: dict[str, Any] | None) -> WaitForPodsReadyConfig:
    """waitForPodsReady as in force under a recorded Configuration document (None: none recorded, Kueue's
    defaults). Its gates and stanza decoded as the scheduler decodes a recorded document (loosely: ``"false"`` is
    false); the document was validated before it was recorded, and one that does not decode counts as Kueue's
    defaults rather than stopping the fold."""
    document = config_version.as_hub(document)
    if not document:
        return DEFAULT
    try:
        feature_gates = msgspec.convert(document.get("featureGates", {}), dict[str, bool], strict=False)
        if _disabled(feature_gates):
            return OFF
        stanza = msgspec.convert(document.get("waitForPodsReady"), WaitForPodsReadyConfig | None, strict=False)
    except msgspec.ValidationError:
        return DEFAULT
    return pods_ready_in_force(stanza, feature_gates, document.get("apiVersion"))
