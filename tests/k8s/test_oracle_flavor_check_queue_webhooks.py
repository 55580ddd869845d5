"""Kueue's own tables for ResourceFlavors, AdmissionChecks and LocalQueues, walked through kueue-es's
validating webhook (:func:`connectors.k8s.validating.refusal`): the same object refused or taken, with the
refusal naming the field Kueue names, and, for a rule of a CRD, the apiserver's answer (422, the rule's
node and ``Invalid value: "<type>"`` for a CEL rule).

Sources (Kueue, ``kubernetes-sigs/kueue``):

* ``pkg/webhooks/resourceflavor_webhook_test.go`` ``TestValidateResourceFlavor`` (and
  ``ValidateResourceFlavor``: node labels, taints, toleration keys) with
  ``apis/kueue/v1beta2/resourceflavor_types.go``'s CEL rules, which
  sit on the ``nodeTaints`` and ``tolerations`` lists and on ``spec`` (their older table's "bad tolerations"
  case, from before those rules moved into the CRD, names the same three tolerations).
* ``pkg/webhooks/admissioncheck_webhook_test.go`` ``TestAdmissionCheckValidation`` /
  ``TestAdmissionCheckUpdateValidation`` (an older webhook; the newest Kueue registers none for
  AdmissionChecks, ``pkg/webhooks/webhooks.go`` ``Setup``, and holds them to ``admissioncheck_types.go``'s
  markers instead).
* ``pkg/webhooks/localqueue_webhook.go`` (newest: no validator; ``localqueue_types.go``'s ``clusterQueue``
  carries ``self == oldSelf``, a transition rule, which the apiserver skips when the old or the new object has
  no value there).
* Kueue #9427 / #13622 / #13738: a TAS flavor (``topologyName`` set) keeps its ``topologyName``; the rest of
  its spec may change.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from connectors.k8s.validating import refusal
from events.field_errors import CEL_NOT_CHECKED

V1B2 = "kueue.x-k8s.io/v1beta2"
EFFECTS = "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'"
NO_KEY = "operator must be Exists when 'key' is empty, which means 'match all values and all keys'"
SECONDS = "effect must be 'NoExecute' when 'tolerationSeconds' is set"
OPERATORS = "supported toleration values: 'Equal'(default), 'Exists'"
EXISTS_VALUE = "a value must be empty when 'operator' is 'Exists'"


def rf(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": V1B2, "kind": "ResourceFlavor", "metadata": {"name": "resource-flavor"},
            "spec": spec}


def ac(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": V1B2, "kind": "AdmissionCheck", "metadata": {"name": "ac"}, "spec": spec}


def lq(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": V1B2, "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": "ns"},
            "spec": spec}


def _refusal(kind: str, new: dict[str, Any], old: dict[str, Any] | None = None) -> str | None:
    return refusal(kind, "UPDATE" if old is not None else "CREATE", copy.deepcopy(new), copy.deepcopy(old),
                   {})


def _tol(**t: Any) -> dict[str, Any]:
    return t


REF = {"apiGroup": "ref.api.group", "kind": "RefKind", "name": "ref-name"}
TAS = rf(nodeLabels={"pool": "a"}, topologyName="default")


# --- ResourceFlavor: TestValidateResourceFlavor and the CRD's rules -----------------------------------------

RF_CASES = {
    "empty": (rf(), None),
    "valid": (rf(nodeLabels={"foo": "bar"},
                 nodeTaints=[{"key": "spot", "value": "true", "effect": "NoSchedule"}]),
              None),
    "invalid label name": (rf(nodeLabels={"@abc": "foo"}), 'field `spec.nodeLabels`: Invalid value: "@abc"'),
    "invalid label value": (rf(nodeLabels={"foo": "@abc"}), 'field `spec.nodeLabels`: Invalid value: "@abc"'),
    # the older table's "bad tolerations", whose operator and effect rules are the CRD's now: those refuse
    # alone, once per rule, at the list (the apiserver calls no webhook after its schema refused)
    "bad tolerations": (rf(tolerations=[
        _tol(key="@abc", operator="Equal", value="v", effect="NoSchedule"),
        _tol(key="abc", operator="Exists", value="v", effect="NoSchedule"),
        _tol(key="abc", operator="Equal", value="v", effect="not-valid"),
        _tol(key="abc", operator="Equal", value="v", effect="NoSchedule")]),
        f'[field `spec.tolerations`: Invalid value: "array": {EXISTS_VALUE}, '
        f'field `spec.tolerations`: Invalid value: "array": {EFFECTS}]'),
    "bad toleration key alone: the webhook's": (
        rf(tolerations=[_tol(key="@abc", operator="Equal", value="v", effect="NoSchedule")]),
        'field `spec.tolerations[0].key`: Invalid value: "@abc"'),
    "a rule broken by two tolerations: one error": (
        rf(tolerations=[_tol(key="a", operator="Exists", value="v"),
                        _tol(key="b", operator="Exists", value="w")]),
        f'field `spec.tolerations`: Invalid value: "array": {EXISTS_VALUE}'),
    "toleration without a key, operator Equal": (
        rf(tolerations=[_tol(operator="Equal", value="v")]),
        f'field `spec.tolerations`: Invalid value: "array": {NO_KEY}'),
    "toleration with an empty key: a key": (rf(tolerations=[_tol(key="", value="v")]), None),
    "tolerationSeconds without NoExecute": (
        rf(tolerations=[_tol(key="a", operator="Exists", effect="NoSchedule", tolerationSeconds=5)]),
        f'field `spec.tolerations`: Invalid value: "array": {SECONDS}'),
    "an empty operator given is none of the two": (
        rf(tolerations=[_tol(key="a", operator="", value="v")]),
        f'field `spec.tolerations`: Invalid value: "array": {OPERATORS}'),
    "an empty effect given is none of the three": (
        rf(tolerations=[_tol(key="a", operator="Exists", effect="")]),
        f'field `spec.tolerations`: Invalid value: "array": {EFFECTS}'),
    "Exists with an empty value given": (rf(tolerations=[_tol(key="a", operator="Exists", value="")]),
                                        f'field `spec.tolerations`: Invalid value: "array": {EXISTS_VALUE}'),
    "the CRD's rule before the webhook's": (
        rf(nodeLabels={"@abc": "foo"}, tolerations=[_tol(operator="Equal", value="v")]),
        f'field `spec.tolerations`: Invalid value: "array": {NO_KEY}'),
    "taint key": (rf(nodeTaints=[{"key": "@abc", "value": "v", "effect": "NoSchedule"}]),
                  'field `spec.nodeTaints[0].key`: Invalid value: "@abc"'),
    "taint value": (rf(nodeTaints=[{"key": "abc", "value": "@v", "effect": "NoSchedule"}]),
                    'field `spec.nodeTaints[0].value`: Invalid value: "@v"'),
    "taints unique by key and effect": (
        rf(nodeTaints=[{"key": "abc", "value": "v", "effect": "NoSchedule"},
                       {"key": "abc", "value": "w", "effect": "NoSchedule"}]),
        "field `spec.nodeTaints[1]`: taints must be unique by key and effect pair"),
    "one key, two effects": (rf(nodeTaints=[{"key": "abc", "effect": "NoSchedule"},
                                            {"key": "abc", "effect": "NoExecute"}]), None),
    "taint effect unknown": (rf(nodeTaints=[{"key": "abc", "effect": "Bad"}]),
                             f'field `spec.nodeTaints`: Invalid value: "array": {EFFECTS}'),
    "taint effect empty": (rf(nodeTaints=[{"key": "abc", "effect": ""}]),
                           f'field `spec.nodeTaints`: Invalid value: "array": {EFFECTS}'),
    "topologyName without nodeLabels": (
        rf(topologyName="default"),
        'field `spec`: Invalid value: "object": at least one nodeLabel is required when topology is set'),
    "too many tolerations: the CEL rules wait (the apiserver skips them after a too-many error)": (
        rf(tolerations=[_tol(key=f"k{i}", operator="Exists", value="v") for i in range(9)]),
        f"[field `spec.tolerations` must have at most 8 items, has 9, {CEL_NOT_CHECKED}]"),
    "topologyName not a DNS subdomain": (rf(topologyName="Bad_Name", nodeLabels={"a": "b"}),
                                         'field `spec.topologyName`: Invalid value: "Bad_Name"'),
}


@pytest.mark.parametrize("name", list(RF_CASES))
def test_resource_flavor(name: str) -> None:
    doc, want = RF_CASES[name]
    got = _refusal("ResourceFlavor", doc)
    if want is None:
        assert got is None
    else:
        assert got is not None and got.startswith(f"ResourceFlavor resource-flavor: {want}"), got


# --- ResourceFlavor: a TAS flavor's updates (Kueue #9427, #13622, #13738) -----------------------------------

TAS_UPDATES = {
    "topologyName changed": (rf(nodeLabels={"pool": "a"}, topologyName="other"), True),
    "topologyName removed": (rf(nodeLabels={"pool": "a"}), True),
    "resourceWeights added (#9427: a field past the topology's may change)": (
        rf(nodeLabels={"pool": "a"}, topologyName="default", resourceWeights={"cpu": "2"}), False),
    "nodeLabels changed (#13738)": (rf(nodeLabels={"pool": "b"}, topologyName="default"), False),
    "nodeTaints and tolerations changed (#9427, #13622)": (
        rf(nodeLabels={"pool": "a"}, topologyName="default",
           nodeTaints=[{"key": "k", "effect": "NoSchedule"}],
           tolerations=[{"key": "k", "operator": "Exists"}]), False),
}


@pytest.mark.parametrize("name", list(TAS_UPDATES))
def test_a_tas_flavor_keeps_its_topology_name(name: str) -> None:
    new, refused = TAS_UPDATES[name]
    got = _refusal("ResourceFlavor", new, TAS)
    assert (got is not None) is refused, got
    if refused:
        assert "field `spec`: Invalid value: \"object\":" in got and "topologyName" in got


def test_a_flavor_may_become_a_tas_flavor() -> None:
    plain = rf(nodeLabels={"pool": "a"})
    assert _refusal("ResourceFlavor", TAS, plain) is None


# --- AdmissionCheck: TestAdmissionCheckValidation, TestAdmissionCheckUpdateValidation -----------------------

AC_CASES = {
    "no controller name": (ac(parameters=REF), "spec.controllerName"),
    "bad ref api group": (ac(controllerName="controller-name",
                             parameters={**REF, "apiGroup": "ref.api.group/Bad"}),
                          "spec.parameters.apiGroup"),
    "no ref api group": (ac(controllerName="controller-name",
                            parameters={"kind": "RefKind", "name": "ref-name"}),
                         "spec.parameters.apiGroup"),
    "bad ref kind": (ac(controllerName="controller-name", parameters={**REF, "kind": "RefKind/Bad"}),
                     "spec.parameters.kind"),
    "no ref kind": (ac(controllerName="controller-name",
                       parameters={"apiGroup": "ref.api.group", "name": "ref-name"}),
                    "spec.parameters.kind"),
    "bad ref name": (ac(controllerName="controller-name", parameters={**REF, "name": "ref-name/Bad"}),
                     "spec.parameters.name"),
    "no ref name": (ac(controllerName="controller-name",
                       parameters={"apiGroup": "ref.api.group", "kind": "RefKind"}),
                    "spec.parameters.name"),
    "no parameters": (ac(controllerName="controller-name"), None),
    "valid": (ac(controllerName="controller-name", parameters=REF), None),
    "mixed-case kind (the CRD's (?i) pattern)": (ac(controllerName="c",
                                                    parameters={**REF, "kind": "rEfKiNd"}), None),
    "controllerName over 253 characters": (ac(controllerName="c" * 254), "spec.controllerName"),
}


@pytest.mark.parametrize("name", list(AC_CASES))
def test_admission_check(name: str) -> None:
    doc, field = AC_CASES[name]
    got = _refusal("AdmissionCheck", doc)
    if field is None:
        assert got is None
    else:
        assert got is not None and got.startswith(f"AdmissionCheck ac: field `{field}`"), got


OLD_AC = ac(controllerName="controller-name", parameters=REF)
AC_UPDATES = {
    "can change parameters": (ac(controllerName="controller-name", parameters={
        "apiGroup": "ref.api.group2", "kind": "RefKind2", "name": "ref-name2"}), None),
    "can remove parameters": (ac(controllerName="controller-name"), None),
    "cannot break parameters": (ac(controllerName="controller-name", parameters={
        "apiGroup": "ref.api.group", "kind": "RefKind"}), "field `spec.parameters.name`"),
    "cannot change the controller": (ac(controllerName="controller-name2", parameters=REF),
                                     'field `spec.controllerName`: Invalid value: "string": field is '
                                     'immutable'),
}


@pytest.mark.parametrize("name", list(AC_UPDATES))
def test_admission_check_update(name: str) -> None:
    new, want = AC_UPDATES[name]
    got = _refusal("AdmissionCheck", new, OLD_AC)
    if want is None:
        assert got is None
    else:
        assert got is not None and got.startswith(f"AdmissionCheck ac: {want}"), got


# --- LocalQueue: localqueue_types.go ------------------------------------------------------------------------

LQ_CASES = {
    "a cluster queue": (lq(clusterQueue="cq"), None),
    "no cluster queue (optional)": (lq(), None),
    "an empty cluster queue given (ClusterQueueReference's pattern refuses it)": (lq(clusterQueue=""),
                                                                                 "field `spec.clusterQueue`"),
    "a cluster queue name that is no DNS subdomain": (lq(clusterQueue="Bad_CQ"), "field `spec.clusterQueue`"),
    "a cluster queue name over 253 characters": (lq(clusterQueue="a" * 254), "field `spec.clusterQueue`"),
    "an unknown stop policy": (lq(clusterQueue="cq", stopPolicy="Stop"), "field `spec.stopPolicy`"),
    "stop policy Hold": (lq(clusterQueue="cq", stopPolicy="HoldAndDrain"), None),
}


@pytest.mark.parametrize("name", list(LQ_CASES))
def test_local_queue(name: str) -> None:
    doc, want = LQ_CASES[name]
    got = _refusal("LocalQueue", doc)
    if want is None:
        assert got is None
    else:
        assert got is not None and got.startswith(f"LocalQueue ns/lq: {want}"), got


LQ_UPDATES = {
    "clusterQueue changed": (lq(clusterQueue="cq"), lq(clusterQueue="cq2"), True),
    "clusterQueue set where there was none (the transition rule is skipped)": (lq(), lq(clusterQueue="cq2"),
                                                                               False),
    "clusterQueue removed (the transition rule is skipped)": (lq(clusterQueue="cq"), lq(), False),
    "stopPolicy changed": (lq(clusterQueue="cq"), lq(clusterQueue="cq", stopPolicy="HoldAndDrain"), False),
}


@pytest.mark.parametrize("name", list(LQ_UPDATES))
def test_local_queue_update(name: str) -> None:
    old, new, refused = LQ_UPDATES[name]
    got = _refusal("LocalQueue", new, old)
    if refused:
        assert got == ('LocalQueue ns/lq: field `spec.clusterQueue`: Invalid value: "string": field is '
                       'immutable')
    else:
        assert got is None


def test_a_flavor_s_cel_rules_left_unchecked_are_said_so() -> None:
    # apiextensions-apiserver's hasBlockingErr: a TooMany error stops the CEL rules (the tolerations'
    # rule on a keyless toleration with a value is not checked), and the apiserver lists its "not checked"
    # line last
    doc = rf(tolerations=[_tol(key=f"k{i}", operator="Exists") for i in range(8)] + [_tol(value="v")])
    got = _refusal("ResourceFlavor", doc)
    assert got == ("ResourceFlavor resource-flavor: [field `spec.tolerations` must have at most 8 items, "
                   f"has 9, {CEL_NOT_CHECKED}]")
