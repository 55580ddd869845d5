"""Table-driven scheduler cases: each ``scenarios/*.yaml`` is a state plus the expected outcome.

A case file holds ``objects`` (what a user would kubectl-apply), an optional Kueue ``config``, and either

* ``refused`` — loading them as ``kueue-es schedule`` does is refused, with an error holding that text (a check
  Kueue makes under a feature gate, whose gate-off twin shows what is then decided), or
* ``cycles`` and ``want`` — run through the same code path as ``kueue-es schedule`` (the objects folded at the
  latest timestamp they carry, then N scheduling cycles); ``want`` names every workload whose status changes, or
* ``timeline`` — for behaviour driven by time: the objects are loaded as ``kueue-es schedule`` loads them, at
  ``start`` (default 2024-01-01T00:00:00Z), then each step happens ``at`` an offset from ``start``: it applies
  ``objects`` (upserts), ``delete`` (``Kind/key``), ``finish``, ``podsReady`` / ``podsNotReady``,
  ``stopJobs`` (keys, or ``all`` evicted workloads that still hold quota), ``reclaimable``
  (``{workload: {podSet: count}}``, what the job integration reports as ``status.reclaimablePods``), ``checks``
  (``{workload, check, state, message, requeueAfterSeconds}``) and ``provisioning`` (``{request: namespace/name, condition: Provisioned,
  status: "True", message, details: {...}, uid}`` — the ProvisioningRequest as kueue-es created it, as the
  watch would bring it back with that condition set; ``uid`` when it was first seen, default ``uid-<key>``:
  one made again under the name of one deleted needs another), ``clusters`` (``{name, connected, reason,
  message}``: what the
  MultiKueue connector observed of a worker) and ``remotes`` (``{workload, cluster, conditions: {type: status or
  {status, reason, message, lastTransitionTime}}, topologyPodSets, preemptionGates: [{name, position, lastTransitionTime}], gone}``: a
  worker's copy of a workload as the connector's watch shows it) and
  ``workerQueues`` (``{cluster, localQueues: {namespace/name: clusterQueue}, clusterQueues: {name: resourceGroups}}``:
  a worker's queues as the connector lists them) as observed events at that
  time, then lets the scheduler settle exactly as the service does (``decide`` — controller rules, then a cycle
  — until it has nothing to say), or with ``cycles: N`` lets it decide only N batches (to look between cycles),
  then asserts its ``expect`` (only the workloads it names) and, when given,
  ``requests`` (every ProvisioningRequest the projection knows, by key, with what it should hold: ``class``,
  ``parameters``, ``podSets`` as ``[template, count]`` pairs, ``templates`` by name with ``nodeSelector``,
  ``requests`` (of the first container), ``labels``, ``gates``), ``decisions`` (the types decided in the
  step, per workload, in order) and ``nextDeadline`` (an offset from ``start``, or null: when the service would
  wake the scheduler with a clock tick if nothing else happened — :func:`kueue_es.scheduler.next_deadline`),
  ``clusterQueues`` (``{name: {reason, message}}``: the ClusterQueue's Active condition, reason ``Ready`` when
  active), ``admissionChecks`` (``{name: {active, reason, message}}``: the check's Active condition as
  kueue-es computes it), ``multiKueueClusters`` (``{name: {status, reason, message}}``) and ``quotaAutomation``
  (``{name: {condition: [status, reason, message] or null, quotas: {resource: quantity} or null}}``, or null while
  nothing changes: what MultiKueueManagerQuotaAutomation leaves on a ClusterQueue, :mod:`projections.manager_quota`).

Expectations per workload: ``admitted: {clusterQueue, flavors: {podSet: {resource: flavor}}, counts:
{podSet: n}, order: [podSet, ...] (the names of ``podSetAssignments``, in the order written), usage:
{podSet: {resource: quantity}},
checksPending, topology: {podSet: [[value..., count], ...]}, topologyAssignment: {podSet: the v1beta2 object exactly as
written}, delayedTopology: {podSet: Pending|Ready|null}}``,
``unhealthyNodes: [node, ...]``, ``reclaimablePods: {podSet: count}`` (exactly ``status.reclaimablePods``), ``usage:
{resource: quantity}`` (the quota it holds in its ClusterQueue, per resource, as the projection counts it),
``pending: REASON`` (QuotaReserved=False reason; ``message``/``notInMessage`` optional substrings), ``preempted:
REASON`` (Preempted condition reason, with Evicted=True/Preempted), ``evicted: REASON`` (Evicted=True),
``requeued: {status, reason}``, ``requeueCount: N``, ``requeueAt: TIME|null``, ``finished: true``,
``active: false``, ``reservingQuota: bool``, ``admittedCondition: {status, reason, message, lastTransitionTime}``
(the last two optional; null: no Admitted condition), ``conditionOrder: [type, ...]`` (every condition's type, in
the order ``status.conditions`` lists them), ``reasons: {condition type:
reason|null}`` (null: no condition of that type), ``messages: {condition type: exact message}``, ``checks: {name: {state,
message (substring), requeueAfterSeconds, retryCount, podSetUpdates, lastTransitionTime}}``, ``retention:
Workload|Job|null`` (what a RetentionExpired decision deleted, null while the retention runs), ``resourceRequests:
[{name, resources}]|null`` (exactly ``status.resourceRequests``; null: not shown), ``accumulated: N|null``
(``status.accumulatedPastExecutionTimeSeconds``; null: not shown), ``evictions: [[reason, underlyingCause, count],
...]`` (exactly ``status.schedulingStats.evictions``, in order; [] when not shown), ``clusterName: NAME|null`` and
``nominatedClusterNames: [NAME, ...]`` (MultiKueue's status fields; [] when not shown), ``copiesOn: [NAME,
...]|null`` (timelines: the workers its MultiKueue copies are to be on, which the connector follows; null
while they are held back, none made and none deleted: :func:`kueue_es.scheduler.multikueue.copies_on`),
``preemptionGates: {gate: [position, lastTransitionTime]}`` (exactly ``status.preemptionGates``),
``remoteGates: {cluster: {gate: [position, lastTransitionTime]}}`` (every copy's preemption gates as the
manager knows them), or ``unchanged: true`` (``want`` only); in timelines also ``queue: active|parked|none``
(where it waits in its ClusterQueue's queue) and ``resumesAt: {podSet: {resource: flavor}}|null`` (where its
next attempt's flavor scan starts, from the progress it keeps; null: it keeps none).
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from fixtures import fastyaml

from events import objects as o
from events import schema as ev
from events.errors import InvalidInput
from events.manifests import Checks, load_text
from events.quantity import to_int
from events.tas_assignment import decode
from events.timefmt import format_time, parse_time
from kueue_es.commands.schedule import schedule
from kueue_es.scheduler import decide, next_deadline, settle
from kueue_es.scheduler.config import parse_duration
from kueue_es.scheduler.flavors import resume_scan
from kueue_es.scheduler.multikueue import copies_on
from kueue_es.statefile import load_state
from projections import gates, manager_quota
from projections.admissionchecks import check_active, cluster_active
from projections.clusterqueues import active_condition
from projections.workloads import status_of

CASES = sorted((Path(__file__).parent / "scenarios").glob("*.yaml"))


def _cond(status: dict, type_: str) -> dict | None:
    return next((c for c in status.get("conditions", []) if c["type"] == type_), None)


def _resumes_at(state, wl, config) -> dict | None:
    if config is not None and not config.gate(gates.FLAVOR_FUNGIBILITY):
        return None  # each attempt starts at the first flavors
    preserve = config is None or config.gate(gates.FLAVOR_FUNGIBILITY_PRESERVE_SCAN_PROGRESS)
    scan = resume_scan(state, wl, wl.cluster_queue, preserve)
    if scan is None:
        return None
    info = state.cq_info(wl.cluster_queue)
    out: dict = {}
    for ps, tried in zip(wl.pod_sets, scan.tried, strict=False):
        out[ps.name] = {r: info.group_of[r].flavors[i + 1 if i >= 0 else 0].name for r, i in tried}
    return out


def _queued(state, wl) -> str:
    q = state.queues.get(wl.cluster_queue)
    if q is None or wl.key not in q.shapes:
        return "none"
    return "parked" if wl.key in q.inadmissible else "active"


def check_status(case: str, key: str, status: dict, want: dict, wl=None, state=None, config=None) -> None:
    """Assert one workload's status (as Kueue would show it) against an expectation."""
    checked = False
    if "clusterName" in want:
        checked = True
        assert status.get("clusterName") == want["clusterName"], f"{key}: clusterName {status.get('clusterName')}"
    if "nominatedClusterNames" in want:
        checked = True
        got_nominated = status.get("nominatedClusterNames", [])
        assert got_nominated == want["nominatedClusterNames"], f"{key}: nominatedClusterNames {got_nominated}"
    if "preemptionGates" in want:
        checked = True
        got_positions = {g["name"]: [g["position"], g.get("lastTransitionTime")]
                         for g in status.get("preemptionGates", [])}
        assert got_positions == want["preemptionGates"], f"{key}: preemptionGates {got_positions}"
    if "remoteGates" in want:
        checked = True
        assert wl is not None, f"{case}: remoteGates is only known in a timeline"
        got_gates = {c: {g.name: [g.position, g.last_transition_time] for g in r.preemption_gates}
                     for c, r in sorted((wl.remotes or {}).items())}
        assert got_gates == want["remoteGates"], f"{key}: remoteGates {got_gates}"
    if "copiesOn" in want:
        checked = True
        assert state is not None and wl is not None, f"{case}: copiesOn is only known in a timeline"
        got_copies = copies_on(state, wl)
        assert (list(got_copies) if got_copies is not None else None) == want["copiesOn"], (
            f"{key}: copiesOn {got_copies}")
    if "queue" in want:
        checked = True
        assert state is not None and wl is not None, f"{case}: queue is only known in a timeline"
        assert _queued(state, wl) == want["queue"], f"{key}: queue {_queued(state, wl)}"
    if "resumesAt" in want:
        checked = True
        assert state is not None and wl is not None, f"{case}: resumesAt is only known in a timeline"
        got = _resumes_at(state, wl, config)
        assert got == want["resumesAt"], f"{key}: resumes at {got} (scan {wl.scan})"
    if "admitted" in want:
        checked = True
        w = want["admitted"]
        adm = status.get("admission")
        assert adm is not None, f"{key}: not admitted: {_cond(status, 'QuotaReserved')}"
        assert adm["clusterQueue"] == w["clusterQueue"]
        flavors = {p["name"]: p.get("flavors", {}) for p in adm["podSetAssignments"]}
        assert flavors == w["flavors"], f"{key}: flavors {flavors}"
        if "counts" in w:
            assert {p["name"]: p["count"] for p in adm["podSetAssignments"]} == w["counts"]
        if "order" in w:
            got_order = [p["name"] for p in adm["podSetAssignments"]]
            assert got_order == w["order"], f"{key}: podSetAssignments order {got_order}"
        if "usage" in w:
            usage = {p["name"]: p["resourceUsage"] for p in adm["podSetAssignments"]}
            assert usage == w["usage"], f"{key}: resourceUsage {usage}"
        if "topology" in w:
            assert _topologies(adm) == w["topology"], f"{key}: topology {_topologies(adm)}"
        if "topologyAssignment" in w:
            got = {p["name"]: p["topologyAssignment"]
                   for p in adm["podSetAssignments"] if "topologyAssignment" in p}
            assert got == w["topologyAssignment"], f"{key}: topologyAssignment {got}"
        if "delayedTopology" in w:
            got = {p["name"]: p.get("delayedTopologyRequest") for p in adm["podSetAssignments"]}
            assert got == w["delayedTopology"], f"{key}: delayedTopologyRequest {got}"
        assert _cond(status, "QuotaReserved")["status"] == "True"
        if w.get("checksPending"):
            adm_cond = _cond(status, "Admitted")
            assert adm_cond is None or adm_cond["status"] != "True"
        else:
            assert _cond(status, "Admitted")["status"] == "True"
    if "pending" in want:
        checked = True
        qr = _cond(status, "QuotaReserved")
        assert "admission" not in status, f"{key}: unexpectedly admitted"
        assert qr is not None and qr["status"] == "False", f"{key}: {qr}"
        assert qr["reason"] == want["pending"], f"{key}: {qr['reason']}: {qr['message']}"
        if "message" in want:
            assert want["message"] in qr["message"], qr["message"]
        if "notInMessage" in want:
            assert want["notInMessage"] not in qr["message"], qr["message"]
    if "preempted" in want:
        checked = True
        pre, evi = _cond(status, "Preempted"), _cond(status, "Evicted")
        assert pre is not None and pre["status"] == "True" and pre["reason"] == want["preempted"], f"{key}: {pre}"
        assert evi is not None and evi["status"] == "True" and evi["reason"] == "Preempted"
        # Kueue v0.20 words a PreemptionConfig's victim's message after the rules that chose it; both conditions
        # carry the one message
        words = "Preempted by " if want["preempted"] == "ConfigurablePreemption" else "Preempted to accommodate "
        assert pre["message"].startswith(words) and evi["message"] == pre["message"], f"{key}: {pre}, {evi}"
    if "evicted" in want:
        checked = True
        evi = _cond(status, "Evicted")
        assert evi is not None and evi["status"] == "True" and evi["reason"] == want["evicted"], f"{key}: {evi}"
    if "requeued" in want:
        checked = True
        rq, w = _cond(status, "Requeued"), want["requeued"]
        assert rq is not None, f"{key}: no Requeued condition"
        assert rq["status"] == ("True" if w["status"] else "False") and rq["reason"] == w["reason"], f"{key}: {rq}"
    if "requeueCount" in want:
        checked = True
        assert status.get("requeueState", {}).get("count", 0) == want["requeueCount"], f"{key}: {status.get('requeueState')}"
    if "requeueAt" in want:
        checked = True
        got = status.get("requeueState", {}).get("requeueAt")
        assert got == want["requeueAt"], f"{key}: requeueAt {got}"
    if "reclaimablePods" in want:
        checked = True
        got = {p["name"]: p["count"] for p in status.get("reclaimablePods", [])}
        assert got == want["reclaimablePods"], f"{key}: reclaimablePods {got}"
    if "usage" in want:
        checked = True
        assert wl is not None, f"{case}: usage is only known in a timeline"
        got = {}
        for fr, v in sorted(wl.usage.items()):
            r = fr.split("/", 1)[1]
            got[r] = got.get(r, 0) + v
        assert got == {r: to_int(r, q) for r, q in want["usage"].items()}, f"{key}: holds {wl.usage}"
    if "unhealthyNodes" in want:
        checked = True
        got = [n["name"] for n in status.get("unhealthyNodes", [])]
        assert got == want["unhealthyNodes"], f"{key}: unhealthyNodes {got}"
    if "finished" in want:
        checked = True
        fin = _cond(status, "Finished")
        assert (fin is not None and fin["status"] == "True") == bool(want["finished"]), f"{key}: {fin}"
    if "active" in want:
        checked = True
        assert wl is not None and wl.active == want["active"], f"{key}: active {wl.active if wl else None}"
    if "reservingQuota" in want:
        checked = True
        assert wl is not None and wl.reserving == want["reservingQuota"], f"{key}: phase {wl.phase if wl else None}"
    if "admittedCondition" in want:
        checked = True
        adm, w = _cond(status, "Admitted"), want["admittedCondition"]
        if w is None:
            assert adm is None, f"{key}: unexpected Admitted condition {adm}"
        else:
            assert adm is not None and adm["status"] == w["status"] and adm["reason"] == w["reason"], f"{key}: {adm}"
            for field in ("message", "lastTransitionTime"):
                if field in w:
                    assert adm[field] == w[field], f"{key}: Admitted {field} {adm[field]!r}"
    if "conditionOrder" in want:
        checked = True
        got = [c["type"] for c in status.get("conditions", [])]
        assert got == want["conditionOrder"], f"{key}: conditions in order {got}"
    if "reasons" in want:
        checked = True
        for type_, reason in want["reasons"].items():  # null: the workload shows no condition of that type
            c = _cond(status, type_)
            assert (c is None if reason is None else c is not None and c["reason"] == reason), (
                f"{key}: {type_} reason {c and c['reason']!r}")
    if "messages" in want:
        checked = True
        for type_, text in want["messages"].items():
            c = _cond(status, type_)
            assert c is not None and c["message"] == text, f"{key}: {type_} message {c and c['message']!r}"
    if "checks" in want:
        checked = True
        got_checks = {c["name"]: c for c in status.get("admissionChecks", [])}
        assert sorted(got_checks) == sorted(want["checks"]), f"{key}: checks {sorted(got_checks)}"
        for name, w in want["checks"].items():
            c = got_checks[name]
            for field, value in w.items():
                if field == "message":
                    assert value in c.get("message", ""), f"{key}: check {name}: message {c.get('message')!r}"
                else:
                    assert c.get(field) == value, f"{key}: check {name}: {field} {c.get(field)!r}, want {value!r}"
    if "resourceRequests" in want:
        checked = True
        got = status.get("resourceRequests")
        assert got == want["resourceRequests"], f"{key}: resourceRequests {got}"
    if "accumulated" in want:
        checked = True
        got = status.get("accumulatedPastExecutionTimeSeconds")
        assert got == want["accumulated"], f"{key}: accumulatedPastExecutionTimeSeconds {got}"
    if "evictions" in want:
        checked = True
        got = status.get("schedulingStats", {}).get("evictions", [])
        assert [[e["reason"], e["underlyingCause"], e["count"]] for e in got] == want["evictions"], \
            f"{key}: schedulingStats.evictions {got}"
    if "retention" in want:
        checked = True
        assert wl is not None and wl.retention_target == (want["retention"] or ""), \
            f"{key}: retention {wl.retention_target if wl else None!r}"
    if not checked:
        raise AssertionError(f"{case}: want for {key} says nothing")


def _topologies(adm: dict) -> dict:
    """Pod set -> its topology assignment decoded to ``[values..., count]`` rows (pod sets without one left out)."""
    out = {}
    for p in adm["podSetAssignments"]:
        ta = p.get("topologyAssignment")
        if ta is not None:
            out[p["name"]] = [[*d.values, d.count] for d in decode(msgspec.convert(ta, o.TopologyAssignment))]
    return out


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_scenario(case: Path, tmp_path: Path) -> None:
    spec = fastyaml.safe_load(case.read_text())
    if "timeline" in spec:
        run_timeline(case.name, spec, tmp_path)
        return
    state = tmp_path / "state.yaml"
    state.write_text(fastyaml.safe_dump_all(spec["objects"]))
    config = None
    if "config" in spec:
        config = tmp_path / "config.yaml"
        config.write_text(fastyaml.safe_dump(spec["config"]))
    if "refused" in spec:
        with pytest.raises(InvalidInput) as refused:
            schedule(str(state), spec.get("cycles", 1), str(config) if config else None)
        assert spec["refused"] in str(refused.value)
        return
    result = schedule(str(state), spec.get("cycles", 1), str(config) if config else None)
    got = {f"{i['metadata']['namespace']}/{i['metadata']['name']}": i["status"] for i in result["items"]}
    for key, want in spec["want"].items():
        if want.get("unchanged"):
            assert key not in got, f"{key} should be unchanged, got {got.get(key)}"
            continue
        assert key in got, f"{key}: status did not change; changed: {sorted(got)}"
        check_status(case.name, key, got[key], want)
    unexpected = set(got) - set(spec["want"])
    assert not unexpected, f"status changed for workloads the case does not expect: {sorted(unexpected)}"


def run_timeline(name: str, spec: dict, tmp_path: Path) -> None:
    state_file = tmp_path / "state.yaml"
    state_file.write_text(fastyaml.safe_dump_all(spec["objects"]))
    config_file = None
    if "config" in spec:
        config_file = tmp_path / "config.yaml"
        config_file.write_text(fastyaml.safe_dump(spec["config"]))
    start = parse_time(spec.get("start", "2024-01-01T00:00:00Z"))
    loaded = load_state(str(state_file), str(config_file) if config_file else None, start)
    state, config = loaded.state, loaded.config

    def apply(events: list) -> None:
        for e in events:
            state.apply(ev.Record(state.offset + 1, e))

    created: dict[str, ev.ProvisioningRequestCreated] = {}

    for i, step in enumerate(spec["timeline"]):
        t = start + parse_duration(str(step.get("at", "0s")))
        assert t >= state.time, f"{name}: step {i} goes back in time"
        events: list = [ev.ClockTicked(time=t)]
        if "objects" in step:
            checks = Checks.under(config.gate)  # the webhooks' checks under the case's gates, as at the start
            for obj in load_text(fastyaml.safe_dump_all(step["objects"]), f"{name} step {i}", checks=checks).objects:
                events.append(ev.ObjectUpserted(time=t, key=obj.key, uid=obj.metadata.uid, obj=obj))
        for ref in step.get("delete", []):
            kind, _, key = ref.partition("/")
            events.append(ev.ObjectDeleted(time=t, key=key, kind=kind))
        for key in step.get("finish", []):
            events.append(ev.WorkloadFinished(time=t, key=key, uid=state.workloads[key].uid))
        for key, pods in sorted(step.get("reclaimable", {}).items()):
            events.append(ev.ReclaimablePodsChanged(time=t, key=key, reclaimable_pods=[
                o.ReclaimablePod(name=n, count=c) for n, c in sorted(pods.items())]))
        for key in step.get("podsReady", []):
            events.append(ev.PodsReadyChanged(time=t, key=key, ready=True))
        for key in step.get("podsNotReady", []):
            events.append(ev.PodsReadyChanged(time=t, key=key, ready=False))
        stop = step.get("stopJobs", [])
        if stop == "all":
            stop = sorted(k for k, w in state.workloads.items() if w.evicted and w.reserving)
        for key in stop:
            events.append(ev.JobStopped(time=t, key=key))
        for c in step.get("clusters", []):
            events.append(ev.MultiKueueClusterObserved(time=t, key=c["name"], connected=c["connected"],
                                                       reason=c.get("reason", ""), message=c.get("message", "")))
        for w in step.get("workerQueues", []):
            events.append(ev.WorkerQueuesObserved(time=t, key=w["cluster"], local_queues=w.get("localQueues", {}),
                                                  cluster_queues=msgspec.convert(w.get("clusterQueues", {}),
                                                                                 dict[str, list[o.ResourceGroup]])))
        for r in step.get("remotes", []):
            conditions = [o.Condition(type=k, status=v, reason=k, last_transition_time=format_time(t))
                          if isinstance(v, str) else o.Condition(type=k, status=v["status"],
                                                                 reason=v.get("reason", k), message=v.get("message", ""),
                                                                 last_transition_time=v.get("lastTransitionTime",
                                                                                            format_time(t)))
                          for k, v in sorted(r.get("conditions", {}).items())]
            gates = [o.PreemptionGateState(name=g["name"], position=g["position"],
                                           last_transition_time=g.get("lastTransitionTime", format_time(t)))
                     for g in r.get("preemptionGates", [])]
            events.append(ev.RemoteWorkloadObserved(time=t, key=r["workload"], cluster=r["cluster"],
                                                    exists=not r.get("gone", False), conditions=conditions,
                                                    topology_pod_sets=r.get("topologyPodSets", []),
                                                    preemption_gates=gates))
        for c in step.get("checks", []):
            events.append(ev.AdmissionCheckStateChanged(time=t, key=c["workload"], check=c["check"], state=c["state"],
                                                        message=c.get("message", ""),
                                                        requeue_after_seconds=c.get("requeueAfterSeconds")))
        apply(events)
        for p in step.get("provisioning", []):  # one by one: each builds on the request as the last one left it
            apply([_observed_request(state, p, t, name, i)])
        if "cycles" in step:
            batches = []
            for _ in range(step["cycles"]):
                batches.append(decide(state, config, now=t))
                apply(batches[-1])
        else:
            batches = settle(state, config, now=t)
            assert not decide(state, config, now=t), f"{name}: step {i}: the scheduler does not settle"
        for batch in batches:
            created.update({d.request.key: d for d in batch if isinstance(d, ev.ProvisioningRequestCreated)})
        if "decisions" in step:
            got: dict[str, list[str]] = {}
            for batch in batches:
                for d in batch:
                    got.setdefault(d.key, []).append(type(d).__name__)
            assert got == step["decisions"], f"{name}: step {i} (at {format_time(t)}): decisions {got}"
        if "nextDeadline" in step:
            wake = next_deadline(state, config)
            want_wake = None if step["nextDeadline"] is None else start + parse_duration(str(step["nextDeadline"]))
            assert wake == want_wake, (f"{name}: step {i} (at {format_time(t)}): next deadline "
                                       f"{None if wake is None else format_time(wake)}")
        where = f"{name}: step {i} (at {format_time(t)})"
        for cq, want in step.get("clusterQueues", {}).items():
            info = state.cq_info(cq)
            assert info is not None, f"{where}: no ClusterQueue {cq}"
            _, reason, message = active_condition(info.inactive_reasons)
            assert {"reason": reason, "message": message} == {"reason": want["reason"], "message": want.get(
                "message", message)}, f"{where}: ClusterQueue {cq}: {reason}: {message}"
        for cq, want in step.get("quotaAutomation", {}).items():
            got_q = manager_quota.outcome(state.cluster_queues[cq], manager_quota.world_of(state)) \
                if manager_quota.enabled(state) else None
            shown = None if got_q is None else {
                "condition": None if got_q.condition is None else list(got_q.condition),
                "quotas": None if got_q.resources is None else {rq.name: str(rq.nominal_quota) for rq in got_q.resources}}
            assert shown == want, f"{where}: quota automation of ClusterQueue {cq}: {shown}"
        for ac_name, want in step.get("admissionChecks", {}).items():
            got = check_active(state.admission_checks[ac_name], state.provisioning_configs, state.multikueue)
            assert got == (want["active"], want["reason"], want.get("message", got[2])), f"{where}: {ac_name}: {got}"
        for cluster, want in step.get("multiKueueClusters", {}).items():
            world = state.multikueue
            got_c = cluster_active(cluster, world) if world is not None else None
            assert got_c == (None if want is None else (want["status"], want["reason"], want.get("message", ""))), (
                f"{where}: MultiKueueCluster {cluster}: {got_c}")
        if "requests" in step:
            check_requests(f"{name}: step {i} (at {format_time(t)})", state, step["requests"], created)
        for key, want in step.get("expect", {}).items():
            wl = state.workloads.get(key)
            assert wl is not None, f"{name}: step {i} (at {format_time(t)}): no workload {key}"
            try:
                check_status(name, key, status_of(wl), want, wl, state, config)
            except AssertionError as exc:
                raise AssertionError(f"{name}: step {i} (at {format_time(t)}): {exc}") from None


def _observed_request(state, p: dict, t: int, name: str, i: int) -> ev.Event:
    """The ProvisioningRequest ``p["request"]`` as the watch would bring it back: what kueue-es created, with the
    condition set (lastTransitionTime moving with its status) and a uid once it exists."""
    key = p["request"]
    req = state.provisioning_requests.get(key)
    assert req is not None, f"{name}: step {i}: no ProvisioningRequest {key}; known: {sorted(state.provisioning_requests)}"
    # a request made again under its name: a uid of its own
    uid = req.metadata.uid or p.get("uid", f"uid-{key}")
    conditions = list(req.status.conditions)
    if "condition" in p:
        status = str(p.get("status", "True"))
        old = next((c for c in conditions if c.type == p["condition"]), None)
        ltt = old.last_transition_time if old is not None and old.status == status else format_time(t)
        cond = o.Condition(type=p["condition"], status=status, reason=p.get("reason", p["condition"]),
                           message=p.get("message", ""), last_transition_time=ltt)
        conditions = [c for c in conditions if c.type != p["condition"]] + [cond]
    details = {**req.status.provisioning_class_details, **p.get("details", {})}
    obj = msgspec.structs.replace(
        req, metadata=msgspec.structs.replace(req.metadata, uid=uid),
        status=o.ProvisioningRequestStatus(conditions=conditions, provisioning_class_details=details))
    return ev.ObjectUpserted(time=t, key=key, uid=uid, obj=obj)


def check_requests(where: str, state, want: dict, created: dict) -> None:
    """Every ProvisioningRequest the projection knows, and what the ones named should hold."""
    assert sorted(state.provisioning_requests) == sorted(want), f"{where}: requests {sorted(state.provisioning_requests)}"
    for key, w in want.items():
        req = state.provisioning_requests[key]
        w = w or {}
        if "class" in w:
            assert req.spec.provisioning_class_name == w["class"], f"{where}: {key}: class"
        if "parameters" in w:
            assert req.spec.parameters == w["parameters"], f"{where}: {key}: parameters {req.spec.parameters}"
        if "podSets" in w:
            got = [[ps.pod_template_ref.name, ps.count] for ps in req.spec.pod_sets]
            assert got == w["podSets"], f"{where}: {key}: podSets {got}"
        if "owner" in w:
            refs = [(r.kind, r.name, r.controller) for r in req.metadata.owner_references]
            assert refs == [("Workload", w["owner"], True)], f"{where}: {key}: owners {refs}"
        if "attempt" in w:
            assert req.metadata.name.endswith(f"-{w['attempt']}") or len(req.metadata.name) == 253
        templates = {t.metadata.name: t for t in created[key].pod_templates} if key in created else {}
        for tname, tw in w.get("templates", {}).items():
            assert tname in templates, f"{where}: {key}: templates {sorted(templates)}"
            tpl = templates[tname].template
            if "nodeSelector" in tw:
                assert tpl.spec.node_selector == tw["nodeSelector"], f"{where}: {tname}: {tpl.spec.node_selector}"
            if "tolerations" in tw:
                got_t = [msgspec.to_builtins(x) for x in tpl.spec.tolerations]
                assert got_t == tw["tolerations"], f"{where}: {tname}: tolerations {got_t}"
            if "requests" in tw:
                got_r = {r: str(q) for r, q in tpl.spec.containers[0].resources.requests.items()}
                assert got_r == {r: str(q) for r, q in tw["requests"].items()}, f"{where}: {tname}: requests {got_r}"
            if "labels" in tw:
                assert tpl.metadata.labels == tw["labels"], f"{where}: {tname}: labels {tpl.metadata.labels}"
            if "gates" in tw:
                assert [g["name"] for g in tpl.spec.scheduling_gates] == tw["gates"], f"{where}: {tname}: gates"

