"""``kueue-es pending``: the pending workloads of a ClusterQueue or LocalQueue, as Kueue's visibility API lists them.

The answer ``GET .../clusterqueues/CQ/pendingworkloads`` (or ``.../namespaces/NS/localqueues/LQ/pendingworkloads``)
would have given at a point of the log — its end, ``--to OFFSET`` or ``--at TIME`` — in the queue's order, with
each workload's position in its ClusterQueue and LocalQueue. ``--offset`` and ``--limit`` page as the API does
(limit 1000 by default, at most 100000). ``-o json|yaml`` prints the API's PendingWorkloadsSummary exactly; the
default is a table. Admission Fair Sharing orders by the Kueue Configuration recorded in force at that point
(``--config FILE`` overrides it).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from events.errors import InvalidInput
from events.timefmt import format_time
from kueue_es.commands._common import (
    CONFIG_HELP_AFS,
    NotFound,
    add_output_argument,
    add_point_arguments,
    add_source_arguments,
    fold_log,
    key_arg,
    load_kueue_config_document,
    log_end,
    name_arg,
    open_readonly,
    path_arg,
    render_table,
    warn_afs_override,
    warn_outside,
    where_folded,
    write_data,
)
from kueue_es.scheduler import config_record, visibility
from kueue_es.scheduler.config import DEFAULT, SchedulerConfig
from kueue_es.statefile import load_state
from projections.cluster import ClusterState
from projections.owners import WorkloadOwners


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "pending",
        help="list a queue's pending workloads in order, as Kueue's visibility API does",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    add_source_arguments(p)
    queue = p.add_mutually_exclusive_group(required=True)
    queue.add_argument("--cluster-queue", type=name_arg, metavar="CQ", help="the ClusterQueue whose pending workloads to list")
    queue.add_argument("--local-queue", type=key_arg, metavar="NS/LQ", help="the LocalQueue whose pending workloads to list")
    p.add_argument("--offset", type=int, default=0, metavar="N",
                   help="position of the first workload listed (default 0; negative counts as 0)")
    p.add_argument("--limit", type=int, default=visibility.DEFAULT_LIMIT, metavar="N",
                   help=f"at most this many workloads (default {visibility.DEFAULT_LIMIT}, at most "
                        f"{visibility.MAX_LIMIT}; 0 means the default, negative nothing)")
    add_point_arguments(p, "the queue")
    p.add_argument("--config", type=path_arg, metavar="FILE", help="Kueue Configuration (config.kueue.x-k8s.io/v1beta2); with --log "
                   "it overrides the one recorded in the log" + CONFIG_HELP_AFS)
    p.add_argument("--api-version", choices=list(visibility.VERSIONS), default=visibility.VERSIONS[0],
                   help=f"apiVersion of the printed summary (default {visibility.VERSIONS[0]})")
    add_output_argument(p, ["table", "yaml", "json"], "table")
    p.set_defaults(func=run)


def load(args: argparse.Namespace) -> tuple[ClusterState, SchedulerConfig, WorkloadOwners]:
    owners = WorkloadOwners()
    if args.filename is not None:
        if args.to is not None or args.at is not None:
            raise InvalidInput("--to and --at go with --log, not -f")
        loaded = load_state(args.filename, args.config, record=owners.apply)
        return loaded.state, loaded.config, owners
    loaded_override = load_kueue_config_document(args.config)
    override, document = loaded_override if loaded_override is not None else (None, None)
    log = open_readonly(args.log)
    state = ClusterState()

    def apply(record: Any) -> None:
        state.apply(record)
        owners.apply(record)

    try:
        end = log_end(log)
        fold_log(log, apply, to=args.to, at=args.at, label="Folding", lazy=True)
    finally:
        log.close_sync()
    warn_outside(args, end, state, "folded")
    warn_afs_override(args.config, document, [state.config.document if state.config is not None else None])
    return state, override or config_record.in_force(state) or DEFAULT, owners


def run(args: argparse.Namespace) -> int:
    state, config, owners = load(args)
    if args.cluster_queue is not None:
        items = visibility.in_cluster_queue(state, config, args.cluster_queue, limit=args.limit, offset=args.offset)
        kind, name = "ClusterQueue", args.cluster_queue
        known = sorted(state.cluster_queues)
    else:
        namespace, _, name = args.local_queue.partition("/")
        items = visibility.in_local_queue(state, config, namespace, name, limit=args.limit, offset=args.offset)
        kind, name = "LocalQueue", args.local_queue
        known = sorted(state.local_queues)
    if items is None:
        listed = ", ".join(known[:20]) + (", ..." if len(known) > 20 else "")
        raise NotFound(kind, name, where_folded(args, state),
                       f" (known: {listed})" if known else " (there are none)" if state.offset >= 0 else "")
    if args.output == "table":
        sys.stdout.write(render(items, f"{kind} {name}"))
    else:
        write_data(visibility.summary(items, args.api_version, owners), args.output)
    return 0


def render(items: list[visibility.PendingWorkload], what: str) -> str:
    rows = [[w.position_in_cluster_queue, w.position_in_local_queue, w.namespace, w.name, w.local_queue, w.priority,
             format_time(w.created)] for w in items]
    return render_table(["POSITION", "IN LOCALQUEUE", "NAMESPACE", "NAME", "LOCALQUEUE", "PRIORITY", "CREATED"],
                        rows, empty=f"No pending workloads in {what}.")
