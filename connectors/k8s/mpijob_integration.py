"""Kueue's MPIJob integration (``kubeflow.org/mpijob``): a queued kubeflow.org/v2beta1 MPIJob runs only while its
Workload is admitted.

MPIJobs are the MPI operator's API and none of admission's inputs, so the log does not hold them: as the JobSet
integration does, this keeps its own list+watch of them (a relist after 410 Gone; while the MPIJob CRD is not
served, none exist and the list is tried again now and then), and reads their Workloads from the mirror. An MPIJob
is looked at again when it changes, and when anything the log records touches a Workload an MPIJob controls, its
namespace, a priority class or the Configuration. Nothing is done while the Configuration in force leaves
``kubeflow.org/mpijob`` out of ``integrations.frameworks``.

Each pass takes the steps of Kueue's generic job reconciler (:mod:`connectors.k8s.jobframework`, shared with Jobs
and JobSets); this module is the MPIJob's adapter, with its pieces from :mod:`connectors.k8s.mpijob`: a running
MPIJob without a Workload is suspended (``spec.runPolicy.suspend``) and a suspended one gets
``mpijob-<name>-<hash>``; admitted, each replica's template gets its pod set's admission and the MPIJob is
unsuspended; not admitted, it is suspended with its templates restored in one write; ``Succeeded``/``Failed``
finish its Workload; PodsReady follows its ``Running`` condition; orphaned Workloads are finished and deleted.
Kueue counts no reclaimable pods for an MPIJob, so none are written. A Workload whose pod sets no longer match is
rewritten or made anew, prebuilt Workloads are adopted and run on, the admission gate followed, as for a Job
(:mod:`connectors.k8s.watched_jobs`). MultiKueue runs an MPIJob on a worker (:mod:`connectors.k8s.multikueue`).
The Worker's pod-index offset under ``runLauncherAsWorker`` is its webhook's (:mod:`connectors.k8s.mpijob_webhook`).
"""

from __future__ import annotations

from typing import Any

import structlog

from connectors.k8s import mpijob as mj
from connectors.k8s.resources import MPIJOBS
from connectors.k8s.watched_jobs import WatchedJobIntegration
from kueue_es.scheduler.config import SchedulerConfig

log = structlog.get_logger("kueue_es.k8s.mpijobs")


class MPIJobIntegration(WatchedJobIntegration[mj.MPIJob]):
    """The MPIJob adapter of the shared job reconciler (:mod:`connectors.k8s.jobframework`), with its own
    list+watch of MPIJobs (:mod:`connectors.k8s.watched_jobs`)."""

    KIND = mj.KIND
    NOUN = "mpijob"
    RESOURCE = MPIJOBS
    LOG = log
    K = mj
    ITEM = mj.MPIJob

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.mpijobs = self.known
        """The MPIJobs, as last listed or watched."""

    def framework_on(self, config: SchedulerConfig) -> bool:
        return config.manages_mpijobs

    def suspend_spec(self) -> dict[str, Any]:
        return {"runPolicy": {"suspend": True}}
