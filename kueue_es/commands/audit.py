"""``kueue-es audit``: the admission history of a workload, or of every workload of a ClusterQueue.

Each step (submitted, queued, quota reserved, admitted, pending attempts, preempted/evicted, requeued,
finished, ...) comes with the offset and time of the event behind it. Consecutive identical pending attempts
are collapsed into one step with a repeat count. ``--since``/``--until`` keep the steps within a time range; a
collapsed step is kept whole, at the time of its first repeat, when the span from its first to its last repeat
meets the range.
The Kueue Configurations the decisions shown were made under (as recorded in the log) are listed with them.
A state an admission check's own controller set on the Workload shows at the upsert that carried it: the cluster
state is folded beside the audit to tell which upserts change a check's state, from the first upsert that may (read
from the newest checkpoint before it), not at all in a log without any.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import msgspec

from events.codec import Quarantined
from events.errors import InvalidInput
from events.objects import ClusterQueue
from events.schema import ObjectUpserted, Record
from kueue_es.commands._common import (
    Log,
    NotFound,
    add_log_argument,
    add_output_argument,
    fold_log,
    key_or_name_arg,
    name_arg,
    namespace_arg,
    nearest_state,
    open_readonly,
    quarantine_report,
    render_csv,
    render_table,
    time_arg,
    time_text,
    warn,
    write_json,
)
from kueue_es.scheduler import config_record
from projections.audit import AuditTrail, Step
from projections.cluster import ClusterState

CSV_COLUMNS = ["offset", "time", "workload", "step", "clusterQueue", "reason", "message", "preemptor",
               "flavors", "counts", "repeat", "lastOffset", "observed", "ignored", "config"]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "audit",
        help="admission history of a workload or of a ClusterQueue's workloads",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    add_log_argument(p)
    which = p.add_mutually_exclusive_group()
    which.add_argument("workload", nargs="?", type=key_or_name_arg, metavar="NAMESPACE/WORKLOAD",
                       help="the workload (NAME alone means namespace --namespace); without it or --cluster-queue, every "
                            "workload's steps")
    which.add_argument("--cluster-queue", type=name_arg, metavar="CQ", help="every step that happened in this ClusterQueue")
    p.add_argument("-n", "--namespace", type=namespace_arg, default=None,
                   help="namespace of a WORKLOAD given without one (default: default)")
    p.add_argument("--since", type=time_arg("--since"), metavar="TIME", help="only steps at or after TIME (a collapsed step: its last repeat)")
    p.add_argument("--until", type=time_arg("--until"), metavar="TIME", help="only steps at or before TIME (a collapsed step: its first repeat)")
    p.add_argument("--quarantine", action="store_true",
                   help="set undecodable events aside and report them instead of stopping")
    add_output_argument(p, ["table", "json", "csv"], "table")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.since is not None and args.until is not None and args.since > args.until:
        raise InvalidInput(f"--since {time_text(args.since)} is after --until {time_text(args.until)}: no step "
                           "can be in between")
    if args.namespace is not None and (not args.workload or "/" in args.workload):
        raise InvalidInput(f"-n {args.namespace} goes with a WORKLOAD given without its namespace; "
                           + (f"{args.workload} names its own" if args.workload else "here it would be ignored"))
    key = None
    if args.workload:
        key = args.workload if "/" in args.workload else f"{args.namespace or 'default'}/{args.workload}"
    trail = AuditTrail(keys=[key] if key else None)
    quarantine: list[Quarantined] | None = [] if args.quarantine else None
    cluster_queues: set[str] = set()
    log = open_readonly(args.log)
    try:
        audit(log, trail, quarantine, cluster_queues)
    finally:
        log.close_sync()
    if quarantine:
        warn(f"set aside {len(quarantine)} undecodable event(s) at offset(s) "
             f"{', '.join(str(q.offset) for q in quarantine)}")
    if key is not None:
        if key not in trail.timelines:
            raise NotFound("Workload", key, f"in log {args.log}")
        steps = trail.timeline(key)
    else:
        steps = trail.steps()
    if args.cluster_queue is not None:
        if args.cluster_queue not in cluster_queues:  # one the log saw but without history: no step, exit 0
            raise NotFound("ClusterQueue", args.cluster_queue, f"in log {args.log}")
        steps = [s for s in steps if s.cluster_queue == args.cluster_queue]
    steps = [s for s in steps if _in_range(s, args.since, args.until)]
    configs = configurations(trail, steps)
    if args.output == "json":
        data: dict[str, Any] = {"log": args.log}
        if key:
            data["workload"] = key
        if args.cluster_queue:
            data["clusterQueue"] = args.cluster_queue
        data["steps"] = [step_json(s) for s in steps]
        data["configurations"] = configs
        if quarantine:
            data["quarantined"] = quarantine_report(quarantine)
        write_json(data)
    elif args.output == "csv":
        sys.stdout.write(render_csv(CSV_COLUMNS, (_csv_row(s) for s in steps)))
    else:
        sys.stdout.write(render_steps(steps, with_workload=key is None))
        for c in configs:
            sys.stdout.write(f"Configuration {config_record.one_line(c)}\n")
    return 0


class _StateNeeded(Exception):
    def __init__(self, offset: int) -> None:
        self.offset = offset


def audit(log: Log, trail: AuditTrail, quarantine: list[Quarantined] | None,
          cluster_queues: set[str] | None = None) -> None:
    """Fold ``log`` into ``trail`` (one without a ``state``), giving it the cluster-state fold from the first record
    it may need it for (:meth:`AuditTrail.needs_state`): what the trail shows is what it shows with the fold beside
    it all along, at the cost of the fold from the checkpoint before that record on, none for a log that never
    needs it. ``cluster_queues``: filled with the name of every ClusterQueue the log creates or updates."""

    def apply(record: Record) -> None:
        if cluster_queues is not None and isinstance(record.event, ObjectUpserted) \
                and isinstance(record.event.obj, ClusterQueue):
            cluster_queues.add(record.event.obj.metadata.name)
        if trail.needs_state(record):
            raise _StateNeeded(record.offset)
        trail.apply(record)

    start = 0
    while True:
        try:
            fold_log(log, apply, start=start, quarantine=quarantine, label="Auditing")
            return
        except _StateNeeded as needed:
            trail.state = state_before(log, needed.offset, setting_aside=quarantine is not None)
            start = needed.offset


def state_before(log: Log, offset: int, *, setting_aside: bool) -> ClusterState:
    """The cluster-state fold of ``log`` up to the record before ``offset``, from the newest usable checkpoint (or
    Kafka snapshot) not after it. ``setting_aside``: without the undecodable events (as ``--quarantine``'s fold)."""
    state, _ = nearest_state(log, to=offset - 1)
    if state.offset < offset - 1:
        fold_log(log, state.apply, start=state.offset + 1, to=offset - 1, quarantine=[] if setting_aside else None,
                 label="Folding", lazy=True)
    return state


def configurations(trail: AuditTrail, steps: list[Step]) -> list[dict[str, Any]]:
    """The recorded configurations the decisions among ``steps`` were made under. The audit shows the log's
    history as it is: a recorded document that is not a valid Configuration is reported, not refused."""
    used = {s.config for s in steps if s.config is not None}
    return [config_record.entry(e, off, document=False, invalid_ok=True) for off, e in trail.configs if off in used]


def _in_range(s: Step, since: int | None, until: int | None) -> bool:
    if until is not None and s.time > until:
        return False
    return since is None or (s.last_time if s.last_time is not None else s.time) >= since


def step_json(s: Step) -> dict[str, Any]:
    data = msgspec.to_builtins(s)
    data["timeMs"] = s.time
    data["time"] = time_text(s.time)
    if s.last_time is not None:
        data["lastTime"] = time_text(s.last_time)
    return data


def details(s: Step) -> str:
    parts: list[str] = []
    reason_message = ": ".join(x for x in (s.reason, s.message) if x)
    match s.step:
        case "Submitted":
            parts.append(f"LocalQueue {s.local_queue}" if s.local_queue else "no LocalQueue")
            if s.priority is not None:
                parts.append(f"priority {s.priority}")
            if s.reason:
                parts.append(f"priority class {s.reason}")
        case "Queued":
            parts.append(f"via LocalQueue {s.local_queue}")
        case "QuotaReserved":
            parts.append("flavors " + _flavors(s.flavors) if s.flavors else "no flavors")
            if s.counts:
                parts.append("pods " + ", ".join(f"{ps}={n}" for ps, n in s.counts.items()))
            if s.message:
                parts.append(s.message)
        case "Preempted":
            parts.append(reason_message)
            if s.preemptor:
                parts.append(f"by {s.preemptor}")
            if s.underlying_cause:
                parts.append(f"cause: {s.underlying_cause}")
        case "Requeued" | "Unreserved":
            parts.append(reason_message)
            if s.released:
                parts.append("quota released")
        case "Rejected":
            parts.append(f"decision at offset {s.decision}")
            parts.append(reason_message)
            if s.taken_back:
                parts.append("taken back: the workload is as it was before that decision")
        case _:
            parts.append(reason_message)
    if s.repeat > 1:
        parts.append(f"x{s.repeat}, last at offset {s.last_offset}")
    if s.cycle is not None:
        parts.append(f"cycle {s.cycle}" + (f" (configuration at offset {s.config})" if s.config is not None else ""))
    if s.observed:
        parts.append("observed in status")
    if s.ignored:
        parts.append("ignored: not applicable to the workload's state")
    if s.taken_back and s.step != "Rejected":
        parts.append("did not happen: rejected and taken back")
    return "; ".join(p for p in parts if p)


def _flavors(flavors: dict[str, dict[str, str]]) -> str:
    if len(flavors) == 1:
        (assignment,) = flavors.values()
        return ",".join(f"{r}={f}" for r, f in assignment.items())
    return " ".join(f"{ps}[{','.join(f'{r}={f}' for r, f in a.items())}]" for ps, a in flavors.items())


def render_steps(steps: list[Step], *, with_workload: bool) -> str:
    if not steps:
        return "No admission history matches.\n"
    headers = ["OFFSET", "TIME"] + (["WORKLOAD"] if with_workload else []) + ["STEP", "CLUSTER QUEUE", "DETAILS"]
    rows = []
    for s in steps:
        row: list[Any] = [s.offset, time_text(s.time)]
        if with_workload:
            row.append(s.workload)
        row += [s.step, s.cluster_queue or "-", details(s)]
        rows.append(row)
    return render_table(headers, rows)


def _csv_row(s: Step) -> list[Any]:
    return [
        s.offset, time_text(s.time), s.workload, s.step, s.cluster_queue, s.reason, s.message, s.preemptor,
        _flavors(s.flavors) if s.flavors else "",
        ";".join(f"{ps}={n}" for ps, n in s.counts.items()),
        s.repeat, "" if s.last_offset is None else s.last_offset, str(s.observed).lower(), str(s.ignored).lower(),
        "" if s.config is None else s.config,
    ]
