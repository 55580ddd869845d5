"""What stamping a Workload's pod templates with their digests costs the watch connector, per Workload event.

The watch decodes each Workload it is sent into a view and stamps each pod set's template with the digest of the
whole raw template (:func:`events.template_digest.stamped_from_json`). This times, on one Workload of a busy
cluster's shape (one pod set, a container with command, args, env, requests and limits, a volume): the plain decode,
the decode and stamping when the digest is in the memo (the usual case: a Workload comes again at every status
change with the same templates), and when it is not. Medians of ``--rounds`` rounds, each the best of 3 repeats of
``--number`` calls:

    python benchmarks/watch_stamp.py
"""

from __future__ import annotations

import msgspec
from microbench import argument_parser, median_us

from events import objects as o
from events.template_digest import _DIGESTS, stamped_from_json

WORKLOAD = {
    "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
    "metadata": {"name": "job-a-1", "namespace": "team", "uid": "u1", "resourceVersion": "7",
                 "labels": {"kueue.x-k8s.io/job-uid": "u1"},
                 "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "a", "uid": "u1",
                                      "controller": True}]},
    "spec": {"queueName": "lq", "priority": 0, "active": True, "podSets": [{"name": "main", "count": 4, "template": {
        "metadata": {"labels": {"job-name": "a", "controller-uid": "u1"}},
        "spec": {"restartPolicy": "Never", "volumes": [{"name": "d", "emptyDir": {}}],
                 "tolerations": [{"key": "k", "operator": "Exists"}],
                 "containers": [{"name": "c", "image": "img:1", "command": ["python", "train.py"],
                                 "args": ["--epochs", "10"], "env": [{"name": "A", "value": "1"}],
                                 "resources": {"requests": {"cpu": "1", "memory": "2Gi"},
                                               "limits": {"cpu": "2", "memory": "2Gi"}},
                                 "volumeMounts": [{"name": "d", "mountPath": "/d"}]}]}}}]},
    "status": {"conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                               "message": "Quota reserved in ClusterQueue cq",
                               "lastTransitionTime": "2026-01-01T00:00:00Z"}]},
}


def main() -> None:
    args = argument_parser(__doc__).parse_args()
    raw = msgspec.json.encode(WORKLOAD)
    decoder = msgspec.json.Decoder(o.Workload)

    def plain() -> None:
        decoder.decode(raw)

    def stamped_memo_hit() -> None:
        stamped_from_json(decoder.decode(raw), raw)

    def stamped_memo_miss() -> None:
        _DIGESTS.clear()
        stamped_from_json(decoder.decode(raw), raw)

    print(f"one Workload of {len(raw):,} bytes, one pod set")
    for f in (plain, stamped_memo_hit, stamped_memo_miss):
        print(f"{f.__name__:>18}: {median_us(f, args.number, args.rounds):6.1f} µs")


if __name__ == "__main__":
    main()
