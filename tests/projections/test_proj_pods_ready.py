"""Whether waitForPodsReady is in force: the projection's reading of a recorded document agrees with the
scheduler's loaded configuration (one rule, :mod:`projections.pods_ready`)."""

from __future__ import annotations

import pytest

from events.errors import InvalidInput
from kueue_es.scheduler.config import load_config
from projections.gates import DISABLE_WAIT_FOR_PODS_READY
from projections.pods_ready import recorded_in_force, waits_for_pods_ready

BASE = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"}
V1BETA1 = {**BASE, "apiVersion": "config.kueue.x-k8s.io/v1beta1"}  # only v1beta1 has waitForPodsReady.enable

LOOSE = ({**V1BETA1, "waitForPodsReady": {"enable": "false"}}, False)
"""A string for a bool: refused when a user's file is loaded; a document the log recorded is read loosely."""

DOCUMENTS = [
    (BASE, True),  # no stanza: Kueue v1beta2 defaults one in
    ({**BASE, "waitForPodsReady": None}, True),
    ({**BASE, "waitForPodsReady": {"timeout": "5m", "blockAdmission": True}}, True),
    ({**V1BETA1, "waitForPodsReady": {"enable": False}}, False),
    LOOSE,
    ({**BASE, "featureGates": {DISABLE_WAIT_FOR_PODS_READY: True}}, False),
    ({**BASE, "featureGates": {DISABLE_WAIT_FOR_PODS_READY: True}, "waitForPodsReady": {"timeout": "1m"}}, False),
    ({**BASE, "featureGates": {"AllAlpha": True}}, False),  # an alpha gate: AllAlpha turns it on
    ({**BASE, "featureGates": {"AllAlpha": True, DISABLE_WAIT_FOR_PODS_READY: False}}, True),
    ({**BASE, "featureGates": {"AllBeta": True}}, True),
    ({**V1BETA1, "featureGates": {DISABLE_WAIT_FOR_PODS_READY: False}, "waitForPodsReady": {"enable": False}}, False),
]


@pytest.mark.parametrize(("document", "on"), DOCUMENTS)
def test_the_projection_reads_the_document_as_the_scheduler_loads_it(document: dict, on: bool) -> None:
    """As the scheduler loads it: strictly, as a user's file, but for :data:`LOOSE`, which only a log that recorded
    it before kueue-es refused it holds (``strict=False``: as it was taken)."""
    assert waits_for_pods_ready(document) is on
    assert load_config(document, strict=(document, on) != LOOSE).pods_ready.enable is on


def test_no_document_is_kueues_defaults() -> None:
    assert waits_for_pods_ready(None) is True
    assert waits_for_pods_ready({}) is True


@pytest.mark.parametrize(("gates", "disabled"), [
    ({}, False), ({"AllAlpha": True}, True), ({"AllAlpha": False}, False), ({"AllBeta": True}, False),
    ({DISABLE_WAIT_FOR_PODS_READY: True, "AllAlpha": False}, True),
    ({DISABLE_WAIT_FOR_PODS_READY: False, "AllAlpha": True}, False)])
def test_the_gate_reads_as_the_feature_gate_machinery_reads_an_alpha_gate(gates: dict, disabled: bool) -> None:
    """Its own entry, else ``AllAlpha``, else its default (off)."""
    document = {**BASE, "featureGates": gates}
    assert waits_for_pods_ready(document) is not disabled
    assert load_config(document).pods_ready.enable is not disabled


def test_the_loose_row_is_refused_when_loaded_strictly() -> None:
    with pytest.raises(InvalidInput, match=r"field `waitForPodsReady.enable`: Expected `bool`, got `str`"):
        load_config(LOOSE[0])


@pytest.mark.parametrize(("document", "timeout"), [
    (None, "30m"),  # no Configuration at all: v1beta2's defaults
    (BASE, "30m"),
    ({**BASE, "waitForPodsReady": {"blockAdmission": True}}, "30m"),
    ({**BASE, "waitForPodsReady": {"timeout": "0s"}}, "30m"),  # zero is unset to v1beta2's defaulting
    ({**BASE, "waitForPodsReady": {"timeout": "10m"}}, "10m"),
    ({**V1BETA1, "waitForPodsReady": {"enable": True}}, "5m"),  # v1beta1 keeps its own default
    ({**V1BETA1, "waitForPodsReady": {"enable": True, "timeout": "0s"}}, "0s"),
])
def test_the_timeout_defaults_to_30_minutes_under_v1beta2(document: dict | None, timeout: str) -> None:
    """Kueue v0.19 (#11855, ``DefaultWaitForPodsReadyTimeout``): v1beta2 gives an unset or zero ``timeout`` 30
    minutes; a v1beta1 document is defaulted as v1beta1 (5 minutes) before Kueue converts it. The fold and the
    scheduler agree on a recorded document (an enabled v1beta1 one with a zero ``timeout``, which a file may no
    longer have, was recorded by an older kueue-es)."""
    assert recorded_in_force(document).timeout == timeout
    assert load_config(document or {}, strict=False).pods_ready.timeout == timeout
