"""The admission gate annotation's form on every object Kueue's webhooks check it on, under ``AdmissionGatedBy``
(beta, on): as Kueue's shared validator (``pkg/util/webhook/validation_admissiongatedby.go``), a job, set or Pod
created with an ill-formed ``kueue.x-k8s.io/admission-gated-by`` is refused with every problem of it, an update
may only remove gates and what is left is checked again; a Deployment too (Kueue's #9792). With the gate off the
annotation is not looked at, whatever it holds."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from typing import Any

import msgspec
import pytest
from test_job_validation_review import job
from test_lws_reconcile import raw_lws
from test_pod_validation_review import pod

from connectors.k8s import (
    appwrapper_webhook,
    job_validation,
    jobset_webhook,
    kubeflow_webhook,
    lws_webhook,
    mpijob_webhook,
    pod_validation,
    ray_webhook,
    spark_webhook,
    trainjob_webhook,
)
from connectors.k8s import deployment_webhook as dw
from connectors.k8s import statefulset_webhook as sw
from connectors.k8s.kubeflow import PYTORCHJOB
from kueue_es.scheduler.config import load_config

GATE = "kueue.x-k8s.io/admission-gated-by"
AT = f"metadata.annotations[{GATE}]"
ON, OFF = {"AdmissionGatedBy": True}, {"AdmissionGatedBy": False}
Q = {"kueue.x-k8s.io/queue-name": "lq"}
BAD = "this is an invalid value"
BAD_ERROR = f'{AT}: Invalid value: "{BAD}": must be a domain-prefixed path (such as "acme.io/foo")'
ADDED = f"{AT}: Forbidden: cannot add admission gate after creation"
NEW_ONE = f"{AT}: Forbidden: can only remove gates, not add new ones"

Create = Callable[[dict[str, Any], dict[str, bool]], list[str]]
Update = Callable[[dict[str, Any], dict[str, Any], dict[str, bool]], list[str]]


def _meta(kind: str, api: str, spec: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"apiVersion": api, "kind": kind, "metadata": {"name": "x", "namespace": "team", "labels": dict(Q)},
            "spec": spec or {}}


def _deployment() -> dict[str, Any]:
    return _meta("Deployment", "apps/v1", {"replicas": 1, "template": {"spec": {"containers": [{"name": "c"}]}}})


def _statefulset() -> dict[str, Any]:
    return _meta("StatefulSet", "apps/v1", {"replicas": 1, "serviceName": "x",
                                            "template": {"spec": {"containers": [{"name": "c"}]}}})


def _labelled_job() -> dict[str, Any]:
    return job(dict(Q))


def _lws() -> dict[str, Any]:
    return raw_lws(replicas=1)


def _pod() -> dict[str, Any]:
    return pod(dict(Q))


# name -> (object, create rules, update rules)
INTEGRATIONS: dict[str, tuple[Callable[[], dict[str, Any]], Create, Update]] = {
    "Job": (_labelled_job, job_validation.create_errors, job_validation.update_errors),
    "JobSet": (lambda: _meta("JobSet", "jobset.x-k8s.io/v1alpha2"), jobset_webhook.create_errors,
               jobset_webhook.update_errors),
    "MPIJob": (lambda: _meta("MPIJob", "kubeflow.org/v2beta1"), mpijob_webhook.create_errors,
               mpijob_webhook.update_errors),
    "PyTorchJob": (lambda: _meta("PyTorchJob", "kubeflow.org/v1"),
                   lambda o, fg: kubeflow_webhook.create_errors(PYTORCHJOB, o, fg),
                   lambda old, new, fg: kubeflow_webhook.update_errors(PYTORCHJOB, old, new, fg)),
    "RayJob": (lambda: _meta("RayJob", "ray.io/v1", {"shutdownAfterJobFinishes": True, "rayClusterSpec": {}}), ray_webhook.rayjob_kind().create_errors,
               lambda old, new, fg: ray_webhook.rayjob_kind().update_errors(old, new, fg, False)),
    "RayCluster": (lambda: _meta("RayCluster", "ray.io/v1"), ray_webhook.raycluster_kind().create_errors,
                   lambda old, new, fg: ray_webhook.raycluster_kind().update_errors(old, new, fg, False)),
    "RayService": (lambda: _meta("RayService", "ray.io/v1", {"rayClusterConfig": {}, "upgradeStrategy": {"type": "None"}}),
                   ray_webhook.rayservice_kind().create_errors,
                   lambda old, new, fg: ray_webhook.rayservice_kind().update_errors(old, new, fg, False)),
    "AppWrapper": (lambda: _meta("AppWrapper", "workload.codeflare.dev/v1beta2"), appwrapper_webhook.create_errors,
                   appwrapper_webhook.update_errors),
    "TrainJob": (lambda: _meta("TrainJob", "trainer.kubeflow.org/v1alpha1"), trainjob_webhook.create_errors,
                 trainjob_webhook.update_errors),
    "SparkApplication": (lambda: _meta("SparkApplication", "sparkoperator.k8s.io/v1beta2"),
                         spark_webhook.create_errors, spark_webhook.update_errors),
    "Pod": (_pod, pod_validation.create_errors, pod_validation.update_errors),
    "StatefulSet": (_statefulset, sw.create_errors, sw.update_errors),
    "Deployment": (_deployment, dw.create_errors, dw.update_errors),
    "LeaderWorkerSet": (_lws, lws_webhook.create_errors, lws_webhook.update_errors),
}


def _with_gate(obj: dict[str, Any], gate: str | None) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    annotations = out["metadata"].setdefault("annotations", {})
    annotations.pop(GATE, None)
    if gate is not None:
        annotations[GATE] = gate
    return out


@pytest.mark.parametrize("name", INTEGRATIONS)
def test_an_ill_formed_admission_gate_is_refused_at_creation_only_under_the_gate(name: str) -> None:
    make, create, _ = INTEGRATIONS[name]
    plain = create(_with_gate(make(), None), ON)
    assert BAD_ERROR not in plain
    assert sorted(create(_with_gate(make(), BAD), ON)) == sorted([*plain, BAD_ERROR])
    assert create(_with_gate(make(), BAD), OFF) == create(_with_gate(make(), None), OFF)
    for good in ("example.com/a", " example.com/a , example.com/b ", "", "  "):
        assert create(_with_gate(make(), good), ON) == plain


@pytest.mark.parametrize("name", INTEGRATIONS)
def test_an_admission_gate_is_never_added_on_update_and_what_is_left_is_checked(name: str) -> None:
    make, _, update = INTEGRATIONS[name]
    base = make()
    plain = update(_with_gate(base, None), _with_gate(base, None), ON)
    assert update(_with_gate(base, None), _with_gate(base, "example.com/a"), ON).count(ADDED) == 1
    assert ADDED not in update(_with_gate(base, None), _with_gate(base, "example.com/a"), OFF)
    assert update(_with_gate(base, "example.com/a,example.com/b"), _with_gate(base, "example.com/b"), ON) == plain
    # created while the gate was off: an ill-formed gate is refused once it is on, even unchanged, and once (the
    # webhooks that run the create rules on the new object too check the form only once)
    assert sorted(update(_with_gate(base, BAD), _with_gate(base, BAD), ON)) == sorted([*plain, BAD_ERROR])
    assert BAD_ERROR not in update(_with_gate(base, BAD), _with_gate(base, BAD), OFF)


@pytest.mark.parametrize("name", INTEGRATIONS)
def test_an_added_gate_is_decided_on_the_raw_annotation_as_kueue_does(name: str) -> None:
    """Kueue compares the raw values: any non-empty value (a blank one too) given to an object whose annotation
    was missing or empty is an added gate; a gate given to one whose annotation was blank (naming none) is a new
    gate beside the old ones, not an added annotation."""
    make, _, update = INTEGRATIONS[name]
    base = make()
    plain = update(_with_gate(base, None), _with_gate(base, None), ON)
    for before in (None, ""):
        assert sorted(update(_with_gate(base, before), _with_gate(base, "  "), ON)) == sorted([*plain, ADDED])
    assert sorted(update(_with_gate(base, "  "), _with_gate(base, "example.com/x"), ON)) == sorted([*plain, NEW_ONE])
    assert update(_with_gate(base, "  "), _with_gate(base, " "), ON) == plain
    assert update(_with_gate(base, "example.com/x"), _with_gate(base, "  "), ON) == plain
    assert update(_with_gate(base, None), _with_gate(base, "  "), OFF) == update(base, base, OFF)


def test_every_problem_of_the_annotation_is_reported_in_kueues_order() -> None:
    value = "Bad_Host.com/a b,example.com/ok,example.com/ok,,x.io/" + "g" * 60
    errors = job_validation.gate_create(_with_gate(_labelled_job(), value), ON)
    assert errors == [
        f'{AT}: Invalid value: "Bad_Host.com": a lowercase RFC 1123 subdomain must consist of lower case '
        "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. "
        "'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        f'{AT}: Invalid value: "a b": Invalid path (regex used for validation is '
        "'[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+')",
        f'{AT}: Invalid value: "{value}": duplicate gate name: example.com/ok',
        f'{AT}: Invalid value: "{value}": cannot contain empty gate names',
        f"{AT}: Too long: may not be more than 63 bytes",
    ]


def _deployment_review(operation: str, new: dict[str, Any], old: dict[str, Any] | None, gate_on: bool
                       ) -> dict[str, Any]:
    config = load_config({"integrations": {"frameworks": ["pod", "deployment"]},
                          "featureGates": {"AdmissionGatedBy": gate_on}})
    reviews = dw.reviewers(dw.ParentDefaulting.of(config, "deployment"), None, None)  # type: ignore[arg-type]
    request = {"uid": "u", "operation": operation, "object": new, **({"oldObject": old} if old else {})}
    return asyncio.run(reviews[dw.VALIDATING_PATH](msgspec.json.encode({"request": request})))["response"]


@pytest.mark.parametrize("gate_on", [True, False])
def test_the_deployment_webhook_holds_the_admission_gate_under_the_gate(gate_on: bool) -> None:
    """The served review reads the Configuration's gate: a Deployment created with an ill-formed gate, or given
    one after creation, is refused under it and allowed without it."""
    created = _deployment_review("CREATE", _with_gate(_deployment(), BAD), None, gate_on)
    assert created["allowed"] is not gate_on
    updated = _deployment_review("UPDATE", _with_gate(_deployment(), "example.com/a"), _deployment(), gate_on)
    assert updated["allowed"] is not gate_on
    if gate_on:
        assert BAD_ERROR in created["status"]["message"]
        assert "cannot add admission gate after creation" in updated["status"]["message"]
    removed = _deployment_review("UPDATE", _deployment(), _with_gate(_deployment(), "example.com/a"), gate_on)
    assert removed["allowed"] is True


@pytest.mark.parametrize("gate_on", [True, False])
def test_the_statefulset_webhook_checks_the_admission_gate_at_creation_under_the_gate(gate_on: bool) -> None:
    config = load_config({"integrations": {"frameworks": ["pod", "statefulset"]},
                          "featureGates": {"AdmissionGatedBy": gate_on}})
    reviews = sw.reviewers(dw.ParentDefaulting.of(config, "statefulset"), None, None)  # type: ignore[arg-type]
    request = {"uid": "u", "operation": "CREATE", "object": _with_gate(_statefulset(), "example.com/a,example.com/a")}
    response = asyncio.run(reviews[sw.VALIDATING_PATH](msgspec.json.encode({"request": request})))["response"]
    assert response["allowed"] is not gate_on
    if gate_on:
        assert "duplicate gate name: example.com/a" in response["status"]["message"]


def test_on_update_the_added_gate_comes_before_the_form_problems_as_kueues_validator() -> None:
    """Kueue's ``ValidateAdmissionGatedByAnnotationOnUpdate`` (``pkg/util/webhook/validation_admissiongatedby.go``):
    a gate added to an object without one, or one the old value did not name, is reported first, then every
    problem of the new value's form, in the create check's order."""
    base = _labelled_job()
    assert job_validation.gate_update(_with_gate(base, None), _with_gate(base, "example.com/a,,example.com/a"), ON) == [
        ADDED,
        f'{AT}: Invalid value: "example.com/a,,example.com/a": cannot contain empty gate names',
        f'{AT}: Invalid value: "example.com/a,,example.com/a": duplicate gate name: example.com/a',
    ]
    assert job_validation.gate_update(_with_gate(base, "example.com/a"), _with_gate(base, "example.com/b,bad"), ON) == [
        NEW_ONE,
        f'{AT}: Invalid value: "bad": must be a domain-prefixed path (such as "acme.io/foo")',
    ]
