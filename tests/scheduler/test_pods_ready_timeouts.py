"""waitForPodsReady's timeouts: the Configuration fields Kueue v0.20 added (``unscheduledTimeout``,
``maxTimeoutOnWorkload``) and their checks, a workload's own timeouts from ``kueue.x-k8s.io/wait-for-pods-ready``
(WorkloadLevelWaitForPodsReady) and the underlying cause a PodsReadyTimeout eviction carries."""

from __future__ import annotations

from typing import Any

import pytest

from events import objects as o
from events.errors import InvalidInput
from events.timefmt import format_time
from kueue_es.scheduler import pods_ready_timeouts
from kueue_es.scheduler.config import load_config
from projections.workload_pods_ready import own_timeouts
from projections.workloads import ADMITTED, WorkloadInfo

V1BETA2 = "config.kueue.x-k8s.io/v1beta2"


def _config(pods_ready: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"apiVersion": V1BETA2, "kind": "Configuration", "waitForPodsReady": pods_ready, **extra}


def test_v0_20_s_fields_are_taken_in_v1beta2_only() -> None:
    cfg = load_config(_config({"timeout": "10m", "unscheduledTimeout": "2m", "maxTimeoutOnWorkload": "1h"}))
    assert cfg.pods_ready.unscheduled_timeout == "2m" and cfg.pods_ready.max_timeout_on_workload == "1h"
    v1beta1 = {**_config({"enable": True, "maxTimeoutOnWorkload": "1h"}), "apiVersion": "config.kueue.x-k8s.io/v1beta1"}
    with pytest.raises(InvalidInput, match='unknown field "waitForPodsReady.maxTimeoutOnWorkload"$'):
        load_config(v1beta1)


def test_the_unscheduled_timeout_is_held_to_the_defaulted_timeout() -> None:
    """Kueue validates after defaulting: under v1beta2 an unset or zero ``timeout`` is 30 minutes by then."""
    for stanza in ({"unscheduledTimeout": "20m"}, {"timeout": "0s", "unscheduledTimeout": "20m"}):
        assert load_config(_config(stanza)).pods_ready.unscheduled_timeout == "20m"
    with pytest.raises(InvalidInput, match=r"Invalid value: 31m0s: must be less than or equal to waitForPodsReady.timeout \(30m0s\) "):
        load_config(_config({"unscheduledTimeout": "31m"}))


@pytest.mark.parametrize("timeout", [{}, {"timeout": "0s"}, {"timeout": "0m0s"}])
def test_the_unscheduled_timeout_error_names_the_timeout_in_force(timeout: dict[str, str]) -> None:
    """An unset or zero ``timeout`` is held as the 30 minutes it defaults to, so the error names those."""
    with pytest.raises(InvalidInput, match=r"Invalid value: 40m0s: must be less than or equal to waitForPodsReady.timeout \(30m0s\) "
                                           r"\(kueue-es's rule: Kueue's validation has none\)$"):
        load_config(_config({**timeout, "unscheduledTimeout": "40m"}))


@pytest.mark.parametrize(("stanza", "message"), [
    ({"unscheduledTimeout": "6m"}, r"field `waitForPodsReady.unscheduledTimeout`: Invalid value: 6m0s: must be less "
                                   r"than or equal to waitForPodsReady.timeout \(5m0s\) \(kueue-es's rule: Kueue's "
                                   r"validation has none\)"),
    ({"unscheduledTimeout": "-1m"}, r"field `waitForPodsReady.unscheduledTimeout`: Invalid value: -1m0s: must be "
                                    r"greater than or equal to 0 \(kueue-es's rule: Kueue's validation has none\)"),
    ({"unscheduledTimeout": "soon"}, r"field `waitForPodsReady.unscheduledTimeout`: invalid duration 'soon'"),
    ({"maxTimeoutOnWorkload": "0s"}, r"field `waitForPodsReady.maxTimeoutOnWorkload`: Invalid value: 0s: must be "
                                     r"greater than 0 \(kueue-es's rule: Kueue's validation has none\)"),
    ({"maxTimeoutOnWorkload": "-90s"}, r"field `waitForPodsReady.maxTimeoutOnWorkload`: Invalid value: -1m30s: must "
                                       r"be greater than 0 \(kueue-es's rule: Kueue's validation has none\)"),
    ({"maxTimeoutOnWorkload": "2x"}, r"field `waitForPodsReady.maxTimeoutOnWorkload`: invalid duration"),
    ({"recoveryTimeout": "-3m"}, r"field `waitForPodsReady.recoveryTimeout`: Invalid value: -3m0s: must be greater "
                                 r"than or equal to 0"),
])
def test_a_bad_pods_ready_duration_is_refused_naming_the_field(stanza: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidInput, match=r"kueue.yaml: " + message):
        load_config(_config({"timeout": "5m", **stanza}), "kueue.yaml")


@pytest.mark.parametrize(("value", "want"), [
    ('{"timeoutSeconds": 30}', (30_000, 30_000)),  # its own timeout is its recovery timeout too
    ('{"timeoutSeconds": 30, "recoveryTimeoutSeconds": 40}', (30_000, 40_000)),
    ('{"recoveryTimeoutSeconds": 40}', (None, 40_000)),
    ('{"timeoutSeconds": 0}', None), ('{"timeoutSeconds": -5}', None), ('{"timeoutSeconds": "30"}', None),
    ('{"timeoutSeconds": 1.5}', None), ('{"timeoutSeconds": true}', None), ("{timeoutSeconds: 30}", None),
    ("[30]", None), ("", None), (None, None),
])
def test_a_workloads_own_timeouts_are_whole_seconds_above_zero(value: str | None, want: object) -> None:
    assert own_timeouts(value) == want


def _admitted(*, own: tuple[int | None, int | None] | None = None, recovering_since: int | None = None
              ) -> WorkloadInfo:
    conditions: tuple[o.Condition, ...] = ()
    if recovering_since is not None:
        conditions = (o.Condition(type="PodsReady", status="False", reason="WaitForRecovery",
                                  last_transition_time=format_time(recovering_since)),)
    return WorkloadInfo(key="ns/w", uid="u", namespace="ns", name="w", queue_name="lq", created=0, priority=0, priority_class="", pod_sets=(),
                        phase=ADMITTED, admitted_at=1_000, conditions=conditions, own_pods_ready=own)


@pytest.mark.parametrize(("gate", "own", "recovering_since", "want"), [
    (False, None, None, (301_000, "WaitForStart")),
    (False, (60_000, 60_000), None, (301_000, "WaitForStart")),  # gate off: the annotation changes nothing
    (True, (60_000, 60_000), None, (61_000, "WaitForStart")),
    (True, (None, 10_000), None, (301_000, "WaitForStart")),  # no own timeout: the configuration's
    (False, None, 100_000, (220_000, "WaitForRecovery")),  # recoveryTimeout 2m from the loss
    (True, (60_000, 10_000), 100_000, (110_000, "WaitForRecovery")),
])
def test_the_deadline_and_underlying_cause_of_a_pods_ready_timeout(
        gate: bool, own: tuple[int | None, int | None] | None, recovering_since: int | None, want: object) -> None:
    cfg = load_config(_config({"timeout": "5m", "recoveryTimeout": "2m"},
                              featureGates={"WorkloadLevelWaitForPodsReady": gate}))
    wl = _admitted(own=own, recovering_since=recovering_since)
    assert pods_ready_timeouts.deadline(cfg, wl) == want


def test_an_unset_recovery_timeout_is_the_timeout_under_v1beta2() -> None:
    """Kueue v0.16 (#8493), and v0.19's defaults (#11855): no ``recoveryTimeout`` is the ``timeout``, with no
    Configuration at all too (30 minutes)."""
    lost = _admitted(recovering_since=100_000)
    assert pods_ready_timeouts.deadline(load_config(_config({"timeout": "5m"})), lost) == (400_000, "WaitForRecovery")
    assert pods_ready_timeouts.deadline(load_config({}), lost) == (100_000 + 30 * 60_000, "WaitForRecovery")


def test_a_zero_recovery_timeout_or_v1beta1_without_one_never_times_a_lost_readiness_out() -> None:
    lost = _admitted(recovering_since=100_000)
    assert pods_ready_timeouts.deadline(load_config(_config({"timeout": "5m", "recoveryTimeout": "0s"})), lost) is None
    v1beta1 = {**_config({"enable": True, "timeout": "5m"}), "apiVersion": "config.kueue.x-k8s.io/v1beta1"}
    assert pods_ready_timeouts.deadline(load_config(v1beta1), lost) is None


@pytest.mark.parametrize("unscheduled", ["-1m", "40m"])
def test_the_unscheduled_timeout_is_checked_only_while_wait_for_pods_ready_is_in_force(unscheduled: str) -> None:
    """Kueue's validateWaitForPodsReady returns at once while waitForPodsReady is off (under v1beta2, which alone has
    the field: the DisableWaitForPodsReady gate), as for ``recoveryTimeout``; the value must still parse."""
    gate_off = _config({"timeout": "5m", "unscheduledTimeout": unscheduled},
                       featureGates={"DisableWaitForPodsReady": True})
    assert not load_config(gate_off).pods_ready.enable
    with pytest.raises(InvalidInput, match=r"field `waitForPodsReady.unscheduledTimeout`: "):
        load_config(_config({"timeout": "5m", "unscheduledTimeout": unscheduled}))
    with pytest.raises(InvalidInput, match=r"field `waitForPodsReady.unscheduledTimeout`: invalid duration"):
        load_config({**gate_off, "waitForPodsReady": {"timeout": "5m", "unscheduledTimeout": "soon"}})
