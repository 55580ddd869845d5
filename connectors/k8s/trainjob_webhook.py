"""Kueue's webhooks for Kubeflow Trainer's trainer.kubeflow.org/v1alpha1 TrainJobs: its
``trainer.kubeflow.org/trainjob`` integration's (``trainjob_webhook.go``).

``mtrainjob.kb.io`` at ``/mutate-trainer-kubeflow-org-v1alpha1-trainjob`` (create only) defaults a TrainJob as any job
(:mod:`connectors.k8s.framework_webhook`): the ``default`` queue, the ``default`` WorkloadPriorityClass, then
``spec.suspend: true`` when it names a queue or is managed without one — never when it has a Kueue-managed ancestor;
and, suspending one that names a queue, that name also in ``spec.labels`` (the labels the Trainer gives the
TrainJob's JobSet and Jobs), as Kueue's ``Default`` writes it.

``vtrainjob.kb.io`` at ``/validate-trainer-kubeflow-org-v1alpha1-trainjob`` (create and update) refuses what Kueue's
generic job validation refuses, the TrainJob suspended at ``spec.suspend``; under ``TopologyAwareScheduling``, the
TAS annotations of the pod sets the TrainJob's runtime makes for it (:func:`connectors.k8s.trainjob.pod_sets`, its
runtime read from the apiserver as Kueue reads it), at Kueue's path ``job[<pod set>].annotations``, each error
telling where to adjust them; and, the gate on, a TrainJob whose runtime is not there is refused with Kueue's
"runtime '<name>' not found" alone. On update the update rules, then the create rules on the new TrainJob.
Registered and failing as the other frameworks' webhooks: answering every review unchanged while the integration is
off (``failurePolicy: Ignore``), ``Fail`` while it is on.

Under the ``MultiKueue`` gate, a TrainJob whose queue (given or defaulted) is a LocalQueue whose ClusterQueue has a
MultiKueue check, and whose ``spec.managedBy`` is unset or the Trainer's own
(``trainer.kubeflow.org/trainjob-controller``), gets ``spec.managedBy: kueue.x-k8s.io/multikueue``, whatever its
ancestry: MultiKueue runs it on a worker (:mod:`connectors.k8s.multikueue`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any

import msgspec

from connectors.k8s import child_jobs, framework_webhook, job_validation
from connectors.k8s import trainjob as tj
from connectors.k8s.client import KubeClient
from connectors.k8s.errors import NotFound
from connectors.k8s.framework_webhook import FrameworkWebhooks, HasDefaultPriorityClass, Kind, Reviewer
from connectors.k8s.job_events import QUEUE_LABEL
from connectors.k8s.json_patch import escape, map_ops
from connectors.k8s.pod_webhook import HasDefaultQueue, NamespaceLabels, allowed_as_is, patch_answer
from connectors.k8s.resources import CLUSTER_TRAINING_RUNTIMES, TRAINING_RUNTIMES, TRAINJOBS
from kueue_es.scheduler.config import SchedulerConfig
from projections import gates

SUSPEND_AT = ("spec", "suspend")
ADJUST = ('. Adjust either the "TrainJob.spec.podTemplateOverrides" or the "TrainingRuntime.Template" annotations '
          "for the corresponding Job")
"""What Kueue adds to each TAS error of a TrainJob's pod sets."""
TRAINJOB_CONTROLLER = "trainer.kubeflow.org/trainjob-controller"
"""The Trainer's own ``spec.managedBy``: Kueue replaces it with MultiKueue's as it does none."""
RuntimeLookup = Callable[[str, Mapping[str, Any]], Awaitable[dict[str, Any] | None]]
"""The spec of the runtime a TrainJob (namespace, raw object) names, as the apiserver holds it (None: not there)."""


class TrainJobWebhooks(FrameworkWebhooks, frozen=True):
    """What the TrainJob webhooks read of the Kueue Configuration (``enabled``: the TrainJob integration)."""

    @classmethod
    def of(cls, config: SchedulerConfig) -> TrainJobWebhooks:
        return cls.reading(config, config.manages_trainjobs)


# --- the validating webhook -------------------------------------------------------------------------------------


def _as_job(job: Mapping[str, Any]) -> dict[str, Any]:
    """The TrainJob as the generic job rules read one: its metadata, suspended at ``spec.suspend``."""
    return job_validation.as_generic_job(job, framework_webhook.suspended(job, SUSPEND_AT))


class Runtime(msgspec.Struct, frozen=True):
    """The runtime a TrainJob under review names, as read for its TAS rules (``spec`` None: not there)."""

    name: str
    spec: dict[str, Any] | None


def topology_errors(job: Mapping[str, Any], runtime: Runtime | None, feature_gates: Mapping[str, bool]
                    ) -> list[str] | str:
    """Under ``TopologyAwareScheduling``, each derived pod set's TAS annotations (module docstring); the refusal
    alone (a string) when the runtime is not there. ``runtime`` None: not looked up, nothing checked."""
    gate = partial(gates.enabled, feature_gates)
    if runtime is None or not gate(gates.TOPOLOGY_AWARE_SCHEDULING):
        return []
    if runtime.spec is None:
        return f"runtime '{runtime.name}' not found"
    errors: list[str] = []
    for ps in tj.pod_sets({"metadata": job.get("metadata") or {}, "spec": job.get("spec") or {}}, runtime.spec,
                          tas=False):
        annotations = _map(_map(ps["template"].get("metadata")).get("annotations"))
        errors += job_validation.topology_errors(annotations, ps["count"], gate,
                                                 path=f"job[{ps['name']}].annotations")
    return [e + ADJUST for e in errors]


def create_errors(job: Mapping[str, Any], feature_gates: Mapping[str, bool], runtime: Runtime | None = None, *,
                  gate_form: bool = True) -> list[str]:
    """What Kueue refuses in a TrainJob being created: the generic rules, then the TAS ones (``runtime``: the one it
    names, as read; a missing one is the only error then). ``gate_form``: check the admission gate's form (False on an update, whose generic rules checked it)."""
    tas = topology_errors(job, runtime, feature_gates)
    if isinstance(tas, str):
        return [tas]
    return job_validation.generic_create_errors(_as_job(job), feature_gates, gate_form=gate_form) + tas


def update_errors(old: Mapping[str, Any], new: Mapping[str, Any], feature_gates: Mapping[str, bool],
                  default_queue: bool = False, runtime: Runtime | None = None) -> list[str]:
    """What Kueue refuses in the update of ``old`` into ``new``: the update rules, then the create rules on
    ``new`` (a missing runtime the only error, under TAS). ``default_queue``: the namespace has a LocalQueue
    ``default``."""
    created = create_errors(new, feature_gates, runtime, gate_form=False)
    if isinstance(topology_errors(new, runtime, feature_gates), str):
        return created
    return (job_validation.generic_update_errors(_as_job(old), _as_job(new), feature_gates,
                                                 default_queue=default_queue) + created)


KIND = Kind(TRAINJOBS, "/mutate-trainer-kubeflow-org-v1alpha1-trainjob", "mtrainjob.kb.io",
            "/validate-trainer-kubeflow-org-v1alpha1-trainjob", "vtrainjob.kb.io", SUSPEND_AT, create_errors,
            update_errors, own_controller=TRAINJOB_CONTROLLER)
PATHS = (KIND.mutating_path, KIND.validating_path)


# --- the mutating webhook ---------------------------------------------------------------------------------------


def _map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def queue_after(obj: Mapping[str, Any], ops: list[dict[str, Any]]) -> str:
    """The queue name the TrainJob names once ``ops`` (the common defaulting) are applied."""
    queue = _map(_map(obj.get("metadata")).get("labels")).get(QUEUE_LABEL, "")
    for op in ops:
        if op.get("path") == "/metadata/labels":
            queue = _map(op.get("value")).get(QUEUE_LABEL, queue)
        elif op.get("path") == f"/metadata/labels/{escape(QUEUE_LABEL)}":
            queue = op.get("value", queue)
    return str(queue or "")


def spec_labels_ops(obj: Mapping[str, Any], ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Kueue's own defaulting of a TrainJob it suspends that names a queue: the queue name in ``spec.labels``. One
    suspended by these ``ops`` is one Kueue suspends; one already suspended is taken as one too when it names a
    queue."""
    suspends = any(op.get("path") in ("/spec", "/spec/suspend") for op in ops)
    queue = queue_after(obj, ops)
    if not queue or not (suspends or framework_webhook.suspended(obj, SUSPEND_AT)):
        return []
    spec = obj.get("spec")
    present = _map(spec).get("labels") if isinstance(spec, dict) else None
    return map_ops("/spec/labels", present if isinstance(present, dict) else None, {QUEUE_LABEL: queue})


async def mutating_review(body: bytes, settings: TrainJobWebhooks, namespace_labels: NamespaceLabels,
                          has_default_queue: HasDefaultQueue,
                          has_default_priority_class: HasDefaultPriorityClass | None = None,
                          managed_ancestry: child_jobs.ManagedAncestry | None = None,
                          multikueue: framework_webhook.HasMultiKueueCheck | None = None) -> dict[str, Any]:
    """Answer one AdmissionReview (v1) of a TrainJob being created: the common defaulting
    (:func:`connectors.k8s.framework_webhook.defaults`, MultiKueue's managedBy included), then
    :func:`spec_labels_ops`."""
    req = msgspec.json.decode(body).get("request") or {}
    obj = req.get("object")
    if not (req.get("operation", "CREATE") == "CREATE" and isinstance(obj, dict) and obj):
        return await patch_answer(req, None)
    namespace = req.get("namespace") or (obj.get("metadata") or {}).get("namespace", "")

    async def patch() -> list[dict[str, Any]]:
        ops = await framework_webhook.defaults(obj, namespace, KIND, settings, namespace_labels, has_default_queue,
                                               has_default_priority_class, managed_ancestry, multikueue)
        return ops + spec_labels_ops(obj, ops)

    return await patch_answer(req, patch)


def runtime_lookup(client: KubeClient) -> RuntimeLookup:
    """Read the runtime a TrainJob names from the apiserver, as Kueue's webhook does (None: not there, or of no
    kind the Trainer has)."""

    async def spec_of(namespace: str, job: Mapping[str, Any]) -> dict[str, Any] | None:
        ref = msgspec.convert(_map(_map(job.get("spec")).get("runtimeRef")), tj.RuntimeRef)
        named = tj.runtime_named(ref, namespace)
        if named is None:
            return None
        cluster, ns, name = named
        try:
            raw = msgspec.json.decode(await client.get(CLUSTER_TRAINING_RUNTIMES if cluster else TRAINING_RUNTIMES,
                                                       name, ns))
        except NotFound:
            return None
        return _map(raw.get("spec"))

    return spec_of


async def validating_review(body: bytes, settings: TrainJobWebhooks, has_default_queue: HasDefaultQueue,
                            runtime_of: RuntimeLookup | None) -> dict[str, Any]:
    """Answer one AdmissionReview (v1) of a TrainJob: the generic rules, and under ``TopologyAwareScheduling`` its
    runtime read (``runtime_of``; None: not read, the TAS rules not checked) for the TAS rules."""
    runtime = None
    if runtime_of is not None and gates.enabled(settings.feature_gates, gates.TOPOLOGY_AWARE_SCHEDULING):
        req = msgspec.json.decode(body).get("request") or {}
        new = req.get("object")
        if isinstance(new, dict) and req.get("operation") in ("CREATE", "UPDATE"):
            namespace = req.get("namespace") or _map(new.get("metadata")).get("namespace", "")
            ref = _map(_map(new.get("spec")).get("runtimeRef"))
            runtime = Runtime(str(ref.get("name", "")), await runtime_of(namespace, new))
    kind = msgspec.structs.replace(KIND, create_errors=partial(create_errors, runtime=runtime),
                                   update_errors=partial(update_errors, runtime=runtime))
    return await framework_webhook.validating_review(body, kind, settings.feature_gates, has_default_queue,
                                                     pods_ready=settings.pods_ready)


# --- serving and registering ------------------------------------------------------------------------------------


def reviewers(settings: TrainJobWebhooks, namespace_labels: NamespaceLabels, has_default_queue: HasDefaultQueue,
              has_default_priority_class: HasDefaultPriorityClass | None = None,
              managed_ancestry: child_jobs.ManagedAncestry | None = None,
              runtime_of: RuntimeLookup | None = None,
              multikueue: framework_webhook.HasMultiKueueCheck | None = None) -> dict[str, Reviewer]:
    """Path -> the review that answers it: both webhooks, or, the integration off, reviews that allow every TrainJob
    as it is (``managed_ancestry``, ``multikueue``: :func:`connectors.k8s.framework_webhook.reviewers`;
    ``runtime_of``: :func:`runtime_lookup`, None in tests that leave the TAS rules out)."""
    if not settings.enabled:
        return {KIND.mutating_path: allowed_as_is, KIND.validating_path: allowed_as_is}
    validate = partial(validating_review, settings=settings, has_default_queue=has_default_queue,
                       runtime_of=runtime_of)
    mutate = partial(mutating_review, settings=settings, namespace_labels=namespace_labels,
                     has_default_queue=has_default_queue, has_default_priority_class=has_default_priority_class,
                     managed_ancestry=managed_ancestry, multikueue=multikueue)
    return {KIND.mutating_path: mutate, KIND.validating_path: validate}
