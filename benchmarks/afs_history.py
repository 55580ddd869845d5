"""What Admission Fair Sharing's history costs per workload lifecycle (session 32, afs-compact).

A log with ``admissionFairSharing`` configured: ClusterQueue cq1 ordering by it (LocalQueues ns/a, ns/b), cq2 not
(ns/c, sampled all the same), and LIFECYCLES workloads each reserved, admitted and finished in turn across them.

    python benchmarks/afs_history.py write /tmp/afs.pickle --lifecycles 3000
    python benchmarks/afs_history.py size /tmp/afs.pickle        # history bytes per lifecycle (objects, snapshot)
    valgrind --tool=callgrind python benchmarks/afs_history.py fold /tmp/afs.pickle --events N
    valgrind --tool=callgrind python benchmarks/afs_history.py loop /tmp/afs.pickle --events N
    valgrind --tool=callgrind python benchmarks/afs_history.py status /tmp/afs.pickle --events N

``size`` folds the log twice, to a third and to the end, and divides the growth of the history (its Python objects,
counted deeply, and its part of an encoded snapshot) by the lifecycles in between. ``fold`` only unpickles and folds
the first N records (run it twice and subtract for instructions per event); ``loop`` also asks what a scheduler
loop asks after each record (the fold under the recorded configuration, the next sample); ``status`` what the
LocalQueue status writer asks after each record (which LocalQueues had a sample since its last look). Uses only the event API and
``ClusterState.afs_history`` whatever its shape, so that it runs on older code too.
"""

from __future__ import annotations

import argparse
import pickle
import sys

import msgspec

from events import objects as o
from events import schema as ev
from projections import snapshot
from projections.cluster import ClusterState

T0 = 1_704_067_200_000
KQ = "kueue.x-k8s.io/v1beta2"


def _records(lifecycles: int) -> list[ev.Record]:
    out: list[ev.Record] = []

    def add(e: ev.AnyEvent) -> None:
        out.append(ev.Record(len(out), e))

    def upsert(d: dict, t: int) -> None:
        obj = msgspec.convert(d, o.KueueObject)
        add(ev.ObjectUpserted(time=t, key=obj.key, obj=obj))

    add(ev.ConfigRecorded(time=T0, writer="bench", id="config-afs", document={
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
        "admissionFairSharing": {"usageHalfLifeTime": "10m", "usageSamplingInterval": "1m"}}))
    upsert({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}}, T0)
    upsert({"apiVersion": KQ, "kind": "ResourceFlavor", "metadata": {"name": "f1"}}, T0)
    for cq, mode in (("cq1", True), ("cq2", False)):
        spec: dict = {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
            {"name": "f1", "resources": [{"name": "cpu", "nominalQuota": 1000}]}]}]}
        if mode:
            spec["admissionScope"] = {"admissionMode": "UsageBasedAdmissionFairSharing"}
        upsert({"apiVersion": KQ, "kind": "ClusterQueue", "metadata": {"name": cq}, "spec": spec}, T0)
    lqs = (("a", "cq1"), ("b", "cq1"), ("c", "cq2"))
    for name, cq in lqs:
        upsert({"apiVersion": KQ, "kind": "LocalQueue", "metadata": {"name": name, "namespace": "ns"},
                "spec": {"clusterQueue": cq}}, T0)
    t = T0
    for i in range(lifecycles):
        lq, cq = lqs[i % 3]
        name, cpu = f"w{i}", f"{100 + i % 900}m"
        t += 17_000
        upsert({"apiVersion": KQ, "kind": "Workload", "metadata": {
            "name": name, "namespace": "ns", "uid": name, "creationTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {"queueName": lq, "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}}]}}, t)
        admission = o.Admission(cluster_queue=cq, pod_set_assignments=[o.PodSetAssignment(
            name="main", flavors={"cpu": "f1"}, count=1, resource_usage={"cpu": cpu})])
        add(ev.QuotaReserved(time=t, key=f"ns/{name}", admission=admission, cycle=i, input=0))
        add(ev.WorkloadAdmitted(time=t, key=f"ns/{name}", cycle=i, input=0))
        add(ev.WorkloadFinished(time=t + 61_000, key=f"ns/{name}"))
        add(ev.ObjectDeleted(time=t + 62_000, key=f"ns/{name}", kind="Workload"))
    return out


def _deep_size(obj: object, seen: set[int]) -> int:
    if id(obj) in seen or isinstance(obj, (int, float, bool)) and -5 <= obj <= 256:  # type: ignore[operator]
        return 0
    seen.add(id(obj))
    size = sys.getsizeof(obj)
    if isinstance(obj, dict):
        size += sum(_deep_size(k, seen) + _deep_size(v, seen) for k, v in obj.items())
    elif isinstance(obj, (list, tuple, set, frozenset)):
        size += sum(_deep_size(v, seen) for v in obj)
    elif hasattr(obj, "__struct_fields__"):
        size += sum(_deep_size(getattr(obj, f), seen) for f in obj.__struct_fields__)  # type: ignore[attr-defined]
    return size


def _history_bytes(state: ClusterState) -> tuple[int, int]:
    snap = snapshot.take(state)
    field = getattr(snap, "afs_queues", None) or snap.afs_history
    return _deep_size(state.afs_history, set()), len(msgspec.msgpack.encode(field))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["write", "size", "fold", "loop", "status"])
    p.add_argument("path")
    p.add_argument("--lifecycles", type=int, default=3000)
    p.add_argument("--events", type=int, default=0)
    args = p.parse_args()
    if args.mode == "write":
        with open(args.path, "wb") as f:
            pickle.dump(_records(args.lifecycles), f)
        return
    with open(args.path, "rb") as f:
        records: list[ev.Record] = pickle.load(f)
    if args.mode in ("fold", "loop", "status"):
        from kueue_es.scheduler import afs
        from kueue_es.scheduler.config_record import in_force
        state = ClusterState()
        seen: int | None = None
        for r in records[:args.events or len(records)]:
            state.apply(r)
            if args.mode == "loop" and (config := in_force(state)) is not None:
                afs.fold(state, config)
                afs.next_sample(state, config)
            elif args.mode == "status" and (config := in_force(state)) is not None:
                if seen is not None:
                    afs.sampled_between(state, config, seen, state.time)
                seen = state.time
        return
    per = 5  # records per lifecycle
    head = 1 + 2 + 2 + 3
    lifecycles = (len(records) - head) // per
    cut = head + lifecycles // 3 * per
    state = ClusterState()
    for r in records[:cut]:
        state.apply(r)
    objects_a, snap_a = _history_bytes(state)
    for r in records[cut:]:
        state.apply(r)
    objects_b, snap_b = _history_bytes(state)
    n = lifecycles - lifecycles // 3
    print(f"lifecycles {lifecycles}: history objects {objects_b} B ({(objects_b - objects_a) / n:.1f} B per "
          f"lifecycle), in a snapshot {snap_b} B ({(snap_b - snap_a) / n:.1f} B per lifecycle), "
          f"snapshot digest {snapshot.digest(state)[:16]}")


if __name__ == "__main__":
    main()
