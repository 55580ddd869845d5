"""``kueue-es explain``: Kueue's message first, then flavors tried, quota short per level, preemption — from a
STATE.yaml or a log, through the real command; and the analysis never changes the state."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import msgspec
import pytest
from fixtures import fastyaml

from events import objects as o
from events import schema as ev
from events.filelog import FileLog
from kueue_es.scheduler import DEFAULT, settle
from kueue_es.scheduler.explain import explain
from kueue_es.statefile import load_state
from projections import snapshot
from projections.cluster import ClusterState

SCENARIOS = Path(__file__).parent / "scenarios"
KQ = "kueue.x-k8s.io/v1beta2"


def kueue_es(*args: str | Path) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "kueue_es", *map(str, args)], capture_output=True, text=True,
                          timeout=120)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def state_file(tmp_path: Path, scenario: str) -> tuple[Path, Path | None]:
    spec = fastyaml.safe_load((SCENARIOS / scenario).read_text())
    path = tmp_path / "state.yaml"
    path.write_text(fastyaml.safe_dump_all(spec["objects"]))
    config = None
    if "config" in spec:
        config = tmp_path / "config.yaml"
        config.write_text(fastyaml.safe_dump(spec["config"]))
    return path, config


T0 = 1_704_067_200_000


def scenario_state(scenario: str) -> tuple[dict, ClusterState]:
    """A scenario's spec and a state holding its objects, observed at ``T0``."""
    spec = fastyaml.safe_load((SCENARIOS / scenario).read_text())
    state = ClusterState()
    for d in spec["objects"]:
        x = msgspec.convert(d, o.KueueObject)
        state.apply(ev.Record(state.offset + 1, ev.ObjectUpserted(time=T0, key=x.key, uid=x.metadata.uid, obj=x)))
    return spec, state


def test_no_fit_message_first_then_each_flavor_and_quota(tmp_path: Path) -> None:
    objects = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}},
        {"apiVersion": KQ, "kind": "ResourceFlavor", "metadata": {"name": "spot"},
         "spec": {"nodeTaints": [{"key": "spot", "value": "true", "effect": "NoSchedule"}]}},
        {"apiVersion": KQ, "kind": "ResourceFlavor", "metadata": {"name": "on-demand"}},
        {"apiVersion": KQ, "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": {
            "namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                {"name": "spot", "resources": [{"name": "cpu", "nominalQuota": 100}]},
                {"name": "on-demand", "resources": [{"name": "cpu", "nominalQuota": 4}]}]}]}},
        {"apiVersion": KQ, "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": "team"},
         "spec": {"clusterQueue": "cq"}},
        {"apiVersion": KQ, "kind": "Workload", "metadata": {"name": "big", "namespace": "team",
                                                           "creationTimestamp": "2024-01-01T00:00:00Z"},
         "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
             "containers": [{"name": "c", "resources": {"requests": {"cpu": "6"}}}]}}}]}},
    ]
    path = tmp_path / "state.yaml"
    path.write_text(fastyaml.safe_dump_all(objects))
    r = kueue_es("explain", "team/big", "-f", path)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[1] == "next attempt would say: ExceedsMaxQuota"
    assert ("insufficient quota for cpu in flavor on-demand, previously considered podsets requests (0) + current "
            "podset request (6) > maximum capacity (4)") in lines[2]
    assert "untolerated taint {spot true NoSchedule <nil>} in flavor spot" in lines[2]
    spot = r.stdout.index("      spot: untolerated taint")
    on_demand = r.stdout.index("      on-demand: no_fit (insufficient quota for cpu")
    assert spot < on_demand
    assert "Quota on-demand/cpu: request 6, available 4, at most 4 — short by 2: the request exceeds the most" in r.stdout
    data = json.loads(kueue_es("explain", "team/big", "-f", path, "-o", "json").stdout)
    assert data["attempt"]["outcome"] == "NoFit"
    assert data["attempt"]["podSets"][0]["tried"]["cpu"][0].startswith("spot: untolerated taint")
    assert [q["flavorResource"] for q in data["quota"]] == ["on-demand/cpu", "spot/cpu"]


def test_preemption_targets_and_why(tmp_path: Path) -> None:
    path, _ = state_file(tmp_path, "reclaim-within-cohort.yaml")
    data = json.loads(kueue_es("explain", "team/owner", "-f", path, "-o", "json").stdout)
    assert data["attempt"]["outcome"] == "Preempt"
    assert data["kueue"]["reason"] == "WaitingForPreemptedWorkloads"
    [t] = data["preemption"]["targets"]
    assert t["workload"] == "team/borrower" and t["reason"] == "InCohortReclamation"
    assert "borrows default/cpu" in t["why"]
    path = data["quota"][0]["path"]
    assert [p["node"] for p in path] == ["ClusterQueue b", "Cohort all"]


def test_a_configured_target_and_why(tmp_path: Path) -> None:
    path, config = state_file(tmp_path, "configurable-preemption-hero-cohort.yaml")
    assert config is not None
    data = json.loads(kueue_es("explain", "team/hero-job", "-f", path, "--config", config, "-o", "json").stdout)
    assert data["attempt"]["outcome"] == "Preempt"
    [t] = data["preemption"]["targets"]
    assert t["workload"] == "team/borrower" and t["reason"] == "ConfigurablePreemption"
    assert "PreemptionConfig" in t["why"]
    message = "Preempted by team/hero-job because of preemption config hero rule hero-preempt-lower-priority/0"
    assert t["underlyingCause"] == "hero"  # what the victim's eviction record will say: its PreemptionConfig
    assert t["message"] == message  # and its Preempted and Evicted conditions
    text = kueue_es("explain", "team/hero-job", "-f", path, "--config", config).stdout
    assert "its eviction's underlying cause: hero" in text
    assert f"its eviction's message: {message}" in text


def test_why_nobody_can_be_preempted(tmp_path: Path) -> None:
    path, config = state_file(tmp_path, "fair-sharing-preempt-final-share-only.yaml")
    r = kueue_es("explain", "team/a-next", "-f", path, "--config", config)
    assert r.returncode == 0, r.stderr
    assert "no workload would be preempted: the 2 candidate(s) would make room, but Fair Sharing" in r.stdout
    assert "team/a-running-1 (ClusterQueue a, priority 0): withinClusterQueue is Never" in r.stdout
    path, _ = state_file(tmp_path, "no-preemption-of-equal-priority.yaml")
    data = json.loads(kueue_es("explain", "team/second", "-f", path, "-o", "json").stdout)
    assert data["preemption"]["targets"] == []
    assert data["preemption"]["why"] == "no workload may be preempted for it"
    assert any("is not below" in c["why"] for c in data["preemption"]["considered"])


def test_from_a_log_with_kueues_observed_message(tmp_path: Path) -> None:
    spec = fastyaml.safe_load((SCENARIOS / "strict-fifo-blocks.yaml").read_text())
    objs = [msgspec.convert(d, o.KueueObject) for d in spec["objects"]]
    state = ClusterState()
    t0 = 1_704_067_200_000
    records = [ev.ObjectUpserted(time=t0, key=x.key, uid=x.metadata.uid, obj=x) for x in objs]
    for e in records:
        state.apply(ev.Record(state.offset + 1, e))
    batches = settle(state, DEFAULT, now=t0)
    log_dir = tmp_path / "log"

    async def write() -> None:
        log = FileLog.open(log_dir, fsync="never")
        try:
            await log.append(records)
            for b in batches:
                await log.append(b)
        finally:
            await log.close()

    anyio.run(write)
    pending = sorted(k for k, w in state.workloads.items() if w.phase == "Pending" and w.condition("QuotaReserved"))
    assert pending
    key = pending[0]
    cond = state.workloads[key].condition("QuotaReserved")
    r = kueue_es("explain", key, "--log", log_dir)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[1] == f"QuotaReserved=False: {cond.reason}"
    assert r.stdout.splitlines()[2] == f"  {cond.message}"
    assert "Next attempt (dry run at" in r.stdout
    early = kueue_es("explain", key, "--log", log_dir, "--to", str(len(records) - 1))
    assert early.returncode == 0 and early.stdout.splitlines()[1].startswith("next attempt would say: ")


def test_admitted_not_found_and_bad_arguments(tmp_path: Path) -> None:
    path, _ = state_file(tmp_path, "reclaim-within-cohort.yaml")
    r = kueue_es("explain", "team/borrower", "-f", path)
    assert r.returncode == 0 and "Admitted in ClusterQueue a with cpu=default." in r.stdout
    r = kueue_es("explain", "team/nope", "-f", path)
    assert r.returncode == 1
    assert r.stderr == f'kueue-es: error: (NotFound) Workload "team/nope" not found in {path}\n'
    r = kueue_es("explain", "team/borrower", "-f", path, "--no-checkpoints")
    assert r.returncode == 2
    assert r.stderr == "kueue-es: error: --no-checkpoints goes with --log, not -f (a STATE.yaml has no checkpoints)\n"
    assert kueue_es("explain", "nope", "-f", path).returncode == 2
    assert kueue_es("explain", "team/owner", "-f", path, "--to", "3").returncode == 2
    assert kueue_es("explain", "team/owner").returncode == 2


def test_inactive_cluster_queue_and_stopped_local_queue(tmp_path: Path) -> None:
    path, _ = state_file(tmp_path, "reclaim-within-cohort.yaml")
    loaded = load_state(str(path))
    state = loaded.state
    cq = state.cluster_queues["b"]
    stopped = msgspec.structs.replace(cq, spec=msgspec.structs.replace(cq.spec, stop_policy="Hold"))
    state.apply(ev.Record(state.offset + 1, ev.ObjectUpserted(time=loaded.now, key="b", obj=stopped)))
    data = explain(state, DEFAULT, "team/owner", loaded.now)
    assert data is not None and data["queue"]["reason"] == "Suspended"
    assert "ClusterQueue b is inactive (Stopped)" in data["queue"]["detail"]
    assert "attempt" not in data


@pytest.mark.parametrize("scenario", sorted(p.name for p in SCENARIOS.glob("*.yaml")))
def test_explain_never_changes_the_state(tmp_path: Path, scenario: str) -> None:
    spec = fastyaml.safe_load((SCENARIOS / scenario).read_text())
    if "refused" in spec:
        return  # nothing is loaded: its objects or configuration are refused
    path = tmp_path / "state.yaml"
    path.write_text(fastyaml.safe_dump_all(spec["objects"]))
    config = None
    if "config" in spec:  # objects a gate-off case holds may be refused under the defaults
        config = tmp_path / "config.yaml"
        config.write_text(fastyaml.safe_dump(spec["config"]))
    loaded = load_state(str(path), str(config) if config else None)
    before = snapshot.digest(loaded.state)
    for key in sorted(loaded.state.workloads):
        data = explain(loaded.state, loaded.config, key, loaded.now)
        assert data is not None and data["workload"] == key
        json.dumps(data)  # plain data all the way down
    assert snapshot.digest(loaded.state) == before


def test_admission_fair_sharing_usage_is_shown() -> None:
    from kueue_es.scheduler import afs

    spec = fastyaml.safe_load((SCENARIOS / "admission-fair-sharing-usage-order.yaml").read_text())
    objs = [msgspec.convert(d, o.KueueObject) for d in spec["objects"] + spec["timeline"][1]["objects"]]
    from kueue_es.scheduler.config import load_config

    config = load_config(spec["config"])
    state = ClusterState()  # the configuration recorded first, as every scheduler loop records its own
    state.apply(ev.Record(0, ev.ConfigRecorded(time=1_704_067_200_000, document=spec["config"], writer="test",
                                               id="config")))
    for x in objs:
        state.apply(ev.Record(state.offset + 1, ev.ObjectUpserted(time=1_704_067_200_000, key=x.key, obj=x)))
    now = 1_704_067_200_000 + 30 * 60_000
    data = explain(state, config, "team/a-next", now)
    assert data is not None
    assert data["queue"]["localQueueUsage"] == afs.lq_usage(state, config, "team/lq-a", "cq", now) > 1.7


def test_where_the_flavor_scan_resumes() -> None:
    """After a skip the next attempt resumes at the flavor after the one tried; the text says so, the trace starts
    there, and once the ClusterQueue's quota changes the kept progress is reported stale."""
    from kueue_es.commands.explain import render
    from kueue_es.scheduler import decide

    spec, state = scenario_state("flavor-scan-resumes-after-skip.yaml")
    t0 = T0
    fresh = explain(state, DEFAULT, "team/w", t0)
    assert fresh is not None and fresh["attempt"]["scan"]["state"] == "none"
    for e in decide(state, DEFAULT, t0):  # w is skipped after flavor a
        state.apply(ev.Record(state.offset + 1, e))
    data = explain(state, DEFAULT, "team/w", t0)
    assert data is not None
    scan = data["attempt"]["scan"]
    assert scan["state"] == "resumed" and scan["resumesAt"] == {"main": {"cpu": "b"}} and scan["untriedFlavors"]
    assert data["attempt"]["podSets"][0]["tried"]["cpu"] == ["b: fit"]
    assert "Flavor scan: resumes where the attempt of cycle 1 stopped: pod set main: cpu at b;" in render(data)
    stale_case = fastyaml.safe_load((SCENARIOS / "flavor-scan-stale-after-quota-change.yaml").read_text())
    high, changed = stale_case["timeline"][1]["objects"][0], stale_case["timeline"][2]["objects"][0]
    for d in (high,):  # h is tried in the next batch, w not: w's progress is no longer the latest...
        x = msgspec.convert(d, o.KueueObject)
        state.apply(ev.Record(state.offset + 1, ev.ObjectUpserted(time=t0, key=x.key, obj=x)))
    for e in decide(state, DEFAULT, t0):
        state.apply(ev.Record(state.offset + 1, e))
    assert explain(state, DEFAULT, "team/w", t0)["attempt"]["scan"]["state"] == "resumed"  # type: ignore[index]
    x = msgspec.convert(changed, o.KueueObject)  # ... and x's quota changes
    state.apply(ev.Record(state.offset + 1, ev.ObjectUpserted(time=t0, key="x", obj=x)))
    stale = explain(state, DEFAULT, "team/w", t0)
    assert stale is not None and stale["attempt"]["scan"]["state"] == "stale"
    assert "allocatable generation grew" in stale["attempt"]["scan"]["detail"]
    assert stale["attempt"]["podSets"][0]["tried"]["cpu"][0].startswith("a: ")


def test_the_flavor_scan_with_flavor_fungibility_off() -> None:
    """With the FlavorFungibility gate off no attempt resumes: explain says each group starts at its first flavor,
    that the attempt's record sends it back to the heap, and its trace starts at flavor a again."""
    from kueue_es.scheduler import decide
    from kueue_es.scheduler.config import load_config

    spec, state = scenario_state("flavor-scan-requeue-to-heap-gate-off.yaml")
    config = load_config(spec["config"])
    t0 = T0
    for e in decide(state, config, t0):
        state.apply(ev.Record(state.offset + 1, e))
    data = explain(state, config, "team/w", t0)
    assert data is not None
    scan = data["attempt"]["scan"]
    assert scan["state"] == "off" and "resumesAt" not in scan and "goes back to the queue's heap" in scan["detail"]
    assert data["attempt"]["podSets"][0]["tried"]["cpu"][0].startswith("a: ")


def test_why_waitforpodsready_blockadmission_holds_a_workload(tmp_path: Path) -> None:
    """Kueue's reason and message first, then which workloads' pods it waits for; the workload that holds the
    others says so too. Before any cycle (nothing observed yet) the dry run gives Kueue's words."""
    from kueue_es.commands.explain import render
    from kueue_es.scheduler.config import load_config

    spec, state = scenario_state("pods-ready-block-admission.yaml")
    config = load_config(spec["config"])
    t0 = T0
    settle(state, config, now=t0)
    data = explain(state, config, "team/b", t0)
    assert data is not None
    assert data["kueue"] == {"reason": "WaitingForPodsReady",
                             "message": "waiting for all admitted workloads to be in PodsReady condition",
                             "observed": True}
    assert data["attempt"]["outcome"] == "Fit" and data["attempt"]["reason"] == "WaitingForPodsReady"
    assert data["podsReady"]["waitingFor"] == ["team/a"] and data["podsReady"]["count"] == 1
    text = render(data)
    lines = text.splitlines()
    assert lines[1:3] == ["QuotaReserved=False: WaitingForPodsReady",
                          "  waiting for all admitted workloads to be in PodsReady condition"]
    assert "WaitingForPodsReady: it fits, but waitForPodsReady.blockAdmission admits nothing while" in text
    assert "team/a (Admitted, ClusterQueue cq)" in text
    holder = explain(state, config, "team/a", t0)
    assert holder is not None and "waitForPodsReady.blockAdmission admits no other workload" in holder["summary"]
    # the same state without blockAdmission: the attempt would be admitted, nothing is said about pods
    plain = explain(state, DEFAULT, "team/c", t0)
    assert plain is not None and plain["attempt"]["reason"] == "" and "podsReady" not in plain
    # c was never tried: its next attempt would say what Kueue writes, once the scheduler no longer waits with b
    fresh = explain(state, config, "team/c", t0)
    assert fresh is not None
    assert fresh["schedulerWaits"]["with"] == "team/b" and fresh["schedulerWaits"]["waitingFor"] == ["team/a"]
    assert "Scheduler waits: waitForPodsReady.blockAdmission holds team/b" in render(fresh)
    assert "schedulerWaits" not in data  # b is the one it waits with
    assert fresh["kueue"] == {"reason": "WaitingForPodsReady",
                              "message": "waiting for all admitted workloads to be in PodsReady condition",
                              "observed": False}
    state.apply(ev.Record(state.offset + 1, ev.PodsReadyChanged(time=t0 + 1, key="team/a", ready=True)))
    ready = explain(state, config, "team/c", t0 + 1)
    assert ready is not None and ready["attempt"]["reason"] == "" and "podsReady" not in ready
    assert "schedulerWaits" not in ready


def test_maximum_execution_time_left_and_why_it_was_deactivated(tmp_path: Path) -> None:
    """From a log through the command: while admitted, the time left and when it runs out; once it ran out, that
    Kueue deactivated it, with its reason and message."""
    spec = fastyaml.safe_load((SCENARIOS / "max-execution-time.yaml").read_text())
    objs = [msgspec.convert(d, o.KueueObject) for d in spec["objects"]]
    state = ClusterState()
    t0 = 1_704_067_200_000
    records: list = [ev.ObjectUpserted(time=t0, key=x.key, uid=x.metadata.uid, obj=x) for x in objs]
    for e in records:
        state.apply(ev.Record(state.offset + 1, e))
    for t in (t0, t0 + 30_000, t0 + 60_000):
        tick = ev.ClockTicked(time=t)
        state.apply(ev.Record(state.offset + 1, tick))
        records.append(tick)
        records.extend(d for b in settle(state, DEFAULT, now=t) for d in b)
    log_dir = tmp_path / "log"

    async def write() -> None:
        log = FileLog.open(log_dir, fsync="never")
        try:
            await log.append(records)
        finally:
            await log.close()

    anyio.run(write)
    r = kueue_es("explain", "team/job", "--log", log_dir, "--at", "2024-01-01T00:00:30Z")
    assert r.returncode == 0, r.stderr
    assert ("Maximum execution time: 60s: 30s left; deactivated at 2024-01-01T00:01:00Z "
            "(DeactivatedDueToMaximumExecutionTimeExceeded) unless it finishes or is evicted first") in r.stdout
    data = json.loads(kueue_es("explain", "team/job", "--log", log_dir, "--at", "2024-01-01T00:00:30Z",
                               "-o", "json").stdout)
    assert data["maxExecution"] == {"limitSeconds": 60, "accumulatedSeconds": 0, "remainingSeconds": 30.0,
                                    "runsOutAt": "2024-01-01T00:01:00Z", "detail": data["maxExecution"]["detail"]}
    r = kueue_es("explain", "team/job", "--log", log_dir)
    assert r.returncode == 0, r.stderr
    assert "Workload team/job: Inactive" in r.stdout
    assert ("Queue: notQueued: deactivated by Kueue (DeactivatedDueToMaximumExecutionTimeExceeded): The workload is "
            "deactivated due to exceeding the maximum execution time") in r.stdout
    assert "Maximum execution time: 60s (60s admitted before); the clock runs while the workload is admitted" in r.stdout


def test_amounts_are_shown_as_kueue_writes_them(tmp_path: Path) -> None:
    """explain's requests and quota rows, and replay's usage/nominal, write amounts as Kueue's status and messages
    do (1G and 1500M, not 1000000000 and 1500000000; 2G is 1953125Ki)."""
    from kueue_es.commands.replay import summarize

    spec = fastyaml.safe_load((SCENARIOS / "quota-message-quantities.yaml").read_text())
    path = tmp_path / "state.yaml"
    path.write_text(fastyaml.safe_dump_all(spec["objects"]))
    loaded = load_state(str(path))
    data = explain(loaded.state, loaded.config, "team/two-pod-sets", loaded.now)
    assert data is not None
    assert [ps["requests"] for ps in data["attempt"]["podSets"]] == [{"memory": "1G"}, {"memory": "1G"}]
    (quota,) = data["quota"]
    assert (quota["available"], quota["maximum"], quota["path"][0]["quota"]) == ("1500M", "1500M", "1500M")
    usage = {q["name"]: q["usage"] for q in summarize(loaded.state, [])["clusterQueues"]}
    assert usage["bytes"] == [{"flavor": "default", "resource": "memory", "used": "0", "nominal": "1953125Ki"}]
    assert usage["cores"][0]["nominal"] == "2k" and usage["small"][0]["nominal"] == "1500M"


def test_a_gated_workload_is_not_queued_and_says_why(tmp_path: Path) -> None:
    path, _ = state_file(tmp_path, "admission-gated-by.yaml")
    loaded = load_state(str(path))
    settle(loaded.state, loaded.config, loaded.now)
    data = explain(loaded.state, loaded.config, "team/gated", loaded.now)
    assert data is not None and data["kueue"]["reason"] == "AdmissionGated"
    assert data["queue"]["state"] == "notQueued" and data["queue"]["reason"] == "AdmissionGated"
    assert "example.com/quota-approver,example.com/budget" in data["queue"]["detail"]


def test_a_workload_parked_with_its_shape_says_why() -> None:
    """A workload parked, untried, with an equivalent one that failed is told apart from one parked on its own."""
    spec, state = scenario_state("equivalence-bulk-park.yaml")
    settle(state, DEFAULT, T0)
    data = explain(state, DEFAULT, "team/twin", T0)
    assert data is not None and data["queue"]["state"] == "parked"
    assert data["queue"]["detail"].startswith(
        "parked with every workload of its scheduling shape after one of them failed (WaitingForQuota)")


def test_a_concurrent_admission_parent_is_not_queued_and_says_why() -> None:
    from kueue_es.scheduler.config import load_config

    spec = fastyaml.safe_load((SCENARIOS / "concurrent-admission-parent.yaml").read_text())
    config = load_config(spec["config"])
    state = ClusterState()
    state.apply(ev.Record(1, ev.ConfigRecorded(time=T0, document=spec["config"], writer="test", id="c")))
    for d in spec["objects"]:
        x = msgspec.convert(d, o.KueueObject)
        state.apply(ev.Record(state.offset + 1, ev.ObjectUpserted(time=T0, key=x.key, uid=x.metadata.uid, obj=x)))
    settle(state, config, T0)
    data = explain(state, config, "team/job", T0)
    assert data is not None and data["queue"]["state"] == "notQueued"
    assert data["queue"]["detail"] == ("a concurrent-admission parent (label "
                                       "kueue.x-k8s.io/concurrent-admission-parent): not queued itself, its variant "
                                       "Workloads are")


def test_a_workload_on_hold_is_not_queued_and_says_why() -> None:
    """A StatefulSet's Workload held while the set is at zero replicas (Kueue #12233)."""
    from fixtures.eventgen import cluster_queue, flavor, local_queue, namespace, upsert, workload

    state = ClusterState()
    for e in (upsert(namespace("ns0"), T0), upsert(flavor("f0"), T0), upsert(cluster_queue("cq0", quotas={"f0": 4}), T0),
              upsert(local_queue("ns0", "lq0", "cq0"), T0), upsert(workload("ns0", "g", uid="u0", cpu="1"), T0),
              ev.WorkloadOnHoldChanged(time=T0 + 1, key="ns0/g", uid="u0", on_hold=True)):
        state.apply(ev.Record(state.offset + 1, e))
    settle(state, DEFAULT, T0 + 2)
    data = explain(state, DEFAULT, "ns0/g", T0 + 2)
    assert data is not None and data["queue"]["state"] == "notQueued"
    assert (data["queue"]["reason"], data["queue"]["detail"]) == (
        "OnHold", "on hold while its StatefulSet is scaled to zero: not queued until the set is scaled up again")


def test_a_workload_on_hold_in_an_inactive_cluster_queue_is_not_said_queued() -> None:
    """The fold keeps a held workload out of every queue, an inactive ClusterQueue's too; its hold is what it shows."""
    from fixtures.eventgen import cluster_queue, flavor, local_queue, namespace, upsert, workload

    state = ClusterState()
    for e in (upsert(namespace("ns0"), T0), upsert(flavor("f0"), T0),
              upsert(cluster_queue("cq0", quotas={"missing": 4}), T0),
              upsert(local_queue("ns0", "lq0", "cq0"), T0), upsert(workload("ns0", "g", uid="u0", cpu="1"), T0),
              ev.WorkloadOnHoldChanged(time=T0 + 1, key="ns0/g", uid="u0", on_hold=True)):
        state.apply(ev.Record(state.offset + 1, e))
    settle(state, DEFAULT, T0 + 2)
    assert state.inactive_reason("cq0") is not None
    data = explain(state, DEFAULT, "ns0/g", T0 + 2)
    assert data is not None and (data["queue"]["state"], data["queue"]["reason"]) == ("notQueued", "OnHold")


def test_a_flavor_is_traced_with_its_least_preferred_resource_and_borrows_at_its_highest_level() -> None:
    """f1's cpu fits by borrowing and its memory needs a reclaim without borrowing: under the default
    preference f1 is (reclaim, 0), tied with f2, so f1 is kept; what the attempt borrows is its resources'
    highest level (Kueue's Assignment.Borrowing). Under PreemptionOverBorrowing f1 is (fit, 1) and the attempt
    reads Fit."""
    _, state = scenario_state("flavor-mode-least-preferred-resource.yaml")
    data = explain(state, DEFAULT, "team/w", T0)
    assert data is not None
    attempt = data["attempt"]
    assert attempt["outcome"] == "Preempt" and attempt["borrowingLevel"] == 1
    [ps] = attempt["podSets"]
    assert ps["flavors"] == {"cpu": "f1", "memory": "f1"} and ps["borrowingLevel"] == 1
    assert ps["tried"]["cpu"] == [
        "f1: reclaim (insufficient unused quota for memory in flavor f1, 2 more needed), a resource "
        "borrowing at level 1",
        "f2: reclaim (insufficient unused quota for memory in flavor f2, 2 more needed)"]
    _, state = scenario_state("flavor-mode-preemption-over-borrowing-fit.yaml")
    data = explain(state, DEFAULT, "team/w", T0)
    assert data is not None
    assert data["attempt"]["outcome"] == "Fit" and data["attempt"]["borrowingLevel"] == 1
    assert data["attempt"]["podSets"][0]["tried"]["cpu"] == [
        "f1: fit (insufficient unused quota for memory in flavor f1, 2 more needed), borrowing level 1"]
