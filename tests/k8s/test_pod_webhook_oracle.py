"""Kueue's own Pod webhook tests as an oracle: the cases of ``TestDefault``, ``TestGetRoleHash``,
``TestValidateCreate`` and ``TestValidateUpdate`` in ``pkg/controller/jobs/pod/pod_webhook_test.go`` (the
v1beta2 version with ``WorkloadIdentifierAnnotations`` and ``WorkloadPriorityClassDefaulting``), each
translated to plain data and run through kueue-es's webhooks: the mutating one
(:func:`connectors.k8s.pod_webhook.review`, its JSON patch applied to the Pod) and the validating one
(:mod:`connectors.k8s.pod_validation`). Every case names the Kueue case it follows.

The Pod is Kueue's ``testingpod.MakePod`` as the apiserver hands it to a webhook: one container ``c`` (image
``pause``) with no requests, ``restartPolicy: Never``; Kueue's empty annotation map and gate list are not on
the wire (omitted when empty). Kueue's expected role ``a9f06f3a`` is the hash of its in-memory Pod, whose
empty ``requests`` map marshals as ``{}``; the wire Pod has none, which Kueue's ``GenerateRoleHash``
marshals as ``null``: ``7aa6c7b8`` (both checked below). Validation errors are compared as Kueue's cases
compare them: the type and field of each, in order
(``cmpopts.IgnoreFields(field.Error{}, "BadValue", "Detail")``)."""

from __future__ import annotations

import asyncio
import base64
import copy
import hashlib
import json
from typing import Any

import msgspec
import pytest
from patchhelp import patched

from connectors.k8s import pod_validation
from connectors.k8s.child_jobs import OwnerMissing
from connectors.k8s.pod_roles import role_hash
from connectors.k8s.pod_webhook import PodDefaulting, review
from kueue_es.scheduler.config import load_config

Q = "kueue.x-k8s.io/queue-name"
MANAGED = "kueue.x-k8s.io/managed"
GROUP = "kueue.x-k8s.io/pod-group-name"
TOTAL = "kueue.x-k8s.io/pod-group-total-count"
ROLE = "kueue.x-k8s.io/role-hash"
PARENT = "kueue.x-k8s.io/pod-suspending-parent"
INDEX = "kueue.x-k8s.io/pod-group-pod-index"
INDEX_FROM = "kueue.x-k8s.io/pod-group-pod-index-label"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"
RETRIABLE = "kueue.x-k8s.io/retriable-in-group"
PRIORITY = "kueue.x-k8s.io/priority-class"
ADMISSION = {"name": "kueue.x-k8s.io/admission"}
TOPOLOGY = {"name": "kueue.x-k8s.io/topology"}
WIRE_ROLE = "7aa6c7b8"
"""Kueue's ``getRoleHash`` of ``MakePod`` as the webhook receives it (no ``requests``: ``null``)."""

ON = PodDefaulting.of(load_config({"integrations": {"frameworks": ["pod"]}}))
"""The pod integration on, Kueue's defaults otherwise: ``TopologyAwareScheduling`` on."""
TAS_OFF = msgspec.structs.replace(ON, tas=False)
"""As the Kueue cases that set ``features.TopologyAwareScheduling: false``."""
WIA_OFF = {"WorkloadIdentifierAnnotations": False}


def make_pod(labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
             *, owner: dict[str, Any] | None = None, gated: bool = False,
             ns: str = "test-ns") -> dict[str, Any]:
    """Kueue's ``testingpod.MakePod("test-pod", ns)`` with these labels and annotations, on the wire."""
    meta: dict[str, Any] = {"name": "test-pod", "namespace": ns}
    if labels:
        meta["labels"] = dict(labels)
    if annotations:
        meta["annotations"] = dict(annotations)
    if owner is not None:
        meta["ownerReferences"] = [{**owner, "uid": owner["name"], "controller": True}]
    spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [{"name": "c", "image": "pause"}]}
    if gated:
        spec["schedulingGates"] = [ADMISSION]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def default(pod: dict[str, Any], defaulting: PodDefaulting = ON, *, ancestor: bool | Exception = False,
            default_lq: bool = False, default_class: bool | None = None) -> dict[str, Any]:
    """The Pod as Kueue's ``PodWebhook.Default`` leaves it (its namespace ``test-ns`` labelled with its name);
    raises :class:`AssertionError` naming the refusal when the webhook refuses it. ``ancestor``: what the walk
    up the Pod's controllers answers (an exception: it fails); ``default_class``: whether a
    WorkloadPriorityClass ``default`` exists (None: ``WorkloadPriorityClassDefaulting`` off, as the service
    wires it)."""
    async def namespace_labels(name: str) -> dict[str, str]:
        return {"kubernetes.io/metadata.name": name}

    async def has_default_queue(name: str) -> bool:
        return default_lq

    async def managed_ancestry(namespace: str, obj: dict[str, Any]) -> bool:
        if isinstance(ancestor, Exception):
            raise ancestor
        return ancestor

    async def has_default_priority_class() -> bool:
        return bool(default_class)

    body = msgspec.json.encode({"request": {"uid": "u", "operation": "CREATE",
                                            "namespace": pod["metadata"]["namespace"], "object": pod}})
    extra: dict[str, Any] = ({} if default_class is None
                             else {"has_default_priority_class": has_default_priority_class})
    response = asyncio.run(review(body, defaulting, namespace_labels, has_default_queue, managed_ancestry,
                                  **extra))["response"]
    if not response["allowed"]:
        raise AssertionError(f"refused: {response['status']}")
    ops = msgspec.json.decode(base64.b64decode(response["patch"])) if "patch" in response else []
    return patched(pod, ops)


def kueues(pod: dict[str, Any], *, labels: dict[str, str] | None = None, managed: bool = True,
           finalizer: bool = True, gates: tuple[dict[str, str], ...] = (ADMISSION,),
           role: str | None = WIRE_ROLE) -> dict[str, Any]:
    """``pod`` as Kueue's wrappers state the expected Pod: ``Label``/``Queue``, ``ManagedByKueueLabel``,
    ``KueueFinalizer``, ``KueueSchedulingGate``/``TopologySchedulingGate`` and ``RoleHash``."""
    out = copy.deepcopy(pod)
    meta = out["metadata"]
    added = {**(labels or {}), **({MANAGED: "true"} if managed else {})}
    if added:
        meta["labels"] = {**meta.get("labels", {}), **added}
    if finalizer:
        meta["finalizers"] = [MANAGED]
    if role is not None:
        meta["annotations"] = {**meta.get("annotations", {}), ROLE: role}
    if gates:
        out["spec"]["schedulingGates"] = list(gates)
    return out


def test_the_wire_role_is_kueues_hash_of_the_pod_it_receives() -> None:
    """Kueue's ``a9f06f3a`` (its in-memory ``MakePod``, ``requests: {}``) and kueue-es's hash of the wire Pod
    (``requests`` absent, ``null`` in Kueue's shape) are both Kueue's ``GenerateRoleHash``."""
    def kueue_hash(requests: Any) -> str:
        shape = {"spec": {"affinity": None,
                          "containers": [{"ports": None, "resources": {"requests": requests}}],
                          "initContainers": None, "nodeSelector": None, "overhead": None, "priority": None,
                          "resourceClaims": None, "runtimeClassName": None, "tolerations": None,
                          "topologySpreadConstraints": None}}
        return hashlib.sha256(json.dumps(shape, separators=(",", ":")).encode()).hexdigest()[:8]

    assert kueue_hash({}) == "a9f06f3a"
    assert kueue_hash(None) == WIRE_ROLE == role_hash(make_pod()["spec"])


# --- TestDefault --------------------------------------------------------------------------------------------

def test_pod_with_suspend_by_parent_annotation_should_skip_finalizer() -> None:
    pod = make_pod({Q: "test-queue"}, {PARENT: "test"})
    assert default(pod, TAS_OFF) == kueues(pod, managed=False, finalizer=False)


@pytest.mark.parametrize("case", ["pod with queue nil ns selector", "pod with queue matching ns selector",
                                  "the namespace matches the selector"])
def test_a_queued_pod_is_made_kueues(case: str) -> None:
    pod = make_pod({Q: "test-queue"})
    assert default(pod, TAS_OFF) == kueues(pod)


def test_pod_without_queue_matching_ns_selector_manage_jobs_without_queue_name() -> None:
    pod = make_pod()
    assert default(pod, msgspec.structs.replace(TAS_OFF, without_queue=True)) == kueues(pod)


JOB = {"apiVersion": "batch/v1", "kind": "Job", "name": "parent-job"}


def test_pod_with_owner_managed_by_kueue_job_while_not_enabled() -> None:
    pod = make_pod({Q: "test-queue"}, owner=JOB)
    assert default(pod, TAS_OFF) == kueues(pod)


def test_pod_with_owner_managed_by_kueue_job() -> None:
    defaulting = msgspec.structs.replace(TAS_OFF, frameworks=frozenset({"pod", "batch/job"}))
    pod = make_pod({Q: "test-queue"}, owner=JOB)
    assert default(pod, defaulting, ancestor=True) == pod


def test_pod_with_owner_reference_to_a_missing_parent_while_not_terminating_should_error() -> None:
    """Kueue: ``jobframework.ErrWorkloadOwnerNotFound`` out of ``Default``; here the Pod is refused."""
    defaulting = msgspec.structs.replace(ON, frameworks=frozenset({"pod", "batch/job"}))
    pod = make_pod({Q: "test-queue"}, owner={**JOB, "name": "deleted-parent-job"})
    with pytest.raises(AssertionError, match="refused.*'code': 404"):
        default(pod, defaulting, ancestor=OwnerMissing("Job test-ns/deleted-parent-job not found"))


@pytest.mark.parametrize(("framework", "api_version", "kind"), [
    pytest.param("ray.io/raycluster", "ray.io/v1", "RayCluster",
                 id="pod with owner managed by kueue (RayCluster)"),
    pytest.param("kubeflow.org/mpijob", "kubeflow.org/v2beta1", "MPIJob",
                 id="pod with owner managed by kueue (MPIJob)"),
    pytest.param("kubeflow.org/pytorchjob", "kubeflow.org/v1", "PyTorchJob",
                 id="pod with owner managed by kueue (PyTorchJob)"),
    pytest.param("kubeflow.org/tfjob", "kubeflow.org/v1", "TFJob",
                 id="pod with owner managed by kueue (TFJob)"),
    pytest.param("kubeflow.org/xgboostjob", "kubeflow.org/v1", "XGBoostJob",
                 id="pod with owner managed by kueue (XGBoostJob)"),
    pytest.param("kubeflow.org/paddlejob", "kubeflow.org/v1", "PaddleJob",
                 id="pod with owner managed by kueue (PaddleJob)"),
])
def test_a_pod_whose_queued_parent_an_enabled_integration_runs_is_left_as_made(
        framework: str, api_version: str, kind: str) -> None:
    defaulting = PodDefaulting.of(load_config({"integrations": {"frameworks": ["pod", framework]}}))
    pod = make_pod({Q: "test-queue"}, owner={"apiVersion": api_version, "kind": kind, "name": "parent"})
    assert default(pod, defaulting, ancestor=True) == pod


@pytest.mark.parametrize("case", ["pod with a group name label, but without group total count label",
                                  "pod with a group name label"])
def test_a_group_pod_is_made_kueues_whatever_its_total(case: str) -> None:
    pod = make_pod({Q: "test-queue", GROUP: "test-group"})
    assert default(pod, TAS_OFF) == kueues(pod)


def test_pod_with_tas() -> None:
    """Both gates; no ``kueue.x-k8s.io/tas`` label (Kueue's older webhook added one)."""
    pod = make_pod({Q: "test-queue"}, {REQUIRED: "block"})
    assert default(pod) == kueues(pod, gates=(ADMISSION, TOPOLOGY))


def test_pod_with_tas_and_pod_group_pod_index_label_annotation() -> None:
    pod = make_pod({Q: "test-queue", "test-label": "test-value"},
                   {INDEX_FROM: "test-label", REQUIRED: "block"})
    assert default(pod) == kueues(pod, labels={INDEX: "test-value"}, gates=(ADMISSION, TOPOLOGY))


@pytest.mark.parametrize("labels", [
    pytest.param({Q: "test-queue"},
                 id="pod with TAS and PodGroupPodIndexLabelAnnotation naming an absent label"),
    pytest.param({Q: "test-queue", "test-label": ""},
                 id="pod with TAS and PodGroupPodIndexLabelAnnotation naming a label with an empty value"),
])
def test_no_index_is_copied_from_a_label_absent_or_empty(labels: dict[str, str]) -> None:
    """Kueue #15867: an empty ``pod-group-pod-index`` would keep the group from ever getting a Workload."""
    pod = make_pod(labels, {INDEX_FROM: "test-label", REQUIRED: "block"})
    assert default(pod) == kueues(pod, gates=(ADMISSION, TOPOLOGY))


def test_pod_with_tas_and_pod_group_pod_index_label_annotation_carrying_no_labels_at_all() -> None:
    pod = make_pod(None, {PARENT: "test", INDEX_FROM: "test-label", REQUIRED: "block"})
    got = default(pod)
    assert "labels" not in got["metadata"]
    assert got == kueues(pod, managed=False, finalizer=False, gates=(ADMISSION, TOPOLOGY))


@pytest.mark.parametrize(("labels", "default_lq", "want_labels"), [
    pytest.param({}, True, {Q: "default"}, id="default queue is created, pod has no queue label"),
    pytest.param({Q: "queue"}, True, {}, id="default queue is created, pod has queue label"),
])
def test_local_queue_defaulting(labels: dict[str, str], default_lq: bool,
                                want_labels: dict[str, str]) -> None:
    pod = make_pod(labels)
    assert default(pod, TAS_OFF, default_lq=default_lq) == kueues(pod, labels=want_labels)


def test_default_queue_isnt_created_pod_has_no_queue_label() -> None:
    pod = make_pod()
    assert default(pod, TAS_OFF) == pod


def test_doesnt_match_the_managed_jobs_namespace_selector() -> None:
    pod = make_pod({Q: "queue"}, ns="kube-system")
    assert default(pod, TAS_OFF) == pod


@pytest.mark.parametrize(("labels", "default_class", "want_labels"), [
    pytest.param({Q: "queue"}, True, {PRIORITY: "default"}, id="default WorkloadPriorityClass is applied "
                 "when feature gate is enabled and pod has no priority class label"),
    pytest.param({Q: "queue"}, None, {},
                 id="default WorkloadPriorityClass is not applied when feature gate is disabled"),
    pytest.param({Q: "queue", PRIORITY: "high"}, True, {},
                 id="default WorkloadPriorityClass is not applied when pod already has a priority class "
                 "label"),
    pytest.param({Q: "queue"}, False, {}, id="default WorkloadPriorityClass is not applied when default "
                 "WorkloadPriorityClass does not exist"),
])
def test_default_workload_priority_class(labels: dict[str, str], default_class: bool | None,
                                         want_labels: dict[str, str]) -> None:
    pod = make_pod(labels)
    assert default(pod, TAS_OFF, default_class=default_class) == kueues(pod, labels=want_labels)


# --- TestGetRoleHash ----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("one", "two"), [
    pytest.param({"metadata": {"labels": {MANAGED: "true"}}}, {}, id="kueue.x-k8s.io/* labels shouldn't "
                 "affect the role"),
    pytest.param({"volumes": [{"name": "volume1"}]}, {"volumes": [{"name": "volume2"}]},
                 id="volume name shouldn't affect the role"),
    pytest.param({"volumes": [{"name": "volume", "persistentVolumeClaim": {"claimName": "claim1"}}]},
                 {"volumes": [{"name": "volume", "persistentVolumeClaim": {"claimName": "claim2"}}]},
                 id="volumes with different claims shouldn't affect the role"),
])
def test_get_role_hash(one: dict[str, Any], two: dict[str, Any]) -> None:
    """The role is the spec's alone: what sits in the metadata, or the volumes, does not change it."""
    def spec(extra: dict[str, Any]) -> dict[str, Any]:
        return {**make_pod()["spec"], **{k: v for k, v in extra.items() if k != "metadata"}}

    assert role_hash(spec(one)) == role_hash(spec(two))


# --- TestValidateCreate / TestValidateUpdate ----------------------------------------------------------------

def fields(errors: list[str]) -> list[tuple[str, str]]:
    """(type, field) of each error, as Kueue's cases compare them."""
    out = []
    for error in errors:
        path, rest = error.split(": ", 1)
        out.append((rest.split(":", 1)[0], path))
    return out


def required(path: str) -> tuple[str, str]:
    return ("Required value", path)


def invalid(path: str) -> tuple[str, str]:
    return ("Invalid value", path)


def forbidden(path: str) -> tuple[str, str]:
    return ("Forbidden", path)


GROUP_LABEL_PATH = f"metadata.labels[{GROUP}]"
GROUP_ANNOTATION_PATH = f"metadata.annotations[{GROUP}]"
TOTAL_PATH = f"metadata.annotations[{TOTAL}]"
PREBUILT_LABEL_PATH = f"metadata.labels[{PREBUILT}]"
PREBUILT_ANNOTATION_PATH = f"metadata.annotations[{PREBUILT}]"

CREATE_CASES = [
    pytest.param({MANAGED: "true", GROUP: "test-group"}, {}, WIA_OFF, [required(TOTAL_PATH)],
                 id="pod with group name and no group total count"),
    pytest.param({MANAGED: "true"}, {TOTAL: "3"}, WIA_OFF, [required(GROUP_LABEL_PATH)],
                 id="pod with group total count and no group name"),
    pytest.param({MANAGED: "true", GROUP: "test-group"}, {TOTAL: "0"}, WIA_OFF, [invalid(TOTAL_PATH)],
                 id="pod with 0 group total count"),
    pytest.param({MANAGED: "true", GROUP: "test-group"}, {TOTAL: ""}, WIA_OFF, [invalid(TOTAL_PATH)],
                 id="pod with empty group total count"),
    pytest.param({MANAGED: "true", GROUP: "notAdns1123Subdomain*"}, {TOTAL: "2"}, WIA_OFF,
                 [invalid(GROUP_LABEL_PATH)], id="pod with incorrect group name"),
    pytest.param({MANAGED: "true"}, {REQUIRED: "cloud.com/block"}, WIA_OFF, [], id="valid topology request"),
    pytest.param({MANAGED: "true"}, {REQUIRED: "cloud.com/block", PREFERRED: "cloud.com/block"}, WIA_OFF,
                 [invalid("metadata.annotations")], id="invalid topology request"),
    pytest.param({PREBUILT: "workload-name"}, {}, WIA_OFF, [], id="prebuilt workload for pod"),
    pytest.param({PREBUILT: "group-name", GROUP: "group-name"}, {TOTAL: "3"}, WIA_OFF, [],
                 id="prebuilt workload for pod group valid"),
    pytest.param({PREBUILT: "workload-name", GROUP: "group-name"}, {TOTAL: "3"}, WIA_OFF,
                 [invalid(PREBUILT_LABEL_PATH)], id="prebuilt workload for pod group invalid"),
    pytest.param({}, {PREBUILT: "workload-name"}, {}, [],
                 id="prebuilt workload annotation for pod, WorkloadIdentifierAnnotations enabled"),
    pytest.param({PREBUILT: "workload-name"}, {}, {}, [],
                 id="prebuilt workload label fallback for pod, WorkloadIdentifierAnnotations enabled"),
    pytest.param({PREBUILT: "workload-a"}, {PREBUILT: "workload-b"}, {}, [], id="prebuilt workload different "
                 "label and annotation, label ignored, WorkloadIdentifierAnnotations enabled"),
    pytest.param({}, {PREBUILT: "group-name", GROUP: "group-name", TOTAL: "3"}, {}, [], id="prebuilt "
                 "workload annotation matches group name annotation, WorkloadIdentifierAnnotations enabled"),
    pytest.param({}, {PREBUILT: "workload-name", GROUP: "group-name", TOTAL: "3"}, {},
                 [invalid(PREBUILT_ANNOTATION_PATH)], id="prebuilt workload annotation mismatches group name "
                 "annotation, WorkloadIdentifierAnnotations enabled"),
    pytest.param({PREBUILT: "workload-name"}, {GROUP: "group-name", TOTAL: "3"}, {},
                 [invalid(PREBUILT_LABEL_PATH)], id="prebuilt workload label mismatches group name "
                 "annotation, WorkloadIdentifierAnnotations enabled"),
    pytest.param({GROUP: "group-name"}, {PREBUILT: "workload-name", TOTAL: "3"}, {},
                 [invalid(PREBUILT_ANNOTATION_PATH)], id="prebuilt workload annotation mismatches group name "
                 "label, WorkloadIdentifierAnnotations enabled"),
    pytest.param({GROUP: "group name"}, {TOTAL: "3"}, WIA_OFF, [invalid(GROUP_LABEL_PATH)],
                 id="invalid group name"),
    pytest.param({GROUP: "group name"}, {TOTAL: "3"}, {}, [invalid(GROUP_LABEL_PATH)],
                 id="invalid group name label, WorkloadIdentifierAnnotations enabled"),
    pytest.param({}, {GROUP: "group name", TOTAL: "3"}, {}, [invalid(GROUP_ANNOTATION_PATH)],
                 id="invalid group name annotation, WorkloadIdentifierAnnotations enabled"),
    pytest.param({GROUP: "group-name-a"}, {GROUP: "group-name-b", TOTAL: "3"}, {}, [], id="different group "
                 "name label and annotation, label ignored, WorkloadIdentifierAnnotations enabled"),
]


@pytest.mark.parametrize(("labels", "annotations", "gates", "want"), CREATE_CASES)
def test_validate_create(labels: dict[str, str], annotations: dict[str, str], gates: dict[str, bool],
                         want: list[tuple[str, str]]) -> None:
    assert fields(pod_validation.create_errors(make_pod(labels, annotations), gates)) == want


def _group_pod(name: str, *, annotation: bool = False, **more: str) -> tuple[dict[str, str], dict[str, str]]:
    """(labels, annotations) of a Pod of group ``name`` (named in the annotation with ``annotation``),
    total 2."""
    if annotation:
        return {}, {GROUP: name, TOTAL: "2", **more}
    return {GROUP: name}, {TOTAL: "2", **more}


UPDATE_CASES = [
    pytest.param(({GROUP: "test-group"}, {}), ({MANAGED: "true", GROUP: "test-group"}, {}), WIA_OFF,
                 [required(TOTAL_PATH)], id="pod with group name and no group total count"),
    pytest.param(({GROUP: "test-group"}, {}), ({MANAGED: "true", GROUP: "test-group"}, {TOTAL: "0"}), WIA_OFF,
                 [invalid(TOTAL_PATH)], id="pod with 0 group total count"),
    pytest.param(({GROUP: "test-group"}, {}), ({MANAGED: "true", GROUP: "test-group"}, {TOTAL: ""}), WIA_OFF,
                 [invalid(TOTAL_PATH)], id="pod with empty group total count"),
    pytest.param(_group_pod("test-group"), _group_pod("test-group-new"), WIA_OFF, [invalid(GROUP_LABEL_PATH)],
                 id="pod group name is changed"),
    pytest.param(_group_pod("test-group"), _group_pod("test-group-new"), {}, [invalid(GROUP_LABEL_PATH)],
                 id="pod group name is changed, labels, WorkloadIdentifierAnnotations enabled"),
    pytest.param(_group_pod("test-group", annotation=True), _group_pod("test-group-new", annotation=True), {},
                 [invalid(GROUP_ANNOTATION_PATH)],
                 id="pod group name is changed, annotations, WorkloadIdentifierAnnotations enabled"),
    pytest.param(_group_pod("test-group"), _group_pod("test-group-new", annotation=True), {},
                 [invalid(GROUP_ANNOTATION_PATH)],
                 id="pod group name is changed, label to annotation, WorkloadIdentifierAnnotations enabled"),
    pytest.param(_group_pod("test-group", annotation=True), _group_pod("test-group-new"), {},
                 [invalid(GROUP_LABEL_PATH)],
                 id="pod group name is changed, annotation to label, WorkloadIdentifierAnnotations enabled"),
    pytest.param(_group_pod("test-group"), _group_pod("test-group", annotation=True), {}, [],
                 id="pod group name label replaced with annotation, WorkloadIdentifierAnnotations enabled"),
    pytest.param(({}, {}), _group_pod("test-group-new"), WIA_OFF, [], id="assign pod group name"),
    pytest.param(_group_pod("test-group", **{RETRIABLE: "false"}), _group_pod("test-group"), WIA_OFF,
                 [forbidden(f"metadata.annotations[{RETRIABLE}]")],
                 id="retriable in group annotation is removed"),
    pytest.param(_group_pod("test-group", **{RETRIABLE: "false"}),
                 _group_pod("test-group", **{RETRIABLE: "true"}),
                 WIA_OFF, [forbidden(f"metadata.annotations[{RETRIABLE}]")],
                 id="retriable in group annotation is changed from false to true"),
]


@pytest.mark.parametrize(("old", "new", "gates", "want"), UPDATE_CASES)
def test_validate_update(old: tuple[dict[str, str], dict[str, str]],
                         new: tuple[dict[str, str], dict[str, str]],
                         gates: dict[str, bool], want: list[tuple[str, str]]) -> None:
    errors = pod_validation.update_errors(make_pod(*old), make_pod(*new), gates)
    assert fields(errors) == want


PREBUILT_UPDATE_CASES = [
    pytest.param(({PREBUILT: "group-name", GROUP: "group-name"}, {TOTAL: "3"}),
                 ({PREBUILT: "group-name-new", GROUP: "group-name"}, {TOTAL: "3"}), WIA_OFF,
                 [invalid(PREBUILT_LABEL_PATH)], id="prebuilt workload for pod group invalid"),
    pytest.param(({}, {PREBUILT: "group-name", GROUP: "group-name", TOTAL: "3"}),
                 ({}, {PREBUILT: "group-name", GROUP: "group-name", TOTAL: "3"}), {}, [],
                 id="prebuilt workload annotation unchanged on update, WorkloadIdentifierAnnotations "
                 "enabled"),
    pytest.param(({}, {PREBUILT: "group-name", GROUP: "group-name", TOTAL: "3"}),
                 ({}, {PREBUILT: "workload-name", GROUP: "group-name", TOTAL: "3"}), {},
                 [invalid(PREBUILT_ANNOTATION_PATH)], id="prebuilt workload annotation mismatches group name "
                 "on update, WorkloadIdentifierAnnotations enabled"),
]


@pytest.mark.parametrize(("old", "new", "gates", "want"), PREBUILT_UPDATE_CASES)
def test_validate_update_of_a_gated_pods_prebuilt_workload(
        old: tuple[dict[str, str], dict[str, str]], new: tuple[dict[str, str], dict[str, str]],
        gates: dict[str, bool], want: list[tuple[str, str]]) -> None:
    """Gated (suspended), the prebuilt name may change as far as the job rules go: one error, the group's."""
    errors = pod_validation.update_errors(make_pod(*old, gated=True), make_pod(*new, gated=True), gates)
    assert fields(errors) == want


# --- the managed label's warning ----------------------------------------------------------------------------

OWNED_WARNING = ("pod owner is managed by kueue, label 'kueue.x-k8s.io/managed=true' might lead to "
                 "unexpected behaviour")


def validate(new: dict[str, Any], old: dict[str, Any] | None = None) -> dict[str, Any]:
    """The validating webhook's answer, the ``batch/job`` integration on (Kueue's cases enable it alone)."""
    async def no_default_queue(namespace: str) -> bool:
        return False

    request: dict[str, Any] = {"uid": "u", "operation": "UPDATE" if old else "CREATE", "namespace": "test-ns",
                               "object": new, **({"oldObject": old} if old else {})}
    body = msgspec.json.encode({"request": request})
    return asyncio.run(pod_validation.review(body, WIA_OFF, no_default_queue,
                                             frameworks=frozenset({"batch/job", "pod"})))["response"]


@pytest.mark.parametrize(("old", "new", "warned"), [
    pytest.param(None, make_pod({MANAGED: "true"}, owner=JOB), True,
                 id="create: pod owner is managed by kueue"),
    pytest.param(make_pod({MANAGED: "true"}, owner=JOB), make_pod({MANAGED: "true"}, owner=JOB), True,
                 id="update: pods owner is managed by kueue, managed label is set for both pods"),
    pytest.param(make_pod(owner=JOB), make_pod({MANAGED: "true"}, owner=JOB), True,
                 id="update: pod owner is managed by kueue, managed label is set for new pod"),
    pytest.param(make_pod(owner=JOB), make_pod({MANAGED: "true"}, {PARENT: "job"}, owner=JOB), False,
                 id="update: pod owner is managed by kueue, managed label is set for new pod with suspend by "
                 "parent annotation"),
])
def test_a_managed_label_under_a_kueue_managed_owner_is_warned_of(
        old: dict[str, Any] | None, new: dict[str, Any], warned: bool) -> None:
    """Allowed, with Kueue's warning (``warningForPodManagedLabel``) unless the Pod's parent holds it."""
    response = validate(new, old)
    assert response["allowed"] is True
    assert response.get("warnings") == ([OWNED_WARNING] if warned else None)


def test_no_warning_without_the_owners_integration_or_the_label() -> None:
    """``IsOwnerManagedByKueueForObject`` asks the enabled integrations: a Job's Pod with ``batch/job`` off,
    or one without the managed label, is not warned of."""
    assert "warnings" not in validate(make_pod(owner=JOB))
    owned = make_pod({MANAGED: "true"}, owner={"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs"})
    assert "warnings" not in validate(owned), "a ReplicaSet is no integration's"
