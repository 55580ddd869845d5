"""Replay verification: re-run the scheduler at every recorded decision point and compare.

Each decision batch names the offset of the last event the scheduler had applied (``input``) and its time.
Folding the log, we stop right after that offset, ask the scheduler again, and compare what it says with what
the log holds, event for event. Any difference means the log was tampered with or the scheduler is no longer
deterministic (or no longer the one that wrote the log) — the workflow replayer's nondeterminism check.

Each batch is re-run under the Kueue Configuration in force at its ``input`` — the latest ``ConfigRecorded``
before it (Kueue's defaults before the first) — unless the caller overrides it with one of its own.

Amounts are compared by value — ``resourceUsage`` and the amounts in quota messages
(:func:`~kueue_es.scheduler.quota_messages.canonical_message`) — since logs recorded before kueue-es wrote them
as Kueue does hold other strings for the same amounts.

Logs written by an older kueue-es verify where the scheduler has since learnt a write Kueue makes: preemption
skips without their mark, reservations without the summary of the flavors they considered (before session 43),
and (before session 32) cycles without the eviction of a deactivated pending workload or without the skipped
attempts written only to settle the preemption-skips gauge.

Where the scheduler has since changed a decision to follow Kueue, such a log reports a difference: from session
45, a flavor whose resources differ in both mode and borrowing level, a pod set's total past int64, a
considered-flavors summary past 1,024 bytes, a Retry check reported after the eviction (``RequeueAtRaised``) and
the retry times of a refused eviction; from session 46, a passed ``requeueAt`` of a workload waiting pending
(``RequeueAtCleared``), a pod-set group's members listed together (in ``podSetAssignments`` and the pending
message, which also names a member tried before the pod set that got no flavor), a NoFit reason counting
the resource groups that found a flavor, a legacy ``Pending`` reason rewritten to ``PendingEvaluation``, the
``DRAResourcesResolved`` message, a ``firstAvailable`` request charged its largest count, all-at-once
MultiKueue nominations in name order, a Ready check with no ``clusterName`` taking the worker of its admitted
copy, a Workload first seen admitted keeping its ``clusterName``, a ProvisioningRequest kept through
reclaimable pods, a pending workload kept as its queue's sticky head through an update (its new generation no
longer its queue's preemptor), an attempt decided before a flush of its queue not parked, a ClusterQueue with
ConcurrentAdmission and a MultiKueue check made inactive, and a pod-level ``spec.resources`` charged only for
cpu, memory and hugepages (docs/kubernetes.md and docs/scheduling.md name each at its rule).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import msgspec

from events import schema as ev
from events.codec import to_builtins
from events.quantity import to_int
from kueue_es.scheduler import decide, decide_as_older
from kueue_es.scheduler.config import DEFAULT, SchedulerConfig
from kueue_es.scheduler.config_record import in_force
from kueue_es.scheduler.quota_messages import canonical_message
from projections.cluster import ClusterState
from projections.workloads import PENDING


@dataclass
class Mismatch:
    cycle: int
    offset: int
    """Offset of the first recorded decision of the batch."""
    expected: list[dict]
    recorded: list[dict]
    config: int = -1
    """Offset of the configuration the batch was re-run under (-1: Kueue's defaults or the override)."""

    def describe(self) -> str:
        under = f" (re-run under the configuration recorded at offset {self.config})" if self.config >= 0 else ""
        for i, (want, got) in enumerate(zip(self.expected, self.recorded, strict=False)):
            if want != got:
                keys = sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))
                return (f"cycle {self.cycle} at offset {self.offset + i}: recorded {got.get('type')} for "
                        f"{got.get('key')} differs from a re-run in {', '.join(keys)}: "
                        f"recorded {[got.get(k) for k in keys]}, re-run {[want.get(k) for k in keys]}{under}")
        return (f"cycle {self.cycle} at offset {self.offset}: recorded {len(self.recorded)} decisions, "
                f"a re-run gives {len(self.expected)}{under}")


@dataclass
class VerifyReport:
    batches: int = 0
    decisions: int = 0
    mismatches: list[Mismatch] = field(default_factory=list)
    configs: list[tuple[int, ev.ConfigRecorded]] = field(default_factory=list)
    """The configurations recorded in the log, with their offsets (used unless overridden)."""
    before_config: int = 0
    """Decision batches re-run before any configuration was recorded (under Kueue's defaults, or the override)."""

    @property
    def ok(self) -> bool:
        return not self.mismatches


def _batches(records: Iterable[ev.Record]) -> Iterable[tuple[str, list[ev.Record]]]:
    """Group consecutive decisions of one cycle; everything else passes one record at a time."""
    current: list[ev.Record] = []
    for r in records:
        if isinstance(r.event, ev.Decision):
            if current and current[-1].event.cycle != r.event.cycle:
                yield "decisions", current
                current = []
            current.append(r)
            continue
        if current:
            yield "decisions", current
            current = []
        yield "event", [r]
    if current:
        yield "decisions", current


def verify(read: Callable[[], Iterable[ev.Record]], override: SchedulerConfig | None = None) -> VerifyReport:
    """``read`` is called twice (two passes over the log): first to find decision points, then to check them.

    ``override``: re-run every batch under this configuration instead of the one recorded in force at its input.
    A recorded configuration that is not valid is an error naming its offset (``InvalidInput``), when a batch
    is to be re-run under it."""
    inputs = set()
    for r in read():
        if isinstance(r.event, ev.Decision):
            inputs.add((r.event.input, r.event.cycle, r.event.time))
    wanted: dict[int, list[tuple[int, int]]] = {}
    for inp, cycle, time in sorted(inputs):
        wanted.setdefault(inp, []).append((cycle, time))
    report = VerifyReport()
    state = ClusterState()
    expected: dict[int, list[ev.Decision]] = {}
    older: dict[int, list[ev.Decision]] = {}
    """Cycle -> what the scheduler decided before it evicted deactivated pending workloads, where that differs."""

    under: dict[int, int] = {}
    """Cycle -> offset of the configuration its batch was re-run under."""

    def expect_at(offset: int) -> None:
        for cycle, time in wanted.get(offset, ()):
            config = override or in_force(state) or DEFAULT
            under[cycle] = -1 if override is not None else state.config_offset
            renumber = state.last_cycle + 1 != cycle
            expected[cycle] = _numbered(decide(state, config, time), cycle, renumber)
            if _new_since_older(state, expected[cycle]):
                older[cycle] = _numbered(decide_as_older(state, config, time), cycle, renumber)

    expect_at(-1)
    for kind, recs in _batches(read()):
        if kind == "decisions":
            cycle = recs[0].event.cycle
            want = expected.pop(cycle, None)
            got = [r.event for r in recs]
            report.batches += 1
            report.decisions += len(got)
            report.before_config += not report.configs
            plain_want, plain_got = _plain(want or []), _plain(got)
            _unwritten_fields(plain_want, plain_got)
            if want is not None and plain_want != plain_got and cycle in older:
                plain_want = _plain(older[cycle])
                _unwritten_fields(plain_want, plain_got)
            older.pop(cycle, None)
            if want is None or plain_want != plain_got:
                report.mismatches.append(Mismatch(cycle, recs[0].offset, plain_want, plain_got,
                                                  under.get(cycle, -1)))
        elif isinstance(recs[0].event, ev.ConfigRecorded):
            report.configs.append((recs[0].offset, recs[0].event))
        for r in recs:
            state.apply(r)
            expect_at(r.offset)
    return report


def _numbered(batch: list[ev.Decision], cycle: int, renumber: bool) -> list[ev.Decision]:
    return [msgspec.structs.replace(d, cycle=cycle) for d in batch] if renumber else batch


def _new_since_older(state: ClusterState, batch: list[ev.Decision]) -> bool:
    """The batch holds a write kueue-es did not make before session 32, so a log written then holds, for the same
    cycle, what :func:`decide_as_older` decides (which ``replay --verify`` accepts as that older kueue-es's): the
    eviction of a deactivated workload that holds no quota, or a skipped attempt with nothing new to say (the
    workload already shows it), written only so the cycle's written skips count them all (a log written before
    the skips were marked leaves their count unknown, so every such cycle writes them)."""
    for d in batch:
        if isinstance(d, ev.WorkloadDeactivated):
            wl = state.workloads.get(d.key)
            if wl is not None and wl.phase == PENDING:
                return True
        elif isinstance(d, ev.WorkloadPending) and d.preemption_skipped:
            wl = state.workloads.get(d.key)
            c = wl.condition("QuotaReserved") if wl is not None else None
            if c is not None and (c.status, c.reason, c.message) == ("False", d.reason, d.message):
                return True
    return False


def _plain(events: list) -> list[dict]:
    out = []
    for e in events:
        data = to_builtins(e)
        data.pop("id", None)
        if isinstance(data.get("message"), str):
            data["message"] = canonical_message(data["message"])
        for psa in (data.get("admission") or {}).get("podSetAssignments") or ():
            _same_quantities(psa)
        out.append(data)
    return out


_LATER_FIELDS = ("preemptionSkipped", "consideredFlavors")
"""Decision fields older logs do not hold: ``preemptionSkipped`` (the preemption skips' mark, which only
``admission_cycle_preemption_skips`` reads) and ``consideredFlavors`` (the QuotaReserved Event's summary of
the flavors tried, which only the Kubernetes connector's Event reads)."""


def _unwritten_fields(want: list[dict], got: list[dict]) -> None:
    """Logs written before the scheduler wrote one of :data:`_LATER_FIELDS` hold the same decisions without
    it: a field the recorded decision lacks is not asked of it. One it holds with another value, or where the
    scheduler writes none, is still a mismatch."""
    if len(want) != len(got):
        return
    for w, g in zip(want, got, strict=True):
        for name in _LATER_FIELDS:
            if name in w and name not in g:
                del w[name]


def _same_quantities(psa: dict) -> None:
    """``resourceUsage`` compared by value: logs written before it took Kueue's formatter hold ``1000000000``
    where the scheduler now writes ``1G``, and both are the same decision."""
    usage = psa.get("resourceUsage")
    if usage:
        psa["resourceUsage"] = {r: to_int(r, q) for r, q in usage.items()}
