"""The controller rules look only at what changed, and decide exactly what a look at every workload decides.

``reconcile`` looks at the workloads the projection marked as touched since its last pass and at the clocks that
ran out (requeue backoffs, waitForPodsReady, maximum execution times, retention); ``reconcile(..., full=True)``
looks at every workload. Over random logs — workloads queued, admitted, evicted, finished, deactivated and
deleted, some with a maximum execution time that runs out, across admissions too; admission checks of another
controller and of the ProvisioningRequest controller, with requests failing, expiring, provisioned and going
away; TAS workloads on nodes that fail and recover, with pods that run and end, and nodes whose 30 s NotReady wait
(TASReplaceNodeOnPodTermination off, or TASReplaceNodeDueToNotReadyOverFixedTime on) runs out in time or has long
run out; workloads owned by a single Pod, whose
placement is kept on a failed node and who are not requeued after a preemption (SkipReassignmentForPodOwnedWorkloads,
switched off too); LocalQueues and
ClusterQueues stopped, drained and deleted; checks and configs changing; time passing in steps from 1 ms to
minutes; workloads parked with an equivalent one that failed; the scheduler's configuration switching between
waitForPodsReady, retention and gate settings (SchedulingEquivalenceHashing off among them) — after every
step, the two give the same decisions, asking twice without applying gives them again, and the next deadline
read off the projection's clocks is the one a scan of every workload finds.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from functools import cache

import msgspec
import pytest
from fixtures.eventgen import shown_reserved
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events import objects as o
from events import schema as ev
from events.manifests import load_text
from events.timefmt import format_time
from kueue_es.scheduler import DEFAULT, pods_ready_timeouts
from kueue_es.scheduler.config import load_config
from kueue_es.scheduler.cycle import run_cycle
from kueue_es.scheduler.nodefailure import assigned_nodes
from kueue_es.scheduler.reconcile import next_deadline, reconcile, retention_deadline
from projections import snapshot
from projections.cluster import ClusterState, max_execution_deadline
from projections.node_ready import not_ready_wait_ends
from projections.workloads import ADMITTED, BYPASSED, PENDING, RESERVED

T0 = 1_704_067_200_000
KQ = "kueue.x-k8s.io/v1beta2"
NAMESPACES = ("ns0", "ns1")
QUEUES = ("lq-plain", "lq-prov", "lq-tas")
CQS = {"lq-plain": "cq-plain", "lq-prov": "cq-prov", "lq-tas": "cq-tas"}
NODES = ("n0", "n1", "n2", "n3")


def _config(doc: dict) -> object:
    return load_config({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", **doc})


CONFIGS = (
    DEFAULT,
    _config({"waitForPodsReady": {"timeout": "5s", "requeuingStrategy": {"backoffBaseSeconds": 2,
                                                                          "backoffLimitCount": 0}}}),
    _config({"objectRetentionPolicies": {"workloads": {"afterFinished": "4s", "afterDeactivatedByKueue": "3s"}}}),
    _config({"waitForPodsReady": {"timeout": "3s", "requeuingStrategy": {"backoffBaseSeconds": 1}},
             "objectRetentionPolicies": {"workloads": {"afterFinished": "0s"}}}),
    _config({"featureGates": {"SchedulingEquivalenceHashing": False,
                              "SchedulingEquivalenceHashingIgnorePodSetName": False}}),
    _config({"featureGates": {"UnadmittedWorkloadsExplicitStatus": True}}),
    _config({"featureGates": {"TASReplaceNodeOnNodeTaints": False}}),
    _config({"featureGates": {"SkipReassignmentForPodOwnedWorkloads": False}}),
    _config({"featureGates": {"TASReplaceNodeDueToNotReadyOverFixedTime": True}}),
    _config({"featureGates": {"TASReplaceNodeOnPodTermination": False}}),
)


@cache
def _obj(text: str) -> o.KObject:
    return load_text(text, "test").objects[0]


def obj(doc: dict) -> o.KObject:
    return _obj(json.dumps(doc, sort_keys=True))


def node(name: str, ready: str | None = "True", taint: str = "", since: int | None = None) -> o.KObject:
    condition: dict = {"type": "Ready", "status": ready}
    if since is not None:
        condition["lastTransitionTime"] = format_time(since)
    return obj({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
        "cloud.example.com/rack": f"r{NODES.index(name) // 2}", "kubernetes.io/hostname": name, "pool": "tas"}},
        "spec": {"taints": [{"key": "maintenance", "effect": taint}] if taint else []},
        "status": {"allocatable": {"cpu": "4", "pods": "110"}, "conditions": [condition] if ready else []}})


def cluster_queue(name: str, stop: str = "None", checks: tuple[str, ...] = ()) -> o.KObject:
    flavor, quota = ("tas", 16) if name == "cq-tas" else ("plain", 6)
    spec: dict = {"namespaceSelector": {}, "stopPolicy": stop, "resourceGroups": [{"coveredResources": ["cpu"],
                  "flavors": [{"name": flavor, "resources": [{"name": "cpu", "nominalQuota": quota}]}]}]}
    if checks:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": c} for c in checks]}
    return obj({"apiVersion": KQ, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec})


def local_queue(ns: str, name: str, stop: str = "None") -> o.KObject:
    return obj({"apiVersion": KQ, "kind": "LocalQueue", "metadata": {"name": name, "namespace": ns},
                "spec": {"clusterQueue": CQS[name], "stopPolicy": stop}})


def admission_check(name: str) -> o.KObject:
    if name == "prov":
        return obj({"apiVersion": KQ, "kind": "AdmissionCheck", "metadata": {"name": "prov"},
                    "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request", "parameters": {
                        "apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "prc"}}})
    return obj({"apiVersion": KQ, "kind": "AdmissionCheck", "metadata": {"name": name},
                "spec": {"controllerName": "example.com/other"}})


def provisioning_config(limit: int) -> o.KObject:
    return obj({"apiVersion": KQ, "kind": "ProvisioningRequestConfig", "metadata": {"name": "prc"},
                "spec": {"provisioningClassName": "cls", "retryStrategy": {
                    "backoffLimitCount": limit, "backoffBaseSeconds": 1, "backoffMaxSeconds": 4}}})


def workload(ns: str, name: str, uid: str, queue: str, cpu: int, count: int, active: bool,
             max_seconds: int | None = None, owner: str = "") -> o.KObject:
    """``owner``: the kind of its one owner (a ``v1`` Pod or a ``batch/v1`` Job), or none."""
    pod_set: dict = {"name": "main", "count": count, "template": {"spec": {"containers": [
        {"name": "c", "resources": {"requests": {"cpu": str(cpu)}}}]}}}
    if queue == "lq-tas":
        pod_set["topologyRequest"] = {"required": "cloud.example.com/rack"}
    spec: dict = {"queueName": queue, "active": active, "podSets": [pod_set]}
    if max_seconds is not None:
        spec["maximumExecutionTimeSeconds"] = max_seconds
    metadata: dict = {"name": name, "namespace": ns, "uid": uid, "creationTimestamp": format_time(T0)}
    if owner:
        metadata["ownerReferences"] = [{"apiVersion": "v1" if owner == "Pod" else "batch/v1", "kind": owner,
                                        "name": name, "uid": f"owner-{uid}"}]
    return obj({"apiVersion": KQ, "kind": "Workload", "metadata": metadata, "spec": spec})


def pod(ns: str, name: str, wl: str, on: str, phase: str, deleting: bool) -> o.KObject:
    meta: dict = {"name": name, "namespace": ns, "uid": f"uid-{ns}-{name}",
                  "annotations": {"kueue.x-k8s.io/workload": wl}}
    if deleting:
        meta["deletionTimestamp"] = format_time(T0)
    return obj({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"nodeName": on, "containers": [
        {"name": "c", "resources": {"requests": {"cpu": "1"}}}]}, "status": {"phase": phase}})


def prelude() -> list[o.KObject]:
    return [
        obj({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}) for ns in NAMESPACES
    ] + [
        obj({"apiVersion": KQ, "kind": "Topology", "metadata": {"name": "topo"}, "spec": {"levels": [
            {"nodeLabel": "cloud.example.com/rack"}, {"nodeLabel": "kubernetes.io/hostname"}]}}),
        obj({"apiVersion": KQ, "kind": "ResourceFlavor", "metadata": {"name": "plain"}}),
        obj({"apiVersion": KQ, "kind": "ResourceFlavor", "metadata": {"name": "tas"},
             "spec": {"topologyName": "topo", "nodeLabels": {"pool": "tas"}}}),
        *(node(n) for n in NODES),
        admission_check("prov"), admission_check("ext"), provisioning_config(1),
        cluster_queue("cq-plain", checks=("ext",)), cluster_queue("cq-prov", checks=("prov",)),
        cluster_queue("cq-tas"),
        *(local_queue(ns, q) for ns in NAMESPACES for q in QUEUES),
    ]


def next_deadline_by_scan(state: ClusterState, config) -> int | None:
    """What ``next_deadline`` finds, by looking at every workload."""
    times = [t for k, t in state.backoff.items()
             if k in state.workloads and not state.workloads[k].reserving and state.workloads[k].active]
    times.extend(state.second_pass.values())
    if config.pods_ready.enable:
        for cq in state.reserving:
            for key in state.reserving[cq]:
                found = pods_ready_timeouts.deadline(config, state.workloads[key])
                if found is not None:
                    times.append(found[0])
    for cq in state.reserving:
        for key in state.reserving[cq]:
            wl = state.workloads[key]
            if wl.phase == ADMITTED and not wl.evicted:
                d = max_execution_deadline(wl)
                if d is not None:
                    times.append(d)
    if not config.gate("TASReplaceNodeOnPodTermination") or config.gate("TASReplaceNodeDueToNotReadyOverFixedTime"):
        for cq in state.reserving:
            for key in state.reserving[cq]:
                wl = state.workloads[key]
                if wl.phase != ADMITTED or wl.evicted:
                    continue
                for name in assigned_nodes(state, wl):
                    ends = not_ready_wait_ends(state.nodes[name]) if name in state.nodes else None
                    if ends is not None and ends > state.time and name not in wl.unhealthy_nodes:
                        times.append(ends)
    if config.object_retention_policies is not None:
        for key in state.retained:
            due = retention_deadline(config, state.workloads[key])
            if due is not None:
                times.append(due[0])
    return min(times) if times else None


def _encode(decisions: list[ev.Decision]) -> bytes:
    return msgspec.json.encode(decisions)


class Run:
    """A state fed observed events and its own decisions, checking the two kinds of pass at every decision."""

    def __init__(self) -> None:
        self.state = ClusterState()
        self.time = T0
        self.config = CONFIGS[0]
        self.decided: Counter[str] = Counter()
        self.observe(*prelude())

    def append(self, *events: ev.AnyEvent) -> None:
        for e in events:
            self.state.apply(ev.Record(self.state.offset + 1, e))

    def observe(self, *objs: o.KObject) -> None:
        self.append(*(ev.ObjectUpserted(time=self.time, key=x.key, uid=x.metadata.uid, obj=x) for x in objs))

    def pick(self, n: int, phases: tuple[str, ...] | None = None) -> str | None:
        wls = self.state.workloads
        keys = sorted(k for k in wls if phases is None or wls[k].phase in phases)
        return keys[n % len(keys)] if keys else None

    def decide(self, apply: bool = True) -> list[ev.Decision]:
        state, config = self.state, self.config
        cycle, now = state.last_cycle + 1, state.time
        want = reconcile(state, config, now, cycle, full=True)
        got = reconcile(state, config, now, cycle)
        assert _encode(got) == _encode(want)
        assert _encode(reconcile(state, config, now, cycle)) == _encode(want), "a second pass decided otherwise"
        assert next_deadline(state, config) == next_deadline_by_scan(state, config)
        assert state.backoff_due.at == state.backoff and state.second_pass_due.at == state.second_pass
        batch = got or run_cycle(state, config, now, cycle)
        for d in batch:  # what SkipReassignmentForPodOwnedWorkloads changes, in a pass or a cycle's second pass
            if isinstance(d, ev.UnhealthyNodesChanged) and d.kept:
                self.decided["UnhealthyNodesChanged/kept"] += 1
            elif isinstance(d, ev.WorkloadRequeued) and d.reason == "Preempted" and not d.status:
                self.decided["WorkloadRequeued/Preempted/not requeued"] += 1
        for d in got:
            name = type(d).__name__
            if getattr(d, "message", "") == BYPASSED:
                name = "WorkloadPending/Bypassed"  # whatever reason the equivalent workload's failure got
            self.decided[f"{name}/{getattr(d, 'reason', '')}" if hasattr(d, "reason") else name] += 1
        if apply:
            self.append(*batch)
        return batch

    def op(self, name: str, a: int, b: int, c: int) -> None:
        t = self.time
        s = self.state
        match name:
            case "decide":
                self.decide()
            case "settle":
                for _ in range(20):
                    if not self.decide():
                        break
            case "peek":
                self.decide(apply=False)
            case "tick":
                self.time += (1, 300, 1000, 2500, 6000, 90_000)[a % 6] * (1 + b % 3)
                self.append(ev.ClockTicked(time=self.time))
            case "config":
                self.config = CONFIGS[a % len(CONFIGS)]
            case "workload":
                ns, i = NAMESPACES[a % 2], b % 8
                key = f"{ns}/w{i}"
                old = s.workloads.get(key)
                uid = old.uid if old is not None and c % 13 else f"uid-{key}-{c}"
                queue = QUEUES[c % 3]
                cpu = 3 if queue == "lq-tas" else 1 + a % 2  # a TAS pod per node: two nodes can fail under one
                limit = (None, None, 1, 4, 30)[a // 2 % 5]  # seconds: a tick step runs out the short ones
                owner = ("", "Pod", "Job")[(a + b) % 3]
                w = workload(ns, f"w{i}", uid, queue, cpu, 1 + c // 3 % 2, c % 7 != 0, limit, owner)
                if old is not None and old.reserving and old.admission is not None and old.uid == uid:
                    # its reservation was written before this rewrite: a rewrite racing it, which the fold undoes,
                    # is tests/projections' (fixtures.eventgen)
                    w = shown_reserved(w, old.admission, old.phase == ADMITTED)  # type: ignore[arg-type]
                self.observe(w)
            case "delete_workload":
                key = self.pick(a)
                if key:
                    self.append(ev.ObjectDeleted(time=t, key=key, kind="Workload"))
            case "job_stopped":  # mostly the job of an evicted workload, as a job controller would stop it
                evicted = sorted(k for k, w in s.workloads.items() if w.reserving and w.evicted)
                key = evicted[a % len(evicted)] if evicted and b % 4 else self.pick(a, (RESERVED, ADMITTED))
                if key:
                    self.append(ev.JobStopped(time=t, key=key))
            case "pods_ready":
                key = self.pick(a, (ADMITTED,))
                if key:
                    self.append(ev.PodsReadyChanged(time=t, key=key, ready=b % 3 != 0))
            case "finish":
                key = self.pick(a, None if b % 4 == 0 else (RESERVED, ADMITTED))
                if key:
                    self.append(ev.WorkloadFinished(time=t, key=key))
            case "check":
                # (one time in four a pending workload's: a Retry with a delay reported while it waits)
                key = self.pick(a, (RESERVED, ADMITTED, PENDING) if c % 4 == 3 else (RESERVED, ADMITTED))
                if key and "ext" in s.workloads[key].check_states:
                    state = ("Ready", "Ready", "Retry", "Rejected", "Pending")[b % 5]
                    self.append(ev.AdmissionCheckStateChanged(
                        time=t, key=key, check="ext", state=state, message=f"m{c % 3}",
                        requeue_after_seconds=(c % 3) or None))
            case "request":
                reqs = sorted(s.provisioning_requests)
                if reqs:
                    req = s.provisioning_requests[reqs[a % len(reqs)]]
                    uid = req.metadata.uid or f"uid-{req.key}"
                    cond = ("Provisioned", "Failed", "BookingExpired", "CapacityRevoked", "Accepted")[b % 5]
                    obj_ = msgspec.structs.replace(
                        req, metadata=msgspec.structs.replace(req.metadata, uid=uid),
                        status=o.ProvisioningRequestStatus(conditions=[o.Condition(
                            type=cond, status="True", reason=cond, message=f"r{c % 2}",
                            last_transition_time=format_time(t))]))
                    self.append(ev.ObjectUpserted(time=t, key=req.key, uid=uid, obj=obj_))
            case "request_gone":
                reqs = sorted(s.provisioning_requests)
                if reqs:
                    req = s.provisioning_requests[reqs[a % len(reqs)]]
                    self.append(ev.ObjectDeleted(time=t, key=req.key, uid=req.metadata.uid,
                                                 kind="ProvisioningRequest"))
            case "node":
                name = NODES[a % 4]
                if c % 6 == 0:
                    self.append(ev.ObjectDeleted(time=t, key=name, kind="Node"))
                else:
                    since = (None, t, t - 20_000, t - 40_000)[c // 4 % 4]  # NotReady: the wait is to come, or over
                    self.observe(node(name, ("True", "True", "False", None)[b % 4],
                                      ("", "", "NoSchedule", "NoExecute")[c % 4], since))
            case "pod":  # mostly a pod of a TAS workload holding quota, on a node of its placement
                placed = sorted(k for k, w in s.workloads.items() if w.reserving and assigned_nodes(s, w))
                key = placed[a % len(placed)] if placed and b % 4 else self.pick(a)
                if key:
                    wl = s.workloads[key]
                    name = f"{wl.name}-p{b % 2}"
                    if c % 5 == 0:
                        self.append(ev.ObjectDeleted(time=t, key=f"{wl.namespace}/{name}", kind="Pod"))
                    else:
                        on = sorted(assigned_nodes(s, wl)) or NODES
                        self.observe(pod(wl.namespace, name, wl.name, on[c % len(on)] if c % 4 else NODES[c % 4],
                                         ("Running", "Running", "Succeeded", "Pending")[c // 5 % 4], c % 7 == 0))
            case "pod_gone":
                pods = sorted(s.pods)
                if pods:
                    self.append(ev.ObjectDeleted(time=t, key=pods[a % len(pods)], kind="Pod"))
            case "local_queue":
                ns, q = NAMESPACES[a % 2], QUEUES[b % 3]
                if c % 6 == 0:
                    self.append(ev.ObjectDeleted(time=t, key=f"{ns}/{q}", kind="LocalQueue"))
                else:
                    self.observe(local_queue(ns, q, ("None", "None", "Hold", "HoldAndDrain")[c % 4]))
            case "cluster_queue":
                name = sorted(CQS.values())[a % 3]
                if c % 9 == 0:
                    self.append(ev.ObjectDeleted(time=t, key=name, kind="ClusterQueue"))
                else:
                    checks = {"cq-plain": ("ext",) if c % 2 else (), "cq-prov": ("prov",), "cq-tas": ()}[name]
                    self.observe(cluster_queue(name, ("None", "None", "Hold", "HoldAndDrain")[b % 4], checks))
            case "admission_check":
                name = ("prov", "ext")[a % 2]
                if b % 3 == 0:
                    self.append(ev.ObjectDeleted(time=t, key=name, kind="AdmissionCheck"))
                else:
                    self.observe(admission_check(name))
            case "provisioning_config":
                if a % 3 == 0:
                    self.append(ev.ObjectDeleted(time=t, key="prc", kind="ProvisioningRequestConfig"))
                else:
                    self.observe(provisioning_config(b % 3))
            case "stray":  # decisions another scheduler wrote: evictions with backoff, deactivations, requeues
                key = self.pick(a)
                if key:
                    base = {"time": t, "key": key, "cycle": s.last_cycle + 1, "input": s.offset}
                    match b % 4:
                        case 0:
                            self.append(ev.WorkloadEvicted(reason="PodsReadyTimeout", message="x",
                                                           requeue_at=t + 500 * (c % 5), requeue_count=c % 2, **base))
                        case 1:
                            self.append(ev.WorkloadDeactivated(reason="DeactivatedDueToAdmissionCheck",
                                                               message="x", **base))
                        case 2:
                            self.append(ev.WorkloadRequeued(status=c % 2 == 0, reason="AdmissionCheck",
                                                            release=c % 3 == 0, requeue_at=t + 700 * (c % 3) or None,
                                                            **base))
                        case _:
                            self.append(ev.WorkloadPreempted(reason="InClusterQueue", message="x", **base))
            case _:
                raise AssertionError(name)


WEIGHTED = (("workload", 14), ("decide", 10), ("settle", 8), ("peek", 3), ("tick", 10), ("config", 2),
            ("delete_workload", 2), ("job_stopped", 5), ("pods_ready", 4), ("finish", 4), ("check", 5),
            ("request", 5), ("request_gone", 1), ("node", 7), ("pod", 8), ("pod_gone", 3), ("local_queue", 5),
            ("cluster_queue", 2), ("admission_check", 1), ("provisioning_config", 1), ("stray", 3))
OP_NAMES = tuple(name for name, weight in WEIGHTED for _ in range(weight))

ops = st.lists(st.tuples(st.sampled_from(OP_NAMES), st.integers(0, 63), st.integers(0, 63), st.integers(0, 63)),
               min_size=1, max_size=80)


def run(history) -> Run:
    r = Run()
    for step in history:
        r.op(*step)
    r.op("settle", 0, 0, 0)
    return r


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_a_pass_over_what_changed_decides_what_a_full_pass_decides(history) -> None:
    r = run(history)
    cold = snapshot.decode(snapshot.encode(r.state))  # restored: everything counts as touched
    assert _encode(reconcile(cold, r.config, cold.time, cold.last_cycle + 1)) == _encode(
        reconcile(r.state, r.config, r.state.time, r.state.last_cycle + 1))
    assert next_deadline(cold, r.config) == next_deadline(r.state, r.config)


def test_the_random_logs_reach_every_rule() -> None:
    """The generator above is only worth something if it makes every controller rule act: over a fixed set of
    random logs, each kind of decision the rules make appears."""
    seen: Counter[str] = Counter()
    for seed in range(60):
        rng = random.Random(seed)
        r = run([(rng.choice(OP_NAMES), rng.randrange(64), rng.randrange(64), rng.randrange(64))
                 for _ in range(200)])
        seen.update(r.decided)
    wanted = {
        "WorkloadRequeued/PodsReadyTimeout", "WorkloadRequeued/BackoffFinished",
        "WorkloadRequeued/Reactivated", "WorkloadRequeued/LocalQueueRestarted",
        "WorkloadRequeued/ClusterQueueRestarted", "WorkloadDeactivated/Deactivated",
        "WorkloadDeactivated/DeactivatedDueToAdmissionCheck", "WorkloadDeactivated/DeactivatedDueToRequeuingLimitExceeded",
        "WorkloadEvicted/AdmissionCheck", "WorkloadEvicted/PodsReadyTimeout", "WorkloadEvicted/LocalQueueStopped",
        "WorkloadEvicted/ClusterQueueStopped", "WorkloadEvicted/NodeFailures", "WorkloadAdmitted",
        "UnhealthyNodesChanged", "AdmissionCheckUpdated", "ProvisioningRequestCreated",
        "ProvisioningRequestDeleted/Finished", "ProvisioningRequestDeleted/Evicted",
        "WorkloadPending/Suspended", "WorkloadPending/Misconfigured", "WorkloadPending/PendingEvaluation",
        "RetentionExpired", "WorkloadDeactivated/DeactivatedDueToMaximumExecutionTimeExceeded",
        "WorkloadPending/Bypassed/WaitingForQuota", "UnhealthyNodesChanged/kept",
        "WorkloadRequeued/Preempted/not requeued", "RequeueAtRaised",
    }
    assert wanted <= set(seen), sorted(wanted - set(seen))


@pytest.mark.parametrize("stops", ["deleted", "succeeded", "deleting"])
def test_a_pod_that_stops_under_a_failed_node_is_looked_at_again(stops: str) -> None:
    """A NotReady node fails for a workload only once none of its pods still runs there: the pod's end, not the
    node, is what changes the decision (the random logs above reach this too rarely to rely on them)."""
    r = Run()
    r.observe(workload("ns0", "w0", "u0", "lq-tas", 3, 2, True))
    r.op("settle", 0, 0, 0)
    first = sorted(assigned_nodes(r.state, r.state.workloads["ns0/w0"]))[0]
    r.observe(pod("ns0", "w0-p0", "w0", first, "Running", False))
    r.observe(node(first, "False"))
    assert r.decide() == []
    if stops == "deleted":
        r.append(ev.ObjectDeleted(time=r.time, key="ns0/w0-p0", kind="Pod"))
    else:
        r.observe(pod("ns0", "w0-p0", "w0", first, "Succeeded" if stops == "succeeded" else "Running",
                      stops == "deleting"))
    assert [(type(d).__name__, d.nodes) for d in r.decide()] == [("UnhealthyNodesChanged", [first])]


@pytest.mark.parametrize("gate", ["TASReplaceNodeOnPodTermination=false",
                                  "TASReplaceNodeDueToNotReadyOverFixedTime=true"])
@pytest.mark.parametrize("fold_sees_the_time", [True, False])
def test_the_end_of_a_not_ready_nodes_wait_is_looked_at_again(fold_sees_the_time: bool, gate: str) -> None:
    """With TASReplaceNodeOnPodTermination off, or TASReplaceNodeDueToNotReadyOverFixedTime on, a NotReady node
    fails 30 s after its Ready condition turned, with the pod still running: no event about the workload, pod or
    node marks that, so the fold takes the node out of its waits once the log's time reaches the end (and every
    workload counts as touched), and a pass asked about a later time than the log's looks at every workload.
    Either way, the incremental pass decides."""
    r = Run()
    name, value = gate.split("=")
    r.config = _config({"featureGates": {name: value == "true"}})
    r.observe(workload("ns0", "w0", "u0", "lq-tas", 3, 2, True))
    r.op("settle", 0, 0, 0)
    first = sorted(assigned_nodes(r.state, r.state.workloads["ns0/w0"]))[0]
    r.observe(pod("ns0", "w0-p0", "w0", first, "Running", False))
    r.observe(node(first, "False", since=r.time))
    assert r.decide() == []
    assert next_deadline(r.state, r.config) == r.time + 30_000
    assert r.state.node_waits.at == {first: r.time + 30_000}
    assert snapshot.decode(snapshot.encode(r.state)).node_waits.at == r.state.node_waits.at  # derived on restore
    r.time += 29_999
    r.append(ev.ClockTicked(time=r.time))
    assert r.decide() == []
    if fold_sees_the_time:
        r.time += 1
        r.append(ev.ClockTicked(time=r.time))
        assert not r.state.node_waits and r.state.touched_all
        got = reconcile(r.state, r.config, r.time, r.state.last_cycle + 1)
    else:  # the log's time stays 1 ms short of the end
        assert reconcile(r.state, r.config, r.time + 1, r.state.last_cycle + 1, full=True)
        got = reconcile(r.state, r.config, r.time + 1, r.state.last_cycle + 1)
    assert [(type(d).__name__, d.nodes) for d in got] == [("UnhealthyNodesChanged", [first])]


def test_a_new_configuration_is_looked_at_with_every_workload() -> None:
    """A running pod keeps a NotReady node healthy for its workload under TASReplaceNodeOnPodTermination; with that
    gate turned off (the node's 30 s long over) the node has failed, though no event touched the workload: the
    first pass under the new configuration looks at every workload."""
    r = Run()
    r.observe(workload("ns0", "w0", "u0", "lq-tas", 3, 2, True))
    r.op("settle", 0, 0, 0)
    first = sorted(assigned_nodes(r.state, r.state.workloads["ns0/w0"]))[0]
    r.observe(pod("ns0", "w0-p0", "w0", first, "Running", False))
    r.observe(node(first, "False", since=r.time - 60_000))
    assert r.decide() == []
    r.config = CONFIGS[-1]
    got = reconcile(r.state, r.config, r.time, r.state.last_cycle + 1)
    assert [(type(d).__name__, d.nodes) for d in got] == [("UnhealthyNodesChanged", [first])]
