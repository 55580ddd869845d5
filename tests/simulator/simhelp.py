"""Small scenarios and helpers for the simulator tests."""

from __future__ import annotations

from pathlib import Path

from events.filelog import FileLog
from kueue_es.simulator import config

SMALL = """
cohorts:
  - className: cohort
    count: 2
    queuesSets:
    - className: cq
      count: 2
      nominalQuota: 4
      borrowingLimit: 4
      reclaimWithinCohort: LowerPriority
      withinClusterQueue: LowerPriority
      workloadsSets:
      - count: 12
        creationIntervalMs: 100
        workloads:
        - className: small
          runtimeMs: 300
          priority: 10
          request: 1
      - count: 3
        creationIntervalMs: 400
        initialDelayMs: 200
        workloads:
        - className: big
          runtimeMs: 500
          priority: 100
          request: "3500m"
"""
"""4 ClusterQueues, 60 workloads; the big ones preempt small ones."""

SMALL_TAS = """
topology:
  name: topo
  levels:
  - {name: block, count: 1, nodeLabel: example.com/block}
  - {name: rack, count: 2, nodeLabel: example.com/rack}
  - {name: node, count: 3, nodeLabel: kubernetes.io/hostname, capacity: {cpu: "8", memory: 16Gi}}
resourceFlavor: {name: tas-flavor, nodeLabel: tas-node-group, topologyName: topo}
cohorts:
  - className: cohort
    count: 1
    queuesSets:
    - className: cq
      count: 2
      nominalQuota: "8"
      borrowingLimit: "8"
      workloadsSets:
      - count: 5
        creationIntervalMs: 100
        workloads:
        - {className: req, runtimeMs: 200, priority: 1, request: 500m, podCount: 2,
           tasConstraint: required, tasLevel: example.com/rack}
        - {className: bal, runtimeMs: 200, priority: 1, request: 500m, podCount: 4,
           tasConstraint: balanced, tasLevel: example.com/rack, sliceSize: 2}
"""


def small(text: str = SMALL) -> config.Scenario:
    return config.parse_text(text, "small.yaml", "small")


def segments(log_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(log_dir.glob("*.seg"))}


def events(log_dir: Path) -> list:
    log = FileLog.open(log_dir, readonly=True)
    try:
        return [r.event for batch in log.scan(0) for r in batch]
    finally:
        log.close_sync()
