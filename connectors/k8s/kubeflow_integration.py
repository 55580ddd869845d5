"""Kueue's Kubeflow training-operator integrations (``kubeflow.org/pytorchjob``, ``kubeflow.org/tfjob``,
``kubeflow.org/xgboostjob``, ``kubeflow.org/paddlejob``, ``kubeflow.org/jaxjob``): a queued kubeflow.org/v1
training job runs only while its Workload is admitted.

One adapter for the five kinds, as Kueue has one (``kubeflowjob``): :class:`KubeflowJobIntegration` over a kind's
:class:`~connectors.k8s.kubeflow.TrainingKind`, with its own list+watch of that kind
(:mod:`connectors.k8s.watched_jobs`), doing nothing while the Configuration leaves the kind's framework out.
:data:`INTEGRATIONS` holds one subclass per kind. Each pass takes the shared reconciler's steps
(:mod:`connectors.k8s.jobframework`) as for an MPIJob: a running job without a Workload is suspended
(``spec.runPolicy.suspend``), a suspended one gets ``<kind>-<name>-<hash>``; admitted, each replica's template gets
its pod set's admission and the job is unsuspended; not admitted, it is suspended with its templates restored;
``Succeeded``/``Failed`` finish its Workload; PodsReady follows ``Running``; no reclaimable pods; a Workload whose pod
sets the job no longer matches is rewritten or made anew (:meth:`~connectors.k8s.kubeflow.TrainingKind.job_pod_sets`),
prebuilt Workloads are used. MultiKueue runs these jobs on a worker (:mod:`connectors.k8s.multikueue`).
"""

from __future__ import annotations

from typing import Any, ClassVar

import structlog

from connectors.k8s import kubeflow as kf
from connectors.k8s.watched_jobs import WatchedJobIntegration
from kueue_es.scheduler.config import SchedulerConfig

log = structlog.get_logger("kueue_es.k8s.kubeflow")


class KubeflowJobIntegration(WatchedJobIntegration[Any]):
    """The adapter of the shared job reconciler for one training-operator kind (``K``: its
    :class:`~connectors.k8s.kubeflow.TrainingKind`)."""

    K: ClassVar[Any]
    LOG = log

    def framework_on(self, config: SchedulerConfig) -> bool:
        return config.manages_kubeflow(self.KIND)

    def suspend_spec(self) -> dict[str, Any]:
        return {"runPolicy": {"suspend": True}}

    @classmethod
    def of(cls, kind: kf.TrainingKind) -> type[KubeflowJobIntegration]:
        """The integration of ``kind``."""
        return type(f"{kind.KIND}Integration", (cls,), {
            "KIND": kind.KIND, "NOUN": kind.KIND.lower(), "RESOURCE": kind.resource, "K": kind, "ITEM": kind.ITEM,
            "__doc__": f"The {kind.KIND} integration (:class:`KubeflowJobIntegration`)."})


INTEGRATIONS = {name: KubeflowJobIntegration.of(kind) for name, kind in kf.KINDS.items()}
"""Kind -> its integration."""
