"""A ProvisioningRequest (or PodTemplate) the apiserver refuses to create, as Kueue's check controller handles
it (#4114, #4190; ``handleError`` in ``pkg/controller/admissionchecks/provisioning/controller.go``): the error
shows on the check, which stays Pending, and the creation is tried again after a backoff, not held for
ever."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import anyio
from fixtures.provflow import T0, Flow

from events import schema as ev
from events.filelog import FileLog
from kueue_es.scheduler import DEFAULT, next_deadline
from projections import snapshot
from projections.create_failures import backoff_ms

KEY = "default/job-a"
REQUEST = "job-a-prov-1"
REFUSED = 'ProvisioningRequest.autoscaling.x-k8s.io "job-a-prov-1" is invalid: spec.parameters: Too long'
MESSAGE = f'Error creating ProvisioningRequest "{REQUEST}": {REFUSED}'


def _creations(decided: list) -> list[tuple[str, int]]:
    return [(d.request.metadata.name, d.attempt) for d in decided
            if isinstance(d, ev.ProvisioningRequestCreated)]


def _last_creation(f: Flow) -> ev.Record:
    return [r for r in f.records if isinstance(r.event, ev.ProvisioningRequestCreated)][-1]


def _refuse(f: Flow) -> None:
    """The applier's outcome of the last creation decided when the apiserver refuses it (a 422)."""
    r = _last_creation(f)
    e = r.event
    f.append([
        ev.ProvisioningRequestCreateFailed(time=f.state.time, key=e.key, uid=e.uid, decision=r.offset,
                                           check=e.check, name=e.request.metadata.name, message=MESSAGE),
        ev.DecisionRejected(time=f.state.time, key=e.key, uid=e.uid, decision=r.offset, reason="Invalid",
                            message=REFUSED)])


def _check(f: Flow) -> tuple[str, str]:
    s = f.state.workloads[KEY].check_states["prov"]
    return s.state, s.message


def test_a_refused_creation_shows_on_the_pending_check_and_is_decided_again_after_the_backoff() -> None:
    f = Flow("provisioning-retry-then-reject.yaml")
    assert _creations([r.event for r in f.records]) == [(REQUEST, 1)]
    _refuse(f)
    decided = f.settle()
    assert [type(d).__name__ for d in decided] == ["AdmissionCheckUpdated"], \
        "the error on the check, nothing else"
    assert _check(f) == ("Pending", MESSAGE)
    assert f.state.workloads[KEY].phase == "QuotaReserved", "the quota is kept while the creation is retried"
    assert f"default/{REQUEST}" not in f.state.provisioning_requests, \
        "the request never made is not the check's"
    assert next_deadline(f.state, DEFAULT) == T0 + 1000, "the live loop is woken for the retry"
    assert _creations(f.at(0)) == [], "not before the backoff"
    assert _creations(f.at(1)) == [(REQUEST, 1)], \
        "the same request again (Kueue's controller retries its name)"
    assert next_deadline(f.state, DEFAULT) is None, "nothing left to wake for"


def test_a_refusal_that_persists_is_retried_with_a_growing_backoff_not_at_every_turn() -> None:
    f = Flow("provisioning-retry-then-reject.yaml")
    tried = []
    for second in range(3601):
        if _creations(f.at(second)) or second == 0:
            tried.append(second)
            _refuse(f)
            f.settle()
    # 1 s, 2 s, 4 s ... 512 s, then every 1000 s (controller-runtime's ceiling)
    assert tried == [0, 1, 3, 7, 15, 31, 63, 127, 255, 511, 1023, 2023, 3023]
    assert [backoff_ms(n) for n in (1, 2, 10, 11, 50)] == [1000, 2000, 512_000, 1_000_000, 1_000_000]
    assert _check(f) == ("Pending", MESSAGE)
    set_message = [r for r in f.records
                   if isinstance(r.event, ev.AdmissionCheckUpdated) and r.event.message == MESSAGE]
    assert len(set_message) == 1, "the same message is set once"


def test_once_created_the_failures_are_forgotten_and_the_request_maps_onto_the_check() -> None:
    f = Flow("provisioning-retry-then-reject.yaml")
    _refuse(f)
    f.settle()
    assert _creations(f.at(1)) == [(REQUEST, 1)]
    _refuse(f)
    f.settle()
    assert f.state.workloads[KEY].failed_creates[0].failures == 2
    assert _creations(f.at(3)) == [(REQUEST, 1)]
    f.at(4, [f.request(f"default/{REQUEST}", "Provisioned", message="ready")])
    assert f.state.workloads[KEY].failed_creates == ()
    assert _check(f) == ("Ready", "ready")
    assert f.state.workloads[KEY].phase == "Admitted"


def test_the_error_goes_once_the_request_is_there_without_a_condition_that_says_more() -> None:
    """Kueue #13785: a request the autoscaler has not spoken about yet leaves the check Pending with no
    message; the creation error of an earlier attempt no longer holds (and would be appended to every later
    Event)."""
    f = Flow("provisioning-retry-then-reject.yaml")
    _refuse(f)
    f.settle()
    assert _check(f) == ("Pending", MESSAGE)
    assert _creations(f.at(1)) == [(REQUEST, 1)]
    f.at(2, [f.request(f"default/{REQUEST}", "Accepted", status="False")])
    assert _check(f) == ("Pending", "")


def test_a_snapshot_at_every_cut_restores_to_the_fold_of_the_whole_log() -> None:
    f = Flow("provisioning-retry-then-reject.yaml")
    _refuse(f)
    f.settle()
    f.at(1)
    _refuse(f)
    f.settle()
    f.at(3)
    f.at(4, [f.request(f"default/{REQUEST}", "Provisioned", message="ready")])
    records = f.records
    for cut in range(len(records) + 1):
        fresh = Flow.__new__(Flow)
        fresh.state, fresh.records = type(f.state)(), []
        fresh.append([r.event for r in records[:cut]])
        restored = snapshot.decode(snapshot.encode(fresh.state))
        assert snapshot.encode(restored) == snapshot.encode(fresh.state), cut
        assert restored.create_retries.at == fresh.state.create_retries.at, cut
        for r in records[cut:]:
            fresh.state.apply(r)
            restored.apply(r)
        assert snapshot.encode(restored) == snapshot.encode(fresh.state), cut


async def _write(path: Path, records: list[ev.Record]) -> None:
    log = FileLog.open(path)
    for r in records:
        await log.append([r.event])
    await log.close()


def test_replay_verify_passes_over_a_refused_creation(tmp_path: Path) -> None:
    """The controller's decisions after a refusal (the check's message, the creation after the backoff) are
    what the scheduler decides again from the log."""
    f = Flow("provisioning-retry-then-reject.yaml")
    _refuse(f)
    f.settle()
    assert _creations(f.at(1)) == [(REQUEST, 1)]
    anyio.run(_write, tmp_path / "log", f.records)
    result = subprocess.run([sys.executable, "-m", "kueue_es", "replay", "--log", str(tmp_path / "log"),
                             "--verify"], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_new_reservation_is_not_held_back_by_the_backoff_of_the_one_before() -> None:
    """The request name does not change with a reservation, but Kueue's backoff does not outlive one: the
    new QuotaReserved is a Workload update, enqueued at once (and every reconcile in between succeeded)."""
    f = Flow("provisioning-retry-then-reject.yaml")
    for second in (0, 1, 3, 7, 15, 31, 63, 127):  # 8 refusals in a row: the next try not before 255 s
        assert second == 0 or _creations(f.at(second)) == [(REQUEST, 1)], second
        _refuse(f)
        f.settle()
    assert f.state.workloads[KEY].failed_creates[0].retry_at == T0 + 255_000
    wl = f.state.workloads[KEY]
    t = T0 + 200_000
    f.append([ev.WorkloadEvicted(time=t, key=KEY, uid=wl.uid, reason="PodsReadyTimeout", message="timeout",
                                 requeue_at=t + 5000, requeue_count=1, cycle=999, input=len(f.records) - 1)])
    f.settle()
    f.at(202, [ev.JobStopped(time=0, key=KEY, uid=wl.uid)])
    reserved = []
    for second in range(203, 230):
        decided = f.at(second)
        if any(isinstance(d, ev.QuotaReserved) for d in decided):
            reserved.append(second)
            assert _creations(decided) == [(REQUEST, 1)], "created with the new reservation, not at 255 s"
            break
    assert reserved, "reserved again"
    assert f.state.workloads[KEY].failed_creates == (), "the old reservation's failures are gone"
    assert next_deadline(f.state, DEFAULT) != T0 + 255_000
    f.at(reserved[0] + 1, [f.request(f"default/{REQUEST}", "Accepted", status="False")])
    assert _check(f) == ("Pending", ""), "the old error goes once the new request is there"
