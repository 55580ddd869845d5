"""An admission that cannot be applied to a job's pod templates — its Ready checks' ``podSetUpdates`` giving one
label, annotation or nodeSelector key two values, or a check's value against the job's own template — keeps the
job suspended and finishes its Workload ``FailedToStart`` with Kueue's error text unchanged (Kueue's job
reconciler: ``workload.Finish(..., FailedToStart, err.Error())``; the ``in admission check "NAME": `` wrap of
``getPodSetsInfoFromStatus``; pkg/podset ``BadPodSetsUpdateError``). Cases: job_controller_test.go TestReconciler
"... PodSetUpdates conflict between admission checks on labels / annotations / nodeSelector ..." and "...
between admission check nodeSelector and current node selector ...". No cluster needed."""

from __future__ import annotations

import msgspec
import pytest
from fixtures.jobs import job, workload
from test_job_sync import _setup, _stored_admitted
from test_pods_integration import integration as pod_integration
from test_pods_integration import managed_pod, pod_workload

from connectors.k8s import podsetinfo as psi
from connectors.k8s.jobframework import failed_to_start_message
from connectors.k8s.jobset import BadPodSets
from connectors.k8s.mirror import Mirror
from events import objects as o
from events import schema as ev
from projections.cluster import ClusterState
from projections.workloads import PodSetInfo, WorkloadInfo

FIELDS = [("labels", "labels"), ("annotations", "annotations"), ("node_selector", "nodeSelector")]
PSA = o.PodSetAssignment(name="main", flavors={"cpu": "default"}, count=10)


def _state(**node_labels: str) -> ClusterState:
    s = ClusterState()
    s.flavors["default"] = o.ResourceFlavor(metadata=o.ObjectMeta(name="default"),
                                            spec=o.ResourceFlavorSpec(node_labels=node_labels))
    return s


def _checks(field: str, **values: str) -> dict[str, o.AdmissionCheckState]:
    """One Ready check per ``name=value``, each setting key ``ac-key`` of ``field`` of pod set ``main``."""
    return {name: o.AdmissionCheckState(name=name, state="Ready", pod_set_updates=[
        o.PodSetUpdate(name="main", **{field: {"ac-key": value}})]) for name, value in values.items()}


def _wl(checks: dict[str, o.AdmissionCheckState]) -> WorkloadInfo:
    ps = PodSetInfo(name="main", count=10, min_count=None, requests=(("cpu", 1000),), topology=None)
    w = WorkloadInfo(key="ns/wl", uid="u", namespace="ns", name="wl", queue_name="lq", created=0, priority=0,
                     priority_class="", pod_sets=(ps,), check_states=checks)
    w.admission = o.Admission(cluster_queue="cq", pod_set_assignments=[PSA])
    return w


def _conflict(field: str) -> str:
    return (f'in admission check "check2": invalid admission check PodSetUpdate: conflict for {field}: '
            "conflict for key=ac-key, value1=ac-value1, value2=ac-value2")


# --- what starting adds, merged ------------------------------------------------------------------------------


@pytest.mark.parametrize(("field", "go"), FIELDS)
def test_two_checks_giving_one_key_two_values_name_the_later_check(field: str, go: str) -> None:
    with pytest.raises(psi.MergeConflict) as e:
        psi.start_info(_state(), _wl(_checks(field, check1="ac-value1", check2="ac-value2")), PSA)
    assert str(e.value) == _conflict(go)


def test_a_check_against_the_flavors_node_labels_names_the_check() -> None:
    """Kueue merges each check's update into what the assignment gives (the flavors' nodeLabels included)."""
    with pytest.raises(psi.MergeConflict) as e:
        psi.start_info(_state(**{"ac-key": "spot"}), _wl(_checks("node_selector", prov="on-demand")), PSA)
    assert str(e.value) == ('in admission check "prov": invalid admission check PodSetUpdate: conflict for '
                            "nodeSelector: conflict for key=ac-key, value1=spot, value2=on-demand")


def test_a_check_against_the_jobs_template_names_no_check() -> None:
    info = psi.start_info(_state(), _wl(_checks("node_selector", check="on-demand")), PSA)
    template = o.PodTemplateSpec(spec=o.PodSpec(node_selector={"ac-key": "spot"}))
    with pytest.raises(psi.MergeConflict) as e:
        psi.onto_template(template, info)
    assert str(e.value) == ("invalid admission check PodSetUpdate: conflict for nodeSelector: "
                            "conflict for key=ac-key, value1=spot, value2=on-demand")


def test_matching_values_merge() -> None:
    info = psi.start_info(_state(), _wl(_checks("labels", check1="same", check2="same")), PSA)
    assert info.labels["ac-key"] == "same"


GPU = {"key": "gpu", "value": "a", "effect": "NoSchedule"}


def test_only_the_first_update_a_check_gives_a_pod_set_is_taken() -> None:
    """Kueue's start takes, per check, the first of its podSetUpdates naming the pod set and no other (its CRD
    does not refuse a second one): a second adds nothing, and one at odds with the first is no conflict."""
    def checks(second: dict[str, str]) -> dict[str, o.AdmissionCheckState]:
        return {"prov": o.AdmissionCheckState(name="prov", state="Ready", pod_set_updates=[
            o.PodSetUpdate(name="main", labels={"a": "1"}), o.PodSetUpdate(name="main", labels=second)])}

    assert psi.start_info(_state(), _wl(checks({"b": "2"})), PSA).labels.get("b") is None
    assert psi.start_info(_state(), _wl(checks({"a": "2"})), PSA).labels["a"] == "1"


def test_a_toleration_without_an_operator_is_the_same_as_one_with_equal() -> None:
    """Kueue #11147: the apiserver defaults an empty operator to ``Equal``, so a flavor's ``Equal`` toleration and
    the template's same one without an operator are one; the template's stays as written (a second would have the
    Pod update refused: "existing toleration can not be modified")."""
    state = _state()
    state.flavors["default"] = msgspec.structs.replace(state.flavors["default"], spec=o.ResourceFlavorSpec(
        tolerations=[o.Toleration(operator="Equal", **GPU)]))
    info = psi.start_info(state, _wl({}), PSA)
    template = o.PodTemplateSpec(spec=o.PodSpec(tolerations=[o.Toleration(**GPU)]))
    assert psi.onto_template(template, info).tolerations == [o.Toleration(**GPU)]
    other = o.Toleration(operator="Exists", key="gpu", effect="NoSchedule")
    assert psi.onto_template(o.PodTemplateSpec(spec=o.PodSpec(tolerations=[other])), info).tolerations == [
        other, o.Toleration(operator="Equal", **GPU)], "another operator is another toleration"


def test_flavors_tolerations_differing_only_by_an_implied_equal_are_one() -> None:
    state = ClusterState()
    for name, operator in (("a", ""), ("b", "Equal")):
        state.flavors[name] = o.ResourceFlavor(metadata=o.ObjectMeta(name=name), spec=o.ResourceFlavorSpec(
            tolerations=[o.Toleration(operator=operator, **GPU)]))
    psa = o.PodSetAssignment(name="main", flavors={"cpu": "a", "memory": "b"}, count=10)
    assert psi.from_assignment(state, _wl({}), psa).tolerations == [o.Toleration(**GPU)]


def test_pod_sets_the_admission_does_not_number_are_kueues_invalid_podset_infos() -> None:
    assert failed_to_start_message(BadPodSets("expecting 2 podset, got 1")) == (
        "invalid podset infos: expecting 2 podset, got 1")


# --- through the integrations ----------------------------------------------------------------------------------


def _admitted(mirror: Mirror, checks: dict[str, o.AdmissionCheckState]) -> None:
    """The Job's Workload admitted with ``checks``, in the log and in its stored status."""

    def shape(info: WorkloadInfo) -> None:
        info.check_states = checks

    _stored_admitted(mirror, shape)


def _finished(appended: list[ev.AnyEvent]) -> list[tuple[str, str]]:
    return [(e.reason, e.message) for e in appended if isinstance(e, ev.WorkloadFinished)]


@pytest.mark.asyncio
@pytest.mark.parametrize(("field", "go"), FIELDS)
async def test_a_job_whose_checks_conflict_stays_suspended_its_workload_failed_to_start(field: str, go: str) -> None:
    jobs, mirror, appended, client = _setup(workload(), job())
    _admitted(mirror, _checks(field, check1="ac-value1", check2="ac-value2"))
    await jobs.reconcile("ns/train")
    assert _finished(appended) == [("FailedToStart", _conflict(go))]
    assert not [body for kind, _, body in client.patches if kind == "Job"], "the Job is not started"


@pytest.mark.asyncio
async def test_a_job_whose_template_conflicts_with_a_check() -> None:
    j = job()
    tpl = msgspec.structs.replace(j.spec.template, spec=msgspec.structs.replace(
        j.spec.template.spec, node_selector={"provisioning": "spot"}))
    j = msgspec.structs.replace(j, spec=msgspec.structs.replace(j.spec, template=tpl))
    jobs, mirror, appended, _ = _setup(workload(), j)
    _admitted(mirror, {"check": o.AdmissionCheckState(name="check", state="Ready", pod_set_updates=[
        o.PodSetUpdate(name="main", node_selector={"provisioning": "on-demand"})])})
    await jobs.reconcile("ns/train")
    assert _finished(appended) == [("FailedToStart", "invalid admission check PodSetUpdate: conflict for "
                                    "nodeSelector: conflict for key=provisioning, value1=spot, value2=on-demand")]


@pytest.mark.asyncio
async def test_a_pod_whose_checks_conflict_stays_gated_its_workload_failed_to_start() -> None:
    pods, mirror, appended, client = pod_integration(pod_workload())
    pod = managed_pod()
    wl = next(iter(mirror.state.workloads.values()))
    wl.admission = o.Admission(cluster_queue="cq", pod_set_assignments=[PSA])
    wl.check_states = _checks("labels", check1="ac-value1", check2="ac-value2")
    await pods._start(pod, wl)
    assert _finished(appended) == [("FailedToStart", _conflict("labels"))]
    assert not [c for c in client.calls if c[0] == "patch"], "the Pod keeps its gate"
