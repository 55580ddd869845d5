"""A ResourceFlavor's ``spec.resourceWeights`` (KEP-8902) goes through ``kueue-es import`` into the log and
comes back from a replay of it, written in either served version; the replayed state weighs the shares by
it."""

from __future__ import annotations

from pathlib import Path

from clihelp import fold, kueue_es

from projections.queue_status import weighted_share

MANIFEST = """
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
fairSharing: {}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: spot}
spec:
  resourceWeights: {cpu: 250m}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: reserved}
spec:
  resourceWeights: {cpu: "1", nvidia.com/gpu: 8}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: a}
spec:
  cohortName: all
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - {name: spot, resources: [{name: cpu, nominalQuota: 0}]}
    - {name: reserved, resources: [{name: cpu, nominalQuota: 0}]}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: lender}
spec:
  cohortName: all
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - {name: spot, resources: [{name: cpu, nominalQuota: 8}]}
    - {name: reserved, resources: [{name: cpu, nominalQuota: 8}]}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {name: w, namespace: team, uid: w, creationTimestamp: "2024-01-01T00:00:00Z"}
spec:
  queueName: lq
  podSets:
  - name: main
    count: 1
    template: {spec: {containers: [{name: c, resources: {requests: {cpu: "4"}}}]}}
status:
  admission:
    clusterQueue: a
    podSetAssignments:
    - {name: main, flavors: {cpu: spot}, resourceUsage: {cpu: "4"}, count: 1}
  conditions:
  - {type: QuotaReserved, status: "True", reason: QuotaReserved, message: reserved,
     lastTransitionTime: "2024-01-01T00:00:00Z"}
"""


def test_resource_weights_go_through_import_and_replay(tmp_path: Path) -> None:
    manifest, log = tmp_path / "cluster.yaml", tmp_path / "log"
    manifest.write_text(MANIFEST)
    result = kueue_es("import", "-f", manifest, "--log", log)
    assert result.code == 0, result.err
    state = fold(log)
    assert state.flavors["spot"].spec.resource_weights == {"cpu": "250m"}
    assert state.flavors["reserved"].spec.resource_weights == {"cpu": "1", "nvidia.com/gpu": 8}
    # a borrows 4 spot cpu: 4 x 0.25 x 1000 / (8 x 0.25 + 8 x 1) = 100 (unweighted: 4000 / 16 = 250)
    assert weighted_share(state, "ClusterQueue", "a") == 100
