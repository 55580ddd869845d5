"""FailureRecoveryPolicy's decision (Kueue's ``pkg/controller/failurerecovery/pod_termination_controller.go``): a
pod that opted in with ``kueue.x-k8s.io/safe-to-forcefully-terminate: "true"`` and is being deleted, not terminal,
is forced to Failed one minute after its deletionTimestamp if its node is then tainted unreachable; every other
pod is left alone."""

from __future__ import annotations

import pytest

from connectors.k8s import forceful_termination as ft
from events import objects as o
from events.timefmt import format_time

DELETED = 1_704_067_200_000
OPT_IN = {ft.ANNOTATION: "true"}


def _pod(annotations: dict[str, str] = OPT_IN, deleted: int | None = DELETED, phase: str = "Running") -> o.Pod:
    return o.Pod(metadata=o.ObjectMeta(name="p", namespace="ns", uid="u", annotations=annotations,
                                       deletion_timestamp=format_time(deleted) if deleted is not None else None),
                 spec=o.PodSpec(node_name="n1"), status=o.PodStatus(phase=phase))


def _node(*taint_keys: str) -> o.Node:
    return o.Node(metadata=o.ObjectMeta(name="n1"),
                  spec=o.NodeSpec(taints=[o.Taint(key=k, effect="NoExecute") for k in taint_keys]))


UNREACHABLE = _node(ft.UNREACHABLE_TAINT)


def test_an_opted_in_pod_waits_out_the_grace_period_then_fails_on_an_unreachable_node() -> None:
    assert ft.verdict(_pod(), UNREACHABLE, DELETED) == ft.Verdict(ft.WAIT, DELETED + 60_000)
    assert ft.verdict(_pod(), UNREACHABLE, DELETED + 59_999) == ft.Verdict(ft.WAIT, DELETED + 60_000)
    assert ft.verdict(_pod(), UNREACHABLE, DELETED + 60_000) == ft.Verdict(ft.FAIL)
    assert ft.verdict(_pod(), UNREACHABLE, DELETED + 5, grace_ms=5) == ft.Verdict(ft.FAIL)


@pytest.mark.parametrize("pod", [
    _pod(annotations={}),
    _pod(annotations={ft.ANNOTATION: "True"}),  # Kueue compares the value exactly
    _pod(deleted=None),
    _pod(phase="Failed"),
    _pod(phase="Succeeded"),
], ids=["no-annotation", "not-true", "not-deleting", "failed", "succeeded"])
def test_pods_that_did_not_opt_in_or_are_not_stuck_are_left_alone(pod: o.Pod) -> None:
    assert ft.verdict(pod, UNREACHABLE, DELETED + 3_600_000) == ft.Verdict(ft.LEAVE)


@pytest.mark.parametrize("node", [None, _node(), _node("node.kubernetes.io/not-ready")],
                         ids=["gone", "untainted", "not-ready-only"])
def test_a_pod_whose_node_is_gone_or_reachable_after_the_grace_period_is_left_alone(node: o.Node | None) -> None:
    assert ft.verdict(_pod(), node, DELETED + 60_000) == ft.Verdict(ft.LEAVE)


def test_a_pending_pod_counts_as_stuck_too() -> None:
    """No kubelet ever started it: Kueue looks only at whether it is terminal."""
    assert ft.verdict(_pod(phase="Pending"), UNREACHABLE, DELETED + 60_000) == ft.Verdict(ft.FAIL)


def test_the_message_adds_the_deletion_grace_period_as_kueue_does() -> None:
    assert ft.message("n1", 0) == ("Pod forcefully terminated after 1m0s grace period due to unreachable node `n1` "
                                   "(triggered by `kueue.x-k8s.io/safe-to-forcefully-terminate` annotation)")
    assert "after 1m0.00000003s grace period" in ft.message("n1", 30)


@pytest.mark.parametrize(("ns", "text"), [
    (0, "0s"), (1, "1ns"), (1_500, "1.5µs"), (250_000_000, "250ms"), (1_000_000_000, "1s"),
    (60_000_000_000, "1m0s"), (3_723_500_000_000, "1h2m3.5s"), (-2_000_000_000, "-2s"),
])
def test_go_duration_strings(ns: int, text: str) -> None:
    assert ft.go_duration(ns) == text


def test_the_status_patch_sets_failed_and_replaces_an_old_recovery_condition() -> None:
    live = {"metadata": {"uid": "u", "resourceVersion": "7"},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"},
                                                           {"type": ft.CONDITION_TYPE, "status": "False"}]}}
    patch = ft.status_patch(live, "m", "2024-01-01T00:01:00Z")
    assert patch == {"metadata": {"uid": "u", "resourceVersion": "7"}, "status": {"phase": "Failed", "conditions": [
        {"type": "Ready", "status": "False"},
        {"type": "KueueFailureRecovery", "status": "True", "reason": "KueueForcefullyTerminated", "message": "m",
         "lastTransitionTime": "2024-01-01T00:01:00Z"}]}}
