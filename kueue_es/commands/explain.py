"""``kueue-es explain NAMESPACE/NAME``: why a workload is (not) admitted.

The state comes from a log (``--log PATH``, folded to its end, ``--to OFFSET`` or ``--at TIME``) or from a
STATE.yaml (``-f``, loaded as ``kueue-es schedule`` loads it). Kueue's own message comes first; then where the
workload waits, the flavors tried in order and what each said, the quota short at each level of the cohort
tree, and the workloads a preemption would evict — or why none can be. Nothing is written anywhere: the next
admission attempt is dry-run on a copy-on-write overlay of the state, under the Kueue Configuration recorded in
force at that point of the log (``--config FILE`` overrides it).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from events.errors import InvalidInput
from kueue_es.commands._common import (
    CONFIG_HELP_AFS,
    NotFound,
    add_checkpoints_argument,
    add_output_argument,
    add_point_arguments,
    add_source_arguments,
    key_arg,
    load_kueue_config_document,
    path_arg,
    render_table,
    state_at,
    time_arg,
    warn_afs_override,
    where_folded,
    write_data,
)
from kueue_es.scheduler import config_record
from kueue_es.scheduler.config import DEFAULT, SchedulerConfig
from kueue_es.scheduler.explain import explain
from kueue_es.statefile import load_state
from projections.cluster import ClusterState


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "explain",
        help="explain why a workload is (not) admitted: Kueue's message, flavors tried, quota, preemption",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    p.add_argument("workload", type=key_arg, metavar="NAMESPACE/NAME", help="the Workload to explain")
    add_source_arguments(p)
    add_point_arguments(p, "the state")
    add_checkpoints_argument(p)
    p.add_argument("--now", type=time_arg("--now"), metavar="TIME",
                   help="with -f: the time of the attempt (default: the latest timestamp in the state)")
    p.add_argument("--config", type=path_arg, metavar="FILE", help="Kueue Configuration (config.kueue.x-k8s.io/v1beta2); with --log "
                   "it overrides the one recorded in the log" + CONFIG_HELP_AFS)
    add_output_argument(p, ["text", "yaml", "json"], "text")
    p.set_defaults(func=run)


def load(args: argparse.Namespace) -> tuple[ClusterState, SchedulerConfig, int]:
    if args.filename is not None:
        if args.to is not None or args.at is not None:
            raise InvalidInput("--to and --at go with --log, not -f")
        if args.no_checkpoints:
            raise InvalidInput("--no-checkpoints goes with --log, not -f (a STATE.yaml has no checkpoints)")
        loaded = load_state(args.filename, args.config, args.now)
        return loaded.state, loaded.config, loaded.now
    if args.now is not None:
        raise InvalidInput("--now goes with -f; with --log the attempt is at the log's time (use --at)")
    loaded_override = load_kueue_config_document(args.config)
    override, document = loaded_override if loaded_override is not None else (None, None)
    state = state_at(args)
    warn_afs_override(args.config, document, [state.config.document if state.config is not None else None])
    return state, override or config_record.in_force(state) or DEFAULT, state.time


def configuration(args: argparse.Namespace, state: ClusterState) -> dict[str, Any]:
    """Which configuration the attempt was made under (with --log)."""
    recorded = config_record.summary(state, document=False) if state.config is not None else None
    if args.config is not None:
        return {"override": args.config, **({"overrides": recorded} if recorded else {})}
    return recorded or {"summary": "Kueue's defaults (none recorded in the log)"}


def run(args: argparse.Namespace) -> int:
    state, config, now = load(args)
    data = explain(state, config, args.workload, now)
    if data is None:
        raise NotFound("Workload", args.workload, where_folded(args, state))
    if args.log is not None:
        data["configuration"] = configuration(args, state)
    if args.output == "text":
        sys.stdout.write(render(data))
    else:
        write_data(data, args.output)
    return 0


def render(d: dict[str, Any]) -> str:
    text = _render(d)
    c = d.get("configuration")
    if c is None:
        return text
    if "override" in c:
        line = f"--config {c['override']}" + (
            f" (overriding the one recorded at offset {c['overrides']['offset']})" if "overrides" in c else "")
    elif "offset" in c:
        line = config_record.one_line(c)
    else:
        line = c["summary"]
    return f"{text}\nConfiguration: {line}\n"


def _render(d: dict[str, Any]) -> str:
    out: list[str] = []
    head = f"Workload {d['workload']}: {d['state']}"
    where = f"LocalQueue {d['localQueue']}" + (f" -> ClusterQueue {d['clusterQueue']}" if d["clusterQueue"] else "")
    out.append(f"{head} ({where}, priority {d['priority']})\n")
    k = d.get("kueue")
    if k is not None:
        label = "QuotaReserved=False" if k["observed"] else "next attempt would say"
        out.append(f"{label}: {k['reason'] or '-'}\n  {k['message'] or '-'}\n")
    if "maxExecution" in d:
        out.append(f"Maximum execution time: {d['maxExecution']['detail']}\n")
    if "summary" in d:
        out.append(f"\n{d['summary'][:1].upper()}{d['summary'][1:]}.\n")
        return "".join(out)
    q = d["queue"]
    out.append(f"\nQueue: {q['state']}: {q['detail']}")
    if "position" in q:
        out.append(f" (position {q['position']} of {q['of']}; {q['parked']} parked)")
    if "localQueueUsage" in q:
        out.append(f"; Admission Fair Sharing: LocalQueue usage {q['localQueueUsage']:.4g}")
    out.append("\n")
    if "schedulerWaits" in d:
        out.append(f"  Scheduler waits: {d['schedulerWaits']['detail']}\n")
    a = d.get("attempt")
    if a is None:
        return "".join(out)
    out.append(f"\nNext attempt (dry run at {d['time']}, log offset {d['offset']}): {a['outcome']}\n")
    if "scan" in a:
        out.append(f"  Flavor scan: {a['scan']['detail']}\n")
    if "podsReady" in d:
        out.append(f"  {a['reason']}: {d['podsReady']['detail']}\n")
    if a["outcome"] == "NotNominated":
        out.append(f"  {a['reason']}: {a['message']}\n")
    for ps in a.get("podSets", []):
        reqs = ", ".join(f"{r}={v}" for r, v in ps["requests"].items()) or "nothing"
        out.append(f"  Pod set {ps['name']} (count {ps['count']}, requests {reqs}): {ps['mode']}")
        if ps["flavors"]:
            out.append(" -> " + ", ".join(f"{r}: {f}" for r, f in ps["flavors"].items()))
        if ps["borrowingLevel"]:
            out.append(f" (borrowing level {ps['borrowingLevel']})")
        out.append("\n")
        for group, tried in ps["tried"].items():
            out.append(f"    resource group of {group}, flavors in order:\n")
            for line in tried:
                out.append(f"      {line}\n")
        if not ps["tried"] and ps["reasons"]:
            for r in ps["reasons"]:
                out.append(f"    {r}\n")
    for entry in d.get("quota", []):
        out.append(f"\nQuota {entry['flavorResource']}: request {entry['request']}, available {entry['available']}, "
                   f"at most {entry['maximum']}")
        if "short" in entry:
            out.append(f" — short by {entry['short']}: {entry['why']}")
        out.append("\n")
        rows = [[r["node"], r["quota"], r["used"], r["free"], r.get("borrowingLimit", "-"), r.get("lendingLimit", "-")]
                for r in entry["path"]]
        table = render_table(["NODE", "QUOTA", "USED", "FREE", "BORROWING LIMIT", "LENDING LIMIT"], rows)
        out.extend("  " + line + "\n" for line in table.splitlines())
    p = d.get("preemption")
    if p is not None:
        pol = p["policies"]
        out.append(f"\nPreemption (withinClusterQueue {pol['withinClusterQueue']}, reclaimWithinCohort "
                   f"{pol['reclaimWithinCohort']}, borrowWithinCohort {pol['borrowWithinCohort']}"
                   + (", Fair Sharing" if pol["fairSharing"] else "") + ")")
        if p["contested"]:
            out.append(f" for {', '.join(p['contested'])}")
        out.append(":\n")
        if p["targets"]:
            out.append("  would preempt:\n")
            for t in p["targets"]:
                out.append(f"    {t['workload']} (ClusterQueue {t['clusterQueue']}, priority {t['priority']}): "
                           f"{t['reason']} — {t['why']}\n")
                if "underlyingCause" in t:
                    out.append(f"      its eviction's underlying cause: {t['underlyingCause']}\n")
                if "message" in t:
                    out.append(f"      its eviction's message: {t['message']}\n")
        else:
            out.append(f"  no workload would be preempted: {p['why']}\n")
            for r in p.get("considered", []):
                who = r.get("workload") or f"ClusterQueue {r['clusterQueue']}"
                where = f" (ClusterQueue {r['clusterQueue']}, priority {r['priority']})" if "workload" in r else ""
                out.append(f"    {who}{where}: {r['why']}\n")
    return "".join(out)
