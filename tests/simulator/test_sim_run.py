"""Simulated runs: completion, figures, determinism, the log's fitness for replay/verify/audit, plots."""

from __future__ import annotations

import json
import time

import pytest
from simhelp import SMALL, SMALL_TAS, events, segments, small

from events import objects as o
from events import schema as ev
from events.tas_assignment import decode
from kueue_es.cli import main
from kueue_es.simulator import runner
from kueue_es.simulator.sim import T0


def test_small_scenario_runs_to_completion(tmp_path) -> None:
    result = runner.run(small(), tmp_path / "log", seed=0)
    s = result.summary
    assert s["workloads"] == 60
    for name, c in s["workloadClasses"].items():
        assert c["count"] == c["admitted"] == c["finished"], name
    assert set(s["workloadClasses"]) == {"small", "big"}
    assert s["workloadClasses"]["big"]["count"] == 12 and s["workloadClasses"]["small"]["count"] == 48
    assert s["notes"] == []
    # preemption happened, and every preempted workload was admitted again and finished
    assert s["workloadClasses"]["small"]["evictions"] > 0
    assert s["lowerBoundSeconds"] == 2.213
    assert s["lowerBoundSeconds"] <= s["simulatedWallSeconds"] <= 3 * s["lowerBoundSeconds"]
    assert 0 < s["clusterQueueClasses"]["cq"]["avgUsagePercent"] <= 100
    assert s["decisions"] > 120 and s["realSeconds"] > 0

    evs = events(tmp_path / "log")
    finished = [e for e in evs if isinstance(e, ev.WorkloadFinished)]
    assert len(finished) == 60 and len({e.key for e in finished}) == 60
    assert max(e.time for e in evs) == T0 + round(s["simulatedWallSeconds"] * 1000)
    times = [e.time for e in evs]
    assert times == sorted(times), "the simulated clock never goes back"
    # each admission is followed by pods ready; each preemption by the job stopping
    admitted = sum(isinstance(e, ev.WorkloadAdmitted) for e in evs)
    assert sum(isinstance(e, ev.PodsReadyChanged) and e.ready for e in evs) == admitted
    preempted = sum(isinstance(e, ev.WorkloadPreempted) for e in evs)
    assert sum(isinstance(e, ev.JobStopped) for e in evs) == preempted > 0


def test_time_to_admission_is_first_quota_reservation_minus_creation(tmp_path) -> None:
    result = runner.run(small(), tmp_path / "log", seed=3)
    evs = events(tmp_path / "log")
    created = {e.key: e.time for e in evs if isinstance(e, ev.ObjectUpserted) and type(e.obj).__name__ == "Workload"}
    first: dict[str, int] = {}
    for e in evs:
        if isinstance(e, ev.QuotaReserved):
            first.setdefault(e.key, e.time)
    waits = sorted(first[k] - created[k] for k in created if "/big-" in k)
    c = result.summary["workloadClasses"]["big"]
    assert c["avgTimeToAdmissionSeconds"] == round(sum(waits) / len(waits) / 1000, 3)
    assert c["p50TimeToAdmissionSeconds"] == waits[(len(waits) + 1) // 2 - 1] / 1000
    assert c["maxTimeToAdmissionSeconds"] == waits[-1] / 1000


def test_same_scenario_and_seed_give_byte_identical_logs(tmp_path) -> None:
    a = runner.run(small(), tmp_path / "a", seed=7, jitter_ms=30)
    b = runner.run(small(), tmp_path / "b", seed=7, jitter_ms=30)
    sa, sb = segments(tmp_path / "a"), segments(tmp_path / "b")
    assert sa and sa == sb
    assert a.summary["decisions"] == b.summary["decisions"]
    runner.run(small(), tmp_path / "c", seed=8, jitter_ms=30)
    assert segments(tmp_path / "c") != sa, "the seed matters"


def test_log_is_ready_for_replay_verify_and_audit(tmp_path, capsys) -> None:
    log = tmp_path / "log"
    result = runner.run(small(), log, seed=1)
    assert main(["replay", "--log", str(log), "--verify"]) == 0
    assert "verified:" in capsys.readouterr().out
    assert main(["replay", "--log", str(log), "-o", "json"]) == 0
    state = json.loads(capsys.readouterr().out)
    assert state  # the final state folds
    preemptor, _ = result.outcome.preemptions[0]
    assert main(["audit", "--log", str(log), preemptor]) == 0
    out = capsys.readouterr().out
    assert "QuotaReserved" in out and "Finished" in out


def test_the_log_records_the_configuration_it_was_simulated_under(tmp_path, capsys) -> None:
    """A run with fairSharing records it after the setup, so verify re-runs it without --config; Kueue's
    defaults (classical preemption) do not give the same decisions."""
    from kueue_es.scheduler.config import load_config

    doc = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}}
    log = tmp_path / "log"
    runner.run(small(), log, seed=1, config=load_config(doc), config_document=doc, config_source="fair.yaml")
    evs = events(log)
    recorded = [(i, e) for i, e in enumerate(evs) if isinstance(e, ev.ConfigRecorded)]
    first_decision = next(i for i, e in enumerate(evs) if isinstance(e, ev.Decision))
    assert [(e.document, e.writer, e.source, e.time) for _, e in recorded] == [(doc, "simulator", "fair.yaml", T0)]
    assert recorded[0][0] < first_decision
    capsys.readouterr()
    assert main(["replay", "--log", str(log), "--verify"]) == 0
    assert "fairSharing" in capsys.readouterr().out
    defaults = tmp_path / "defaults.yaml"
    defaults.write_text("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n")
    assert main(["replay", "--log", str(log), "--verify", "--config", str(defaults)]) == 1
    runner.run(small(), tmp_path / "again", seed=1, config=load_config(doc), config_document=doc,
               config_source="fair.yaml")
    assert segments(tmp_path / "again") == segments(log)


def test_under_admission_fair_sharing_the_run_ends_with_its_last_workload(tmp_path) -> None:
    """The scheduler wakes for Admission Fair Sharing samples while they move a LocalQueue's usage; the simulator
    writes no status, so once nothing waits it takes none of them (no tail of idle ticks while the usage decays)."""
    from kueue_es.scheduler.config import load_config

    doc = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
           "admissionFairSharing": {"usageHalfLifeTime": "1s", "usageSamplingInterval": "1s"}}
    log = tmp_path / "log"
    result = runner.run(small(), log, seed=0, config=load_config(doc), config_document=doc, config_source="afs.yaml")
    evs = events(log)
    last_finish = max(e.time for e in evs if isinstance(e, ev.WorkloadFinished))
    assert max(e.time for e in evs) == last_finish == T0 + round(result.summary["simulatedWallSeconds"] * 1000)


def test_block_admission_runs_one_workload_at_a_time_to_completion(tmp_path, capsys) -> None:
    """Under waitForPodsReady.blockAdmission the simulated cluster still runs everything: each admission waits
    for the pods of the one before (the PodsReady event wakes the scheduler), and the log verifies."""
    from kueue_es.scheduler import blockadmission
    from kueue_es.scheduler.config import load_config
    from projections.cluster import ClusterState

    doc = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
           "waitForPodsReady": {"blockAdmission": True}}
    log = tmp_path / "log"
    result = runner.run(small(), log, seed=0, config=load_config(doc), config_document=doc, config_source="b.yaml")
    for name, c in result.summary["workloadClasses"].items():
        assert c["count"] == c["admitted"] == c["finished"], name
    state = ClusterState()
    held = 0
    for i, e in enumerate(events(log)):
        if isinstance(e, ev.QuotaReserved):
            assert not blockadmission.holds_admission(state), f"{e.key} reserved while {state.not_ready} not ready"
        if isinstance(e, ev.WorkloadPending) and e.reason == blockadmission.REASON:
            held += 1
        state.apply(ev.Record(i, e))
    assert held > 0
    capsys.readouterr()
    assert main(["replay", "--log", str(log), "--verify"]) == 0


def test_tas_scenario_places_every_workload_on_the_topology(tmp_path) -> None:
    result = runner.run(small(SMALL_TAS), tmp_path / "log", seed=0)
    s = result.summary
    assert s["nodes"] == 6
    assert all(c["count"] == c["finished"] for c in s["workloadClasses"].values())
    logged = events(tmp_path / "log")
    kinds = {type(e.obj).__name__ for e in logged if isinstance(e, ev.ObjectUpserted)}
    assert {"Topology", "Node", "ResourceFlavor", "Workload"} <= kinds
    nodes = {e.obj.metadata.name for e in logged if isinstance(e, ev.ObjectUpserted) and isinstance(e.obj, o.Node)}
    reserved = [e for e in logged if isinstance(e, ev.QuotaReserved)]
    assert reserved
    for e in reserved:  # each admission carries its placement, on hosts of the generated topology
        (psa,) = e.admission.pod_set_assignments
        assert psa.topology_assignment is not None, e.key
        domains = decode(psa.topology_assignment)
        assert sum(d.count for d in domains) == psa.count and {d.values[-1] for d in domains} <= nodes


def test_realtime_follows_the_wall_clock(tmp_path) -> None:
    text = SMALL.replace("count: 12", "count: 3").replace("count: 3\n        creationIntervalMs: 400", "count: 1\n"
                                                           "        creationIntervalMs: 400")
    started = time.perf_counter()
    result = runner.run(small(text), tmp_path / "log", seed=0, realtime=True)
    elapsed = time.perf_counter() - started
    assert elapsed >= result.summary["simulatedWallSeconds"] * 0.95
    fast = runner.run(small(text), tmp_path / "fast", seed=0)
    assert segments(tmp_path / "fast") == segments(tmp_path / "log"), "realtime changes timing, not events"
    assert fast.summary["simulatedWallSeconds"] == result.summary["simulatedWallSeconds"]


def test_cli_json_output_and_html_plot(tmp_path, capsys) -> None:
    scenario = tmp_path / "small.yaml"
    scenario.write_text(SMALL)
    plot = tmp_path / "run.html"
    assert main(["simulate", str(scenario), "--log", str(tmp_path / "log"), "--seed", "2", "-o", "json",
                 "--plot", str(plot)]) == 0
    data = json.loads(capsys.readouterr().out)
    for key in ("simulatedWallSeconds", "realSeconds", "lowerBoundSeconds", "decisions"):
        assert isinstance(data[key], (int, float)), key
    for c in data["workloadClasses"].values():
        assert {"count", "admitted", "avgTimeToAdmissionSeconds", "p50TimeToAdmissionSeconds",
                "p95TimeToAdmissionSeconds"} <= set(c)
    assert set(data["clusterQueueClasses"]["cq"]) >= {"avgUsagePercent"}
    page = plot.read_text()
    assert page.startswith("<!DOCTYPE html>") and page.count("<svg") == 2 and "<script" not in page
    assert "http" not in page.replace("http://www.w3.org/2000/svg", "")


def test_cli_text_output_names_the_log_and_next_commands(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    scenario = tmp_path / "small.yaml"
    scenario.write_text(SMALL)
    assert main(["simulate", str(scenario)]) == 0
    out = capsys.readouterr().out
    assert "time to admission" in out and "Simulated wall time" in out and "lower bound" in out
    assert "kueue-es replay --log ./kueue-es-sim-small-seed0" in out
    assert (tmp_path / "kueue-es-sim-small-seed0").is_dir()
    assert main(["simulate", str(scenario)]) == 0  # a second run gets a fresh directory
    assert "./kueue-es-sim-small-seed0-2" in capsys.readouterr().out


def test_cli_refuses_a_non_empty_log_dir(tmp_path, capsys) -> None:
    (tmp_path / "log").mkdir()
    (tmp_path / "log" / "x").write_text("mine")
    assert main(["simulate", "demo", "--log", str(tmp_path / "log")]) == 2
    assert "not empty" in capsys.readouterr().err


def test_png_plot(tmp_path, capsys) -> None:
    pytest.importorskip("matplotlib")
    scenario = tmp_path / "small.yaml"
    scenario.write_text(SMALL)
    assert main(["simulate", str(scenario), "--log", str(tmp_path / "log"), "--plot", str(tmp_path / "p.png")]) == 0
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_png_plot_without_matplotlib_fails_before_running(tmp_path, capsys, monkeypatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError("no matplotlib")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    assert main(["simulate", "demo", "--log", str(tmp_path / "log"), "--plot", str(tmp_path / "p.png")]) == 2
    err = capsys.readouterr().err
    assert "needs matplotlib" in err and "kueue-es[plot]" in err and ".html" in err
    assert not (tmp_path / "log").exists()


THRASH = """
cohorts:
  - className: team
    count: 1
    queuesSets:
    - className: cq
      count: 3
      nominalQuota: 10
      borrowingLimit: 10
      reclaimWithinCohort: Any
      withinClusterQueue: LowerPriority
      workloadsSets:
      - count: 36
        creationIntervalMs: 250
        workloads:
        - {className: batch, runtimeMs: 3000, priority: 10, request: 2}
      - count: 8
        creationIntervalMs: 1000
        initialDelayMs: 3000
        workloads:
        - {className: urgent, runtimeMs: 2000, priority: 1000, request: 6}
"""
"""Two preemptors of one cohort take the same free quota in turn (reclaimWithinCohort: Any): without a stop
delay, Kueue's rules undo and redo the same preemptions at one instant."""


def test_a_loop_at_one_instant_is_reported_not_spun_forever(tmp_path, monkeypatch) -> None:
    from kueue_es.simulator import sim

    monkeypatch.setattr(sim, "MAX_ROUNDS_PER_INSTANT", 200)
    with pytest.raises(sim.SimulationStuck, match="--stop-delay-ms"):
        runner.run(small(THRASH), tmp_path / "log", stop_delay_ms=0)
    result = runner.run(small(THRASH), tmp_path / "log2")  # with the default stop delay it completes
    assert all(c["count"] == c["finished"] for c in result.summary["workloadClasses"].values())
