"""The one place every Workload body an integration builds is finished, before any create or rewrite writes it.

Kueue finishes a job's pod sets where it builds them (``jobframework.JobPodSets`` runs ``SanitizePodSets``,
kubernetes-sigs/kueue#7425), so every create and every comparison sees them alike. Here every builder returns
:func:`workload`'s result: the Job's (:mod:`connectors.k8s.jobs`), the single Pod's (:mod:`connectors.k8s.pod_sync`,
a Deployment's Pods too), the pod group's (:mod:`connectors.k8s.pod_group`, a StatefulSet's too), the
LeaderWorkerSet's (:mod:`connectors.k8s.leaderworkerset`) and :func:`connectors.k8s.jobset.job_workload`, on which
every other kind builds (JobSet, MPIJob, the training operator's jobs, TrainJob, the Ray kinds, AppWrapper,
SparkApplication). Each create and each spec rewrite writes what a builder returned, so a new create path gets
the finished body without a step of its own.

Finishing is the env folding of :mod:`connectors.k8s.pod_set_env`. Not built here: copies of a Workload the
apiserver already holds (MultiKueue's worker copy, ConcurrentAdmission's variants), folded when first written.
The job's pod sets compared with its Workload (:func:`connectors.k8s.job_sync.equivalent_sets`) need no folding:
the comparison reads counts, tolerations and resources, never env.
"""

from __future__ import annotations

from typing import Any

from connectors.k8s import pod_set_env
from connectors.k8s.resources import KUEUE_GROUP, KUEUE_VERSION


def workload(metadata: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    """The Workload body of ``metadata`` and ``spec`` (plain data, taken over, not copied) as it is written."""
    return pod_set_env.deduplicated({"apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION}", "kind": "Workload",
                                     "metadata": metadata, "spec": spec})
