"""Kueue's SparkApplication integration (``sparkoperator.k8s.io/sparkapplication``, alpha, under the
``SparkApplicationIntegration`` gate): a queued sparkoperator.k8s.io/v1beta2 SparkApplication runs only while its
Workload is admitted.

SparkApplications are none of admission's inputs: as for the other kinds of other projects' APIs, the integration
keeps its own list+watch of them (:mod:`connectors.k8s.watched_jobs`) and takes the steps of Kueue's generic job
reconciler (:mod:`connectors.k8s.jobframework`) with the kind's pieces (:mod:`connectors.k8s.sparkapplication`): a
running one without a Workload is suspended (``spec.suspend``) and a suspended one given
``sparkapplication-<name>-<hash>`` with the ``driver`` and ``executor`` pod sets; admitted, each role gets its
admission and the application is unsuspended; not admitted, it is suspended with its roles restored; a
``COMPLETED``, ``FAILED`` or ``SUBMISSION_FAILED`` state finishes its Workload; PodsReady once it runs with its
executors. No reclaimable pods. The pods the Spark operator makes are the operator's business: the driver Pod,
controlled by the SparkApplication, is its child (:func:`connectors.k8s.job_selection.kueue_owner`), and so are the
executor Pods under the driver (the Pod webhook's walk; :mod:`connectors.k8s.spark_executor_webhook` gives them a
reference to the application).
"""

from __future__ import annotations

import structlog

from connectors.k8s import sparkapplication as spark
from connectors.k8s.resources import SPARK_APPLICATIONS
from connectors.k8s.watched_jobs import WatchedJobIntegration
from kueue_es.scheduler.config import SchedulerConfig

log = structlog.get_logger("kueue_es.k8s.sparkapplication")


class SparkApplicationIntegration(WatchedJobIntegration[spark.SparkApplication]):
    """The SparkApplication adapter of the shared job reconciler, with its own list+watch of SparkApplications."""

    KIND = spark.KIND
    NOUN = "sparkapplication"
    RESOURCE = SPARK_APPLICATIONS
    LOG = log
    K = spark
    ITEM = spark.SparkApplication

    def framework_on(self, config: SchedulerConfig) -> bool:
        return config.manages_sparkapplications
