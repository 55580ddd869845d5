"""The ProvisioningRequest check controller beyond the timeline scenarios: its naming rules, the check's
activity, the fold of requests that are created or deleted before the watch shows it, the TAS parts of a
request's PodTemplate, snapshots and replay of a whole provisioning flow."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import anyio
import msgspec
import pytest
from fixtures.provflow import T0, Flow, retry_then_provision

from events import crd_markers
from events import objects as o
from events import schema as ev
from events.filelog import FileLog
from kueue_es.scheduler import decide
from kueue_es.scheduler import provisioning as prov
from kueue_es.scheduler.config import load_config
from projections import snapshot
from projections.admissionchecks import applicable_checks, check_active

# --- names ---------------------------------------------------------------------------------------------------------


def test_short_names_are_kept_and_long_ones_hashed_as_kueue_does() -> None:
    assert prov.request_name("job-a", "prov", 3) == "job-a-prov-3"
    assert prov.template_name("job-a-prov-3", "main") == "ppt-job-a-prov-3-main"
    exact = "w" * 247
    assert prov.limit_name(exact) == exact
    full = "w" * 248
    short = prov.limit_name(full)
    assert short == "w" * 247 + "-" + hashlib.sha1(full.encode()).hexdigest()[:5]
    assert len(short) == 253


@pytest.mark.parametrize("workload", ["job-a", "j" * 200, "j" * 245])
def test_the_attempt_is_read_back_from_every_name_the_controller_gives(workload: str) -> None:
    for attempt in (1, 2, 4):
        assert prov.attempt_of(prov.request_name(workload, "prov", attempt), workload, "prov", 4) == attempt
    assert prov.attempt_of(prov.request_name(workload, "other", 1), workload, "prov", 4) is None


def test_names_of_other_workloads_or_without_a_number_are_not_attempts() -> None:
    assert prov.attempt_of("job-ab-prov-1", "job-a", "prov", 4) is None
    assert prov.attempt_of("job-a-prov-", "job-a", "prov", 4) is None
    assert prov.attempt_of("job-a-prov-1x", "job-a", "prov", 4) is None
    assert prov.attempt_of("job-a-prov-12", "job-a", "prov", 4) == 12


def test_backoff_doubles_from_the_base_and_stops_at_the_maximum() -> None:
    rs = o.ProvisioningRequestRetryStrategy()
    assert [prov.backoff_seconds(rs, n) for n in range(7)] == [60, 120, 240, 480, 960, 1800, 1800]


def test_a_negative_retry_strategy_retries_nothing_and_waits_nothing() -> None:
    """Kueue's CRD puts no minimum on the retry strategy. A negative limit retries nothing, as 0 does (Kueue
    retries an attempt while it is at most the limit): one request, whose shortened name is still known as its
    own. A negative base or maximum waits nothing: Kueue's Workload CRD holds ``requeueAfterSeconds`` to 0 or
    more, so a negative wait could not be written (and no wait is what Kueue's API says of none)."""
    rs = o.ProvisioningRequestRetryStrategy(backoff_limit_count=-2, backoff_base_seconds=-60,
                                            backoff_max_seconds=-1)
    assert prov.attempts(rs) == 1 == prov.attempts(msgspec.structs.replace(rs, backoff_limit_count=0))
    assert prov.attempts(o.ProvisioningRequestRetryStrategy()) == 4
    long = "j" * 245
    assert prov.attempt_of(prov.request_name(long, "prov", 1), long, "prov", prov.attempts(rs)) == 1
    assert [prov.backoff_seconds(rs, n) for n in range(3)] == [0, 0, 0]
    assert prov.backoff_seconds(o.ProvisioningRequestRetryStrategy(backoff_base_seconds=-60), 2) == 0


# --- activity and applicability ------------------------------------------------------------------------------------


def _check(parameters: o.AdmissionCheckParameters | None, controller: str = prov.PROVISIONING_CONTROLLER,
           conditions: list[o.Condition] | None = None) -> o.AdmissionCheck:
    return o.AdmissionCheck(metadata=o.ObjectMeta(name="c"), spec=o.AdmissionCheckSpec(
        controller_name=controller, parameters=parameters), status=o.AdmissionCheckStatus(conditions=conditions or []))


def test_a_provisioning_check_is_active_while_its_config_exists() -> None:
    configs = {"cfg": o.ProvisioningRequestConfig(metadata=o.ObjectMeta(name="cfg"))}
    ref = o.AdmissionCheckParameters(api_group="kueue.x-k8s.io", kind="ProvisioningRequestConfig", name="cfg")
    assert check_active(_check(ref), configs) == (True, "Active", "The admission check is active")
    missing = msgspec.structs.replace(ref, name="gone")
    assert check_active(_check(missing), configs) == (
        False, "BadParametersRef", 'ProvisioningRequestConfig.kueue.x-k8s.io "gone" not found')
    assert check_active(_check(None), configs) == (False, "BadParametersRef", "missing parameters reference")
    wrong = msgspec.structs.replace(ref, kind="MultiKueueConfig")
    assert check_active(_check(wrong), configs)[2] == (
        'wrong kind "MultiKueueConfig", expecting "ProvisioningRequestConfig": bad parameters reference')


def test_other_controllers_checks_are_as_active_as_their_status_says() -> None:
    active = o.Condition(type="Active", status="True", reason="Active")
    assert check_active(_check(None, "example.com/x", [active]), {})[0]
    assert not check_active(_check(None, "example.com/x"), {})[0]


def test_checks_that_apply_with_and_without_an_admission() -> None:
    spec = o.ClusterQueueSpec(
        resource_groups=[o.ResourceGroup(covered_resources=["cpu"], flavors=[
            o.FlavorQuotas(name="spot", resources=[o.ResourceQuota(name="cpu")]),
            o.FlavorQuotas(name="on-demand", resources=[o.ResourceQuota(name="cpu")])])],
        admission_checks_strategy=o.AdmissionChecksStrategy(admission_checks=[
            o.AdmissionCheckStrategyRule(name="z-all"),
            o.AdmissionCheckStrategyRule(name="spot-only", on_flavors=["spot"]),
            o.AdmissionCheckStrategyRule(name="both", on_flavors=["on-demand", "spot"])]))
    assert applicable_checks(spec, None) == ["both", "z-all"]
    assert applicable_checks(spec, ["on-demand"]) == ["both", "z-all"]
    assert applicable_checks(spec, ["spot"]) == ["both", "spot-only", "z-all"]


# --- the fold of requests ------------------------------------------------------------------------------------------


def test_a_created_request_is_known_at_once_and_never_created_twice() -> None:
    f = Flow("provisioning-happy-path.yaml")
    created = [r.event for r in f.records if isinstance(r.event, ev.ProvisioningRequestCreated)]
    assert [e.request.key for e in created] == ["default/job-a-prov-1"]
    assert f.state.provisioning_requests["default/job-a-prov-1"].metadata.uid == ""
    assert f.at(5) == []  # not observed yet, and nothing more to decide
    f.at(6, [f.request("default/job-a-prov-1", "Accepted")])
    assert f.state.provisioning_requests["default/job-a-prov-1"].metadata.uid == "uid-default/job-a-prov-1"


def test_a_late_event_of_a_deleted_request_does_not_bring_it_back() -> None:
    f = Flow("provisioning-happy-path.yaml")
    stale = f.request("default/job-a-prov-1", "Accepted")
    f.at(5, [stale])
    decided = f.at(10, [ev.WorkloadFinished(time=0, key="default/job-a", uid="uid-default/job-a")])
    assert [type(d).__name__ for d in decided] == ["ProvisioningRequestDeleted"]
    assert decided[0].request_uid == "uid-default/job-a-prov-1"
    assert f.state.deleted_requests == {"uid-default/job-a-prov-1": None}
    f.at(11, [stale])  # the watch was behind
    assert f.state.provisioning_requests == {}
    f.at(12, [ev.ObjectDeleted(time=0, key="default/job-a-prov-1", uid="uid-default/job-a-prov-1",
                               kind="ProvisioningRequest")])
    assert f.state.deleted_requests == {}


def test_the_deletion_of_an_older_request_of_a_name_keeps_the_one_just_created() -> None:
    f = Flow("provisioning-happy-path.yaml")
    f.at(5, [ev.ObjectDeleted(time=0, key="default/job-a-prov-1", uid="uid-of-an-older-one",
                              kind="ProvisioningRequest")])
    assert "default/job-a-prov-1" in f.state.provisioning_requests
    assert f.at(6) == []


def _rewritten(f: Flow, count: int) -> ev.ObjectUpserted:
    """job-a as its job integration rewrites it with ``count`` pods, before the reservation was written: the
    Workload shows no status."""
    first = next(r.event for r in f.records if isinstance(r.event, ev.ObjectUpserted) and r.event.key == "default/job-a")
    obj = first.obj
    (ps,) = obj.spec.pod_sets
    spec = msgspec.structs.replace(obj.spec, pod_sets=[msgspec.structs.replace(ps, count=count)])
    return msgspec.structs.replace(first, obj=msgspec.structs.replace(obj, spec=spec))


def test_a_request_decided_for_a_reservation_forgotten_is_withdrawn_and_the_next_one_gets_its_own() -> None:
    """The request job-a-prov-1 was decided for 2 pods on the log's reservation; the Workload, rewritten with 1
    pod before that reservation was written, makes the fold forget it. Kueue never made that request (its
    controller sees only stored reservations): it is deleted before it is ever created, and the next
    reservation gets a request counted from its own admission, not the forgotten one's 2 pods."""
    f = Flow("provisioning-happy-path.yaml")
    assert f.state.provisioning_requests["default/job-a-prov-1"].spec.pod_sets[0].count == 2
    decided = f.at(5, [_rewritten(f, 1)])
    assert [type(d).__name__ for d in decided] == [
        "ProvisioningRequestDeleted", "QuotaReserved", "ProvisioningRequestCreated"]
    assert (decided[0].name, decided[0].reason, decided[0].request_uid) == ("job-a-prov-1", prov.FORGOTTEN, "")
    created = decided[2]
    assert created.request.metadata.name == "job-a-prov-1"
    assert [p.count for p in created.request.spec.pod_sets] == [1]
    assert [p.count for p in f.state.provisioning_requests["default/job-a-prov-1"].spec.pod_sets] == [1]


def test_an_unobserved_request_of_a_workload_evicted_with_the_cleanup_gate_off_is_kept() -> None:
    """Only a pending workload that is not evicted lost its reservation unwritten: one evicted (and released)
    before the watch showed its request keeps it while CleanupProvisioningRequestsOnEviction is off, as Kueue
    keeps an evicted workload's requests for its next reservation."""
    f = Flow("provisioning-happy-path.yaml")
    off = load_config({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                       "featureGates": {"CleanupProvisioningRequestsOnEviction": False}})
    base = {"time": T0 + 1000, "cycle": f.state.last_cycle + 1, "input": len(f.records) - 1}
    f.append([ev.WorkloadEvicted(key="default/job-a", uid="uid-default/job-a", reason="PodsReadyTimeout",
                                 message="timed out", requeue_at=T0 + 61_000, requeue_count=1, **base),
              ev.JobStopped(time=T0 + 2000, key="default/job-a")])  # (a timeout's eviction has its backoff)
    while batch := decide(f.state, off, T0 + 2000):
        f.append(batch)
    wl = f.state.workloads["default/job-a"]
    assert wl.evicted == "PodsReadyTimeout" and wl.phase == "Pending"
    assert f.state.provisioning_requests["default/job-a-prov-1"].metadata.uid == ""
    assert not any(isinstance(r.event, ev.ProvisioningRequestDeleted) for r in f.records)


def _local_queue(f: Flow, stop_policy: str) -> ev.ObjectUpserted:
    """LocalQueue default/lq as the watch brings it back with ``stop_policy``."""
    lq = f.state.local_queues["default/lq"]
    spec = msgspec.structs.replace(lq.spec, stop_policy=stop_policy)
    return ev.ObjectUpserted(time=0, key=lq.key, uid=lq.metadata.uid, obj=msgspec.structs.replace(lq, spec=spec))


@pytest.mark.parametrize("seen", [False, True], ids=["not-yet-watched", "watched"])
def test_a_reservation_given_back_keeps_its_request_for_the_next_one(seen: bool) -> None:
    """job-a's LocalQueue stops while its check waits: it gives its quota back (QuotaReservationUnset). Kueue's
    controller leaves a workload that holds no quota, neither finished nor evicted, alone (controller.go, kueue
    main): its request stays, whether or not the watch has shown it yet, and the next reservation takes it as the
    check's active request (no new attempt); provisioned, it admits the workload. kueue-es deleted one the watch had
    not shown yet (``ReservationForgotten``), as if the fold had forgotten that reservation."""
    f = Flow("provisioning-happy-path.yaml")
    if seen:
        f.at(5, [f.request("default/job-a-prov-1", "Accepted")])
    stopped = f.at(10, [_local_queue(f, "Hold")])
    assert [type(d).__name__ for d in stopped] == ["QuotaReservationUnset", "WorkloadPending"]
    assert "default/job-a-prov-1" in f.state.provisioning_requests
    resumed = f.at(20, [_local_queue(f, "None")])
    assert "QuotaReserved" in [type(d).__name__ for d in resumed]
    assert not any(isinstance(d, ev.ProvisioningRequestCreated | ev.ProvisioningRequestDeleted) for d in resumed)
    admitted = f.at(30, [f.request("default/job-a-prov-1", "Provisioned", message="ready")])
    assert [type(d).__name__ for d in admitted] == ["AdmissionCheckUpdated", "WorkloadAdmitted"]
    assert not any(isinstance(r.event, ev.ProvisioningRequestDeleted) for r in f.records)


def test_a_pod_template_carries_the_topology_gate_and_no_tas_label_once_the_pod_set_has_a_topology() -> None:
    """Kueue builds the PodTemplate from what starting the pod set adds, which has had no
    ``kueue.x-k8s.io/tas`` label since v0.14 (#6895): only the gate."""
    f = Flow("provisioning-happy-path.yaml")
    wl = f.state.workloads["default/job-a"]
    cfg = f.state.provisioning_configs["prov-config"]
    plain = prov.pod_template(f.state, wl, 0, "t")
    assert plain.template.spec.scheduling_gates == [] and plain.template.metadata.labels == {}
    psa = wl.admission.pod_set_assignments[0]
    tas = msgspec.structs.replace(psa, topology_assignment=o.TopologyAssignment(levels=["rack"]))
    wl.admission = o.Admission(cluster_queue="cq", pod_set_assignments=[tas])
    gated = prov.pod_template(f.state, wl, 0, "t")
    assert gated.template.spec.scheduling_gates == [{"name": "kueue.x-k8s.io/topology"}]
    assert gated.template.metadata.labels == {}
    assert prov.merged_pod_sets(f.state, wl, cfg) == [(0, 2)]


def test_a_pod_template_drops_the_templates_gates_and_an_earlier_admissions_annotations() -> None:
    f = Flow("provisioning-happy-path.yaml")
    wl = f.state.workloads["default/job-a"]
    (template,) = f.state.pod_templates[wl.key]
    left = {"autoscaling.x-k8s.io/consume-provisioning-request": "job-a-prov-1",
            "autoscaling.x-k8s.io/provisioning-class-name": "old-class", "kueue.x-k8s.io/workload": "job-a",
            "kueue.x-k8s.io/workload-slice-name": "job-a-1", "team": "ml"}
    f.state.pod_templates[wl.key] = (msgspec.structs.replace(
        template, metadata=o.TemplateMeta(annotations=left),
        spec=msgspec.structs.replace(template.spec, scheduling_gates=[{"name": "example.com/held"}])),)
    made = prov.pod_template(f.state, wl, 0, "t")
    assert made.template.metadata.annotations == {"team": "ml"}
    assert made.template.spec.scheduling_gates == []


# --- the check's message ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("char", "kept"), [("x", "x" * 32740), ("€", "€" * 10913 + "\ufffd")])
def test_a_message_a_prefix_takes_past_the_crds_bound_is_cut_as_kueue_cuts_condition_messages(
        char: str, kept: str) -> None:
    """A request condition's message may be as long as the check's message may be (32768); "Retrying after
    failure: " before it would have the status write refused on every pass. Cut to 32 KiB, the last 4 bytes
    " ..." (Kueue's ``api.TruncateConditionMessage``; a character cut in two is U+FFFD per byte, as Go's JSON
    writes it), and once: the next pass finds the check as it would set it."""
    f = Flow("provisioning-retry-then-reject.yaml")
    longest = char * (32768 // len(char.encode()))
    decided = f.at(10, [f.request("default/job-a-prov-1", "Failed", message=longest)])
    retry = [d for d in decided if isinstance(d, ev.AdmissionCheckUpdated) and d.state == "Retry"]
    assert len(retry) == 1, "cut once: the next pass finds the check as it would set it"
    assert retry[0].message == "Retrying after failure: " + kept + " ..."
    status = {"admissionChecks": [{"message": retry[0].message}]}
    assert crd_markers.errors("Workload", {"status": status}) == []


# --- snapshots and replay -----------------------------------------------------------------------------------------


def test_a_snapshot_mid_flow_behaves_as_the_fold_it_was_taken_from() -> None:
    f = Flow("provisioning-retry-then-reject.yaml")
    f.at(10, [f.request("default/job-a-prov-1", "Failed", message="no capacity")])
    f.at(11, [ev.JobStopped(time=0, key="default/job-a")])
    f.at(70)
    restored = snapshot.decode(snapshot.encode(f.state))
    assert snapshot.digest(restored) == snapshot.digest(f.state)
    assert restored.requests_of == f.state.requests_of
    assert restored.pod_templates == f.state.pod_templates
    obs = f.request("default/job-a-prov-2", "Provisioned")
    for state in (f.state, restored):
        state.apply(ev.Record(state.offset + 1, msgspec.structs.replace(obs, time=T0 + 80_000)))
    assert decide(restored) == decide(f.state)
    assert [type(d).__name__ for d in decide(restored)] == ["AdmissionCheckUpdated"]


async def _write(path: Path, records: list[ev.Record], tamper=None) -> None:
    log = FileLog.open(path)
    for r in records:
        e = r.event
        if tamper is not None:
            e = tamper(e)
        await log.append([e])
    await log.close()


def _verify(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kueue_es", "replay", "--log", str(path), "--verify"],
                          capture_output=True, text=True)


def test_replay_verify_passes_over_a_whole_provisioning_flow(tmp_path: Path) -> None:
    f = retry_then_provision()
    kinds = {type(r.event).__name__ for r in f.records}
    assert {"ProvisioningRequestCreated", "ProvisioningRequestDeleted", "AdmissionCheckUpdated", "WorkloadEvicted",
            "WorkloadAdmitted"} <= kinds
    anyio.run(_write, tmp_path / "log", f.records)
    result = _verify(tmp_path / "log")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "verified:" in result.stdout


def test_replay_verify_catches_a_forged_request(tmp_path: Path) -> None:
    def forge(e):
        if isinstance(e, ev.ProvisioningRequestCreated) and e.attempt == 2:
            spec = msgspec.structs.replace(e.request.spec, provisioning_class_name="forged")
            return msgspec.structs.replace(e, request=msgspec.structs.replace(e.request, spec=spec))
        return e

    anyio.run(_write, tmp_path / "log", retry_then_provision().records, forge)
    result = _verify(tmp_path / "log")
    assert result.returncode == 1, result.stdout
    assert "MISMATCH" in result.stdout and "request" in result.stdout
