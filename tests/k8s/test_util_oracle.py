"""Kueue's small rule-holding ``pkg/util`` packages as the oracle (session 47): each case names Kueue's test
file and case, and calls kueue-es's own function for that rule.

* ``pkg/util/equality/podset_test.go`` ``TestComparePodSetSlices`` (the newest stored version, v1beta2, with
  the pod-level resources and resource-claims cases of Kueue #14436):
  :func:`connectors.k8s.job_sync.same_pod_sets`, the comparison behind Kueue's ``EquivalentToWorkload``.
* ``pkg/util/priority/priority_test.go`` ``TestGetPriorityFromPriorityClass``:
  :func:`connectors.k8s.job_priority.workload_priority`.
* ``pkg/util/admissioncheck/admissioncheck_test.go`` ``TestConfigHelper``:
  :func:`projections.admissionchecks.config_for` (its error text is the check's ``Active=False`` message).
"""

from __future__ import annotations

import msgspec
import pytest
from fixtures.jobs import KEY, integration
from fixtures.jobs import job as fixture_job
from fixtures.jobs import workload as fixture_workload

from connectors.k8s import job_sync
from connectors.k8s.job_priority import PriorityClassNotFound, workload_priority
from events import objects as o
from projections.admissionchecks import config_for

# --- pkg/util/equality/podset_test.go TestComparePodSetSlices -----------------------------------------------


def _ps(name: str = "ps", count: int = 10, *, min_count: int | None = 5,
        requests: dict[str, str] | None = None, init_requests: dict[str, str] | None = None,
        tolerations: list[o.Toleration] | None = None,
        node_selector: dict[str, str] | None = None, pod_requests: dict[str, str] | None = None,
        claims: list[o.PodResourceClaim] | None = None) -> o.PodSet:
    """``MakePodSet(name, count).SetMinimumCount(5)`` and the case's one change."""
    containers = [o.Container(name="c", resources=o.ResourceRequirements(requests=requests or {}))]
    init = ([o.Container(name="i", image="img1", resources=o.ResourceRequirements(requests=init_requests))]
            if init_requests is not None else [])
    spec = o.PodSpec(containers=containers, init_containers=init, tolerations=tolerations or [],
                     node_selector=node_selector or {},
                     resources=(o.ResourceRequirements(requests=pod_requests) if pod_requests is not None
                                else None),
                     resource_claims=claims or [])
    return o.PodSet(name=name, count=count, min_count=min_count, template=o.PodTemplateSpec(spec=spec))


def _tol(value: str) -> o.Toleration:
    return o.Toleration(key="instance", operator="Equal", value=value, effect="NoSchedule")


def _claim(name: str, rc: str) -> o.PodResourceClaim:
    return o.PodResourceClaim(name=name, resource_claim_name=rc)


@pytest.mark.parametrize(("a", "b", "ignore_tolerations", "want"), [
    pytest.param([_ps("ps")], [_ps("ps2")], False, True, id="different name"),
    pytest.param([_ps(min_count=5)], [_ps(min_count=2)], False, False, id="different min count"),
    pytest.param([_ps()], [_ps(node_selector={"key": "val"})], False, True, id="different node selector"),
    pytest.param([_ps(requests={"res": "1"})], [_ps(requests={"res": "2"})], False, False,
                 id="different requests"),
    pytest.param([_ps(init_requests={"res": "1"})], [_ps(init_requests={"res": "2"})], False, False,
                 id="different requests in init containers"),
    pytest.param([_ps(tolerations=[_tol("spot")])], [_ps(tolerations=[_tol("demand")])], False, False,
                 id="different requests in toleration"),
    pytest.param([_ps(pod_requests={"res": "1"})], [_ps(pod_requests={"res": "2"})], False, False,
                 id="different pod-level resources"),
    pytest.param([_ps()], [_ps(pod_requests={"res": "1"})], False, False,
                 id="pod-level resources present vs omitted"),
    pytest.param([_ps()], [_ps(claims=[_claim("claim", "rc")])], False, False,
                 id="resource claims present vs omitted"),
    pytest.param([_ps(claims=[_claim("claim-a", "rc-a"), _claim("claim-b", "rc-b")])],
                 [_ps(claims=[_claim("claim-b", "rc-b"), _claim("claim-a", "rc-a")])], False, True,
                 id="resource claims in reversed order"),
    pytest.param([_ps(count=10)], [_ps(count=20)], False, False, id="different count"),
    pytest.param([o.PodSet(), o.PodSet()], [o.PodSet(), o.PodSet(), o.PodSet()], False, False,
                 id="different slice len"),
    pytest.param([_ps(tolerations=[_tol("spot")])], [_ps(tolerations=[_tol("demand")])], True, True,
                 id="different requests in toleration, ignore tolerations"),
    pytest.param([_ps(node_selector={"key": "val"})], [_ps(node_selector={"key": "val2"})], False, True,
                 id="different requests in node selector"),
])
def test_compare_pod_set_slices(a: list[o.PodSet], b: list[o.PodSet], ignore_tolerations: bool,
                                want: bool) -> None:
    assert job_sync.same_pod_sets(a, b, ignore_tolerations=ignore_tolerations) is want
    assert job_sync.same_pod_sets(b, a, ignore_tolerations=ignore_tolerations) is want


def test_pod_level_quantities_compare_by_value() -> None:
    """Kueue compares with ``equality.Semantic``, quantities by value: "1" and "1000m" alike."""
    assert job_sync.same_pod_sets([_ps(pod_requests={"cpu": "1"})], [_ps(pod_requests={"cpu": "1000m"})],
                                  ignore_tolerations=False)


# --- pkg/util/priority/priority_test.go TestGetPriorityFromPriorityClass ------------------------------------


def _pc(name: str, value: int, default: bool = False) -> o.PriorityClass:
    return o.PriorityClass(metadata=o.ObjectMeta(name=name), value=value, global_default=default)


@pytest.mark.parametrize(("classes", "name", "want"), [
    pytest.param([_pc("test", 50)], "test", ("test", 50), id="priorityClass is specified and it exists"),
    pytest.param([_pc("globalDefault", 40, True)], None, ("globalDefault", 40),
                 id="priorityClass is unspecified and one global default exists"),
    pytest.param([_pc("globalDefault1", 90, True), _pc("globalDefault2", 20, True),
                  _pc("globalDefault3", 50, True)],
                 None, ("globalDefault2", 20),
                 id="priorityClass is unspecified and multiple global defaults exist"),
    pytest.param([], None, None,
                 id="no class and no global default: none (priority 0, Kueue's DefaultPriority)"),
])
def test_get_priority_from_priority_class(classes: list[o.PriorityClass], name: str | None,
                                          want: tuple[str, int] | None) -> None:
    state = integration(*classes)[1].state
    got = workload_priority(state, {}, name)
    assert (got if got is None else (got[0]["name"], got[1])) == want
    if got is not None:
        assert got[0]["kind"] == "PriorityClass"


def test_get_priority_from_priority_class_not_found() -> None:
    """"priorityClass is specified and it does not exist": Kueue's lookup fails (NotFound), no fallback."""
    state = integration(_pc("dflt", 7, True))[1].state
    with pytest.raises(PriorityClassNotFound):
        workload_priority(state, {}, "test")


def test_a_job_whose_pods_ask_pod_level_resources_is_not_its_workload_that_omits_them() -> None:
    """Kueue #14436 (the bug its equality cases guard): a Workload leaving out the pod-level ``resources`` the
    Job's pods ask for would reserve less than they use, so the Job is not equivalent to it (a generated one
    is rewritten, a prebuilt one finished OutOfSync)."""
    j = fixture_job(parallelism=1, completions=None)
    spec = msgspec.structs.replace(j.spec.template.spec,
                                   resources=o.ResourceRequirements(requests={"cpu": "2"}))
    j2 = msgspec.structs.replace(j, spec=msgspec.structs.replace(
        j.spec, template=msgspec.structs.replace(j.spec.template, spec=spec)))
    wl = fixture_workload(count=1)
    _, mirror, _ = integration(wl, j2)
    info = mirror.state.workloads[KEY]
    assert job_sync.equivalent(mirror.state, j, mirror.workloads[KEY], info, None, generated=True)
    assert not job_sync.equivalent(mirror.state, j2, mirror.workloads[KEY], info, None, generated=True)


# --- pkg/util/admissioncheck/admissioncheck_test.go TestConfigHelper ----------------------------------------

GROUP = "kueue.x-k8s.io"
CONFIG = o.ProvisioningRequestConfig(metadata=o.ObjectMeta(name="config"))


def _ac(group: str, kind: str, name: str) -> o.AdmissionCheck:
    return o.AdmissionCheck(metadata=o.ObjectMeta(name="ac"), spec=o.AdmissionCheckSpec(
        parameters=o.AdmissionCheckParameters(api_group=group, kind=kind, name=name)))


@pytest.mark.parametrize(("ac", "configs", "want_error"), [
    pytest.param(o.AdmissionCheck(metadata=o.ObjectMeta(name="ac")), {}, "missing parameters reference",
                 id="no parameter reference"),
    pytest.param(_ac(GROUP, "ProvisioningRequestConfig", ""), {}, "empty name: bad parameters reference",
                 id="bad parameter reference, no name"),
    pytest.param(_ac("not-" + GROUP, "ProvisioningRequestConfig", "config"), {},
                 'wrong group "not-kueue.x-k8s.io", expecting "kueue.x-k8s.io": bad parameters reference',
                 id="bad parameter reference, bad group"),
    pytest.param(_ac(GROUP, "NptProvisioningRequestConfig", "config"), {},
                 'wrong kind "NptProvisioningRequestConfig", expecting "ProvisioningRequestConfig": bad '
                 'parameters reference', id="bad parameter reference, bad kind"),
    pytest.param(_ac(GROUP, "ProvisioningRequestConfig", "config"), {}, "not found", id="config not found"),
    pytest.param(_ac(GROUP, "ProvisioningRequestConfig", "config"), {"config": CONFIG}, "",
                 id="config found"),
])
def test_config_helper(ac: o.AdmissionCheck, configs: dict, want_error: str) -> None:
    config, error = config_for(ac, configs)
    assert (config is CONFIG) is (want_error == "")
    assert want_error in error and bool(error) is bool(want_error)
