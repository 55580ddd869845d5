"""Kueue's LeaderWorkerSet webhooks (``mleaderworkerset.kb.io``, ``vleaderworkerset.kb.io``) as its
``leaderworkerset_webhook.go``: a queued set's pod templates marked held by their parent and serving, the
``default`` queue, its refusals in Kueue's words, and the registration (fail-closed only while the framework is
on)."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import msgspec
from patchhelp import patched

from connectors.k8s import lws_webhook as lwh
from connectors.k8s.certs import self_signed
from connectors.k8s.validating import configuration as validating_configuration
from connectors.k8s.webhook import FRAMEWORK_PATHS
from connectors.k8s.webhook import configuration as mutating_configuration
from kueue_es.scheduler.config import load_config

Q = "kueue.x-k8s.io/queue-name"
FRAMEWORKS = ["batch/job", "pod", "leaderworkerset.x-k8s.io/leaderworkerset"]
ON = lwh.LeaderWorkerSetWebhooks.of(load_config({"integrations": {"frameworks": FRAMEWORKS}}))
WITHOUT_QUEUE = lwh.LeaderWorkerSetWebhooks.of(load_config({"integrations": {"frameworks": FRAMEWORKS},
                                                            "manageJobsWithoutQueueName": True}))
OFF = lwh.LeaderWorkerSetWebhooks.of(load_config({}))
HELD = {"kueue.x-k8s.io/pod-suspending-parent": "leaderworkerset", "kueue.x-k8s.io/pod-group-serving": "true"}
OFFSET = "kueue.x-k8s.io/pod-index-offset"


def _lws(labels: dict[str, str] | None = None, *, leader: bool = True, worker_meta: bool = True,
         **spec: Any) -> dict[str, Any]:
    pod = {"spec": {"containers": [{"name": "c", "image": "img:1"}]}}
    lwt: dict[str, Any] = {"size": 3, "workerTemplate": {**pod, **({"metadata": {"labels": {"a": "b"}}}
                                                                   if worker_meta else {})}}
    if leader:
        lwt["leaderTemplate"] = dict(pod)
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": "lws", "namespace": "team", "labels": labels or {}},
            "spec": {"leaderWorkerTemplate": lwt, **spec}}


def _review(path: str, obj: dict[str, Any], settings: lwh.LeaderWorkerSetWebhooks = ON, *, operation: str = "CREATE",
            old: dict[str, Any] | None = None, default_queue: bool = False) -> dict[str, Any]:
    async def namespace_labels(name: str) -> dict[str, str]:
        return {"kubernetes.io/metadata.name": name}

    async def has_default_queue(name: str) -> bool:
        return default_queue

    reviews = lwh.reviewers(settings, namespace_labels, has_default_queue)
    body = msgspec.json.encode({"request": {"uid": "u", "operation": operation, "namespace": "team", "object": obj,
                                            "oldObject": old}})
    return asyncio.run(reviews[path](body))["response"]


def _mutated(obj: dict[str, Any], settings: lwh.LeaderWorkerSetWebhooks = ON, **kw: Any) -> dict[str, Any]:
    response = _review(lwh.MUTATING_PATH, obj, settings, **kw)
    assert response["allowed"]
    ops = msgspec.json.decode(base64.b64decode(response["patch"])) if "patch" in response else []
    return patched(obj, ops)


def test_a_queued_sets_templates_are_marked_held_by_their_parent_and_serving() -> None:
    out = _mutated(_lws({Q: "lq", "kueue.x-k8s.io/priority-class": "high"}))
    lwt = out["spec"]["leaderWorkerTemplate"]
    assert lwt["leaderTemplate"]["metadata"]["annotations"] == HELD
    assert lwt["workerTemplate"]["metadata"]["annotations"] == {**HELD, OFFSET: "1"}, "workers rank from 1"
    for name in ("leaderTemplate", "workerTemplate"):
        assert lwt[name]["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "high", name
    assert lwt["workerTemplate"]["metadata"]["labels"]["a"] == "b", "the template's own labels kept"


def test_without_a_leader_template_the_workers_alone_are_marked() -> None:
    lwt = _mutated(_lws({Q: "lq"}, leader=False, worker_meta=False))["spec"]["leaderWorkerTemplate"]
    assert "leaderTemplate" not in lwt
    assert lwt["workerTemplate"]["metadata"] == {"annotations": HELD, "labels": {Q: "lq"}}


def test_a_set_naming_no_queue_is_left_alone_unless_a_default_queue_or_manage_without_queue() -> None:
    plain = _lws()
    assert _mutated(plain) == plain
    defaulted = _mutated(_lws(), default_queue=True)
    assert defaulted["metadata"]["labels"][Q] == "default"
    assert defaulted["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["metadata"]["annotations"] == HELD
    assert _mutated(_lws(), WITHOUT_QUEUE)["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["metadata"][
        "annotations"] == HELD


def test_the_framework_off_every_set_is_allowed_as_it_is() -> None:
    assert _mutated(_lws({Q: "lq"}), OFF) == _lws({Q: "lq"})
    assert _review(lwh.VALIDATING_PATH, _lws({Q: "lq"}, startupPolicy="LeaderReady"), OFF)["allowed"]


def test_the_validating_webhook_refuses_in_kueues_words() -> None:
    assert _review(lwh.VALIDATING_PATH, _lws({Q: "lq"}, startupPolicy="LeaderReady"))["allowed"], (
        "Kueue's #4023: a queued set may start its workers once its leader is ready")
    running = {**_lws({Q: "lq"}), "status": {"readyReplicas": 1}}
    changed = _review(lwh.VALIDATING_PATH, _lws({Q: "other"}), operation="UPDATE", old=running)
    assert changed["status"]["message"] == ('metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "other": '
                                            "field is immutable")
    assert _review(lwh.VALIDATING_PATH, _lws({Q: "other"}), operation="UPDATE", old=_lws({Q: "lq"}))["allowed"], (
        "Kueue's #4932: no group ready, the set may be sent to another queue")
    assert _review(lwh.VALIDATING_PATH, _lws({Q: "lq"}, replicas=4), operation="UPDATE",
                   old=_lws({Q: "lq"}))["allowed"]


def _resized(size: int | None) -> dict[str, Any]:
    obj = _lws({Q: "lq"})
    if size is None:
        del obj["spec"]["leaderWorkerTemplate"]["size"]
    else:
        obj["spec"]["leaderWorkerTemplate"]["size"] = size
    return obj


def test_a_queued_sets_group_size_is_immutable_under_lws_immutable_group_size() -> None:
    """Kueue's LWSImmutableGroupSize (beta, on): a group's Workload keeps the counts it was made with, so the
    validating webhook refuses another size (growing or shrinking; a missing size is 1) of a set naming a queue."""
    grown = _review(lwh.VALIDATING_PATH, _resized(10), operation="UPDATE", old=_lws({Q: "lq"}))
    assert grown["status"]["message"] == "spec.leaderWorkerTemplate.size: Invalid value: 10: field is immutable"
    assert not _review(lwh.VALIDATING_PATH, _resized(None), operation="UPDATE", old=_lws({Q: "lq"}))["allowed"]
    assert _review(lwh.VALIDATING_PATH, _resized(1), operation="UPDATE", old=_resized(None))["allowed"]
    unqueued = _lws()
    assert _review(lwh.VALIDATING_PATH, {**unqueued, "spec": _resized(10)["spec"]}, operation="UPDATE",
                   old=unqueued)["allowed"], "a set naming no queue is not Kueue's"
    gate_off = lwh.LeaderWorkerSetWebhooks.of(load_config({"integrations": {"frameworks": FRAMEWORKS},
                                                           "featureGates": {"LWSImmutableGroupSize": False}}))
    assert _review(lwh.VALIDATING_PATH, _resized(10), gate_off, operation="UPDATE", old=_lws({Q: "lq"}))["allowed"]


def test_registered_fail_closed_only_while_on_the_mutating_one_on_update_too() -> None:
    on = lwh.registration({"url": "https://h/m"}, {}, on=True, mutating=True)
    assert (on["name"], on["failurePolicy"], on["rules"][0]["operations"]) == (
        "mleaderworkerset.kb.io", "Fail", ["CREATE", "UPDATE"])
    assert on["rules"][0]["apiGroups"] == ["leaderworkerset.x-k8s.io"]
    off = lwh.registration({"url": "https://h/v"}, {}, on=False, mutating=False)
    assert (off["name"], off["failurePolicy"]) == ("vleaderworkerset.kb.io", "Ignore")


def test_the_configurations_carry_both_webhooks_and_the_server_answers_their_paths() -> None:
    ca = self_signed(["127.0.0.1"]).ca_pem
    for on in (True, False):
        mhook = next(w for w in mutating_configuration(ca, url="https://h", leaderworkersets=on)["webhooks"]
                     if w["name"] == lwh.MUTATING_NAME)
        vhook = next(w for w in validating_configuration(ca, url="https://h", leaderworkersets=on)["webhooks"]
                     if w["name"] == lwh.VALIDATING_NAME)
        assert (mhook["failurePolicy"], vhook["failurePolicy"]) == (("Fail", "Fail") if on else ("Ignore", "Ignore"))
        assert mhook["clientConfig"]["url"] == "https://h" + lwh.MUTATING_PATH
    assert set(lwh.PATHS) <= set(FRAMEWORK_PATHS)


REQ, PREF = "kueue.x-k8s.io/podset-required-topology", "kueue.x-k8s.io/podset-preferred-topology"
SLICE, SLICE_SIZE = "kueue.x-k8s.io/podset-slice-required-topology", "kueue.x-k8s.io/podset-slice-size"
GROUP = "kueue.x-k8s.io/podset-group-name"
LEADER_AT = "spec.leaderWorkerTemplate.leaderTemplate.metadata.annotations"
WORKER_AT = "spec.leaderWorkerTemplate.workerTemplate.metadata.annotations"


def _annotated(leader: dict[str, str] | None, worker: dict[str, str], *, with_leader: bool = True) -> dict[str, Any]:
    obj = _lws({Q: "lq"}, leader=with_leader)
    lwt = obj["spec"]["leaderWorkerTemplate"]
    if leader is not None:
        lwt["leaderTemplate"]["metadata"] = {"annotations": leader}
    lwt["workerTemplate"]["metadata"]["annotations"] = worker
    return obj


def _refusal(obj: dict[str, Any], settings: lwh.LeaderWorkerSetWebhooks = ON, **kw: Any) -> str | None:
    response = _review(lwh.VALIDATING_PATH, obj, settings, **kw)
    return None if response["allowed"] else response["status"]["message"]


def test_the_pod_templates_tas_annotations_are_checked_as_any_jobs() -> None:
    """Kueue v0.20 validates a LeaderWorkerSet's pod templates' TAS annotations under TopologyAwareScheduling, on
    create and update: the leader's as a pod set of 1, the workers' as the rest of the group (all of it without a
    leader)."""
    both = _annotated(None, {REQ: "rack", PREF: "block"})
    assert _refusal(both) == (f'{WORKER_AT}: Invalid value: must not contain more than one topology annotation: '
                              f'["{REQ}", "{PREF}", "kueue.x-k8s.io/podset-unconstrained-topology"]')
    assert _refusal(both, operation="UPDATE", old=_lws({Q: "lq"})) == _refusal(both)
    sliced = {REQ: "block", SLICE: "rack", SLICE_SIZE: "2"}
    assert _refusal(_annotated(sliced, {})) == (f'{LEADER_AT}[{SLICE_SIZE}]: Invalid value: "2": must not be greater '
                                                "than pod set count 1")
    assert _refusal(_annotated(None, sliced)) is None, "2 workers of a group of 3"
    assert _refusal(_annotated(None, {**sliced, SLICE_SIZE: "3"})) == (
        f'{WORKER_AT}[{SLICE_SIZE}]: Invalid value: "3": must not be greater than pod set count 2')
    assert _refusal(_annotated(None, {**sliced, SLICE_SIZE: "3"}, with_leader=False)) is None, "all 3 pods"
    assert _refusal(both, msgspec.structs.replace(ON, feature_gates={"TopologyAwareScheduling": False})) is None


def test_a_pod_index_offset_is_a_non_negative_integer_never_beside_a_group_name() -> None:
    """Kueue v0.20's #14485: the offset the TAS ungater adds to the workers' ranks must parse as a non-negative
    integer, and a pod-set group (which places ranks itself) may not carry one."""
    assert _refusal(_annotated(None, {OFFSET: "1"})) is None
    assert _refusal(_annotated(None, {OFFSET: "-1"})) == (
        f'{WORKER_AT}[{OFFSET}]: Invalid value: "-1": must be a non-negative integer')
    assert _refusal(_annotated(None, {OFFSET: "one"})) == (
        f'{WORKER_AT}[{OFFSET}]: Invalid value: "one": must be a non-negative integer')
    assert _refusal(_annotated(None, {OFFSET: "2147483647"})) is None  # Kueue parses it as an int32
    assert _refusal(_annotated(None, {OFFSET: "2147483648"})) == (
        f'{WORKER_AT}[{OFFSET}]: Invalid value: "2147483648": must be a non-negative integer')
    grouped = {PREF: "rack", GROUP: "g"}
    assert _refusal(_annotated(grouped, {**grouped, OFFSET: "x"})) == (
        f"{WORKER_AT}[{OFFSET}]: Forbidden: may not be set when '{GROUP}' is specified")


def test_under_tas_the_workers_of_a_set_with_a_leader_get_a_pod_index_offset_of_one() -> None:
    """Kueue's #8685: worker indexes run from 1 beside a leader, so under TopologyAwareScheduling the webhook gives
    the workers' template ``pod-index-offset: "1"`` for the ungater to rank them from 0 — not to a set without a
    leader (its indexes run from 0), nor to workers in a pod-set group (the group places ranks), nor with the gate
    off."""
    def worker(obj: dict[str, Any], settings: lwh.LeaderWorkerSetWebhooks = ON) -> dict[str, str]:
        return _mutated(obj, settings)["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["annotations"]

    assert worker(_lws({Q: "lq"}))[OFFSET] == "1"
    assert OFFSET not in worker(_lws({Q: "lq"}, leader=False))
    grouped = _annotated({PREF: "rack", GROUP: "g"}, {PREF: "rack", GROUP: "g"})
    assert OFFSET not in worker(grouped)
    assert OFFSET not in worker(_lws({Q: "lq"}), msgspec.structs.replace(ON, feature_gates={
        "TopologyAwareScheduling": False}))
