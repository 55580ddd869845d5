"""Kueue's StatefulSet reconciler tests as the oracle for the rules kueue-es's pod integration runs for a
StatefulSet's group (:mod:`connectors.k8s.pod_group`): the set among its Workload's owners, the Workload put
on hold at zero, and which pods are let go. Kueue's files, newest versions read:
``statefulset_reconciler_test.go`` (42 475 characters, v1beta2, the #9091 design: the reconciler makes the
Workload), ``statefulset_release_test.go`` (``TestReleaseScaleDownReservation``),
``statefulset_pod_reconciler_test.go`` (12 776 characters, ``testUID``). Each case id names Kueue's case; the
rules that differ between Kueue's designs are in the session-47 report."""

from __future__ import annotations

import msgspec
import pytest
from test_pod_group import group_workload, names, sts_member

from connectors.k8s import pod_group
from events import objects as o
from projections.workloads import ADMITTED, FINISHED, PENDING

STS = o.OwnerReference(api_version="apps/v1", kind="StatefulSet", name="sts", uid="sts-uid")
POD = o.OwnerReference(api_version="v1", kind="Pod", name="sts-0", uid="pod-uid")


def _obs(*owners: o.OwnerReference) -> o.Workload:
    return o.Workload(metadata=o.ObjectMeta(name="g", namespace="ns", uid="wl", resource_version="3",
                                            owner_references=list(owners)),
                      spec=o.WorkloadSpec(queue_name="lq", pod_sets=[o.PodSet(name="r1", count=2)]))


@pytest.mark.parametrize(("replicas", "owners", "added"), [
    (1, (POD,), True),
    (0, (POD,), False),
    (0, (POD, STS), False),
    (3, (POD, STS), False),
], ids=["should add StatefulSet to Workload owner references if replicas > 0",
        "shouldn't add StatefulSet to Workload owner references if replicas = 0",
        "should keep StatefulSet in Workload owner references if replicas = 0",
        "already an owner: nothing written"])
def test_the_set_among_its_workloads_owners(replicas: int, owners: tuple[o.OwnerReference, ...],
                                            added: bool) -> None:
    """Kueue (newest): added while the set has replicas, not removed at zero (the older "should remove
    StatefulSet from Workload owner references if replicas = 0" is superseded by #12233). Not the controller:
    Kueue's ``wantWorkloads`` reference is a plain ``OwnerReference(gvk, "sts", uid)``."""
    refs = pod_group.statefulset_owners(_obs(*owners), "sts", "sts-uid", replicas)
    if not added:
        assert refs is None
        return
    assert refs is not None and refs[-1] == {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "sts",
                                             "uid": "sts-uid"}
    assert [r["kind"] for r in refs] == ["Pod", "StatefulSet"], "the pod stays first (the Workload's kind)"


@pytest.mark.parametrize(("phase", "reserving", "owned", "want"), [
    (ADMITTED, True, False, pod_group.HOLD),
    (PENDING, False, False, None),
    (FINISHED, True, True, None),
], ids=["releases admitted workload", "ignores workload without active reservation",
        "ignores finished workload"])
def test_scaled_to_zero_release_of_the_reservation(phase: str, reserving: bool, owned: bool,
                                                   want: str | None) -> None:
    """``TestReleaseScaleDownReservation``: a Workload holding quota is put on hold (QuotaReserved=False
    ``OnHold``, admission cleared); one holding none, or finished, is left as it is."""
    wl = group_workload(phase, reserving=reserving)
    assert pod_group.hold_step(wl, _obs(POD, STS) if owned else _obs(POD), "sts", 0) == want


UPDATING = pod_group.StatefulSetView(current_revision="1", update_revision="2", queue="lq")
SETTLED = pod_group.StatefulSetView(current_revision="1", update_revision="1", queue="lq", replicas=0)


@pytest.mark.parametrize(("pod", "sts", "admitted", "let_go"), [
    (sts_member("pod1", "1"), UPDATING, True, True),
    (sts_member("pod1", "2"), UPDATING, True, False),
    (sts_member("pod2", "1", gated=False, phase="Running", node="n1"), UPDATING, True, True),
    (sts_member("pod1", "1", gated=False, phase="Running", node="n1"), SETTLED, True, False),
    (sts_member("pod1", "1"), pod_group.STATEFULSET_GONE, False, True),
    (sts_member("pod1", "1"), UPDATING, False, False),
], ids=["should ungate old revision pod during rolling update",
        "should not ungate new revision pod during rolling update",
        "should finalize old revision pod without gate during rolling update",
        "should not finalize running pod when sts exists with same revision",
        "should ungate and finalize orphan pod (sts deleted)",
        "statefulset with update revision (no admitted Workload: #16401)"])
def test_which_pods_the_set_lets_go(pod, sts: pod_group.StatefulSetView, admitted: bool,
                                    let_go: bool) -> None:
    """``TestPodReconciler`` (its pods carry Kueue's finalizer): a pod let go loses Kueue's gates and
    finalizer. During a rollout only once the group's Workload is admitted (Kueue v0.19.7 #16401, v0.20.0
    #16329; the newest ``TestReconciler`` "statefulset with update revision", with no Workload, leaves the old
    revision's pods gated)."""
    assert names(pod_group.let_go_by_statefulset([pod], sts, admitted=admitted)) == (
        [pod.metadata.name] if let_go else [])


def test_scaled_up_again_the_hold_is_cleared() -> None:
    """``TestReconciler_ClearOnHoldSetsReason``: a set of one replica whose Workload is on hold has the hold
    cleared (QuotaReserved=False, reason ``PendingEvaluation`` under UnadmittedWorkloadsObservability, else
    ``Pending``: the fold's words, not decided here); kueue-es resizes first when the count differs
    (#15279)."""
    held = o.Condition(type="QuotaReserved", status="False", reason="OnHold")
    wl = msgspec.structs.replace(group_workload(PENDING), conditions=(held,))
    one = _obs(POD, STS)
    one = msgspec.structs.replace(one, spec=msgspec.structs.replace(one.spec,
                                                                    pod_sets=[o.PodSet(name="r1", count=1)]))
    assert pod_group.hold_step(wl, one, "sts", 1) == pod_group.RELEASE_HOLD
    assert pod_group.hold_step(wl, one, "sts", 3) == pod_group.RESIZE
    assert pod_group.hold_step(wl, one, "sts", 0) is None, "still at zero: stays on hold"
