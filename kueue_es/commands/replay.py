"""``kueue-es replay``: rebuild the cluster state at a point of the log and print it.

The state is the fold of every event up to and including ``--to OFFSET`` (default: the end), or of every
event whose time is at most ``--at TIME``. The fold starts from the newest of the log's checkpoints before that
point (written by ``kueue-es run``: :mod:`kueue_es.checkpoints`), from offset 0 with ``--no-checkpoints``, or
from a saved snapshot with ``--snapshot``; ``--save-snapshot`` writes the state reached. ``--quarantine`` reads
every event, sets aside the undecodable ones and those holding an object the fold cannot take, and reports them
instead of stopping at the first one. The Kueue Configuration in force at that point (the latest one recorded) is
shown with the state.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from connectors.kafka.settings import is_kafka_url
from events.codec import Quarantined, encode_event
from events.errors import InvalidInput, InvalidRecord
from events.filelog import FileLog
from events.quantity import canonical_quantity, to_int
from events.schema import Record
from events.timefmt import format_time
from kueue_es.commands._common import (
    CONFIG_HELP_AFS,
    add_checkpoints_argument,
    add_log_argument,
    add_output_argument,
    add_point_arguments,
    fold_log,
    log_end,
    open_readonly,
    path_arg,
    quarantine_report,
    render_table,
    start_state,
    warn,
    warn_outside,
    write_data,
)
from kueue_es.scheduler import config_record
from projections import effective_quotas, snapshot
from projections.cluster import ClusterState
from projections.workloads import ADMITTED, PENDING, RESERVED, WorkloadInfo, status_of

# When two conditions changed in the same second, the later one in a workload's life wins.
_CONDITION_ORDER = ("PodsReady", "QuotaReserved", "Admitted", "Preempted", "Evicted", "Requeued", "Finished")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "replay",
        help="rebuild the state at a point of the log and print queues and workloads",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    add_log_argument(p)
    add_point_arguments(p)
    add_output_argument(p, ["summary", "yaml", "json"], "summary")
    p.add_argument("--quarantine", action="store_true",
                   help="set undecodable or invalid events aside and report them instead of stopping")
    p.add_argument("--snapshot", type=path_arg, metavar="FILE", help="start from this snapshot instead of the beginning")
    add_checkpoints_argument(p)
    p.add_argument("--save-snapshot", type=path_arg, metavar="FILE", help="save the state reached as a snapshot")
    p.add_argument("--verify", action="store_true",
                   help="re-run the scheduler at every recorded decision point and report any decision that "
                   "differs (exit code 1)")
    p.add_argument("--config", type=path_arg, metavar="FILE",
                   help="with --verify: re-run under this Kueue Configuration instead of the one recorded in the "
                   "log" + CONFIG_HELP_AFS)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    _check_verify_flags(args)
    if args.verify:
        from kueue_es.commands._verify import run_verify

        return run_verify(args)
    if args.save_snapshot and args.at is not None:
        raise InvalidInput("--save-snapshot cannot be combined with --at: a snapshot holds a prefix of the log "
                           "(use --to OFFSET)")
    if args.save_snapshot:
        _check_target(args.save_snapshot, args.log)  # before the fold, which may be long
    log = open_readonly(args.log)
    try:
        end = log_end(log)
        state, checkpoint = _start(args, end, log)
        quarantine: list[Quarantined] | None = None
        if args.quarantine:
            state, quarantine = _fold_setting_aside(log, state, lambda: _start(args, end, log)[0], args)
        else:
            fold_log(log, state.apply, start=state.offset + 1, to=args.to, at=args.at, lazy=True)
    finally:
        log.close_sync()
    warn_outside(args, end, state, "replayed")
    if args.save_snapshot:
        _save(state, args.save_snapshot)
    if quarantine:
        warn(f"set aside {len(quarantine)} undecodable or invalid event(s) at offset(s) "
             f"{', '.join(str(q.offset) for q in quarantine)}")
    data = summarize(state, quarantine or [])
    data = {"log": args.log, **({"checkpoint": checkpoint} if checkpoint else {}), **data}
    if args.output == "summary":
        sys.stdout.write(render_summary(data))
    else:
        write_data(data, args.output)
    return 0


def _check_verify_flags(args: argparse.Namespace) -> None:
    """--verify re-runs every decision of the whole log, from its start; a replay shows the Configuration the log
    records. A flag the other one would take is misuse, not silently dropped."""
    if args.verify:
        given = [flag for flag, value in (("--to", args.to), ("--at", args.at), ("--snapshot", args.snapshot),
                                          ("--save-snapshot", args.save_snapshot), ("--quarantine", args.quarantine))
                 if value not in (None, False)]
        if given:
            raise InvalidInput(f"{given[0]} does not go with --verify, which re-runs every decision of the whole log")
    elif args.config is not None:
        raise InvalidInput("--config goes with --verify (a replay shows the Configuration recorded in the log)")


def _start(args: argparse.Namespace, end: int, log: FileLog) -> tuple[ClusterState, dict[str, Any] | None]:
    """The state the fold starts from, and the checkpoint it was (None: a snapshot, or the beginning)."""
    if not args.snapshot:
        if args.quarantine:  # it is about the events: every one is read
            return ClusterState(), None
        state, path = start_state(log, args)
        return state, {"offset": state.offset, "path": str(path)} if path is not None else None
    try:
        state = snapshot.load(args.snapshot)
    except OSError as exc:
        raise InvalidInput(f"--snapshot {args.snapshot}: cannot read: {exc.strerror}") from None
    except InvalidInput as exc:
        raise InvalidInput(f"--snapshot {args.snapshot}: {exc}") from None
    if state.offset >= end:
        raise InvalidInput(f"--snapshot {args.snapshot}: it is at offset {state.offset} but the log ends at "
                           f"offset {end - 1}: it belongs to another log")
    if args.to is not None and args.to < state.offset:
        raise InvalidInput(f"--to {args.to} is before the snapshot's offset {state.offset}")
    if args.at is not None and args.at < state.time:
        raise InvalidInput(f"--at {format_time(args.at)} is before the snapshot's time {format_time(state.time)}")
    return state, None


def _fold_setting_aside(
    log: FileLog, state: ClusterState, fresh: Callable[[], ClusterState], args: argparse.Namespace
) -> tuple[ClusterState, list[Quarantined]]:
    """Fold with every event decoded up front, undecodable ones set aside by the reader. An event the fold cannot
    take (:class:`InvalidRecord`) may have left the state half-changed, so the fold starts again from ``fresh()``
    without it: the result is always the fold of the log minus the events reported."""
    invalid: dict[int, Quarantined] = {}

    def apply(record: Record) -> None:
        if record.offset not in invalid:
            try:
                state.apply(record)
            except InvalidRecord as exc:
                invalid[record.offset] = Quarantined(record.offset, exc.detail, encode_event(record.event))
                raise

    while True:
        undecodable: list[Quarantined] = []
        try:
            fold_log(log, apply, start=state.offset + 1, to=args.to, at=args.at, quarantine=undecodable)
        except InvalidRecord:
            state = fresh()
            continue
        return state, sorted([*undecodable, *invalid.values()], key=lambda q: q.offset)


def _check_target(path: str, log: str) -> None:
    """A file already at ``path`` is replaced only when it is a kueue-es snapshot itself: a typo must not cost a
    user their manifest. Nothing is written inside the log's directory: a file named like a segment or a
    checkpoint would be read as part of the log."""
    if not is_kafka_url(log):
        target, directory = Path(path).resolve(), Path(log).resolve()
        if target == directory or directory in target.parents:
            raise InvalidInput(f"--save-snapshot {path}: inside the log directory {log}; not written there "
                               "(a file there may be read as part of the log): choose a path outside it")
    if os.path.isfile(path):
        try:
            snapshot.load(path)
        except InvalidInput:
            raise InvalidInput(f"--save-snapshot {path}: the file exists and is not a kueue-es snapshot; "
                               "not overwritten") from None


def _save(state: ClusterState, path: str) -> None:
    try:
        snapshot.save(state, path)
    except OSError as exc:
        raise InvalidInput(f"--save-snapshot {path}: cannot write: {exc.strerror}") from None


# --- the summary -----------------------------------------------------------------------------------------------


def summarize(state: ClusterState, quarantined: list[Quarantined]) -> dict[str, Any]:
    """Queues and workloads of ``state`` as plain data (what ``-o json|yaml`` prints)."""
    counts: dict[str, list[int]] = {}
    for wl in state.workloads.values():
        if wl.phase in (RESERVED, ADMITTED) and wl.cluster_queue:
            c = counts.setdefault(wl.cluster_queue, [0, 0])
            c[0] += 1
            c[1] += wl.phase == ADMITTED
    queues = []
    for name in sorted(state.cluster_queues):
        cq = state.cluster_queues[name]
        reserving, admitted = counts.get(name, (0, 0))
        q = state.queues.get(name)
        queues.append({
            "name": name,
            "cohort": cq.spec.cohort_name,
            "pendingWorkloads": len(q) if q is not None else 0,
            "reservingWorkloads": reserving,
            "admittedWorkloads": admitted,
            "usage": _usage(state, name),
        })
    local_queues = [
        {"namespace": lq.metadata.namespace, "name": lq.metadata.name, "clusterQueue": lq.spec.cluster_queue,
         "stopPolicy": lq.spec.stop_policy}
        for _, lq in sorted(state.local_queues.items())
    ]
    workloads = [_workload(state.workloads[k]) for k in sorted(state.workloads)]
    out: dict[str, Any] = {
        "offset": state.offset,
        "time": format_time(state.time),
        "timeMs": state.time,
        "configuration": config_record.summary(state),
        "clusterQueues": queues,
        "localQueues": local_queues,
        "workloads": workloads,
    }
    if quarantined:
        out["quarantined"] = quarantine_report(quarantined)
    return out


def _usage(state: ClusterState, cq_name: str) -> list[dict[str, Any]]:
    used = state.usage.get(cq_name, {})
    rows = []
    seen = set()
    cq = state.cluster_queues[cq_name]
    for rg in effective_quotas.in_force(cq, state.dynamic_quotas).spec.resource_groups:  # what it admits with
        for fq in rg.flavors:
            for rq in fq.resources:
                key = f"{fq.name}/{rq.name}"
                seen.add(key)
                rows.append(_usage_row(fq.name, rq.name, used.get(key, 0), to_int(rq.name, rq.nominal_quota)))
    for key in sorted(k for k in used if k not in seen and used[k]):
        flavor, _, resource = key.partition("/")
        rows.append(_usage_row(flavor, resource, used[key], 0))
    return rows


def _usage_row(flavor: str, resource: str, used: int, nominal: int) -> dict[str, Any]:
    return {
        "flavor": flavor,
        "resource": resource,
        "used": canonical_quantity(resource, used),
        "nominal": canonical_quantity(resource, nominal),
    }


def _workload(wl: WorkloadInfo) -> dict[str, Any]:
    flavors: dict[str, dict[str, str]] = {}
    if wl.admission is not None:
        flavors = {psa.name: dict(sorted(psa.flavors.items())) for psa in wl.admission.pod_set_assignments}
    last = last_condition(wl)
    return {
        "namespace": wl.namespace,
        "name": wl.name,
        "uid": wl.uid,
        "state": wl.phase,
        "active": wl.active,
        "clusterQueue": wl.cluster_queue,
        "localQueue": wl.queue_name,
        "priority": wl.priority,
        "priorityClass": wl.priority_class,
        "flavors": flavors,
        "reason": last.reason if last is not None else "",
        "message": last.message if last is not None else "",
        "status": status_of(wl),
    }


def last_condition(wl: WorkloadInfo) -> Any:
    """The condition that changed last (latest lastTransitionTime; in a tie, the later in a workload's life). An
    Admitted=False says only what the others say (no reservation, checks not Ready): it loses every tie, so a
    pending workload shows why its QuotaReserved is False."""
    best, best_key = None, None
    for c in wl.conditions:
        if c.type == "Admitted" and c.status == "False":
            rank = -2
        else:
            rank = _CONDITION_ORDER.index(c.type) if c.type in _CONDITION_ORDER else -1
        k = (c.last_transition_time or "", rank)
        if best_key is None or k >= best_key:
            best, best_key = c, k
    return best


def render_summary(data: dict[str, Any]) -> str:
    point = (f"state at offset {data['offset']}, time {data['time']}" if data["offset"] >= 0
             else "empty state (no event folded)")  # not "offset -1, time 1970-01-01T00:00:00Z"
    out = [f"Log {data['log']}: {point}"
           + (f" (from its checkpoint at offset {data['checkpoint']['offset']})" if data.get("checkpoint") else "")
           + "\n",
           f"Configuration: {config_record.one_line(data['configuration'])}\n", "\n"]
    queue_rows = []
    for q in data["clusterQueues"]:
        usage = ", ".join(f"{u['flavor']}/{u['resource']} {u['used']}/{u['nominal']}" for u in q["usage"])
        queue_rows.append([q["name"], q["cohort"] or "-", q["pendingWorkloads"], q["reservingWorkloads"],
                           q["admittedWorkloads"], usage or "-"])
    out.append(render_table(["CLUSTER QUEUE", "COHORT", "PENDING", "RESERVING", "ADMITTED", "USAGE/NOMINAL"],
                            queue_rows, empty="No ClusterQueues."))
    out.append("\n")
    wl_rows = []
    for w in data["workloads"]:
        flavors = sorted({f"{r}={f}" for ps in w["flavors"].values() for r, f in ps.items()})
        state = w["state"] if w["active"] or w["state"] != PENDING else f"{w['state']} (inactive)"
        wl_rows.append([f"{w['namespace']}/{w['name']}", state, w["clusterQueue"] or "-", w["priority"],
                        ",".join(flavors) or "-", w["reason"] or "-"])
    out.append(render_table(["WORKLOAD", "STATE", "CLUSTER QUEUE", "PRIORITY", "FLAVORS", "REASON"], wl_rows,
                            empty="No workloads."))
    if data.get("quarantined"):
        out.append("\n")
        out.append(render_table(["QUARANTINED OFFSET", "ERROR"],
                                [[q["offset"], q["error"]] for q in data["quarantined"]]))
    return "".join(out)
