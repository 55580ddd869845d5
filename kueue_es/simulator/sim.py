"""The simulated cluster: a clock, job execution and the real pipeline in between.

The log starts with the cluster's objects and the scheduler's Kueue Configuration (recorded as a scheduler service
records it, so ``replay --verify`` needs no ``--config``). Every step takes the next simulated time ``t`` — a workload's creation, a running job's end, or the scheduler's
own next deadline (backoff, waitForPodsReady) — and appends what the cluster observed at ``t`` as one batch of
facts (``ObjectUpserted`` workloads, ``WorkloadFinished``; a ``ClockTicked`` when there is nothing else). The
engine then settles the scheduler: its decisions go to the log and into the projection. The simulated jobs
react: an admitted workload reports ``PodsReadyChanged(ready=True)`` at once and finishes ``runtimeMs``
later; a preempted or evicted one stops (``JobStopped``) ``stop_delay_ms`` later (10 ms by default; 0 means at
once) and, when admitted again, runs its whole ``runtimeMs`` from scratch. Nothing here reads a wall clock
except ``--realtime``'s sleeps, and the only randomness is the seeded ``random.Random`` used to build the
plan, so a scenario and a seed give the same log byte for byte.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from events import schema as ev
from events.errors import KueueEsError
from events.log import EventLog
from kueue_es.engine import observe, settle
from kueue_es.scheduler import DEFAULT, SchedulerConfig, next_deadline
from kueue_es.scheduler.config_record import document_of, pending
from kueue_es.simulator.model import Arrival, Plan, workload_object
from projections.cluster import ClusterState
from projections.workloads import ADMITTED

T0 = 1_735_689_600_000
"""Simulated start: 2025-01-01T00:00:00Z, in ms. Fixed, so logs do not depend on when they were made."""

_FINISH, _STOP, _CREATE = 0, 1, 2
STOP_DELAY_MS = 10
"""Default time a preempted or evicted job takes to stop (see :class:`Simulation`)."""
MAX_ROUNDS_PER_INSTANT = 10_000
"""Rounds of decisions and job reactions allowed at one simulated instant before the run is declared stuck."""


class SimulationStuck(KueueEsError):
    """Decisions and simulated job reactions loop at one instant: nothing lets simulated time pass."""


@dataclass
class Track:
    """What the simulator knows about one workload."""

    arrival: Arrival
    created: int | None = None
    first_reserved: int | None = None
    admissions: int = 0
    evictions: int = 0
    finished: int | None = None
    run: int = 0
    """Generation of the current run; a scheduled end with an older generation was cancelled."""
    holding: int = 0
    """cpu (milli) of quota the workload holds right now, as the projection says."""


@dataclass
class Series:
    """Samples over simulated time for plots: one point per step that changed something."""

    times: list[int] = field(default_factory=list)
    pending: list[int] = field(default_factory=list)
    usage: dict[str, list[int]] = field(default_factory=dict)
    """ClusterQueue class -> cpu in use (milli)."""


@dataclass
class Outcome:
    tracks: dict[str, Track]
    decisions: int
    events: int
    end: int
    """Simulated time of the last event, ms since the epoch."""
    usage_integral: dict[str, int]
    """ClusterQueue class -> cpu·ms used over the run (milli·ms)."""
    series: Series
    real_seconds: float
    notes: list[str]
    preemptions: list[tuple[str, str]] = field(default_factory=list)
    """The first (preemptor, victim) pairs of the run, for pointing users at an interesting audit."""


ProgressFn = Callable[[int, int, int], None]
"""progress(finished workloads, total workloads, simulated ms since start)."""


class Simulation:
    """One run of a plan against a log.

    ``stop_delay_ms`` is how long an evicted job takes to stop. It must be above zero for scenarios with
    preemption: two preemptors of one cohort can take the same free quota in turn (each one's victims are
    readmitted while the other waits), and Kueue's algorithm only leaves that loop when something else
    happens — a job finishing — which needs simulated time to pass.
    """

    def __init__(self, plan: Plan, log: EventLog, *, config: SchedulerConfig = DEFAULT, realtime: bool = False,
                 progress: ProgressFn | None = None, stop_delay_ms: int = STOP_DELAY_MS,
                 max_batches_per_step: int = 200_000, config_document: dict[str, Any] | None = None,
                 config_source: str = "") -> None:
        self.plan = plan
        self.config_document = config_document if config_document is not None else document_of(config)
        """Recorded in the log after the setup, so ``replay --verify`` re-runs the decisions under it."""
        self.config_source = config_source
        self.stop_delay_ms = stop_delay_ms
        self.max_batches = max_batches_per_step
        self.log = log
        self.config = config
        self.realtime = realtime
        self.progress = progress
        self.state = ClusterState()
        self.tracks: dict[str, Track] = {a.key: Track(a) for a in plan.arrivals}
        self.heap: list[tuple[int, int, int, str, int]] = []
        """(time, kind, seq, key, run generation)."""
        self._seq = 0
        self.decisions = 0
        self.events = 0
        self.finished = 0
        self.created = 0
        self.holding_count = 0
        self.usage_now: dict[str, int] = {c: 0 for c in sorted(set(plan.cq_class.values()))}
        self.usage_integral: dict[str, int] = dict.fromkeys(self.usage_now, 0)
        self.series = Series(usage={c: [] for c in self.usage_now})
        self._touched: dict[str, None] = {}
        self._admitted_now: dict[str, None] = {}
        self._stopped_now: dict[str, None] = {}
        self.notes: list[str] = []
        self.preemptions: list[tuple[str, str]] = []
        self._last_t = T0

    # --- scheduling of simulated facts --------------------------------------------------------------------

    def _push(self, t: int, kind: int, key: str, run: int = 0) -> None:
        self._seq += 1
        heapq.heappush(self.heap, (t, kind, self._seq, key, run))

    # --- reacting to what was appended ----------------------------------------------------------------------

    def _on_records(self, records: list[ev.Record]) -> None:
        self.events += len(records)
        tracks = self.tracks
        for r in records:
            e = r.event
            is_decision = isinstance(e, ev.Decision)
            if is_decision:
                self.decisions += 1
            key = e.key
            tr = tracks.get(key)
            if tr is None:
                continue
            self._touched[key] = None
            if is_decision:
                if isinstance(e, ev.QuotaReserved):
                    if tr.first_reserved is None:
                        tr.first_reserved = e.time
                elif isinstance(e, ev.WorkloadAdmitted):
                    tr.admissions += 1
                    tr.run += 1
                    self._push(e.time + tr.arrival.template.runtime_ms, _FINISH, key, tr.run)
                    self._admitted_now[key] = None
                elif isinstance(e, (ev.WorkloadPreempted, ev.WorkloadEvicted)):
                    if isinstance(e, ev.WorkloadPreempted) and len(self.preemptions) < 100:
                        self.preemptions.append((e.preemptor, key))
                    tr.evictions += 1
                    tr.run += 1  # the running job stops; its scheduled end is void
                    if self.stop_delay_ms:
                        self._push(e.time + self.stop_delay_ms, _STOP, key, tr.run)
                    else:
                        self._stopped_now[key] = None
                elif isinstance(e, ev.WorkloadDeactivated):
                    tr.run += 1
            elif isinstance(e, ev.ObjectUpserted):
                if tr.created is None:
                    tr.created = e.time
                    self.created += 1
            elif isinstance(e, ev.WorkloadFinished):
                if tr.finished is None:
                    tr.finished = e.time
                    self.finished += 1

    def _sync_usage(self) -> None:
        """Bring the per-class usage in line with the projection for every workload touched since last time."""
        wls = self.state.workloads
        for key in self._touched:
            tr = self.tracks[key]
            wl = wls.get(key)
            now = sum(wl.usage.values()) if wl is not None and wl.reserving else 0
            if now != tr.holding:
                cls = tr.arrival.cq_class
                self.usage_now[cls] += now - tr.holding
                if now and not tr.holding:
                    self.holding_count += 1
                elif tr.holding and not now:
                    self.holding_count -= 1
                tr.holding = now
        self._touched.clear()

    def _job_facts(self, t: int) -> list[ev.AnyEvent]:
        """What the simulated jobs report at ``t``: pods ready for new admissions, stopped for evictions."""
        out: list[ev.AnyEvent] = []
        wls = self.state.workloads
        for key in self._admitted_now:
            wl = wls.get(key)
            if wl is not None and wl.phase == ADMITTED and not wl.evicted and not wl.pods_ready:
                out.append(ev.PodsReadyChanged(time=t, key=key, uid=wl.uid, ready=True, reason="PodsReady"))
        for key in self._stopped_now:
            wl = wls.get(key)
            if wl is not None and wl.evicted and wl.reserving and not wl.job_stopped:
                out.append(ev.JobStopped(time=t, key=key, uid=wl.uid))
        self._admitted_now.clear()
        self._stopped_now.clear()
        return out

    # --- the run --------------------------------------------------------------------------------------------

    async def run(self) -> Outcome:
        started = time.perf_counter()
        state, log = self.state, self.log
        setup = [ev.ObjectUpserted(time=T0, key=obj.key, uid=obj.metadata.uid, id=f"sim-setup-{i}", obj=obj)
                 for i, obj in enumerate(self.plan.objects)]
        await observe(log, state, setup, self._on_records)
        await observe(log, state, pending(state, self.config_document, writer="simulator", source=self.config_source),
                      self._on_records)
        for a in self.plan.arrivals:
            self._push(T0 + a.at, _CREATE, a.key)
        total = len(self.plan.arrivals)
        while True:
            t = self.heap[0][0] if self.heap else None
            waiting = self.created - self.finished - self.holding_count
            deadline = next_deadline(state, self.config, afs_samples=waiting > 0)  # no idle tail of samples
            if deadline is not None and deadline <= state.time:
                self.notes.append(f"scheduler deadline {deadline} is not in the future at {state.time}; ignored")
                deadline = None
            if deadline is not None and (t is None or deadline < t):
                t = deadline
            if t is None:
                break
            if self.realtime:
                await self._sleep_until(t, started)
            self._advance(t)
            facts: list[ev.AnyEvent] = []
            while self.heap and self.heap[0][0] == t:
                _, kind, _, key, run = heapq.heappop(self.heap)
                tr = self.tracks[key]
                if kind == _CREATE:
                    obj = workload_object(tr.arrival)
                    facts.append(ev.ObjectUpserted(time=t, key=key, uid=obj.metadata.uid, obj=obj,
                                                   id=f"sim-create-{obj.metadata.uid}"))
                elif run != tr.run or tr.finished is not None:
                    continue  # superseded: the job was stopped (or restarted) since this was scheduled
                elif kind == _FINISH:
                    facts.append(ev.WorkloadFinished(time=t, key=key, uid=tr.arrival.uid,
                                                     message="The simulated job ran to completion"))
                else:
                    wl = state.workloads.get(key)
                    if wl is not None and wl.evicted and wl.reserving and not wl.job_stopped:
                        facts.append(ev.JobStopped(time=t, key=key, uid=wl.uid))
            if not facts:
                facts.append(ev.ClockTicked(time=t))
            await observe(log, state, facts, self._on_records)
            for _ in range(MAX_ROUNDS_PER_INSTANT):
                await settle(log, state, self.config, on_records=self._on_records, max_batches=self.max_batches)
                follow = self._job_facts(t)
                if not follow:
                    break
                await observe(log, state, follow, self._on_records)
            else:
                raise SimulationStuck(
                    f"the scheduler and the simulated jobs keep reacting to each other at simulated time "
                    f"{(t - T0) / 1000:.3f}s without time passing (preemptions undone and redone); run with "
                    f"a stop delay above zero (--stop-delay-ms)")
            self._sync_usage()
            self._sample(t)
            if self.progress is not None:
                self.progress(self.finished, total, t - T0)
        unfinished = total - self.finished
        if unfinished:
            self.notes.append(f"{unfinished} workload(s) never finished: nothing more could happen")
        return Outcome(
            tracks=self.tracks, decisions=self.decisions, events=self.events, end=self._last_t,
            usage_integral=self.usage_integral, series=self.series,
            real_seconds=time.perf_counter() - started, notes=self.notes, preemptions=self.preemptions,
        )

    def _advance(self, t: int) -> None:
        dt = t - self._last_t
        if dt > 0:
            for cls, used in self.usage_now.items():
                if used:
                    self.usage_integral[cls] += used * dt
            self._last_t = t

    def _sample(self, t: int) -> None:
        s = self.series
        pending = self.created - self.finished - self.holding_count
        if s.times and s.pending[-1] == pending and all(s.usage[c][-1] == u for c, u in self.usage_now.items()):
            return
        if s.times and s.times[-1] == t:
            s.pending[-1] = pending
            for c, u in self.usage_now.items():
                s.usage[c][-1] = u
            return
        s.times.append(t)
        s.pending.append(pending)
        for c, u in self.usage_now.items():
            s.usage[c].append(u)

    async def _sleep_until(self, t: int, started: float) -> None:
        delay = (t - T0) / 1000 - (time.perf_counter() - started)
        if delay > 0:
            await anyio.sleep(delay)


def percentile(sorted_values: list[int], p: float) -> int:
    """Nearest-rank percentile of an ascending list (p in 0..100)."""
    if not sorted_values:
        return 0
    rank = max(1, -(-len(sorted_values) * p // 100))
    return sorted_values[int(rank) - 1]


def summarize(plan: Plan, out: Outcome, *, seed: int, log_path: str, real_seconds: float) -> dict[str, Any]:
    """The run's figures as plain data (the ``-o json`` document)."""
    classes: dict[str, list[Track]] = {}
    for tr in out.tracks.values():
        classes.setdefault(tr.arrival.template.class_name, []).append(tr)
    wl_classes: dict[str, Any] = {}
    for name in sorted(classes):
        trs = classes[name]
        waits = sorted(tr.first_reserved - tr.created for tr in trs
                       if tr.first_reserved is not None and tr.created is not None)
        wl_classes[name] = {
            "count": len(trs),
            "admitted": len(waits),
            "finished": sum(1 for tr in trs if tr.finished is not None),
            "evictions": sum(tr.evictions for tr in trs),
            "avgTimeToAdmissionSeconds": round(sum(waits) / len(waits) / 1000, 3) if waits else None,
            "p50TimeToAdmissionSeconds": round(percentile(waits, 50) / 1000, 3) if waits else None,
            "p95TimeToAdmissionSeconds": round(percentile(waits, 95) / 1000, 3) if waits else None,
            "maxTimeToAdmissionSeconds": round(waits[-1] / 1000, 3) if waits else None,
        }
    duration = max(0, out.end - T0)
    nominal = plan.class_nominal()
    counts: dict[str, int] = {}
    for cls in plan.cq_class.values():
        counts[cls] = counts.get(cls, 0) + 1
    cq_classes = {
        cls: {
            "count": counts[cls],
            "nominalQuotaCpu": nominal[cls] / 1000,
            "avgUsagePercent": round(100 * out.usage_integral[cls] / (nominal[cls] * duration), 2)
            if nominal[cls] and duration else 0.0,
        }
        for cls in sorted(counts)
    }
    bound, resource_bound, arrival_bound = plan.lower_bound()
    sim_wall = duration / 1000
    return {
        "scenario": plan.scenario.name,
        "source": plan.scenario.source,
        "seed": seed,
        "log": log_path,
        "cohorts": len(plan.cohorts),
        "clusterQueues": len(plan.cq_class),
        "workloads": len(plan.arrivals),
        "nodes": plan.nodes,
        "simulatedWallSeconds": sim_wall,
        "lowerBoundSeconds": bound / 1000,
        "lowerBound": {"resourceSeconds": resource_bound / 1000, "arrivalSeconds": arrival_bound / 1000},
        "wallOverLowerBound": round(sim_wall / (bound / 1000), 3) if bound else None,
        "realSeconds": round(real_seconds, 3),
        "decisions": out.decisions,
        "decisionsPerRealSecond": round(out.decisions / real_seconds, 1) if real_seconds > 0 else None,
        "events": out.events,
        "workloadClasses": wl_classes,
        "clusterQueueClasses": cq_classes,
        "notes": list(out.notes),
    }
