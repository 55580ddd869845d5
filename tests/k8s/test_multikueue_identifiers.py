"""WorkloadIdentifierAnnotations in MultiKueue's copies, as Kueue's adapters have it (``SetMultiKueueMeta``,
``MultiKueueWorkloadNameFor``): the prebuilt Workload named in an annotation while the gate is on (or for a name no
label can hold), in a label while it is off; a copy read in either form whatever the gate, label and annotation
disagreeing making it not MultiKueue's; a pod's group read alike."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import msgspec
import pytest
from fixtures.multikueue_states import KEY, MK_CONFIG, WorkerApi, dispatched_state

from connectors.k8s.multikueue import MultiKueueConnector
from connectors.k8s.multikueue_adapters import ADAPTERS, owner_copy
from connectors.k8s.multikueue_identifiers import group_name_of, place_prebuilt, workload_name_of
from connectors.k8s.multikueue_worker import Worker
from connectors.k8s.statefulset_multikueue import KIND
from projections.gates import WORKLOAD_IDENTIFIER_ANNOTATIONS

PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"
GROUP = "kueue.x-k8s.io/pod-group-name"
ORIGIN = "kueue.x-k8s.io/multikueue-origin"
GATE_OFF = msgspec.structs.replace(MK_CONFIG, feature_gates={WORKLOAD_IDENTIFIER_ANNOTATIONS: False})
WL = {"metadata": {"name": "job-a", "namespace": "default"}}
MANAGER_STS = {"apiVersion": "apps/v1", "kind": "StatefulSet",
               "metadata": {"name": "web", "namespace": "default", "uid": "sts-uid", "labels": {"app": "web"}},
               "spec": {"replicas": 1}}


def _meta(labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None) -> dict:
    return {"metadata": {"name": "x", "namespace": "default", "labels": labels or {},
                         "annotations": annotations or {}}}


def test_the_gate_on_names_the_prebuilt_workload_in_an_annotation_and_off_in_a_label() -> None:
    sts = ADAPTERS[KIND]
    on = owner_copy(sts, MANAGER_STS, WL, "o", MK_CONFIG)["metadata"]
    assert (on["annotations"][PREBUILT], PREBUILT in on["labels"], on["labels"][ORIGIN]) == ("job-a", False, "o")
    off = owner_copy(sts, MANAGER_STS, WL, "o", GATE_OFF)["metadata"]
    assert (off["labels"][PREBUILT], PREBUILT in off["annotations"], off["labels"][ORIGIN]) == ("job-a", False, "o")


def test_a_name_no_label_can_hold_goes_in_an_annotation_whatever_the_gate() -> None:
    long = "w" * 64
    made = place_prebuilt({"metadata": {"labels": {PREBUILT: long}}}, {}, long, GATE_OFF)["metadata"]
    assert (made["labels"], made["annotations"]) == ({}, {PREBUILT: long})
    short = "w" * 63
    assert place_prebuilt({"metadata": {"labels": {PREBUILT: short}}}, {}, short, GATE_OFF) == {
        "metadata": {"labels": {PREBUILT: short}}}


def test_the_manager_owners_own_label_stays_and_a_copy_naming_none_is_left_alone() -> None:
    made = place_prebuilt({"metadata": {"labels": {PREBUILT: "job-a"}}}, {"metadata": {"labels": {PREBUILT: "mine"}}},
                          "job-a", MK_CONFIG)["metadata"]
    assert (made["labels"], made["annotations"]) == ({PREBUILT: "mine"}, {PREBUILT: "job-a"})
    lws = {"metadata": {"labels": {ORIGIN: "o"}}}
    assert place_prebuilt(lws, {}, "lws-0", MK_CONFIG) is lws


def test_a_copy_is_read_in_either_form_the_annotation_first_and_not_when_they_disagree() -> None:
    assert workload_name_of(_meta(annotations={PREBUILT: "a"})) == "a"
    assert workload_name_of(_meta(labels={PREBUILT: "a"})) == "a"
    assert workload_name_of(_meta(labels={PREBUILT: "a"}, annotations={PREBUILT: "a"})) == "a"
    assert workload_name_of(_meta(labels={PREBUILT: "a"}, annotations={PREBUILT: "b"})) is None
    assert workload_name_of(_meta()) == ""
    assert group_name_of(_meta(annotations={GROUP: "g"})) == "g"
    assert group_name_of(_meta(labels={GROUP: "g"}, annotations={GROUP: "h"})) is None


def test_a_workers_copy_named_only_in_an_annotation_is_this_managers() -> None:
    """Whatever the gate now, a copy made under the other form is still found: its workload is the one its changes
    wake and whose copies it is collected with."""
    w = Worker("worker1", b"kubeconfig")
    w.owners["Job"] = {"default/a": {"metadata": {"name": "a", "namespace": "default", "labels": {ORIGIN: "o"},
                                                  "annotations": {PREBUILT: "job-a"}}}}
    w.owners["Pod"] = {"default/p": {"metadata": {"name": "p", "namespace": "default",
                                                  "labels": {ORIGIN: "o", PREBUILT: "x"},
                                                  "annotations": {PREBUILT: "y"}}}}
    assert w.copied() == {KEY}, "the Pod naming two Workloads is none's"


@pytest.mark.asyncio
async def test_a_copy_named_in_an_annotation_is_deleted_with_its_workloads_copy(tmp_path: Path) -> None:
    state = dispatched_state(tmp_path, "apps/v1", "StatefulSet", finished=True)
    worker = WorkerApi()
    journal = SimpleNamespace(mirror=SimpleNamespace(state=state, workloads={}))
    mk = MultiKueueConnector(WorkerApi(), journal, append=None)  # type: ignore[arg-type]
    w = mk.workers["worker1"] = Worker("worker1", b"kubeconfig", client=worker, connected=True)  # type: ignore[arg-type]
    w.workloads[KEY] = {"metadata": {"name": "job-a", "namespace": "default"}}
    made = place_prebuilt(ADAPTERS[KIND].make_copy(MANAGER_STS, WL, "multikueue"), MANAGER_STS, "job-a", MK_CONFIG)
    assert PREBUILT not in made["metadata"]["labels"]
    w.owners["StatefulSet"] = {"default/web": made}
    await mk.sync_copies("multikueue")
    assert worker.deleted == ["StatefulSet:default/web", "Workload:default/job-a"]


@pytest.mark.asyncio
async def test_a_pod_whose_label_and_annotation_name_two_groups_is_not_synced(tmp_path: Path) -> None:
    """Kueue's Pod adapter refuses such a pod (conflicting PodGroup identifiers): nothing is copied, the workload
    looked at again."""
    state = dispatched_state(tmp_path, "v1", "Pod")
    pod = {"metadata": {"name": "a", "namespace": "default", "labels": {GROUP: "g"}, "annotations": {GROUP: "h"}},
           "spec": {}}
    manager = WorkerApi(pod)
    journal = SimpleNamespace(mirror=SimpleNamespace(state=state, workloads={}))
    mk = MultiKueueConnector(manager, journal, append=None)  # type: ignore[arg-type]
    wl = state.workloads[KEY]
    assert await mk._owner_names(ADAPTERS["v1", "Pod"], wl) is None
    pod["metadata"]["annotations"] = {GROUP: "g"}

    async def listed(resource, label_selector: str = "", namespace: str = ""):
        assert label_selector == f"{GROUP}=g"
        return SimpleNamespace(items=[msgspec.json.encode(pod)])

    manager.list = listed  # type: ignore[attr-defined]
    found = await mk._owner_names(ADAPTERS["v1", "Pod"], wl)
    assert found is not None and found[1] == ["a"], "the same group in both forms: one group"
