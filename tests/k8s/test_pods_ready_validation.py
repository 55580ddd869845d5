"""The job webhooks' checks of ``kueue.x-k8s.io/wait-for-pods-ready`` under ``WorkloadLevelWaitForPodsReady``
(alpha, off; KEP-4803): a JSON object with a ``timeoutSeconds`` (and optional ``recoveryTimeoutSeconds``) above 0
and at most ``waitForPodsReady.maxTimeoutOnWorkload`` (2h unset); no change unless the job stays suspended. The
Job, Pod and framework (JobSet) webhooks; the gate off, nothing is refused."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import msgspec
import pytest

from connectors.k8s import jobset_webhook as jw
from connectors.k8s import pod_validation
from connectors.k8s.job_validation import review
from connectors.k8s.pods_ready_validation import PodsReadyRule, value_errors
from kueue_es.scheduler.config import load_config

KEY = "kueue.x-k8s.io/wait-for-pods-ready"
GATE = "WorkloadLevelWaitForPodsReady"
ON = load_config({"featureGates": {GATE: True}})
RULE = PodsReadyRule.of(ON)
PATH = f"metadata.annotations[{KEY}]"


def _job(value: str | None = None, *, suspend: bool = True) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "j", "namespace": "team", "labels": {"kueue.x-k8s.io/queue-name": "lq"}}
    if value is not None:
        meta["annotations"] = {KEY: value}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": {
        "suspend": suspend, "parallelism": 1,
        "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}


def _request(new: dict, old: dict | None) -> bytes:
    request: dict[str, Any] = {"uid": "u", "operation": "UPDATE" if old else "CREATE", "namespace": "team",
                               "object": new}
    if old is not None:
        request["oldObject"] = old
    return msgspec.json.encode({"request": request})


def _job_message(new: dict, old: dict | None = None, rule: PodsReadyRule | None = RULE) -> str | None:
    async def no_default(namespace: str) -> bool:
        return False

    resp = asyncio.run(review(_request(new, old), {}, no_default, pods_ready=rule))["response"]
    return resp["status"]["message"] if not resp["allowed"] else None


def test_the_rule_is_off_without_the_gate_and_reads_max_timeout_on_workload() -> None:
    assert PodsReadyRule.of(load_config({})) is None
    assert PodsReadyRule.of(load_config({"featureGates": {GATE: True, "DisableWaitForPodsReady": True}})) is None
    assert RULE == PodsReadyRule(7200)
    assert PodsReadyRule.of(load_config({"featureGates": {GATE: True},
                                         "waitForPodsReady": {"maxTimeoutOnWorkload": "10m"}})) == PodsReadyRule(600)


@pytest.mark.parametrize("value", ['{"timeoutSeconds": 30}', '{"timeoutSeconds": 30, "recoveryTimeoutSeconds": 40}',
                                   '{"timeoutSeconds": 7200}'])
def test_valid_values_pass(value: str) -> None:
    assert _job_message(_job(value)) is None


@pytest.mark.parametrize(("value", "detail"), [
    ('{"timeoutSeconds":', "must be a JSON object"),
    ("[30]", "must be a JSON object"),
    ('{"recoveryTimeoutSeconds": 40}', "Required value: timeoutSeconds must be set"),
    ('{"timeoutSeconds": 0}', "timeoutSeconds must be a whole number of seconds greater than 0"),
    ('{"timeoutSeconds": -5}', "timeoutSeconds must be a whole number of seconds greater than 0"),
    ('{"timeoutSeconds": "30"}', "timeoutSeconds must be a whole number of seconds greater than 0"),
    ('{"timeoutSeconds": 1.5}', "timeoutSeconds must be a whole number of seconds greater than 0"),
    ('{"timeoutSeconds": 7201}', "timeoutSeconds must not exceed maxTimeoutOnWorkload (7200s)"),
    ('{"timeoutSeconds": 30, "recoveryTimeoutSeconds": 9000}',
     "recoveryTimeoutSeconds must not exceed maxTimeoutOnWorkload (7200s)")])
def test_a_new_job_with_a_bad_value_is_refused(value: str, detail: str) -> None:
    message = _job_message(_job(value))
    assert message is not None and message.startswith(PATH) and detail in message
    assert _job_message(_job(value), rule=None) is None  # the gate off


def test_the_limit_is_the_configurations() -> None:
    short = PodsReadyRule.of(load_config({"featureGates": {GATE: True},
                                          "waitForPodsReady": {"maxTimeoutOnWorkload": "1m"}}))
    assert value_errors('{"timeoutSeconds": 60}', short) == []  # type: ignore[arg-type]
    assert value_errors('{"timeoutSeconds": 61}', short) == [  # type: ignore[arg-type]
        f'{PATH}: Invalid value: "{{\\"timeoutSeconds\\": 61}}": timeoutSeconds must not exceed '
        "maxTimeoutOnWorkload (60s)"]


def test_changed_only_while_suspended() -> None:
    before, after = '{"timeoutSeconds": 30}', '{"timeoutSeconds": 60}'
    assert _job_message(_job(after), _job(before)) is None  # suspended before and after
    for old, new in ((_job(before, suspend=False), _job(after, suspend=False)),
                     (_job(before), _job(after, suspend=False)),  # unsuspended by the same update
                     (_job(None, suspend=False), _job(after, suspend=False)),  # added to a running job
                     (_job(before, suspend=False), _job(None, suspend=False))):  # removed from one
        message = _job_message(new, old)
        assert message is not None and "field is immutable while the job is not suspended" in message
        assert _job_message(new, old, rule=None) is None
    assert _job_message(_job(before, suspend=False), _job(before, suspend=False)) is None  # unchanged


def test_an_update_holds_a_changed_value_as_on_creation_only() -> None:
    assert "must be a JSON object" in (_job_message(_job("nope"), _job('{"timeoutSeconds": 30}')) or "")
    assert _job_message(_job("nope", suspend=False), _job("nope", suspend=False)) is None


def test_the_pod_webhook_checks_it() -> None:
    async def no_default(namespace: str) -> bool:
        return False

    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team", "annotations": {
        KEY: '{"timeoutSeconds": 0}'}}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    resp = asyncio.run(pod_validation.review(_request(pod, None), {}, no_default, pods_ready=RULE))["response"]
    assert not resp["allowed"] and "greater than 0" in resp["status"]["message"]
    resp = asyncio.run(pod_validation.review(_request(pod, None), {}, no_default))["response"]
    assert resp["allowed"]


@pytest.mark.parametrize("on", [True, False])
def test_the_jobset_webhook_checks_it_under_the_gate(on: bool) -> None:
    config: dict[str, Any] = {"integrations": {"frameworks": ["batch/job", "jobset.x-k8s.io/jobset"]}}
    if on:
        config["featureGates"] = {GATE: True}
    settings = jw.JobSetWebhooks.of(load_config(config))

    async def no_default(namespace: str) -> bool:
        return False

    def jobset(value: str, suspend: bool) -> dict:
        return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {
            "name": "js", "namespace": "team", "labels": {"kueue.x-k8s.io/queue-name": "lq"},
            "annotations": {KEY: value}}, "spec": {"suspend": suspend, "replicatedJobs": [
                {"name": "w", "replicas": 1, "template": {"spec": {"template": {"spec": {
                    "containers": [{"name": "c", "image": "busybox"}]}}}}}]}}

    validate = jw.reviewers(settings, None, no_default)[jw.VALIDATING_PATH]  # type: ignore[arg-type]
    created = asyncio.run(validate(_request(jobset('{"timeoutSeconds": 99999}', True), None)))["response"]
    running = jobset('{"timeoutSeconds": 30}', False)
    changed = copy.deepcopy(running)
    changed["metadata"]["annotations"][KEY] = '{"timeoutSeconds": 60}'
    updated = asyncio.run(validate(_request(changed, running)))["response"]
    assert created["allowed"] is not on and updated["allowed"] is not on
    if on:
        assert "maxTimeoutOnWorkload" in created["status"]["message"]
        assert "immutable while the job is not suspended" in updated["status"]["message"]


def test_a_bad_value_is_shown_go_quoted_as_kueues_field_errors_show_it() -> None:
    """The value in the error is quoted as Go's ``%q`` quotes it (``\\x01``), as every Kubernetes field error."""
    (error,) = value_errors("\x01", RULE)  # type: ignore[arg-type]
    assert error.startswith(f'{PATH}: Invalid value: "\\x01": must be a JSON object')
