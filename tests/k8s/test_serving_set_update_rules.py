"""What Kueue's validating webhooks refuse in the update of a serving set it holds (LeaderWorkerSet, StatefulSet):
the rules they share with every job kind, read against Kueue's newest stored leaderworkerset_webhook_test.go and
statefulset_webhook_test.go (TestValidateUpdate) and jobframework/validation.go."""

from __future__ import annotations

from typing import Any

import pytest

from connectors.k8s import leaderworkerset as lw
from connectors.k8s import statefulset_webhook as sw

Q = "kueue.x-k8s.io/queue-name"
P = "kueue.x-k8s.io/priority-class"
REMOVED = f'metadata.labels[{P}]: Invalid value: "": WorkloadPriorityClass cannot be removed from a workload'


def added(name: str) -> str:
    return f'metadata.labels[{P}]: Invalid value: "{name}": WorkloadPriorityClass cannot be added to a non-suspended workload'


def _containers(cpu: str | None, image: str, env: str | None) -> list[dict[str, Any]]:
    c: dict[str, Any] = {"name": "c", "image": image, "resources": {"requests": {"cpu": cpu} if cpu else {}}}
    if env is not None:
        c["env"] = [{"name": "A", "value": env}]
    return [c]


def _pod_template(cpu: str | None = None, image: str = "pause:0.1.0", env: str | None = None, **spec: Any
                  ) -> dict[str, Any]:
    return {"spec": {"containers": _containers(cpu, image, env),
                     "initContainers": [{"name": "ic", "image": image, "resources": {"requests": {}}}], **spec}}


def lws(labels: dict[str, str], ready: int | None = None, **template: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "metadata": {"name": "test-lws", "namespace": "ns", "labels": labels},
        "spec": {"leaderWorkerTemplate": {"size": 2, "leaderTemplate": _pod_template(**template),
                                          "workerTemplate": _pod_template(**template)}}}
    if ready is not None:
        obj["status"] = {"readyReplicas": ready}
    return obj


def sts(labels: dict[str, str], ready: int | None = None, **template: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {"metadata": {"name": "test-sts", "namespace": "ns", "labels": labels},
                           "spec": {"replicas": 3, "template": _pod_template(**template)}}
    if ready is not None:
        obj["status"] = {"readyReplicas": ready}
    return obj


def lws_update(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    return lw.update_errors(old, new)


def sts_update(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    return sw.update_errors(old, new)


KINDS = [pytest.param(lws, lws_update, id="LeaderWorkerSet"), pytest.param(sts, sts_update, id="StatefulSet")]


# --- the WorkloadPriorityClass label: never removed, not added while a replica is ready -------------------------


@pytest.mark.parametrize(("make", "update"), KINDS)
@pytest.mark.parametrize(("old_labels", "old_ready", "new_labels", "new_ready", "errors"), [
    ({Q: "q", P: "test"}, None, {Q: "q", P: "new-test"}, None, []),
    ({Q: "q"}, 1, {Q: "q", P: "test"}, 1, [added("test")]),
    ({Q: "q", P: "test"}, 1, {Q: "q", P: "new-test"}, 1, []),
    ({Q: "q", P: "test"}, 1, {Q: "q"}, 1, [REMOVED]),
    ({Q: "q"}, None, {Q: "q", P: "test"}, None, []),
    ({Q: "q", P: "test"}, None, {Q: "q", P: "new-test"}, 1, []),
    ({Q: "q", P: "test"}, None, {Q: "q"}, 1, [REMOVED]),
    ({Q: "q", P: "test"}, 0, {Q: "q"}, 0, [REMOVED]),
], ids=["change-suspended", "set-ready", "change-ready", "delete-ready", "set-not-ready", "change-not-ready",
        "delete-not-ready", "delete-zero-ready"])
def test_the_priority_class_label_follows_the_job_kinds_rule_with_no_ready_replica_as_suspended(
        make: Any, update: Any, old_labels: dict[str, str], old_ready: int | None, new_labels: dict[str, str],
        new_ready: int | None, errors: list[str]) -> None:
    """Kueue's cases "set/change/delete priority class when replicas (not) ready" and "... when suspended": a
    serving set is "suspended" while none of its replicas was ready (the old object's ``status.readyReplicas``)."""
    assert update(make(old_labels, old_ready), make(new_labels, new_ready)) == errors


# --- a queued set's pod templates: what admission looks at is fixed, the rest may roll ----------------------------


LWS_PATHS = ["spec.leaderWorkerTemplate.leaderTemplate.spec", "spec.leaderWorkerTemplate.workerTemplate.spec"]


@pytest.mark.parametrize(("make", "update", "paths"), [
    pytest.param(lws, lws_update, LWS_PATHS, id="LeaderWorkerSet"),
    pytest.param(sts, sts_update, ["spec.template.spec"], id="StatefulSet")])
@pytest.mark.parametrize(("old", "new", "field", "value"), [
    ({}, {"cpu": "1"}, "containers[0].resources.requests", '{"cpu":"1"}'),
    ({}, {"nodeSelector": {"zone": "a"}}, "nodeSelector", '{"zone":"a"}'),
    ({"priority": 1}, {"priority": 2}, "priority", "2"),
    ({"runtimeClassName": "a"}, {}, "runtimeClassName", "null"),
], ids=["requests", "node-selector", "priority", "runtime-class"])
def test_a_queued_sets_template_may_not_change_what_admission_looks_at(
        make: Any, update: Any, paths: list[str], old: dict[str, Any], new: dict[str, Any], field: str,
        value: str) -> None:
    """Kueue's "attempt to change resources in container" (StatefulSet) and "change resources in container"
    (LeaderWorkerSet): ``ValidateImmutablePodGroupPodSpec``, each changed field of the role's shape at its own path."""
    errors = update(make({Q: "q"}, **old), make({Q: "q"}, **new))
    assert errors == [f"{p}.{field}: Invalid value: {value}: field is immutable" for p in paths]


@pytest.mark.parametrize(("make", "update"), KINDS)
@pytest.mark.parametrize(("old", "new"), [
    ({"image": "pause:0.1.0"}, {"image": "pause:0.1.1"}),
    ({"env": "1"}, {"env": "2"}),
    ({}, {"serviceAccountName": "sa"}),
], ids=["image", "env", "service-account"])
def test_a_queued_sets_template_may_roll_what_admission_does_not_look_at(
        make: Any, update: Any, old: dict[str, Any], new: dict[str, Any]) -> None:
    """Kueue's "change image" (LeaderWorkerSet): outside the role's shape a serving group may roll."""
    assert update(make({Q: "q"}, **old), make({Q: "q"}, **new)) == []


def test_a_container_added_is_refused_as_the_whole_list() -> None:
    old, new = sts({Q: "q"}), sts({Q: "q"})
    new["spec"]["template"]["spec"]["containers"].append({"name": "d", "image": "pause"})
    assert [e.split(": ")[0] for e in sts_update(old, new)] == ["spec.template.spec.containers"]


def test_a_statefulset_naming_no_queue_changes_its_template_freely() -> None:
    assert sts_update(sts({}), sts({}, cpu="1")) == []
