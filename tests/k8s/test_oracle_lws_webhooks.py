"""Kueue's own unit tests of its LeaderWorkerSet and Deployment webhooks as the oracle (session 47,
oracle-lws).

Each case is named after the Kueue test case it translates:

* ``pkg/controller/jobs/leaderworkerset/leaderworkerset_webhook_test.go`` (the v1beta2 version with
  ``AdmissionGatedBy`` and ``LWSImmutableGroupSize`` cases): ``TestDefault``, ``TestValidateCreate``,
  ``TestValidateUpdate``;
* ``pkg/controller/jobs/deployment/deployment_webhook_test.go`` (the v1beta2 version with the "... when
  replicas ready" priority-class cases): ``TestValidateUpdate``;
* ``pkg/controller/jobs/statefulset/statefulset_webhook_test.go`` (the v1beta2 version whose ``Default`` only
  annotates the template): the ``TestValidateUpdate`` cases kueue-es's StatefulSet model shares (not those of
  a set owned by a Kueue-managed parent, managed by another framework, or blocked by its Workload's existence:
  see /work/notes/s47/oracle-lws.md).

Kueue compares a validation error by its type and field path only (``cmpopts.IgnoreFields(field.Error{},
"BadValue", "Detail")``), so these tests compare ``(path, type)`` pairs too; a defaulting case compares the
pod templates Kueue's ``Default`` leaves.
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import msgspec
import pytest
from patchhelp import patched

from connectors.k8s import deployment_webhook as dw
from connectors.k8s import lws_webhook as lwh
from connectors.k8s import statefulset_webhook as sw
from kueue_es.scheduler.config import load_config

Q = "kueue.x-k8s.io/queue-name"
WPC = "kueue.x-k8s.io/priority-class"
PARENT = "kueue.x-k8s.io/pod-suspending-parent"
SERVING = "kueue.x-k8s.io/pod-group-serving"
OFFSET = "kueue.x-k8s.io/pod-index-offset"
GROUP = "kueue.x-k8s.io/podset-group-name"
ELASTIC = "kueue.x-k8s.io/elastic-job"
HELD = {PARENT: "leaderworkerset", SERVING: "true"}
FRAMEWORKS = ["batch/job", "pod", "leaderworkerset.x-k8s.io/leaderworkerset"]
ON = lwh.LeaderWorkerSetWebhooks.of(load_config({"integrations": {"frameworks": FRAMEWORKS}}))
QUEUE_PATH = f"metadata.labels[{Q}]"
WPC_PATH = f"metadata.labels[{WPC}]"


# --- helpers ------------------------------------------------------------------------------------------------


def _fields(errors: list[str]) -> list[tuple[str, str]]:
    """``(field path, error type)`` of each error, as Kueue's tests compare them."""
    out = []
    for error in errors:
        path, _, rest = error.partition(": ")
        kind = rest.split(":", 1)[0]
        out.append((path, {"Invalid value": "Invalid", "Forbidden": "Forbidden",
                           "Required value": "Required"}.get(kind, kind)))
    return out


def _template(meta: dict[str, Any] | None = None, image: str = "pause", cpu: str | None = None,
              init_cpu: str | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "c", "image": image, "resources": {"requests": {}}}
    init: dict[str, Any] = {"name": "ic", "image": image, "resources": {"requests": {}}}
    if cpu:
        container["resources"]["requests"]["cpu"] = cpu
    if init_cpu:
        init["resources"]["requests"]["cpu"] = init_cpu
    out: dict[str, Any] = {"spec": {"containers": [container], "initContainers": [init]}}
    if meta is not None:
        out["metadata"] = meta
    return out


def _lws(queue: str | None = None, *, leader: dict[str, Any] | None = None,
         worker: dict[str, Any] | None = None,
         labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
         replicas: int | None = None, size: int | None = None, ready: int = 0, namespace: str = "default"
         ) -> dict[str, Any]:
    """Kueue's ``MakeLeaderWorkerSet``: a worker template, a leader template when given, no queue unless
    named."""
    meta: dict[str, Any] = {"name": "test-lws", "namespace": namespace,
                            "labels": {**({Q: queue} if queue else {}), **(labels or {})}}
    if annotations:
        meta["annotations"] = annotations
    lwt: dict[str, Any] = {"workerTemplate": worker if worker is not None else _template()}
    if leader is not None:
        lwt["leaderTemplate"] = leader
    if size is not None:
        lwt["size"] = size
    spec: dict[str, Any] = {"leaderWorkerTemplate": lwt}
    if replicas is not None:
        spec["replicas"] = replicas
    out = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": meta,
           "spec": spec}
    if ready:
        out["status"] = {"readyReplicas": ready}
    return out


def _defaulted(lws: dict[str, Any], *, default_queue: bool) -> dict[str, Any]:
    """The LeaderWorkerSet as Kueue's mutating webhook leaves it (a ``default`` LocalQueue or not)."""
    async def namespace_labels(name: str) -> dict[str, str]:
        return {"kubernetes.io/metadata.name": name}

    async def has_default_queue(name: str) -> bool:
        return default_queue

    reviews = lwh.reviewers(ON, namespace_labels, has_default_queue)
    body = msgspec.json.encode({"request": {"uid": "u", "operation": "CREATE", "namespace": "default",
                                            "object": lws}})
    response = asyncio.run(reviews[lwh.MUTATING_PATH](body))["response"]
    assert response["allowed"]
    ops = msgspec.json.decode(base64.b64decode(response["patch"])) if "patch" in response else []
    return patched(lws, ops)


def _meta_of(lws: dict[str, Any], which: str) -> dict[str, Any]:
    return lws["spec"]["leaderWorkerTemplate"][which].get("metadata", {})


# --- leaderworkerset_webhook_test.go: TestDefault -----------------------------------------------------------


def _marks(labels: dict[str, str], annotations: dict[str, str]) -> dict[str, Any]:
    return {k: v for k, v in (("labels", labels), ("annotations", annotations)) if v}


DEFAULT_CASES = [
    pytest.param(_lws(leader={}, labels={WPC: "high-priority"}), True,
                 _marks({Q: "default", WPC: "high-priority"}, HELD),
                 _marks({Q: "default", WPC: "high-priority"}, {**HELD, OFFSET: "1"}),
                 id="LeaderWorkerSet with WorkloadPriorityClass"),
    pytest.param(_lws(leader={}), True, _marks({Q: "default"}, HELD),
                 _marks({Q: "default"}, {**HELD, OFFSET: "1"}),
                 id="default lq is created, job doesn't have queue label"),
    pytest.param(_lws("test-queue", leader={}, namespace=""), True, _marks({Q: "test-queue"}, HELD),
                 _marks({Q: "test-queue"}, {**HELD, OFFSET: "1"}),
                 id="default lq is created, job has queue label"),
    pytest.param(_lws(leader={}, namespace=""), False, {}, {},
                 id="default lq isn't created, job doesn't have queue label"),
    pytest.param(_lws(), True, None, _marks({Q: "default"}, HELD),
                 id="worker-only LWS (no leader template), no offset annotation"),
    pytest.param(_lws("test-queue", leader=_template({"labels": {Q: "user-queue"}}),
                      worker=_template({"labels": {Q: "user-queue"}})), True,
                 _marks({Q: "test-queue"}, HELD), _marks({Q: "test-queue"}, {**HELD, OFFSET: "1"}),
                 id="queue-name on templates overridden by top-level queue"),
    pytest.param(_lws("test-queue", worker=_template({"labels": {Q: "user-queue"}})), True, None,
                 _marks({Q: "test-queue"}, HELD),
                 id="queue-name on worker template overridden when no leader template"),
    pytest.param(_lws(leader={}, worker=_template({"annotations": {GROUP: "test-group"}})), True,
                 _marks({Q: "default"}, HELD), _marks({Q: "default"}, {GROUP: "test-group", **HELD}),
                 id="LWS with PodSetGroupName set, no offset annotation"),
]


@pytest.mark.parametrize(("lws", "default_queue", "leader", "worker"), DEFAULT_CASES)
def test_lws_default(lws: dict[str, Any], default_queue: bool, leader: dict[str, Any] | None,
                     worker: dict[str, Any]) -> None:
    """Kueue's ``Default`` gives a held set's pod templates the set's queue name (overriding theirs), its
    WorkloadPriorityClass label and the held/serving annotations (and, the workers of a set with a leader
    outside a pod-set group, ``pod-index-offset: "1"``)."""
    out = _defaulted(lws, default_queue=default_queue)
    if leader is not None:
        assert _meta_of(out, "leaderTemplate") == leader
    else:
        assert "leaderTemplate" not in out["spec"]["leaderWorkerTemplate"]
    assert _meta_of(out, "workerTemplate") == worker


# --- leaderworkerset_webhook_test.go: TestValidateCreate ----------------------------------------------------


CREATE_CASES = [
    pytest.param(_lws(leader={}), {}, [], id="without queue"),
    pytest.param(_lws("test-queue", leader={}), {}, [], id="valid queue name"),
    pytest.param(_lws("test-queue", leader={}, replicas=-1), {}, [("spec.replicas", "Invalid")],
                 id="negative replicas"),
    pytest.param(_lws("test-queue", leader={}, replicas=1_000_001), {}, [("spec.replicas", "Invalid")],
                 id="replicas above maximum"),
    pytest.param(_lws("test-queue", leader={}, replicas=1_000_000), {}, [],
                 id="replicas at the maximum (boundary)"),
    pytest.param(_lws("test-queue", leader={}, replicas=0), {}, [], id="zero replicas (boundary)"),
    pytest.param(_lws("test/queue", leader={}), {}, [(QUEUE_PATH, "Invalid")], id="invalid queue name"),
    pytest.param(_lws("test-queue", leader={}, annotations={ELASTIC: "true"}),
                 {"ElasticJobsViaWorkloadSlices": True}, [(f"metadata.annotations[{ELASTIC}]", "Forbidden")],
                 id="elastic job annotation is rejected"),
    pytest.param(_lws("test-queue", leader={}, annotations={ELASTIC: "true"}),
                 {"ElasticJobsViaWorkloadSlices": False}, [],
                 id="elastic job annotation, the gate off (kueue-es: not looked at)"),
]


@pytest.mark.parametrize(("lws", "feature_gates", "want"), CREATE_CASES)
def test_lws_validate_create(lws: dict[str, Any], feature_gates: dict[str, bool],
                             want: list[tuple[str, str]]) -> None:
    assert _fields(lwh.create_errors(lws, feature_gates)) == want


# --- leaderworkerset_webhook_test.go: TestValidateUpdate ----------------------------------------------------

HELD_ONLY = {"annotations": {PARENT: "leaderworkerset"}}
LEADER_PATH = "spec.leaderWorkerTemplate.leaderTemplate"
WORKER_PATH = "spec.leaderWorkerTemplate.workerTemplate"
GATE_ON = {"LWSImmutableGroupSize": True}

UPDATE_CASES = [
    pytest.param(_lws("test-queue", leader=_template(HELD_ONLY), worker=_template(HELD_ONLY)),
                 _lws("test-queue", leader=_template(HELD_ONLY), worker=_template(HELD_ONLY)), {}, [],
                 id="no changes"),
    pytest.param(_lws("test-queue", leader={}), _lws("new-test-queue", leader={}), {}, [],
                 id="change queue name when suspended"),
    pytest.param(_lws("test-queue", leader={}), _lws("test-queue", leader={}, replicas=-1), {},
                 [("spec.replicas", "Invalid")], id="set invalid replicas"),
    pytest.param(_lws("test-queue", leader={}), _lws("test-queue", leader={}, replicas=1_000_001), {},
                 [("spec.replicas", "Invalid")], id="set replicas above maximum"),
    pytest.param(_lws("test-queue", leader={}, size=2), _lws("test-queue", leader={}, size=10), GATE_ON,
                 [("spec.leaderWorkerTemplate.size", "Invalid")], id="change size when managed"),
    pytest.param(_lws("test-queue", leader={}, size=2), _lws("test-queue", leader={}, size=10),
                 {"LWSImmutableGroupSize": False}, [],
                 id="change size when managed and the feature gate is disabled"),
    pytest.param(_lws("test-queue", leader={}, size=2), _lws("test-queue", leader={}, size=2), GATE_ON, [],
                 id="same size when managed"),
    pytest.param(_lws(leader={}, size=2), _lws(leader={}, size=10), {}, [], id="change size when unmanaged"),
    pytest.param(_lws("test-queue", leader={}, ready=1), _lws("new-test-queue", leader={}), {},
                 [(QUEUE_PATH, "Invalid")], id="change queue name when replicas ready"),
    pytest.param(_lws("test-queue", leader={}), _lws(leader={}), {}, [(QUEUE_PATH, "Invalid")],
                 id="delete queue name"),
    pytest.param(_lws("test-queue", leader={}), _lws("test/queue", leader={}), {}, [(QUEUE_PATH, "Invalid")],
                 id="change to an invalid queue name when suspended (ValidateUpdate runs validateCreate "
                    "on the new set)"),
    pytest.param(_lws("test-queue", leader={}, labels={WPC: "test"}),
                 _lws("test-queue", leader={}, labels={WPC: "new-test"}), {}, [],
                 id="change priority class when suspended"),
    pytest.param(_lws("test-queue", leader={}, ready=1),
                 _lws("test-queue", leader={}, labels={WPC: "test"}, ready=1),
                 {}, [(WPC_PATH, "Invalid")], id="set priority class when replicas ready"),
    pytest.param(_lws("test-queue", leader={}, labels={WPC: "test"}, ready=1),
                 _lws("test-queue", leader={}, labels={WPC: "new-test"}, ready=1), {}, [],
                 id="change priority class when replicas ready"),
    pytest.param(_lws("test-queue", leader={}, labels={WPC: "test"}, ready=1),
                 _lws("test-queue", leader={}, ready=1), {}, [(WPC_PATH, "Invalid")],
                 id="delete priority class when replicas ready"),
    pytest.param(_lws("test-queue", leader={}), _lws("test-queue", leader={}, labels={WPC: "test"}), {}, [],
                 id="set priority class when replicas not ready"),
    pytest.param(_lws("test-queue", leader={}, labels={WPC: "test"}),
                 _lws("test-queue", leader={}, labels={WPC: "new-test"}, ready=1), {}, [],
                 id="change priority class when replicas not ready"),
    pytest.param(_lws("test-queue", leader={}, labels={WPC: "test"}), _lws("test-queue", leader={}, ready=1),
                 {}, [(WPC_PATH, "Invalid")], id="delete priority class when replicas not ready"),
    pytest.param(_lws("test-queue", leader=_template(HELD_ONLY, image="pause:0.1.0"),
                      worker=_template(HELD_ONLY, image="pause:0.1.0")),
                 _lws("test-queue", leader=_template(HELD_ONLY, image="pause:0.1.1"),
                      worker=_template(HELD_ONLY, image="pause:0.1.1")), {}, [], id="change image"),
    pytest.param(_lws("test-queue", leader=_template(HELD_ONLY), worker=_template(HELD_ONLY)),
                 _lws("test-queue", leader=_template(HELD_ONLY, cpu="1"),
                      worker=_template(HELD_ONLY, cpu="1")), {},
                 [(f"{LEADER_PATH}.spec.containers[0].resources.requests", "Invalid"),
                  (f"{WORKER_PATH}.spec.containers[0].resources.requests", "Invalid")],
                 id="change resources in container"),
    pytest.param(_lws("test-queue", leader=_template(HELD_ONLY), worker=_template(HELD_ONLY)),
                 _lws("test-queue", leader=_template(HELD_ONLY, init_cpu="1"),
                      worker=_template(HELD_ONLY, init_cpu="1")), {},
                 [(f"{LEADER_PATH}.spec.initContainers[0].resources.requests", "Invalid"),
                  (f"{WORKER_PATH}.spec.initContainers[0].resources.requests", "Invalid")],
                 id="change resources in init containers"),
]


@pytest.mark.parametrize(("old", "new", "feature_gates", "want"), UPDATE_CASES)
def test_lws_validate_update(old: dict[str, Any], new: dict[str, Any], feature_gates: dict[str, bool],
                             want: list[tuple[str, str]]) -> None:
    assert _fields(lwh.update_errors(old, new, feature_gates)) == want


# --- deployment_webhook_test.go: TestValidateUpdate ---------------------------------------------------------


def _deployment(queue: str | None = None, *, priority: str | None = None, ready: int = 0) -> dict[str, Any]:
    labels = {**({Q: queue} if queue else {}), **({WPC: priority} if priority else {})}
    out: dict[str, Any] = {"metadata": {"name": "test-pod", "labels": labels},
                           "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "pause"}]}}}}
    if ready:
        out["status"] = {"readyReplicas": ready}
    return out


DEPLOYMENT_UPDATE_CASES = [
    pytest.param(_deployment(), _deployment(), [], id="without queue (no changes)"),
    pytest.param(_deployment("test-queue"), _deployment(), [(QUEUE_PATH, "Invalid")], id="without queue"),
    pytest.param(_deployment("test-queue"), _deployment("test-queue"), [], id="with queue (no changes)"),
    pytest.param(_deployment(), _deployment("test-queue"), [], id="with queue"),
    pytest.param(_deployment("test/queue"), _deployment("test/queue"), [(QUEUE_PATH, "Invalid")],
                 id="with queue (invalid)"),
    pytest.param(_deployment("test-queue", ready=1), _deployment("test-queue-new", ready=1),
                 [(QUEUE_PATH, "Invalid")], id="with queue (ready replicas)"),
    pytest.param(_deployment("test-queue", priority="test"), _deployment("test-queue", priority="new-test"),
                 [], id="update priority-class when suspended"),
    pytest.param(_deployment("test-queue", ready=1), _deployment("test-queue", priority="test", ready=1),
                 [(WPC_PATH, "Invalid")], id="set priority-class when replicas ready"),
    pytest.param(_deployment("test-queue", priority="test", ready=1),
                 _deployment("test-queue", priority="new-test", ready=1), [],
                 id="update priority-class when replicas ready"),
    pytest.param(_deployment("test-queue", priority="test", ready=1), _deployment("test-queue", ready=1),
                 [(WPC_PATH, "Invalid")], id="delete priority-class when replicas ready"),
    pytest.param(_deployment("test-queue"), _deployment("test-queue", priority="test"), [],
                 id="set priority-class when replicas not ready"),
    pytest.param(_deployment("test-queue", priority="test"), _deployment("test-queue", priority="new-test"),
                 [], id="update priority-class when replicas not ready"),
    pytest.param(_deployment("test-queue", priority="test"), _deployment("test-queue"),
                 [(WPC_PATH, "Invalid")], id="delete priority-class when replicas not ready"),
]


@pytest.mark.parametrize(("old", "new", "want"), DEPLOYMENT_UPDATE_CASES)
def test_deployment_validate_update(old: dict[str, Any], new: dict[str, Any],
                                    want: list[tuple[str, str]]) -> None:
    assert _fields(dw.update_errors(old, new)) == want


# --- statefulset_webhook_test.go: TestValidateUpdate (the cases kueue-es's StatefulSet model shares) --------


def _sts(queue: str | None = None, *, priority: str | None = None, replicas: int | None = None,
         status_replicas: int = 0, ready: int = 0, cpu: str | None = None) -> dict[str, Any]:
    labels = {**({Q: queue} if queue else {}), **({WPC: priority} if priority else {})}
    spec: dict[str, Any] = {"template": _template(image="pause:0.1.1", cpu=cpu)}
    if replicas is not None:
        spec["replicas"] = replicas
    out: dict[str, Any] = {"metadata": {"name": "test-sts", "namespace": "test-ns", "labels": labels},
                           "spec": spec}
    status = {**({"replicas": status_replicas} if status_replicas else {}),
              **({"readyReplicas": ready} if ready else {})}
    if status:
        out["status"] = status
    return out


STS_REPLICAS = "spec.replicas"
STATEFULSET_UPDATE_CASES = [
    pytest.param(_sts("test-queue"), _sts("test-queue-new"), [], id="change in queue label"),
    pytest.param(_sts("test-queue", ready=1), _sts("test-queue-new", ready=1), [(QUEUE_PATH, "Invalid")],
                 id="change in queue label (ReadyReplicas > 0)"),
    pytest.param(_sts(), _sts("test-queue"), [], id="set queue label"),
    pytest.param(_sts(ready=1), _sts("test-queue", ready=1), [(QUEUE_PATH, "Invalid")],
                 id="set queue label (ReadyReplicas > 0)"),
    pytest.param(_sts("test-queue"), _sts(), [(QUEUE_PATH, "Invalid")], id="delete queue name"),
    pytest.param(_sts("queue1", priority="priority1"), _sts("queue1", priority="priority2"), [],
                 id="change in priority class label when suspended"),
    pytest.param(_sts("queue1", ready=1), _sts("queue1", priority="priority2", ready=1),
                 [(WPC_PATH, "Invalid")], id="set in priority class label when replicas ready"),
    pytest.param(_sts("queue1", priority="priority1", ready=1), _sts("queue1", priority="priority2", ready=1),
                 [], id="change in priority class label when replicas ready"),
    pytest.param(_sts("queue1", priority="priority1", ready=1), _sts("queue1", ready=1),
                 [(WPC_PATH, "Invalid")], id="delete in priority class label when replicas ready"),
    pytest.param(_sts("queue1"), _sts("queue1", priority="priority2"), [],
                 id="set in priority class label when replicas not ready"),
    pytest.param(_sts("queue1", priority="priority1"), _sts("queue1"), [(WPC_PATH, "Invalid")],
                 id="delete in priority class label when replicas not ready"),
    pytest.param(_sts(replicas=3), _sts(replicas=0), [], id="change in replicas (scale down to zero)"),
    pytest.param(_sts(replicas=0), _sts(replicas=3), [], id="change in replicas (scale up from zero)"),
    pytest.param(_sts("test-queue", replicas=0, status_replicas=3),
                 _sts("test-queue", replicas=3, status_replicas=1),
                 [(STS_REPLICAS, "Forbidden")],
                 id="change in replicas (scale up while the previous scaling operation is still in "
                    "progress)"),
    pytest.param(_sts("test-queue", replicas=3), _sts("test-queue", replicas=4), [(STS_REPLICAS, "Invalid")],
                 id="change in replicas (scale up)"),
    pytest.param(_sts(replicas=0, status_replicas=3), _sts(replicas=3, status_replicas=1), [],
                 id="change in replicas (scale up without queue-name while the previous scaling operation is "
                    "still in progress)"),
    pytest.param(_sts(replicas=3), _sts(replicas=4), [],
                 id="change in replicas (scale up without queue-name)"),
    pytest.param(_sts("test-queue"), _sts("test-queue", cpu="1"),
                 [("spec.template.spec.containers[0].resources.requests", "Invalid")],
                 id="attempt to change resources in container"),
]


@pytest.mark.parametrize(("old", "new", "want"), STATEFULSET_UPDATE_CASES)
def test_statefulset_validate_update(old: dict[str, Any], new: dict[str, Any],
                                     want: list[tuple[str, str]]) -> None:
    assert _fields(sw.update_errors(old, new)) == want
