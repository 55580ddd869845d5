"""``kueue-es schedule -f STATE.yaml``: run scheduling cycles on a state file and print what changed."""

from __future__ import annotations

import argparse
from typing import Any

from events import schema as ev
from kueue_es.commands._common import (
    add_output_argument,
    int_arg,
    path_arg,
    time_arg,
    warn_ignored_gates,
    write_data,
)
from kueue_es.scheduler.cycle import run_cycle
from kueue_es.statefile import load_state
from projections.workloads import status_of


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "schedule",
        help="run scheduling cycles on a STATE.yaml and print the Workloads whose status changed",
        description="Run N scheduling cycles on the objects in STATE.yaml (no cluster, no log server) and print "
        "a kind: List of every Workload whose status the cycles changed, as Kueue would write it. Only the "
        "scheduler's cycles run: what Kueue's controllers do on their own (admission checks, evictions, requeues, "
        "ConcurrentAdmission's variants, ...) is left to kueue-es run, simulate and replay.",
    )
    p.add_argument("-f", "--filename", required=True, type=path_arg, metavar="STATE.yaml")
    p.add_argument("--cycles", type=int_arg(1, "a cycle count"), default=1, metavar="N", help="scheduling cycles to run (default 1)")
    p.add_argument("--config", type=path_arg, metavar="FILE", help="Kueue Configuration (config.kueue.x-k8s.io/v1beta2)")
    p.add_argument("--now", type=time_arg("--now"), metavar="TIME",
                   help="the time the cycles run at (default: the latest timestamp in the state)")
    add_output_argument(p, ("yaml", "json"), "yaml")
    p.set_defaults(func=run)


def schedule(path: str, cycles: int = 1, config_path: str | None = None, now: int | None = None) -> dict[str, Any]:
    loaded = load_state(path, config_path, now)
    state, config = loaded.state, loaded.config
    warn_ignored_gates(config, config_path or path)
    before = {k: status_of(w, state.byte_valued()) for k, w in state.workloads.items()}
    touched: set[str] = set()
    for _ in range(cycles):
        batch = run_cycle(state, config, loaded.now, state.last_cycle + 1)
        if not batch:
            break
        for e in batch:
            touched.add(e.key)
            state.apply(ev.Record(state.offset + 1, e))
    items = []
    for key in sorted(touched):
        wl = state.workloads[key]
        status = status_of(wl, state.byte_valued())
        if status == before.get(key):
            continue
        meta: dict[str, Any] = {"name": wl.name, "namespace": wl.namespace}
        if wl.uid and wl.uid != key:
            meta["uid"] = wl.uid
        items.append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": meta, "status": status})
    return {"apiVersion": "v1", "kind": "List", "items": items}


def run(args: argparse.Namespace) -> int:
    write_data(schedule(args.filename, args.cycles, args.config, args.now), args.output)
    return 0
