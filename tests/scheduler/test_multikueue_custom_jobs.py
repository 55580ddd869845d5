"""MultiKueue's generic adapter for custom job kinds (the Configuration's ``multiKueue.externalFrameworks``, under
MultiKueueAdaptersForCustomJobs): which kinds have an adapter, how a Configuration naming them is checked, and the
pure decisions on a workload owned by one."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import msgspec
import pytest
from fixtures.multikueue_states import KEY, MK_CONFIG, START, apply, owned_state

from connectors.k8s.discovery import discover
from connectors.k8s.errors import NotFound
from connectors.k8s.multikueue_adapters import Adapter, adapter_of, custom_copy
from connectors.k8s.resources import Resource
from events import schema as ev
from events.errors import InvalidInput
from kueue_es.scheduler import decide, settle
from kueue_es.scheduler.config import external_kind, load_config
from kueue_es.scheduler.multikueue import adapters_in_force, external_kinds

MK = "kueue.x-k8s.io/multikueue"
WIDGET = ("example.com/v1", "Widget")
CUSTOM = load_config({"multiKueue": {"externalFrameworks": [{"name": "Widget.v1.example.com"}]}})
GATE_OFF = msgspec.structs.replace(CUSTOM, feature_gates={"MultiKueueAdaptersForCustomJobs": False})


def test_a_name_is_read_as_kind_version_group() -> None:
    assert external_kind("Widget.v1.example.com") == WIDGET
    assert external_kind("PipelineRun.v1.tekton.dev") == ("tekton.dev/v1", "PipelineRun")
    assert external_kind("Widget.v1.") == ("v1", "Widget")  # an empty group: the core API's form
    assert external_kind("Widget.v1") is None and external_kind("") is None


def test_the_custom_kinds_have_the_generic_adapter_only_under_the_gate() -> None:
    """Kueue (the gate beta, on) builds a generic adapter for each ``externalFrameworks`` kind; with the gate off,
    none, so such a workload is "No multikueue adapter found"."""
    assert external_kinds(CUSTOM) == (WIDGET,) and WIDGET in adapters_in_force(CUSTOM)
    assert external_kinds(GATE_OFF) == () and WIDGET not in adapters_in_force(GATE_OFF)
    assert sorted(adapters_in_force(GATE_OFF)) == [("batch/v1", "Job")]


@pytest.mark.parametrize(("names", "frameworks", "problem"), [
    (["Widget.v1"], None, '`multiKueue.externalFrameworks[0].name`: Invalid value: "Widget.v1": must be in '
                          "'kind.version.group' format"),
    ([""], None, "`multiKueue.externalFrameworks[0].name`: Invalid value: \"\": must be in 'kind.version.group' format"),
    (["Widget.v1.example.com", "Gadget.v1.example.com", "Widget.v1.example.com"], None,
     '`multiKueue.externalFrameworks[2].name`: Duplicate value: "Widget.v1.example.com"'),
    (["Job.v1.batch"], None, '`multiKueue.externalFrameworks[0].name`: Invalid value: "Job.v1.batch": conflicts '
                             "with a built-in MultiKueue adapter"),
    (["JobSet.v1alpha2.jobset.x-k8s.io"], ["batch/job", "jobset.x-k8s.io/jobset"],
     '`multiKueue.externalFrameworks[0].name`: Invalid value: "JobSet.v1alpha2.jobset.x-k8s.io": conflicts with a '
     "built-in MultiKueue adapter"),
    (["Job.v1.batch", "Job.v1.batch"], None,
     '[field `multiKueue.externalFrameworks[0].name`: Invalid value: "Job.v1.batch": conflicts with a built-in '
     'MultiKueue adapter, field `multiKueue.externalFrameworks[1].name`: Duplicate value: "Job.v1.batch", field '
     '`multiKueue.externalFrameworks[1].name`: Invalid value: "Job.v1.batch": conflicts with a built-in MultiKueue '
     "adapter]"),
])
def test_a_configuration_naming_a_kind_badly_twice_or_built_in_is_refused(names: list[str],
                                                                          frameworks: list[str] | None,
                                                                          problem: str) -> None:
    """Kueue's checks of ``multiKueue.externalFrameworks`` (made whatever the gate), in its words (``field.Invalid``
    and ``field.Duplicate``, the name as Go's %q writes it): the ``Kind.version.group`` form, no kind twice, none a
    kind a built-in adapter of an enabled framework runs (a repeated one that is refused for both)."""
    doc: dict = {"multiKueue": {"externalFrameworks": [{"name": n} for n in names]},
                 "featureGates": {"MultiKueueAdaptersForCustomJobs": False}}
    if frameworks is not None:
        doc["integrations"] = {"frameworks": frameworks}
    with pytest.raises(InvalidInput) as err:
        load_config(doc)
    assert str(err.value) == f"<config>: {problem if problem.startswith('[') else 'field ' + problem}"


def test_a_built_in_kind_whose_framework_is_off_may_be_a_custom_one() -> None:
    """Only an enabled framework's adapter clashes: a JobSet with its framework off is run by the generic one."""
    config = load_config({"multiKueue": {"externalFrameworks": [{"name": "JobSet.v1alpha2.jobset.x-k8s.io"}]}})
    assert external_kinds(config) == (("jobset.x-k8s.io/v1alpha2", "JobSet"),)


def _decided(state, config) -> list[ev.AdmissionCheckUpdated]:
    decided = []
    for _ in range(5):
        batch = decide(state, config, now=START)
        decided += batch
        apply(state, *batch)
    return [d for d in decided if isinstance(d, ev.AdmissionCheckUpdated)]


def test_a_custom_job_waits_for_its_managed_by_then_is_dispatched(tmp_path: Path) -> None:
    """The generic adapter reads the owner's ``spec.managedBy`` first (observed by the connector): nothing is
    decided until then; handed to MultiKueue, the workload is nominated as a Job's is."""
    state = owned_state(tmp_path, *WIDGET)
    settle(state, CUSTOM, now=START)
    assert state.workloads[KEY].reserving and not state.workloads[KEY].nominated
    assert state.workloads[KEY].check_states["mk"].state == "Pending"
    apply(state, ev.OwnerObserved(time=START, key=KEY, managed_by=MK))
    settle(state, CUSTOM, now=START)
    assert state.workloads[KEY].nominated == ("worker1",)


def test_a_custom_job_not_handed_to_multikueue_is_rejected_in_kueues_words(tmp_path: Path) -> None:
    state = owned_state(tmp_path, *WIDGET)
    apply(state, ev.OwnerObserved(time=START, key=KEY, managed_by="example.com/widget-controller"))
    assert [(d.state, d.message) for d in _decided(state, CUSTOM)] == [(
        "Rejected", f'The owner is not managed by Kueue: Expecting .spec.managedBy to be "{MK}" not '
                    '"example.com/widget-controller"')]
    wl = state.workloads[KEY]
    assert not wl.reserving and wl.active, "rejected while pending: never reserves, not deactivated"


@pytest.mark.parametrize("config", [GATE_OFF, MK_CONFIG], ids=["gate-off", "not-listed"])
def test_without_the_gate_or_not_listed_a_custom_job_has_no_adapter(tmp_path: Path, config) -> None:
    state = owned_state(tmp_path, *WIDGET)
    assert [(d.state, d.message) for d in _decided(state, config)] == [(
        "Rejected", 'No multikueue adapter found for owner kind "example.com/v1, Kind=Widget"')]


# --- the connector: the copy, the resource found through discovery ------------------------------------------------

WIDGETS = Resource("Widget", "example.com", "v1", "widgets", True, status_subresource=True, optional=True)


def test_the_copy_is_the_whole_object_without_managed_by_with_kueues_labels() -> None:
    """Kueue's generic adapter copies the object whole (its status too, which the apiserver ignores on create)
    but for its resourceVersion and ``spec.managedBy``, and adds Kueue's two labels."""
    manager = {"apiVersion": "example.com/v1", "kind": "Widget",
               "metadata": {"name": "w", "namespace": "ns", "uid": "u", "resourceVersion": "7", "labels": {"a": "b"},
                            "annotations": {"note": "x"}},
               "spec": {"managedBy": MK, "size": 3}, "status": {"phase": "Pending"}}
    made = custom_copy(manager, {"metadata": {"name": "wl-w"}}, "mk-origin")
    assert made == {"apiVersion": "example.com/v1", "kind": "Widget",
                    "metadata": {"name": "w", "namespace": "ns", "uid": "u", "annotations": {"note": "x"},
                                 "labels": {"a": "b", "kueue.x-k8s.io/prebuilt-workload-name": "wl-w",
                                            "kueue.x-k8s.io/multikueue-origin": "mk-origin"}},
                    "spec": {"size": 3}, "status": {"phase": "Pending"}}
    assert manager["spec"]["managedBy"] == MK and manager["metadata"]["resourceVersion"] == "7"


class Discovery:
    """An apiserver's discovery documents, by path."""

    def __init__(self, docs: dict[str, dict]) -> None:
        self.docs = docs
        self.asked: list[str] = []

    async def request(self, method: str, path: str) -> bytes:
        self.asked.append(path)
        if path not in self.docs:
            raise NotFound(f"GET {path}: 404")
        return msgspec.json.encode(self.docs[path])


@pytest.mark.asyncio
async def test_a_custom_kinds_resource_is_found_through_discovery() -> None:
    api = Discovery({"/apis/example.com/v1": {"kind": "APIResourceList", "resources": [
        {"name": "widgets", "kind": "Widget", "namespaced": True}, {"name": "widgets/status", "kind": "Widget"},
        {"name": "gadgets", "kind": "Gadget", "namespaced": False}]}})
    assert await discover(api, WIDGET) == WIDGETS
    gadgets = await discover(api, ("example.com/v1", "Gadget"))
    assert gadgets is not None and (gadgets.plural, gadgets.namespaced, gadgets.status_subresource) == (
        "gadgets", False, False)
    assert await discover(api, ("example.com/v1", "Other")) is None
    assert await discover(api, ("example.org/v1", "Widget")) is None  # no such group version served
    assert api.asked[-1] == "/apis/example.org/v1"


def test_the_connector_picks_a_custom_kinds_adapter_only_once_found_and_in_force() -> None:
    wl = SimpleNamespace(owner=(*WIDGET, "w"))
    found = {WIDGET: Adapter(WIDGETS, custom_copy, in_log=False)}
    assert adapter_of(wl, CUSTOM, found) is found[WIDGET]
    assert adapter_of(wl, CUSTOM) is None  # not found yet: nothing read, nothing copied
    assert adapter_of(wl, GATE_OFF, found) is None
