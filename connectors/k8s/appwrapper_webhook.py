"""Kueue's webhooks for AppWrappers (workload.codeflare.dev/v1beta2): its ``workload.codeflare.dev/appwrapper``
integration's.

Kueue serves the AppWrapper's pair from its generic job webhook (``BaseWebhook``, ``appwrapper_controller.go``):
``mappwrapper.kb.io`` at ``/mutate-workload-codeflare-dev-v1beta2-appwrapper`` (create only) defaults an AppWrapper
as any job (:mod:`connectors.k8s.framework_webhook`): the ``default`` queue, the ``default`` WorkloadPriorityClass,
then ``spec.suspend: true`` when it names a queue or is managed without one — never when it has a Kueue-managed
ancestor (the Job webhook's walk). ``vappwrapper.kb.io`` at ``/validate-workload-codeflare-dev-v1beta2-appwrapper``
(create and update) refuses what Kueue's generic job validation refuses, suspended at ``spec.suspend``: on create the
create rules (queue name, prebuilt Workload name, maximum execution time), on update the update rules only (the
AppWrapper has no validation of its own).

Registered and failing as the other frameworks' webhooks: answering every review unchanged while the integration is
off (``failurePolicy: Ignore``), ``Fail`` while it is on.

Under the ``MultiKueue`` gate, an AppWrapper whose queue (given or defaulted) is a LocalQueue whose ClusterQueue has
a MultiKueue check, and whose ``spec.managedBy`` is unset or the AppWrapper controller's own
(``workload.codeflare.dev/appwrapper-controller``), gets ``spec.managedBy: kueue.x-k8s.io/multikueue``, whatever its
ancestry: MultiKueue runs it on a worker (:mod:`connectors.k8s.multikueue`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from connectors.k8s import child_jobs, framework_webhook, job_validation
from connectors.k8s.framework_webhook import FrameworkWebhooks, HasDefaultPriorityClass, Kind, Reviewer
from connectors.k8s.pod_webhook import HasDefaultQueue, NamespaceLabels
from connectors.k8s.resources import APPWRAPPERS
from kueue_es.scheduler.config import SchedulerConfig

SUSPEND_AT = ("spec", "suspend")
APPWRAPPER_CONTROLLER = "workload.codeflare.dev/appwrapper-controller"
"""The AppWrapper controller's own ``spec.managedBy``: Kueue replaces it with MultiKueue's as it does none."""


class AppWrapperWebhooks(FrameworkWebhooks, frozen=True):
    """What the AppWrapper webhooks read of the Kueue Configuration."""

    @classmethod
    def of(cls, config: SchedulerConfig) -> AppWrapperWebhooks:
        return cls.reading(config, config.manages_appwrappers)


def _as_job(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The AppWrapper as the generic job rules read a job: its metadata, suspended at ``spec.suspend``."""
    return job_validation.as_generic_job(obj, framework_webhook.suspended(obj, SUSPEND_AT))


def create_errors(obj: Mapping[str, Any], feature_gates: Mapping[str, bool]) -> list[str]:
    """What Kueue refuses in an AppWrapper being created: the generic job rules."""
    return job_validation.generic_create_errors(_as_job(obj), feature_gates)


def update_errors(old: Mapping[str, Any], new: Mapping[str, Any], feature_gates: Mapping[str, bool],
                  default_queue: bool = False) -> list[str]:
    """What Kueue refuses in the update of ``old`` into ``new``: the generic update rules (``default_queue``: the
    namespace has a LocalQueue ``default``)."""
    return job_validation.generic_update_errors(_as_job(old), _as_job(new), feature_gates,
                                                default_queue=default_queue)


KIND = Kind(APPWRAPPERS, "/mutate-workload-codeflare-dev-v1beta2-appwrapper", "mappwrapper.kb.io",
            "/validate-workload-codeflare-dev-v1beta2-appwrapper", "vappwrapper.kb.io", SUSPEND_AT, create_errors,
            update_errors, own_controller=APPWRAPPER_CONTROLLER)
PATHS = (KIND.mutating_path, KIND.validating_path)


def reviewers(settings: AppWrapperWebhooks, namespace_labels: NamespaceLabels, has_default_queue: HasDefaultQueue,
              has_default_priority_class: HasDefaultPriorityClass | None = None,
              managed_ancestry: child_jobs.ManagedAncestry | None = None,
              multikueue: framework_webhook.HasMultiKueueCheck | None = None) -> dict[str, Reviewer]:
    """Path -> the review that answers it: both webhooks, or, the integration off, reviews that allow every
    AppWrapper as it is (``managed_ancestry``, ``multikueue``: :func:`connectors.k8s.framework_webhook.reviewers`)."""
    return framework_webhook.reviewers(KIND, settings, namespace_labels, has_default_queue,
                                       has_default_priority_class, managed_ancestry, multikueue)
