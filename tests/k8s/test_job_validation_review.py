"""Kueue's validating webhook for batch/v1 Jobs: its answer to an AdmissionReview on create and on update (Kueue's
field errors, under the Configuration's gates) and its place in the ValidatingWebhookConfiguration."""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import msgspec
import pytest

from connectors.k8s import manifests
from connectors.k8s.certs import self_signed
from connectors.k8s.job_validation import PATH, review
from connectors.k8s.validating import configuration
from events.errors import aggregate

Q = "kueue.x-k8s.io/queue-name"
PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"
MAX_EXEC = "kueue.x-k8s.io/max-exec-time-seconds"
WPC = "kueue.x-k8s.io/priority-class"
MIN_PAR = "kueue.x-k8s.io/job-min-parallelism"
SYNC = "kueue.x-k8s.io/job-completions-equal-parallelism"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
SLICE = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
LAYERS = "kueue.x-k8s.io/podset-slice-required-topology-constraints"
GROUP = "kueue.x-k8s.io/podset-group-name"
SUBDOMAIN = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
             "must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
             r"'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
NAME_PART = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
             "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
             "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
TA = "spec.template.metadata.annotations"


def job(labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None, *, suspend: bool = True,
        parallelism: int = 4, completions: int | None = None, template_annotations: dict[str, str] | None = None,
        **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "j", "namespace": "team", "labels": {Q: "lq", **(labels or {})}}
    if annotations:
        meta["annotations"] = annotations
    doc: dict[str, Any] = {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": {
        "suspend": suspend, "parallelism": parallelism,
        "template": {"metadata": {"annotations": template_annotations or {}},
                     "spec": {"containers": [{"name": "c", "image": "busybox"}]}}, **spec}}
    if completions is not None:
        doc["spec"]["completions"] = completions
    return doc


def _answer(new: dict, old: dict | None = None, gates: dict | None = None, *, default_queue: bool = False,
            asked: list[str] | None = None) -> dict:
    async def has_default(namespace: str) -> bool:
        if asked is not None:
            asked.append(namespace)
        return default_queue

    request: dict[str, Any] = {"uid": "u-1", "operation": "UPDATE" if old else "CREATE", "namespace": "team",
                               "object": new}
    if old is not None:
        request["oldObject"] = old
    body = msgspec.json.encode({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
    out = asyncio.run(review(body, gates or {}, has_default))
    assert out["kind"] == "AdmissionReview" and out["response"]["uid"] == "u-1"
    return out["response"]


def refused(new: dict, old: dict | None = None, gates: dict | None = None, **kw: Any) -> str:
    resp = _answer(new, old, gates, **kw)
    assert resp["allowed"] is False, "expected a refusal"
    assert resp["status"]["code"] == 403 and resp["status"]["reason"] == "Forbidden"
    return resp["status"]["message"]


def allowed(new: dict, old: dict | None = None, gates: dict | None = None, **kw: Any) -> None:
    resp = _answer(new, old, gates, **kw)
    assert resp == {"uid": "u-1", "allowed": True}, resp


def _with(doc: dict, *, labels: dict | None = None, drop: tuple[str, ...] = (), **spec: Any) -> dict:
    out = copy.deepcopy(doc)
    out["metadata"]["labels"].update(labels or {})
    for key in drop:
        out["metadata"]["labels"].pop(key, None)
    out["spec"].update(spec)
    return out


# --- create ------------------------------------------------------------------------------------------------------


def test_a_valid_job_is_allowed() -> None:
    allowed(job({MAX_EXEC: "30", PREBUILT: "wl-1", WPC: "gold"}, {MIN_PAR: "2"}))
    allowed(job(labels={}, template_annotations={REQUIRED: "cloud.com/rack"}))


@pytest.mark.parametrize(("key", "value"), [(Q, "Team_Queue"), (PREBUILT, "Bad_Name"), (PREBUILT, "")])
def test_a_queue_or_prebuilt_name_that_is_no_dns_subdomain_is_refused_naming_the_label(key: str, value: str) -> None:
    assert refused(job({key: value})) == f'metadata.labels[{key}]: Invalid value: "{value}": {SUBDOMAIN}'


@pytest.mark.parametrize(("value", "message"), [
    ("0", f"metadata.labels[{MAX_EXEC}]: Invalid value: 0: should be greater than 0"),
    ("soon", f'metadata.labels[{MAX_EXEC}]: Invalid value: "soon": strconv.Atoi: parsing "soon": invalid syntax'),
])
def test_a_max_exec_time_kueue_refuses_is_refused(value: str, message: str) -> None:
    assert refused(job({MAX_EXEC: value})) == message


@pytest.mark.parametrize(("value", "completions", "message"), [
    ("4", None, f"metadata.annotations[{MIN_PAR}]: Invalid value: 4: should be between 0 and 3"),
    ("3", 3, f"metadata.annotations[{MIN_PAR}]: Invalid value: 3: should be between 0 and 2"),
    ("0", None, f"metadata.annotations[{MIN_PAR}]: Invalid value: 0: should be between 0 and 3"),
    ("x", None, f'metadata.annotations[{MIN_PAR}]: Invalid value: "x": strconv.ParseInt: parsing "x": '
                'invalid syntax'),
    ("3", None, None), ("1", 2, None),
    # read as an int32 since Kueue #15499 (ParseInt): no int32 wrap (2**32 + 1 to 1, 2**31 to a negative) lets
    # one through; Go's range error says why
    ("4294967297", None, f'metadata.annotations[{MIN_PAR}]: Invalid value: "4294967297": strconv.ParseInt: '
                         'parsing "4294967297": value out of range'),
    ("2147483648", None, f'metadata.annotations[{MIN_PAR}]: Invalid value: "2147483648": strconv.ParseInt: '
                         'parsing "2147483648": value out of range'),
])
def test_min_parallelism_is_between_1_and_the_pod_count_less_one(value: str, completions: int | None,
                                                                message: str | None) -> None:
    doc = job(annotations={MIN_PAR: value}, completions=completions)
    if message is None:
        allowed(doc)
    else:
        assert refused(doc) == message


def test_min_parallelism_is_checked_whatever_partial_admission_says() -> None:
    doc = job(annotations={MIN_PAR: "9"})
    assert refused(doc, gates={"PartialAdmission": False}) == refused(doc)


def test_completions_equal_parallelism_only_on_indexed_jobs_with_equal_counts() -> None:
    allowed(job(annotations={SYNC: "true"}, completions=4, completionMode="Indexed"))
    allowed(job(annotations={SYNC: "false"}))
    assert refused(job(annotations={SYNC: "yes"})) == (
        f'metadata.annotations[{SYNC}]: Invalid value: "yes": strconv.ParseBool: parsing "yes": invalid syntax')
    assert refused(job(annotations={SYNC: "true"}, completions=3)) == (
        f'[metadata.annotations[{SYNC}]: Invalid value: "true": should not be enabled for NonIndexed jobs, '
        f"spec.completions: Invalid value: 3: should be equal to parallelism when {SYNC} is annotation is true]")


def test_several_problems_are_reported_together_in_kueues_order() -> None:
    assert refused(job({Q: "Q", MAX_EXEC: "-1"}, {MIN_PAR: "0"})) == (
        f'[metadata.labels[{Q}]: Invalid value: "Q": {SUBDOMAIN}, '
        f"metadata.labels[{MAX_EXEC}]: Invalid value: -1: should be greater than 0, "
        f"metadata.annotations[{MIN_PAR}]: Invalid value: 0: should be between 0 and 3]")


# --- TAS annotations of the pod template ---------------------------------------------------------------------


@pytest.mark.parametrize(("annotations", "message"), [
    ({REQUIRED: "rack", PREFERRED: "block"},
     f'{TA}: Invalid value: must not contain more than one topology annotation: ["{REQUIRED}", "{PREFERRED}", '
     f'"{UNCONSTRAINED}"]'),
    ({REQUIRED: "a b"}, f'{TA}[{REQUIRED}]: Invalid value: "a b": {NAME_PART}'),
    ({UNCONSTRAINED: "maybe"}, f'{TA}[{UNCONSTRAINED}]: Invalid value: "maybe": must be a boolean value'),
    ({SLICE: "rack", SLICE_SIZE: "two"}, f'{TA}[{SLICE_SIZE}]: Invalid value: "two": must be a numeric value'),
    ({SLICE: "rack", SLICE_SIZE: "0"}, f'{TA}[{SLICE_SIZE}]: Invalid value: "0": must be greater than or equal to 1'),
    ({SLICE: "rack"}, f"{TA}[{SLICE_SIZE}]: Required value: must be set when '{SLICE}' is specified"),
    ({SLICE_SIZE: "2"}, f"{TA}[{SLICE_SIZE}]: Forbidden: may not be set when '{SLICE}' is not specified"),
    ({SLICE: "rack", SLICE_SIZE: "8"}, f'{TA}[{SLICE_SIZE}]: Invalid value: "8": must not be greater than pod set '
                                        "count 4"),
    ({PREFERRED: "rack", GROUP: "7"}, f'{TA}[{GROUP}]: Invalid value: "7": must not be a number'),
    ({GROUP: "g"}, f"{TA}[{GROUP}]: Forbidden: may not be set when neither '{PREFERRED}' nor '{REQUIRED}' is "
                   "specified"),
    ({LAYERS: '[{"topology": "rack", "size": 2}]', SLICE: "rack", SLICE_SIZE: "2"},
     f"[{TA}[{LAYERS}]: Forbidden: may not be set when '{SLICE}' is specified, "
     f"{TA}[{LAYERS}]: Forbidden: may not be set when '{SLICE_SIZE}' is specified]"),
    ({LAYERS: '[{"topology": "block", "size": 4}, {"topology": "block", "size": 3}]'},
     f'[{TA}[{LAYERS}][1].topology: Duplicate value: "block (also at index 0)", '
     f"{TA}[{LAYERS}][1].size: Invalid value: 3: must evenly divide the parent layer size 4]"),
    ({LAYERS: '[{"topology": "block", "size": 0}]'},
     f"{TA}[{LAYERS}][0].size: Invalid value: 0: must be greater than or equal to 1"),
    ({LAYERS: '[{"topology": "block", "size": 8}]'},
     f"{TA}[{LAYERS}]: Invalid value: 8: must not be greater than pod set count 4"),
    ({LAYERS: "[]"}, f'{TA}[{LAYERS}]: Invalid value: "[]": must have between 1 and 3 layers'),
])
def test_tas_annotations_kueue_refuses_are_refused_naming_the_annotation(annotations: dict, message: str) -> None:
    assert refused(job(template_annotations=annotations)) == message


def test_tas_annotations_are_checked_only_under_topology_aware_scheduling() -> None:
    bad = job(template_annotations={REQUIRED: "rack", PREFERRED: "block", SLICE_SIZE: "9"})
    refused(bad)
    allowed(bad, gates={"TopologyAwareScheduling": False})


def test_slice_layers_need_tas_multi_layer_topology() -> None:
    layered = job(template_annotations={LAYERS: '[{"topology": "block", "size": 4}, {"topology": "rack", "size": 2}]'})
    allowed(layered)
    assert refused(layered, gates={"TASMultiLayerTopology": False}) == (
        f"{TA}[{LAYERS}]: Forbidden: the TASMultiLayerTopology feature gate must be enabled to use this annotation")


def test_a_grouped_pod_set_may_be_sliced_unless_tas_grouped_pod_set_slicing_is_off() -> None:
    sliced = job(template_annotations={REQUIRED: "block", GROUP: "g", SLICE: "rack", SLICE_SIZE: "2"})
    allowed(sliced)
    assert refused(sliced, gates={"TASGroupedPodSetSlicing": False}) == (
        f"[{TA}[{GROUP}]: Forbidden: may not be set when '{SLICE_SIZE}' is specified, "
        f"{TA}[{GROUP}]: Forbidden: may not be set when '{SLICE}' is specified]")
    layered = job(template_annotations={REQUIRED: "block", GROUP: "g", LAYERS: '[{"topology": "rack", "size": 2}]'})
    allowed(layered)
    assert refused(layered, gates={"TASGroupedPodSetSlicing": False}) == (
        f"{TA}[{GROUP}]: Forbidden: may not be set when '{LAYERS}' is specified")


def test_two_slice_layers_must_divide_the_count_under_tas_partial_slices() -> None:
    uneven = job(template_annotations={LAYERS: '[{"topology": "block", "size": 3}, {"topology": "rack", "size": 1}]'})
    assert refused(uneven) == (
        f"{TA}[{LAYERS}]: Invalid value: 3: must evenly divide pod set count 4 when more than one layer is specified")
    allowed(uneven, gates={"TASPartialSlices": False})
    allowed(job(template_annotations={LAYERS: '[{"topology": "block", "size": 3}]'}))
    allowed(job(template_annotations={SLICE: "rack", SLICE_SIZE: "3"}))


def test_a_malformed_slice_layers_annotation_is_refused() -> None:
    assert refused(job(template_annotations={LAYERS: "not json"})).startswith(
        f'{TA}[{LAYERS}]: Invalid value: "not json": must be a valid JSON array: ')


# --- update ------------------------------------------------------------------------------------------------------


def test_a_running_jobs_queue_name_is_immutable_a_suspended_ones_is_not() -> None:
    running = job(suspend=False)
    assert refused(_with(running, labels={Q: "other"}), running) == (
        f'metadata.labels[{Q}]: Invalid value: "other": field is immutable')
    assert refused(_with(running, drop=(Q,)), running) == f'metadata.labels[{Q}]: Invalid value: "": field is immutable'
    suspended = job()
    allowed(_with(suspended, labels={Q: "other"}), suspended)
    allowed(_with(running, labels={Q: "other"}, suspend=True), running)  # suspended by the same update
    plain = job(suspend=False)
    del plain["metadata"]["labels"][Q]
    assert "field is immutable" in refused(_with(plain, labels={Q: "lq"}), plain), "no queue name added while running"


def test_the_queue_name_stays_where_a_default_local_queue_exists() -> None:
    suspended = job()
    asked: list[str] = []
    assert refused(_with(suspended, drop=(Q,)), suspended, default_queue=True, asked=asked) == (
        f'metadata.labels[{Q}]: Invalid value: "": queue-name must not be empty in namespace with default queue')
    assert asked == ["team"]
    allowed(_with(suspended, drop=(Q,)), suspended, default_queue=False)
    asked.clear()
    allowed(_with(suspended, labels={Q: "other"}), suspended, default_queue=True, asked=asked)
    assert asked == [], "asked only when the name is taken away"


def test_a_running_jobs_prebuilt_workload_name_is_immutable() -> None:
    running = job({PREBUILT: "wl-1"}, suspend=False)
    assert refused(_with(running, labels={PREBUILT: "wl-2"}), running) == (
        f'metadata.labels[{PREBUILT}]: Invalid value: "wl-2": field is immutable')
    allowed(_with(job({PREBUILT: "wl-1"}), labels={PREBUILT: "wl-2"}), job({PREBUILT: "wl-1"}))
    assert refused(_with(job(), labels={PREBUILT: "Bad"}), job()) == (
        f'metadata.labels[{PREBUILT}]: Invalid value: "Bad": {SUBDOMAIN}'), "suspended: checked as on create, once"
    annotated = copy.deepcopy(running)
    annotated["metadata"]["annotations"] = {PREBUILT: "wl-3"}
    assert "field is immutable" in refused(annotated, running), "the annotation names it (WorkloadIdentifierAnnotations)"
    allowed(annotated, running, {"WorkloadIdentifierAnnotations": False})


def test_the_max_exec_time_is_immutable_unless_suspended_before_and_after() -> None:
    suspended, running = job({MAX_EXEC: "30"}), job({MAX_EXEC: "30"}, suspend=False)
    allowed(_with(suspended, labels={MAX_EXEC: "60"}), suspended)
    for old, new in ((running, _with(running, labels={MAX_EXEC: "60"})),
                     (suspended, _with(suspended, labels={MAX_EXEC: "60"}, suspend=False)),
                     (running, _with(running, labels={MAX_EXEC: "60"}, suspend=True))):
        assert refused(new, old) == f'metadata.labels[{MAX_EXEC}]: Invalid value: "60": field is immutable'


def test_a_workload_priority_class_is_not_added_to_a_running_job_nor_removed() -> None:
    running = job(suspend=False)
    assert refused(_with(running, labels={WPC: "gold"}), running) == (
        f'metadata.labels[{WPC}]: Invalid value: "gold": WorkloadPriorityClass cannot be added to a non-suspended '
        "workload")
    allowed(_with(job(), labels={WPC: "gold"}), job())
    for old in (job({WPC: "gold"}), job({WPC: "gold"}, suspend=False)):
        assert refused(_with(old, drop=(WPC,)), old) == (
            f'metadata.labels[{WPC}]: Invalid value: "": WorkloadPriorityClass cannot be removed from a workload')
        allowed(_with(old, labels={WPC: "silver"}), old)


def test_with_min_parallelism_a_running_jobs_parallelism_stays() -> None:
    running = job(annotations={MIN_PAR: "2"}, suspend=False)
    assert refused(_with(running, parallelism=3), running) == (
        "spec.parallelism: Forbidden: cannot change when partial admission is enabled and the job is not suspended")
    allowed(_with(job(annotations={MIN_PAR: "2"}), parallelism=3, suspend=False), job(annotations={MIN_PAR: "2"}))
    allowed(_with(job(suspend=False), parallelism=3), job(suspend=False))


def test_min_parallelism_is_checked_on_update_only_when_it_changes() -> None:
    stale = job(annotations={MIN_PAR: "2"})
    allowed(_with(stale, parallelism=2), stale)  # unchanged: not checked against the new count
    changed = _with(stale, parallelism=2)
    changed["metadata"]["annotations"][MIN_PAR] = "3"
    assert "should be between 0 and 1" in refused(changed, stale)


def test_the_completions_setting_stays_while_the_job_runs() -> None:
    running = job(suspend=False, completions=4, completionMode="Indexed")
    synced = copy.deepcopy(running)
    synced["metadata"]["annotations"] = {SYNC: "true"}
    assert refused(synced, running) == (
        f"metadata.annotations[{SYNC}]: Forbidden: field is immutable while the job is not suspended")
    allowed(_with(synced, suspend=True), _with(running, suspend=True))


def test_updates_are_held_to_the_create_checks_too() -> None:
    old = job()
    assert refused(_with(old, labels={MAX_EXEC: "0"}), old) == (
        f"metadata.labels[{MAX_EXEC}]: Invalid value: 0: should be greater than 0")


def test_other_operations_and_a_missing_old_object_are_allowed() -> None:
    async def no_default(namespace: str) -> bool:
        return False

    for request in ({"uid": "u-1", "operation": "DELETE", "oldObject": job({Q: "Q"})},
                    {"uid": "u-1", "operation": "UPDATE", "object": job()}):
        out = asyncio.run(review(msgspec.json.encode({"request": request}), {}, no_default))
        assert out["response"] == {"uid": "u-1", "allowed": True}


def test_aggregate_drops_repeats() -> None:
    assert aggregate([]) is None and aggregate(["a"]) == "a" and aggregate(["a", "b", "a"]) == "[a, b]"


# --- registration ------------------------------------------------------------------------------------------------


def test_registered_beside_the_kueue_kinds_for_jobs_outside_the_excluded_namespaces() -> None:
    bundle = self_signed(["127.0.0.1"])
    doc = configuration(bundle.ca_pem, service=("kueue-es-webhook", "kueue-system", 443),
                        excluded_namespaces=("kube-system", "kueue-es"))
    hook = next(h for h in doc["webhooks"] if h["name"] == "vjob.kb.io")
    assert hook["clientConfig"]["service"]["path"] == PATH == "/validate-batch-v1-job"
    assert hook["rules"] == [{"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                              "resources": ["jobs"], "scope": "Namespaced"}]
    assert hook["failurePolicy"] == "Fail" and hook["sideEffects"] == "None"
    assert hook["namespaceSelector"] == {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", "kueue-es"]}]}
    assert json.dumps(doc["webhooks"][0]["clientConfig"]["caBundle"]) == json.dumps(hook["clientConfig"]["caBundle"])


def test_the_manifests_install_it_leaving_out_kueue_es_own_namespace() -> None:
    vwc = next(d for d in manifests.registrations("kueue-es") if d["kind"] == "ValidatingWebhookConfiguration")
    hook = next(h for h in vwc["webhooks"] if h["name"] == "vjob.kb.io")
    assert hook["namespaceSelector"]["matchExpressions"][0]["values"] == ["kube-system", "kueue-es"]
    assert "caBundle" not in hook["clientConfig"], "the first replica sets it"


@pytest.mark.parametrize("value", ["false", "False", "0", "f"])
def test_a_false_unconstrained_annotation_is_refused_under_tas_reject_false_unconstrained_topology(value: str) -> None:
    """Kueue v0.20 (#15262, TASRejectFalseUnconstrainedTopology beta, on): the annotation is an opt-in, so a
    value reading as false (which asked for TAS at no level Kueue could place) is refused; off, taken as before."""
    false_one = job(template_annotations={UNCONSTRAINED: value})
    assert refused(false_one) == (
        f'{TA}[{UNCONSTRAINED}]: Invalid value: "{value}": must be "true" when set')
    allowed(false_one, gates={"TASRejectFalseUnconstrainedTopology": False})
    allowed(job(template_annotations={UNCONSTRAINED: "true"}))


SPREADING = "kueue.x-k8s.io/podset-topology-spreading"


def test_topology_spreading_is_checked_only_under_tas_topology_spreading() -> None:
    value = json.dumps({"rules": [{"topologyKey": "rack", "maxShareAllowingPlacement": "0.45"}]})
    alone = job(template_annotations={PREFERRED: "rack", SPREADING: value})
    allowed(alone)  # the gate is off by default: the annotation is not looked at
    on = {"TASTopologySpreading": True}
    assert refused(alone, gates=on) == (
        f"{TA}[{SPREADING}]: Forbidden: may only be set together with '{REQUIRED}'")
    allowed(job(template_annotations={REQUIRED: "rack", SPREADING: value}), gates=on)
    bad = json.dumps({"workloadLabelSelectors": [{"key": "app", "operator": "Exists"}],
                      "rules": [{"topologyKey": "rack", "maxShareAllowingPlacement": "0.45", "enforcementMode": "Soft"}]})
    assert refused(job(template_annotations={REQUIRED: "rack", SPREADING: bad}), gates=on) == (
        f'[{TA}[{SPREADING}].workloadLabelSelectors[0].operator: Unsupported value: "Exists": supported values: "In", '
        f'{TA}[{SPREADING}].rules[0].enforcementMode: Unsupported value: "Soft": supported values: "Required", '
        '"Preferred"]')
    assert refused(job(template_annotations={REQUIRED: "rack", SPREADING: '{"rules": []}'}), gates=on) == (
        f'{TA}[{SPREADING}]: Invalid value: "{{\\"rules\\": []}}": topology spreading rules must contain between 1 '
        "and 2 entries: got 0")
