"""AdmissionFairSharingAnchorAtQuotaReservation (beta, on; Kueue v0.20): Admission Fair Sharing accounts a
LocalQueue's usage from its workloads' quota reservation, not their admission.

A workload holding quota while its admission check is pending counts toward its LocalQueue's usage under the gate
(its entry penalty settled when it reserved, its usage sampled from then on); with the gate off only its pending
entry penalty counts until it is admitted. Turning the gate on or off by a new configuration moves such workloads
into or out of the usage, and a snapshot keeps what was folded.
"""

from __future__ import annotations

import msgspec
import pytest

from events import objects as o
from events import schema as ev
from kueue_es.scheduler import afs, decide
from kueue_es.scheduler.afs import lq_usage
from kueue_es.scheduler.config import load_config
from projections import gates, snapshot
from projections.cluster import ClusterState

T0 = 1_704_067_200_000
MIN = 60_000
KQ = "kueue.x-k8s.io/v1beta2"
GATE = gates.ADMISSION_FAIR_SHARING_ANCHOR_AT_QUOTA_RESERVATION
PENALTY = 1 - 0.5 ** (1 / 10)  # usageSamplingInterval 1m, usageHalfLifeTime 10m


def _document(anchor: bool | None) -> dict:
    doc: dict = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                 "admissionFairSharing": {"usageHalfLifeTime": "10m", "usageSamplingInterval": "1m"}}
    if anchor is not None:
        doc["featureGates"] = {GATE: anchor}
    return doc


def _apply(state: ClusterState, events) -> None:
    for e in events:
        state.apply(ev.Record(state.offset + 1, e))


def _upsert(state: ClusterState, d: dict, t: int) -> None:
    obj = msgspec.convert(d, o.KueueObject)
    _apply(state, [ev.ObjectUpserted(time=t, key=obj.key, obj=obj)])


def _workload(name: str, lq: str, cpu: int) -> dict:
    return {"apiVersion": KQ, "kind": "Workload",
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}",
                         "creationTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {"queueName": lq, "podSets": [{"name": "main", "count": 1, "template": {
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": str(cpu)}}}]}}}]}}


def _state(anchor: bool | None) -> ClusterState:
    state = ClusterState()
    _apply(state, [ev.ConfigRecorded(time=T0, document=_document(anchor), writer="test", id=f"c-{anchor}")])
    objs = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}},
            {"apiVersion": KQ, "kind": "ResourceFlavor", "metadata": {"name": "f1"}},
            {"apiVersion": KQ, "kind": "AdmissionCheck", "metadata": {"name": "approval"},
             "spec": {"controllerName": "example.com/approval"},
             "status": {"conditions": [{"type": "Active", "status": "True", "reason": "Active"}]}},
            {"apiVersion": KQ, "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": {
                "namespaceSelector": {}, "admissionScope": {"admissionMode": "UsageBasedAdmissionFairSharing"},
                "admissionChecksStrategy": {"admissionChecks": [{"name": "approval"}]},
                "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                    {"name": "f1", "resources": [{"name": "cpu", "nominalQuota": 4}]}]}]}}]
    objs += [{"apiVersion": KQ, "kind": "LocalQueue", "metadata": {"name": lq, "namespace": "ns"},
              "spec": {"clusterQueue": "cq"}} for lq in ("a", "b")]
    for d in objs:
        _upsert(state, d, T0)
    return state


def _settle(state: ClusterState, config, now: int) -> None:
    for _ in range(20):
        batch = decide(state, config, now=now)
        if not batch:
            return
        _apply(state, batch)
    raise AssertionError("the scheduler does not settle")


def _reserved_waiting(anchor: bool | None) -> tuple[ClusterState, object]:
    """LocalQueue ns/a's 2-cpu workload holds quota at T0, its admission check pending."""
    state = _state(anchor)
    config = load_config(_document(anchor))
    _upsert(state, _workload("w", "a", 2), T0)
    _settle(state, config, T0)
    wl = state.workloads["ns/w"]
    assert wl.phase == "QuotaReserved", wl.phase  # reserved, not admitted: the check is pending
    return state, config


@pytest.mark.parametrize("anchor", [None, True])
def test_a_reservation_waiting_on_its_check_counts_under_the_gate(anchor) -> None:
    state, config = _reserved_waiting(anchor)
    assert gates.GATES[GATE][1] is True  # beta, on by default: no setting is the gate on
    # settled when it reserved: 2 cpu x penalty, then sampled towards the 2 cpu it holds
    assert lq_usage(state, config, "ns/a", "cq", T0) == pytest.approx(2 * PENALTY)
    after = lq_usage(state, config, "ns/a", "cq", T0 + 30 * MIN)
    assert after == pytest.approx(2 + (2 * PENALTY - 2) / 8)  # 3 half-lives towards 2
    # its admission settles nothing more
    _apply(state, [ev.AdmissionCheckStateChanged(time=T0 + 30 * MIN, key="ns/w", check="approval", state="Ready")])
    _settle(state, config, T0 + 30 * MIN)
    assert state.workloads["ns/w"].phase == "Admitted"
    assert lq_usage(state, config, "ns/a", "cq", T0 + 30 * MIN) == pytest.approx(after)
    assert lq_usage(state, config, "ns/b", "cq", T0 + 30 * MIN) == 0


def test_with_the_gate_off_only_the_pending_penalty_counts_until_admission() -> None:
    state, config = _reserved_waiting(False)
    assert lq_usage(state, config, "ns/a", "cq", T0) == pytest.approx(2 * PENALTY)
    assert lq_usage(state, config, "ns/a", "cq", T0 + 30 * MIN) == pytest.approx(2 * PENALTY)  # nothing sampled
    _apply(state, [ev.AdmissionCheckStateChanged(time=T0 + 30 * MIN, key="ns/w", check="approval", state="Ready")])
    _settle(state, config, T0 + 30 * MIN)
    assert state.workloads["ns/w"].phase == "Admitted"
    # settled at admission: the penalty, now in the history, then sampled from there
    assert lq_usage(state, config, "ns/a", "cq", T0 + 30 * MIN) == pytest.approx(2 * PENALTY)
    assert lq_usage(state, config, "ns/a", "cq", T0 + 60 * MIN) == pytest.approx(2 + (2 * PENALTY - 2) / 8)


def test_the_anchor_decides_which_local_queue_goes_first() -> None:
    """ns/b admitted 1 cpu 30 minutes ago; ns/a's 2 cpu have waited on their check since. The next workloads
    of both compete for the one cpu left: under the gate ns/a's reservation makes it the heavier LocalQueue."""
    heads = {}
    for anchor in (True, False):
        state = _state(anchor)
        config = load_config(_document(anchor))
        _upsert(state, _workload("b-old", "b", 1), T0)
        _settle(state, config, T0)
        _apply(state, [ev.AdmissionCheckStateChanged(time=T0, key="ns/b-old", check="approval", state="Ready")])
        _settle(state, config, T0)
        assert state.workloads["ns/b-old"].phase == "Admitted"
        _upsert(state, _workload("w", "a", 2), T0)
        _settle(state, config, T0)
        assert state.workloads["ns/w"].phase == "QuotaReserved"
        t = T0 + 30 * MIN
        _upsert(state, _workload("a-next", "a", 1), t)
        _upsert(state, _workload("b-next", "b", 1), t)
        _settle(state, config, t)
        heads[anchor] = sorted(k for k in ("ns/a-next", "ns/b-next") if state.workloads[k].reserving)
    assert heads == {True: ["ns/b-next"], False: ["ns/a-next"]}


@pytest.mark.parametrize("turned_on", [True, False])
def test_a_new_configuration_moves_the_anchor_of_held_reservations(turned_on) -> None:
    state, config = _reserved_waiting(not turned_on)
    t = T0 + 10 * MIN
    _apply(state, [ev.ConfigRecorded(time=t, document=_document(turned_on), writer="test", id="again")])
    cold = snapshot.decode(snapshot.encode(state))
    assert cold.afs_history == state.afs_history
    later = t + 30 * MIN
    usage = lq_usage(state, load_config(_document(turned_on)), "ns/a", "cq", later)
    if turned_on:  # settled (another penalty) at the change, then sampled towards the 2 cpu it holds
        assert usage == pytest.approx(2 + (2 * PENALTY - 2) / 8, rel=0.2)
        assert usage > 1.5
    else:  # out of the usage: what it had settled decays (3 half-lives), the pending penalty counts on top
        assert usage < 0.5


def test_a_snapshot_anchored_at_admission_is_reanchored_when_restored_under_the_gate() -> None:
    """A snapshot older than the gate (version 33) recorded the history anchored at admission: restored under the
    gate, a workload holding quota without admission enters its LocalQueue's usage at the restore, so releasing it
    later leaves nothing negative behind."""
    state, config = _reserved_waiting(False)  # recorded as an older kueue-es did: nothing for ns/w yet
    _apply(state, [ev.ConfigRecorded(time=T0, document=_document(None), writer="test", id="upgraded")])
    snap = snapshot.take(state)
    old = msgspec.structs.replace(snap, version=33, afs_queues=[], afs_history=[  # nor the seeds of version 45
        (t, lq, sign, list(u)) for t, lq, sign, u in state.afs_entries() if lq != "ns/a" and sign != 0])
    restored = snapshot.restore(old)
    assert [(lq, sign) for _, lq, sign, _ in restored.afs_entries() if sign] == [("ns/a", 1)]  # sign 0: seeds
    assert snapshot.restore(snap).afs_history == state.afs_history  # a current one is taken as it is
    t = T0 + 10 * MIN
    _apply(restored, [ev.WorkloadFinished(time=t, key="ns/w")])
    fold_ = afs.fold(restored, load_config(_document(None)))
    assert fold_.queues["ns/a"].admitted == {"cpu": 0.0}
    assert lq_usage(restored, config, "ns/a", "cq", t + 60 * MIN) >= 0
