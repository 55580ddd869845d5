"""Kueue's ``statefulset`` integration (on the pod one): the StatefulSet webhooks (``mstatefulset.kb.io``,
``vstatefulset.kb.io``): a queued StatefulSet's pods made one serving pod group by its template, and the updates
Kueue refuses (a changed queue or group name, a resize but to or from zero)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import re
from typing import Any

import msgspec
import pytest

from connectors.k8s import deployment_webhook as dw
from connectors.k8s import pod_webhook
from connectors.k8s import statefulset_webhook as sw
from connectors.k8s.certs import self_signed
from connectors.k8s.errors import KubeError, NotFound
from connectors.k8s.pod_webhook import PodDefaulting
from connectors.k8s.validating import configuration as validating_configuration
from connectors.k8s.webhook import configuration as mutating_configuration
from kueue_es.scheduler.config import load_config

Q = "kueue.x-k8s.io/queue-name"
GROUP = "kueue.x-k8s.io/pod-group-name"
ON = dw.ParentDefaulting.of(load_config({"integrations": {"frameworks": ["pod", "statefulset"]}}), "statefulset")


def _sts(labels: dict | None = None, replicas: int | None = 3, status_replicas: int = 0,
         template_labels: dict | None = None, ready: int = 0) -> dict:
    spec: dict = {"serviceName": "web", "selector": {"matchLabels": {"app": "web"}},
                  "template": {"metadata": {"labels": {"app": "web", **(template_labels or {})}},
                               "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}
    if replicas is not None:
        spec["replicas"] = replicas
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "web", "namespace": "team", "labels": labels or {}},
            "spec": spec, "status": {"replicas": status_replicas, "readyReplicas": ready}}


def _mutate(obj: dict, defaulting: dw.ParentDefaulting = ON) -> list[dict]:
    async def namespace_labels(name: str) -> dict[str, str]:
        return {"kubernetes.io/metadata.name": name}

    async def has_default_queue(name: str) -> bool:
        return False

    reviews = sw.reviewers(defaulting, namespace_labels, has_default_queue)
    body = msgspec.json.encode({"request": {"uid": "u", "operation": "CREATE", "namespace": "team", "object": obj}})
    response = asyncio.run(reviews[sw.MUTATING_PATH](body))["response"]
    assert response["allowed"]
    return msgspec.json.decode(base64.b64decode(response["patch"])) if "patch" in response else []


def _template_after(obj: dict, ops: list[dict]) -> dict:
    meta = obj["spec"]["template"]["metadata"]
    labels, annotations = dict(meta.get("labels") or {}), dict(meta.get("annotations") or {})
    for op in ops:
        parts = op["path"].split("/")
        key = parts[-1].replace("~1", "/").replace("~0", "~")
        if parts[-2] == "labels":
            labels[key] = op["value"]
        elif parts[-2] == "annotations":
            annotations[key] = op["value"]
        elif key == "annotations":
            annotations.update(op["value"])
    return {"labels": labels, "annotations": annotations}


def test_a_queued_statefulset_makes_its_pods_one_serving_group_of_its_replicas() -> None:
    obj = _sts({Q: "lq"})
    template = _template_after(obj, _mutate(obj))
    group = template["labels"].pop(GROUP)
    assert re.fullmatch(r"statefulset-web-[0-9a-f]{5}", group) and group == sw.workload_name("web")
    assert template["labels"] == {"app": "web", "kueue.x-k8s.io/managed": "true", Q: "lq"}
    assert template["annotations"] == {
        "kueue.x-k8s.io/pod-suspending-parent": "statefulset", "kueue.x-k8s.io/pod-group-total-count": "3",
        "kueue.x-k8s.io/pod-group-fast-admission": "true", "kueue.x-k8s.io/pod-group-serving": "true",
        "kueue.x-k8s.io/pod-group-pod-index-label": "apps.kubernetes.io/pod-index"}


@pytest.mark.parametrize("short", [False, True])
def test_a_long_named_statefulsets_group_name_follows_short_workload_names(short: bool) -> None:
    """Kueue names the group as any Workload it makes: under ``ShortWorkloadNames`` the prefix is cut to 57
    characters, so that the name (a label value here) stays within 63."""
    name = "inference-" + "x" * 50
    config = load_config({"integrations": {"frameworks": ["pod", "statefulset"]},
                          "featureGates": {"ShortWorkloadNames": short}})
    obj = _sts({Q: "lq"})
    obj["metadata"]["name"] = name
    group = _template_after(obj, _mutate(obj, dw.ParentDefaulting.of(config, "statefulset")))["labels"][GROUP]
    digest = hashlib.sha1(f"StatefulSet\napps\n{name}\n".encode()).hexdigest()[:5]
    prefix = f"statefulset-{name}"
    assert group == f"{prefix[:57] if short else prefix}-{digest}"
    assert (len(group) <= 63) is short


@pytest.mark.parametrize("lws_on", [False, True])
def test_a_statefulset_its_leaderworkerset_controls_is_left_to_the_set(lws_on: bool) -> None:
    """Kueue's ``IsOwnerManagedByKueue``: with the LeaderWorkerSet integration on, an LWS's StatefulSet is not
    queued under ``manageJobsWithoutQueueName`` (its pods are the set's groups', marked by the LWS webhook)."""
    frameworks = ["pod", "statefulset", *(["leaderworkerset.x-k8s.io/leaderworkerset"] if lws_on else [])]
    without = dw.ParentDefaulting.of(load_config({"integrations": {"frameworks": frameworks},
                                                  "manageJobsWithoutQueueName": True}), "statefulset")
    obj = _sts()
    obj["metadata"]["ownerReferences"] = [{"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                                           "name": "lws", "uid": "u", "controller": True}]
    assert (_mutate(obj, without) == []) is lws_on


def test_an_unset_replica_count_is_one_and_an_unqueued_statefulset_is_left_alone() -> None:
    obj = _sts({Q: "lq"}, replicas=None)
    assert _template_after(obj, _mutate(obj))["annotations"]["kueue.x-k8s.io/pod-group-total-count"] == "1"
    assert _mutate(_sts()) == []
    off = dw.ParentDefaulting.of(load_config({"integrations": {"frameworks": ["pod", "deployment"]}}), "statefulset")
    assert _mutate(_sts({Q: "lq"}), off) == []


def _validate(new: dict, old: dict | None = None) -> dict:
    reviews = sw.reviewers(ON, None, None)  # type: ignore[arg-type]  # the validating review asks nothing
    request: dict[str, Any] = {"uid": "u", "operation": "UPDATE" if old else "CREATE", "object": new}
    if old is not None:
        request["oldObject"] = old
    return asyncio.run(reviews[sw.VALIDATING_PATH](msgspec.json.encode({"request": request})))["response"]


@pytest.mark.parametrize(("old", "new", "error"), [
    (_sts({Q: "a"}), _sts({Q: "a"}), None),
    (_sts({Q: "a"}, ready=1), _sts({Q: "b"}, ready=1),
     f'metadata.labels[{Q}]: Invalid value: "a": field is immutable'),
    (_sts({Q: "a"}, template_labels={Q: "a"}, ready=1), _sts({Q: "a"}, template_labels={Q: "b"}, ready=1),
     f'spec.template.metadata.labels[{Q}]: Invalid value: "b": field is immutable'),
    (_sts({Q: "a"}), _sts({}), f'metadata.labels[{Q}]: Invalid value: "a": field is immutable'),
    (_sts({GROUP: "g"}), _sts({GROUP: "h"}), f'metadata.labels[{GROUP}]: Invalid value: "h": field is immutable'),
    (_sts({Q: "a"}, replicas=3), _sts({Q: "a"}, replicas=4), "spec.replicas: Invalid value: 4: field is immutable"),
    (_sts({Q: "a"}, replicas=3), _sts({Q: "a"}, replicas=0), None),
    (_sts({Q: "a"}, replicas=0), _sts({Q: "a"}, replicas=5), None),
    (_sts({Q: "a"}, replicas=0), _sts({Q: "a"}, replicas=5, status_replicas=2),
     "spec.replicas: Forbidden: scaling down is still in progress"),
])
def test_what_an_update_may_change(old: dict, new: dict, error: str | None) -> None:
    response = _validate(new, old)
    assert response["allowed"] is (error is None)
    assert error is None or response["status"]["message"] == error


@pytest.mark.parametrize(("old", "new"), [
    (_sts({Q: "bad"}, template_labels={Q: "bad"}), _sts({Q: "good"}, template_labels={Q: "good"})),
    (_sts({Q: "bad"}, template_labels={Q: "bad"}, replicas=0), _sts({Q: "good"}, template_labels={Q: "good"}, replicas=0)),
    (_sts({}), _sts({Q: "lq"}, template_labels={Q: "lq"})),
], ids=["renamed", "renamed-at-zero", "queued-later"])
def test_the_queue_name_may_change_while_no_replica_is_ready(old: dict, new: dict) -> None:
    """Kueue's ``statefulset_test.go`` e2e "should allow to change queue name if ReadyReplicas=0" (and the two-phase
    case of #9830): while the stored StatefulSet has no ready replica, its queue name (and so its template's, which
    the mutating webhook keeps equal) may be changed or set, never removed; Kueue's webhook test "change in queue
    label" / "set queue label" (ReadyReplicas 0) allows both."""
    assert _validate(new, old)["allowed"]


@pytest.mark.parametrize(("old_replicas", "new_replicas", "status_replicas"), [(3, 4, 3), (0, 2, 1), (5, 1, 5)])
def test_a_statefulset_naming_no_queue_may_be_resized(old_replicas: int, new_replicas: int,
                                                       status_replicas: int) -> None:
    """Not Kueue's: its pods form no group whose total is fixed, so any resize goes (Kueue's fix for scaling
    StatefulSets it does not manage, kubernetes-sigs/kueue#3996)."""
    old = _sts({"app": "web"}, replicas=old_replicas, status_replicas=status_replicas)
    new = _sts({"app": "web"}, replicas=new_replicas, status_replicas=status_replicas)
    assert _validate(new, old)["allowed"]


REQ, PREF = "kueue.x-k8s.io/podset-required-topology", "kueue.x-k8s.io/podset-preferred-topology"
UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
SLICE, SLICE_SIZE = "kueue.x-k8s.io/podset-slice-required-topology", "kueue.x-k8s.io/podset-slice-size"
TEMPLATE_AT = "spec.template.metadata.annotations"


def _annotated(annotations: dict[str, str], replicas: int = 3, **kw: Any) -> dict:
    sts = _sts({Q: "lq"}, replicas=replicas, template_labels={Q: "lq"}, **kw)
    sts["spec"]["template"]["metadata"]["annotations"] = annotations
    return sts


def test_the_pod_template_s_tas_annotations_are_checked_on_create_and_update() -> None:
    """Kueue v0.20 (#15857 on create, #16039 on update): under TopologyAwareScheduling the StatefulSet webhook checks
    its pod template's TAS annotations as any job's, every one broken, the pod set being its replicas."""
    bad = _annotated({REQ: "rack", PREF: "block", UNCONSTRAINED: "maybe"})
    errors = [f'{TEMPLATE_AT}: Invalid value: must not contain more than one topology annotation: '
              f'["{REQ}", "{PREF}", "{UNCONSTRAINED}"]',
              f'{TEMPLATE_AT}[{UNCONSTRAINED}]: Invalid value: "maybe": must be a boolean value']
    message = f"[{', '.join(errors)}]"
    response = _validate(bad)
    assert not response["allowed"] and response["status"]["message"] == message
    update = _validate(bad, _annotated({}))
    assert not update["allowed"] and update["status"]["message"] == message
    sliced = {REQ: "block", SLICE: "rack", SLICE_SIZE: "4"}
    assert _validate(_annotated(sliced))["status"]["message"] == (
        f'{TEMPLATE_AT}[{SLICE_SIZE}]: Invalid value: "4": must not be greater than pod set count 3')
    assert _validate(_annotated({**sliced, SLICE_SIZE: "3"}))["allowed"]
    off = msgspec.structs.replace(ON, feature_gates={"TopologyAwareScheduling": False})
    validate = sw.reviewers(off, None, None)[sw.VALIDATING_PATH]  # type: ignore[arg-type]
    body = msgspec.json.encode({"request": {"uid": "u", "operation": "CREATE", "object": bad}})
    assert asyncio.run(validate(body))["response"]["allowed"], "the gate off: not looked at"


def test_a_tas_statefulset_may_scale_to_zero_and_back() -> None:
    """A set scaled to zero has no pods to place: its slice is not held to a pod set count of 0."""
    sliced = {REQ: "block", SLICE: "rack", SLICE_SIZE: "2"}
    assert _validate(_annotated(sliced, replicas=0), _annotated(sliced, replicas=2))["allowed"]
    assert _validate(_annotated(sliced, replicas=2), _annotated(sliced, replicas=0))["allowed"]


def test_a_queue_name_must_be_a_dns_subdomain() -> None:
    assert not _validate(_sts({Q: "Bad_Queue"}))["allowed"]
    assert _validate(_sts({Q: "lq"}))["allowed"]


@pytest.mark.parametrize("on", [True, False])
def test_the_statefulset_webhooks_fail_closed_only_while_the_framework_is_on(on: bool) -> None:
    ca = self_signed(["127.0.0.1"]).ca_pem
    mhook = next(w for w in mutating_configuration(ca, url="https://h", statefulsets=on)["webhooks"]
                 if w["name"] == "mstatefulset.kb.io")
    vhook = next(w for w in validating_configuration(ca, url="https://h", statefulsets=on)["webhooks"]
                 if w["name"] == "vstatefulset.kb.io")
    for hook, path in ((mhook, "/mutate-apps-v1-statefulset"), (vhook, "/validate-apps-v1-statefulset")):
        assert hook["failurePolicy"] == ("Fail" if on else "Ignore") and hook["clientConfig"]["url"] == "https://h" + path
        assert hook["rules"][0]["resources"] == ["statefulsets"]
        assert hook["rules"][0]["operations"] == ["CREATE", "UPDATE"]


def _pod_group_of(sts: dict, uid: str, defaulting: PodDefaulting) -> str:
    """The group the pod ``<name>-0`` a StatefulSet's controller makes from its (mutated) template ends up in, after
    the Pod webhook: the set's name and uid in its controller reference, as the apiserver has them by then."""
    template = _template_after(sts, _mutate(sts))
    name = sts["metadata"].get("name") or sts["metadata"]["generateName"] + uid[:5]
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": f"{name}-0", "namespace": "team", "labels": template["labels"],
                        "annotations": template["annotations"],
                        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": name,
                                             "uid": uid, "controller": True}]},
           "spec": {"containers": [{"name": "c", "image": "busybox"}]}}

    async def no_lookup(*args: Any) -> Any:
        raise AssertionError("no lookup for a pod its parent holds")

    body = msgspec.json.encode({"request": {"uid": "u", "operation": "CREATE", "namespace": "team", "object": pod}})
    response = asyncio.run(pod_webhook.review(body, defaulting, no_lookup, no_lookup, no_lookup))["response"]
    labels = dict(template["labels"])
    for op in msgspec.json.decode(base64.b64decode(response["patch"])) if "patch" in response else []:
        if op["path"].startswith("/metadata/labels/"):
            labels[op["path"].removeprefix("/metadata/labels/").replace("~1", "/")] = op["value"]
    return labels[GROUP]


def test_statefulsets_made_from_one_generate_name_get_a_group_each() -> None:
    """Kueue's "Should create distinct workloads for StatefulSets with generateName" (kubernetes-sigs/kueue#8687,
    fixed by #9091, cherry-picked to release-0.15 and 0.16, so in v0.20): a StatefulSet created with
    ``generateName`` has no name yet when its webhook marks the template, so the group name hashed there,
    ``statefulset--d7705``, was the same for every such set and their pods made one group. Its pods get the name
    Kueue gives the set's Workload, from the name and uid their controller reference carries; a named
    StatefulSet's group is left as its template says."""
    pods = PodDefaulting.of(load_config({"integrations": {"frameworks": ["pod", "statefulset"]}}))
    generated = []
    for uid in ("1b9d6bcd-0001", "7c3e5f21-0002"):
        sts = _sts({Q: "lq"})
        sts["metadata"].pop("name")
        sts["metadata"]["generateName"] = "web-"
        generated.append((_pod_group_of(sts, uid, pods), f"web-{uid[:5]}", uid))
    (first, first_name, first_uid), (second, second_name, second_uid) = generated
    assert first != second
    assert first == sw.workload_name(first_name, first_uid) and second == sw.workload_name(second_name, second_uid)
    assert _pod_group_of(_sts({Q: "lq"}), "1b9d6bcd-0001", pods) == sw.workload_name("web")


def _generated_pod(set_name: str = "web-1b9d6", uid: str = "1b9d6bcd-0001") -> dict:
    sts = _sts({Q: "lq"})
    template = _template_after(sts, _mutate(sts))
    labels = {**template["labels"], GROUP: pod_webhook.UNNAMED_STATEFULSET_GROUP}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{set_name}-1", "namespace": "team", "labels": labels,
                         "annotations": template["annotations"],
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": set_name,
                                              "uid": uid, "controller": True}]},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


@pytest.mark.parametrize("legacy", [True, False, KubeError("boom")])
def test_a_generate_name_statefulset_already_running_as_the_unnamed_group_stays_in_it(legacy: Any) -> None:
    """As Kueue's reconciler keeps a set on its legacy-named Workload (#9091's fallback): a set whose pods made the
    unnamed group's Workload before (a pod of it among its owners) keeps its remade pods in that group, so that one
    does not leave its siblings; a Workload that cannot be read refuses the Pod, as the webhook's other lookups."""
    asked = []

    async def legacy_group(namespace: str, statefulset: str) -> bool:
        asked.append((namespace, statefulset))
        if isinstance(legacy, Exception):
            raise legacy
        return legacy

    async def no_lookup(*args: Any) -> Any:
        raise AssertionError("no other lookup for a pod its parent holds")

    pods = PodDefaulting.of(load_config({"integrations": {"frameworks": ["pod", "statefulset"]}}))
    body = msgspec.json.encode({"request": {"uid": "u", "operation": "CREATE", "namespace": "team",
                                            "object": _generated_pod()}})
    response = asyncio.run(pod_webhook.review(body, pods, no_lookup, no_lookup, no_lookup,
                                              legacy_group=legacy_group))["response"]
    assert asked == [("team", "web-1b9d6")]
    if isinstance(legacy, Exception):
        assert not response["allowed"] and "boom" in response["status"]["message"]
        return
    ops = msgspec.json.decode(base64.b64decode(response["patch"]))
    renamed = [op["value"] for op in ops if op["path"] == "/metadata/labels/kueue.x-k8s.io~1pod-group-name"]
    assert renamed == ([] if legacy else [sw.workload_name("web-1b9d6", "1b9d6bcd-0001")])


def test_the_unnamed_groups_workload_is_a_sets_when_one_of_its_pods_owns_it() -> None:
    class Client:
        def __init__(self, owners: list[str] | None) -> None:
            self.owners = owners

        async def get(self, resource: Any, name: str, namespace: str = "") -> bytes:
            assert (resource.kind, name, namespace) == ("Workload", pod_webhook.UNNAMED_STATEFULSET_GROUP, "team")
            if self.owners is None:
                raise NotFound("workloads not found")
            return msgspec.json.encode({"metadata": {"ownerReferences": [
                {"apiVersion": "v1", "kind": "Pod", "name": n, "uid": n} for n in self.owners]}})

    def ask(owners: list[str] | None, statefulset: str) -> bool:
        return asyncio.run(pod_webhook.legacy_group_lookup(Client(owners))("team", statefulset))  # type: ignore[arg-type]

    assert ask(["web-1b9d6-0", "web-1b9d6-2"], "web-1b9d6")
    assert not ask(["web-7c3e5-0"], "web-1b9d6"), "another set's"
    assert not ask(["web-1b9d6-x"], "web-1b9d6") and not ask(None, "web-1b9d6")
