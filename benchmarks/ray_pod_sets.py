"""What rebuilding a RayCluster's pod sets costs its reconcile, which does it at every pass to compare them with the
Workload's (:func:`connectors.k8s.raycluster.job_pod_sets`; Kueue also rebuilds pod sets at each reconcile).

On one RayCluster of a usual shape (a head and two worker groups, each a container with command, env, requests
and limits, ports, volume mounts, a volume): the whole rebuild, then its parts — writing the typed object out
(``msgspec.to_builtins``), building the raw pod sets (two deep copies: the cluster spec, then each template) and
converting them to views — and, for scale, decoding the RayCluster once as the watch does for each event and the
comparison with the Workload (:func:`connectors.k8s.job_sync.equivalent_sets`). Medians of ``--rounds`` rounds,
each the best of 3 repeats of ``--number`` calls, in microseconds per call:

    python benchmarks/ray_pod_sets.py
"""

from __future__ import annotations

from typing import Any

import msgspec
from microbench import argument_parser, median_us

from connectors.k8s import job_sync
from connectors.k8s import raycluster as rc
from events import objects as o
from kueue_es.scheduler.config import NO_KEYS
from projections.cluster import ClusterState
from projections.workloads import WorkloadInfo


def _template(image: str, cpu: str, memory: str, gpus: int = 0) -> dict[str, Any]:
    limits = {"cpu": cpu, "memory": memory, **({"nvidia.com/gpu": str(gpus)} if gpus else {})}
    return {"metadata": {"labels": {"app": "ray"}}, "spec": {
        "volumes": [{"name": "logs", "emptyDir": {}}],
        "containers": [{"name": "ray", "image": image, "command": ["/bin/bash", "-lc", "--"],
                        "args": ["ulimit -n 65536; exec ray start"],
                        "env": [{"name": "RAY_LOG_TO_STDERR", "value": "1"}, {"name": "A", "value": "x"}],
                        "ports": [{"containerPort": 6379, "name": "gcs"}, {"containerPort": 8265, "name": "dash"}],
                        "resources": {"requests": dict(limits), "limits": limits},
                        "volumeMounts": [{"name": "logs", "mountPath": "/tmp/ray"}]}]}}


RAYCLUSTER = {
    "apiVersion": "ray.io/v1", "kind": "RayCluster",
    "metadata": {"name": "rc", "namespace": "team", "uid": "u1", "resourceVersion": "7",
                 "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
    "spec": {"suspend": True, "rayVersion": "2.9.0",
             "headGroupSpec": {"rayStartParams": {"dashboard-host": "0.0.0.0"},
                               "template": _template("rayproject/ray:2.9.0", "2", "8Gi")},
             "workerGroupSpecs": [
                 {"groupName": "cpu", "replicas": 4, "minReplicas": 0, "maxReplicas": 8, "rayStartParams": {},
                  "template": _template("rayproject/ray:2.9.0", "4", "16Gi")},
                 {"groupName": "gpu", "replicas": 2, "minReplicas": 0, "maxReplicas": 4, "rayStartParams": {},
                  "template": _template("rayproject/ray:2.9.0-gpu", "8", "32Gi", gpus=1)}]},
}


def _workload(state: ClusterState) -> tuple[o.Workload, WorkloadInfo]:
    """The RayCluster's Workload as stored, pending (holding no quota: compared with its spec)."""
    obs = msgspec.convert(rc.workload_for(state, NO_KEYS, RAYCLUSTER, "raycluster-rc-1"), o.Workload)
    return obs, WorkloadInfo(key="team/raycluster-rc-1", uid="w1", namespace="team", name="raycluster-rc-1",
                             queue_name="lq", created=0, priority=0, priority_class="", pod_sets=())


def main() -> None:
    args = argument_parser(__doc__).parse_args()
    raw_bytes = msgspec.json.encode(RAYCLUSTER)
    decoder = msgspec.json.Decoder(rc.RayCluster)
    cluster = decoder.decode(raw_bytes)
    written = msgspec.to_builtins(cluster)
    built = rc.pod_sets(written, tas=False)
    state = ClusterState()
    obs, wl = _workload(state)
    mine = rc.job_pod_sets(cluster)
    assert mine is not None and job_sync.equivalent_sets(state, mine, obs, wl, None, suspended=True)
    rows = [
        ("job_pod_sets (the whole rebuild)", lambda: rc.job_pod_sets(cluster)),
        ("  to_builtins of the RayCluster", lambda: msgspec.to_builtins(cluster)),
        ("  raw pod sets (deep copies)", lambda: rc.pod_sets(written, tas=False)),
        ("  convert to list[PodSet]", lambda: msgspec.convert(built, list[o.PodSet])),
        ("decode the RayCluster (per watch event)", lambda: decoder.decode(raw_bytes)),
        ("equivalent_sets (the comparison)", lambda: job_sync.equivalent_sets(state, mine, obs, wl, None,
                                                                             suspended=True)),
    ]
    for label, fn in rows:
        print(f"{label:42s} {median_us(fn, args.number, args.rounds):8.1f} us")


if __name__ == "__main__":
    main()
