"""Kueue's Workload webhook under ``TASReplaceMultipleFailedNodes`` (alpha, off): the
``kueue.x-k8s.io/tas-unhealthy-nodes-eviction-threshold`` annotation is a whole number from 1 to 8, refused with
field.Invalid on ``metadata.annotations[KEY]`` otherwise; an update that leaves an invalid value as it was passes.
Off, nothing is looked at. (Kueue's TestValidateWorkloadUnhealthyNodesEvictionThreshold, each case both ways.)"""

from __future__ import annotations

import copy

import pytest

from connectors.k8s.validating import refusal
from events.errors import InvalidInput
from events.manifests import Checks, decode_object
from events.unhealthy_threshold import UNHEALTHY_NODES_THRESHOLD_ANNOTATION as KEY

GATE = "TASReplaceMultipleFailedNodes"
ABSENT = object()


def _wl(value: object = ABSENT, *, unhealthy: tuple[str, ...] = (), finalizer: bool = False) -> dict:
    meta: dict = {"name": "w", "namespace": "team"}
    if value is not ABSENT:
        meta["annotations"] = {KEY: value}
    if finalizer:
        meta["finalizers"] = ["kueue.x-k8s.io/resource-in-use"]
    doc: dict = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": meta,
                 "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                     "containers": [{"name": "c", "image": "busybox"}]}}}]}}
    if unhealthy:
        doc["status"] = {"unhealthyNodes": [{"name": n} for n in unhealthy]}
    return doc


def _invalid(value: str) -> str:
    return f'Workload team/w: field `metadata.annotations[{KEY}]`: Invalid value: "{value}": ' \
           "must be an integer between 1 and 8"


CASES = {
    "create without annotation": (None, _wl(), None),
    "create with minimum threshold": (None, _wl("1"), None),
    "create with intermediate threshold": (None, _wl("3"), None),
    "create with maximum threshold": (None, _wl("8"), None),
    "create with zero": (None, _wl("0"), "0"),
    "create with negative threshold": (None, _wl("-1"), "-1"),
    "create above maximum": (None, _wl("9"), "9"),
    "create with empty value": (None, _wl(""), ""),
    "create with non-numeric value": (None, _wl("many"), "many"),
    "create with fractional value": (None, _wl("1.5"), "1.5"),
    "create with whitespace": (None, _wl(" 2 "), " 2 "),
    "create with overflowing integer": (None, _wl("99999999999999999999"), "99999999999999999999"),
    "add a valid annotation": (_wl(), _wl("2"), None),
    "add an empty annotation": (_wl(), _wl(""), ""),
    "change a valid annotation to an invalid value": (_wl("2"), _wl("9"), "9"),
    "change a legacy invalid annotation to another invalid value": (_wl("many"), _wl("0"), "0"),
    "correct a legacy invalid annotation": (_wl("many"), _wl("2"), None),
    "remove a legacy invalid annotation": (_wl("many"), _wl(), None),
    "remove a valid annotation": (_wl("2"), _wl(), None),
    "update status with an unchanged legacy invalid annotation": (
        _wl("many"), _wl("many", unhealthy=("node1", "node2")), None),
    "update status with an unchanged legacy empty annotation": (_wl(""), _wl("", unhealthy=("node1", "node2")), None),
    "remove finalizers with an unchanged legacy invalid annotation": (_wl("many", finalizer=True), _wl("many"), None),
    "status unhealthy nodes may exceed the annotation threshold": (
        _wl("1"), _wl("1", unhealthy=("node1", "node2")), None),
    "lower threshold below the current unhealthy node count": (
        _wl("2", unhealthy=("node1", "node2")), _wl("1", unhealthy=("node1", "node2")), None),
}


@pytest.mark.parametrize("on", [True, False], ids=["gate enabled", "gate disabled"])
@pytest.mark.parametrize("name", list(CASES))
def test_webhook_validates_the_threshold_annotation(name: str, on: bool) -> None:
    old, new, bad = CASES[name]
    op = "UPDATE" if old is not None else "CREATE"
    got = refusal("Workload", op, copy.deepcopy(new), copy.deepcopy(old), {GATE: on})
    assert got == (_invalid(bad) if on and bad is not None else None)


@pytest.mark.parametrize(("value", "on", "refused"), [
    ("many", True, True), ("", True, True), ("4", True, False), ("many", False, False)])
def test_a_manifest_workload_is_held_to_it_under_the_gate(value: str, on: bool, refused: bool) -> None:
    """A STATE.yaml or imported Workload is a create: the check applies under the gate, whatever else it holds."""
    checks = Checks.under(lambda gate: on and gate == GATE)
    if refused:
        with pytest.raises(InvalidInput, match="must be an integer between 1 and 8"):
            decode_object(_wl(value), "Workload team/w", checks=checks)
    else:
        decode_object(_wl(value), "Workload team/w", checks=checks)
