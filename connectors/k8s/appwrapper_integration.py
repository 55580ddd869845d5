"""Kueue's AppWrapper integration (``workload.codeflare.dev/appwrapper``): a queued workload.codeflare.dev/v1beta2
AppWrapper runs only while its Workload is admitted.

AppWrappers are none of admission's inputs: as for JobSets and Ray objects, the integration keeps its own list+watch
of them (:mod:`connectors.k8s.watched_jobs`) and takes the steps of Kueue's generic job reconciler
(:mod:`connectors.k8s.jobframework`) with the kind's pieces (:mod:`connectors.k8s.appwrapper`): a running one
without a Workload is suspended (``spec.suspend``) and a suspended one given ``appwrapper-<name>-<hash>``, its pod
sets read from its components' pod templates; admitted, each component gets its pod sets' admission in its
``podSetInfos`` (the AppWrapper controller puts them on what it creates) and the AppWrapper is unsuspended; not
admitted, it is suspended with the ``podSetInfos`` cleared in one write; phase ``Succeeded``, or ``Failed`` with its
resources deleted, finishes its Workload; PodsReady follows its ``PodsReady`` condition. No reclaimable pods.

What an AppWrapper wraps (a batch/v1 Job, a PyTorchJob, ...) its own controller creates under the AppWrapper's
controller reference: with this integration on, such an object is the AppWrapper's child
(:func:`connectors.k8s.job_selection.kueue_owner`, the parents registry the connector shares among the job
reconcilers), never queued on a Workload of its own, as Kueue's ``IsOwnerManagedByKueue``. A Workload whose pod sets
the AppWrapper no longer matches is rewritten or made anew (:func:`connectors.k8s.appwrapper.job_pod_sets`), prebuilt
Workloads are used. MultiKueue runs an AppWrapper on a worker (:mod:`connectors.k8s.multikueue`).
"""

from __future__ import annotations

import structlog

from connectors.k8s import appwrapper as aw
from connectors.k8s.resources import APPWRAPPERS
from connectors.k8s.watched_jobs import WatchedJobIntegration
from kueue_es.scheduler.config import SchedulerConfig

log = structlog.get_logger("kueue_es.k8s.appwrapper")


class AppWrapperIntegration(WatchedJobIntegration[aw.AppWrapper]):
    """The AppWrapper adapter of the shared job reconciler, with its own list+watch of AppWrappers."""

    KIND = aw.KIND
    NOUN = "appwrapper"
    RESOURCE = APPWRAPPERS
    LOG = log
    K = aw
    ITEM = aw.AppWrapper

    def framework_on(self, config: SchedulerConfig) -> bool:
        return config.manages_appwrappers
