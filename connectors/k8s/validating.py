"""The validating admission webhooks for Kueue's own kinds, as Kueue's manager serves them: ``kubectl apply`` of
an object Kueue would refuse is refused, with a message naming the object and the field.

Kueue validates ClusterQueues, Cohorts, ResourceFlavors and Workloads (and ``workloads/status``) on create and
update (``config/components/webhook/manifests.yaml``: ``/validate-kueue-x-k8s-io-v1beta2-<kind>``,
``v<kind>.kb.io``, ``failurePolicy: Fail``). LocalQueues, Topologies, AdmissionChecks, MultiKueueClusters and
MultiKueueConfigs are added here under the same naming: Kueue holds them to the CEL and schema rules of its CRDs (a
LocalQueue's ``clusterQueue``, a Topology's ``levels`` and an AdmissionCheck's ``controllerName`` immutable, a
MultiKueueCluster's one cluster source, a MultiKueueConfig's 1–20 distinct clusters, among others:
:mod:`events.object_rules`, :func:`events.manifests.validate_multikueue_cluster`), which kueue-es's generated CRDs
do not carry. (Only their main resource: kueue-es writes a MultiKueueCluster's status itself.)

The answer comes from the checks kueue-es already holds every object to (:func:`events.manifests.decode_object`:
what the watch skips, what ``kueue-es import`` refuses), with the gated ones as the Kueue Configuration in force
sets them (:meth:`events.manifests.Checks.under`), and on update from :mod:`events.update_rules`. As in Kueue, a
new ClusterQueue's ``onFlavors`` are checked whatever ``RejectUpdatesToCQWithInvalidOnFlavors`` says; the gate
decides only whether an update may keep an invalid entry unchanged.

A refusal for a rule of Kueue's CRDs is answered as the apiserver answers it when the CRD carries the rule, 422
``Invalid``; one for a rule of Kueue's webhooks as they answer it, 403 ``Forbidden`` (:func:`refusal_status`).

The apiserver sends the object in the version the webhook is registered for (v1beta2; a v1beta1 request is
converted first, ``matchPolicy: Equivalent`` by default), so one decoder serves both versions.

The same configuration registers Kueue's validating webhooks for batch/v1 Jobs (:mod:`connectors.k8s.job_validation`,
``vjob.kb.io``) and for Pods (:mod:`connectors.k8s.pod_validation`, ``vpod.kb.io``, which allows every Pod while
the pod integration is off), as Kueue's does, for every namespace but the excluded ones (Kueue's namespace
selector).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from functools import partial
from typing import Any

import msgspec

from connectors.k8s import (
    appwrapper_webhook,
    deployment_webhook,
    framework_webhook,
    job_validation,
    jobset_webhook,
    kubeflow_webhook,
    lws_webhook,
    mpijob_webhook,
    pod_validation,
    pod_webhook,
    ray_webhook,
    spark_webhook,
    statefulset_webhook,
    trainjob_webhook,
)
from connectors.k8s.certs import ca_bundle
from connectors.k8s.resources import Resource
from events import crd_markers
from events import objects as o
from events.errors import InvalidInput, SchemaRefused, aggregate
from events.manifests import Checks, decode_object
from events.object_rules import WorkloadRefused
from events.update_rules import validate_update
from projections import gates

CONFIGURATION_NAME = "kueue-es-validating-webhook-configuration"
GROUP = "kueue.x-k8s.io"
VALIDATING_CONFIGS = Resource("ValidatingWebhookConfiguration", "admissionregistration.k8s.io", "v1",
                              "validatingwebhookconfigurations", False)


@dataclasses.dataclass(frozen=True)
class Hook:
    kind: str
    resources: tuple[str, ...]
    scope: str

    @property
    def path(self) -> str:
        return f"/validate-kueue-x-k8s-io-v1beta2-{self.kind.lower()}"

    @property
    def name(self) -> str:
        return f"v{self.kind.lower()}.kb.io"


HOOKS = (
    Hook("ClusterQueue", ("clusterqueues",), "Cluster"),
    Hook("Cohort", ("cohorts",), "Cluster"),
    Hook("ResourceFlavor", ("resourceflavors",), "Cluster"),
    Hook("Workload", ("workloads", "workloads/status"), "Namespaced"),
    Hook("LocalQueue", ("localqueues",), "Namespaced"),
    Hook("Topology", ("topologies",), "Cluster"),
    Hook("AdmissionCheck", ("admissionchecks",), "Cluster"),
    Hook("MultiKueueCluster", ("multikueueclusters",), "Cluster"),
    Hook("MultiKueueConfig", ("multikueueconfigs",), "Cluster"),
)
PATHS = {h.path: h.kind for h in HOOKS}


def refusal(kind: str, operation: str, new_doc: Any, old_doc: Any, feature_gates: Mapping[str, bool]) -> str | None:
    """Why Kueue refuses this create or update of a ``kind`` (the objects as plain data), or None."""
    refused = _refused(kind, operation, new_doc, old_doc, feature_gates)
    return str(refused) if refused is not None else None


def _refused(kind: str, operation: str, new_doc: Any, old_doc: Any,
             feature_gates: Mapping[str, bool]) -> InvalidInput | None:
    """:func:`refusal`'s error, which tells whose rules refused the object."""
    if operation not in ("CREATE", "UPDATE") or not isinstance(new_doc, dict):
        return None
    gate = partial(gates.enabled, feature_gates)
    checks = Checks.under(gate)
    updating = operation == "UPDATE" and isinstance(old_doc, dict)
    spreading = updating and checks.topology_spreading
    threshold = updating and checks.unhealthy_threshold
    if not updating:
        checks = dataclasses.replace(checks, on_flavors=True)  # a new ClusterQueue: whatever the gate
    else:  # held against the old object (below); a CRD marker it broke already, ratcheted
        checks = dataclasses.replace(checks, reclaimable_bounds=False, topology_spreading=False,
                                     unhealthy_threshold=False, unique_names=False,
                                     ratcheted=crd_markers.ratcheted(kind, old_doc, new_doc))
    new_doc = {**new_doc, "kind": kind}
    where = f"{kind} {_key(new_doc)}"
    try:
        own = None
        try:
            new = decode_object(new_doc, where, checks=checks)
        except WorkloadRefused as exc:
            if not updating or exc.workload is None:
                raise
            # Kueue's webhook returns the update's errors with the object's own, and the apiserver the CRD's
            # transition rules with the rest of the CRD's
            new, own = exc.workload, exc
        if updating:
            old = _view({**old_doc, "kind": kind})
            validate_update(old_doc, new_doc, old, new, where,
                            on_flavors_gate=checks.on_flavors, tas=gate(gates.TOPOLOGY_AWARE_SCHEDULING),
                            gated_by=gate(gates.ADMISSION_GATED_BY),
                            elastic=gate(gates.ELASTIC_JOBS_VIA_WORKLOAD_SLICES), own=own, spreading=spreading,
                            threshold=threshold)
    except InvalidInput as exc:
        return exc
    return None


def review(body: bytes, kind: str, feature_gates: Mapping[str, bool]) -> dict[str, Any]:
    """Answer one AdmissionReview (v1) for a ``kind`` object: allowed, or refused with the reason
    (:func:`refusal_status`)."""
    req = msgspec.json.decode(body).get("request") or {}
    response: dict[str, Any] = {"uid": req.get("uid", ""), "allowed": True}
    refused = _refused(kind, req.get("operation", ""), req.get("object"), req.get("oldObject"), feature_gates)
    if refused is not None:
        response.update(allowed=False, status=refusal_status(kind, req.get("object"), refused))
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


def refusal_status(kind: str, doc: Any, refused: InvalidInput) -> dict[str, Any]:
    """The status refusing a ``kind`` object (``doc``, plain data) for ``refused``. For its CRD's rules
    (:class:`~events.errors.SchemaRefused`, a Workload's :attr:`~events.object_rules.WorkloadRefused.schema`), what
    the apiserver answers when a CRD carries them (``apierrors.NewInvalid``): 422 ``Invalid``, the message
    ``<Kind>.kueue.x-k8s.io "<name>" is invalid: <field errors>`` (several as ``[a, b]``) and each field error a
    cause. Else Kueue's webhooks' answer (controller-runtime's ``Denied``): 403 ``Forbidden``, kueue-es's message.

    kueue-es's generated CRDs carry few of those rules (:mod:`events.crd_markers`), so the apiserver hears the
    others from this webhook, and
    ``ToStatusErr`` (``k8s.io/apiserver``'s webhook errors) passes the status on with its code, reason and details
    as they are, the message prefixed ``admission webhook "v<kind>.kb.io" denied the request: ``. A client sees the
    422 ``Invalid`` (``apierrors.IsInvalid``; ``kubectl`` prints ``The <Kind> "<name>" is invalid:`` and the
    causes), the message alone telling it came through a webhook."""
    errors = _crd_errors(refused)
    if not errors:
        return {"code": 403, "reason": "Forbidden", "message": str(refused)}
    meta = doc.get("metadata") if isinstance(doc, dict) and isinstance(doc.get("metadata"), dict) else {}
    name = str(meta.get("name", ""))
    causes = [_cause(error) for error in errors]
    listed = aggregate(f"{c['field']}: {c['message']}" if c["field"] else c["message"] for c in causes)
    return {"code": 422, "reason": "Invalid", "status": "Failure",
            "message": f'{kind}.{GROUP} "{name}" is invalid: {listed}',
            "details": {"name": name, "group": GROUP, "kind": kind, "causes": causes}}


def _crd_errors(refused: InvalidInput) -> list[str]:
    """The field errors of the CRD's rules ``refused`` reports; none when they are a webhook's."""
    if isinstance(refused, SchemaRefused):
        return refused.errors
    if isinstance(refused, WorkloadRefused):
        return refused.schema
    return []


_FIELD_ERROR = re.compile(r"field `(?P<field>[^`]*)`(?::\s*|\s+)(?P<body>.*)", re.DOTALL)
CAUSE_TYPES = (("Invalid value:", "FieldValueInvalid"), ("Required value", "FieldValueRequired"),
               ("Duplicate value:", "FieldValueDuplicate"), ("Unsupported value:", "FieldValueNotSupported"),
               ("Too long:", "FieldValueTooLong"), ("Too many:", "FieldValueTooMany"),
               ("Forbidden:", "FieldValueForbidden"), ("Not found:", "FieldValueNotFound"))
"""A field error's body as Kubernetes opens it (``field.Error``'s ``ErrorBody``), and its type, a cause's
``reason``. A body in kueue-es's own words (a CEL rule's message among them) is ``FieldValueInvalid``, as a CEL
rule's error is."""


def _cause(error: str) -> dict[str, str]:
    """A field error (``field `path`: body``, or ``field `path` body``) as a status cause."""
    match = _FIELD_ERROR.fullmatch(error)
    field, body = (match["field"], match["body"]) if match else ("", error)
    reason = next((t for opening, t in CAUSE_TYPES if body.startswith(opening)),
                  "FieldValueRequired" if body == "is required" else "FieldValueInvalid")
    return {"reason": reason, "message": body, "field": field}


def configuration(ca_pem: bytes, *, url: str = "", service: tuple[str, str, int] | None = None,
                  name: str = CONFIGURATION_NAME, object_selector: dict[str, Any] | None = None,
                  excluded_namespaces: tuple[str, ...] = ("kube-system", "kueue-system"), pods: bool = False,
                  deployments: bool = False, statefulsets: bool = False, jobsets: bool = False,
                  mpijobs: bool = False, kubeflow: frozenset[str] = frozenset(), rayjobs: bool = False,
                  rayclusters: bool = False, leaderworkersets: bool = False, appwrappers: bool = False,
                  trainjobs: bool = False, rayservices: bool = False,
                  sparkapplications: bool = False) -> dict[str, Any]:
    """The ValidatingWebhookConfiguration for :data:`HOOKS` and for Jobs and Pods (not in ``excluded_namespaces``), at
    ``url`` or at ``service`` (name, namespace, port), trusting ``ca_pem``. ``object_selector``: only objects it
    selects (for tests sharing a cluster). ``pods``: whether the pod integration is on (the Pod webhook then fails
    closed: :func:`connectors.k8s.pod_webhook.failure_policy`); ``deployments``, ``statefulsets``, ``jobsets``,
    ``mpijobs``, ``leaderworkersets``: the same for the Deployment, StatefulSet, JobSet, MPIJob and LeaderWorkerSet
    webhooks (:mod:`connectors.k8s.deployment_webhook`, :mod:`connectors.k8s.statefulset_webhook`,
    :mod:`connectors.k8s.jobset_webhook`, :mod:`connectors.k8s.mpijob_webhook`, :mod:`connectors.k8s.lws_webhook`);
    ``kubeflow``: the training operator's kinds whose integration is on (:mod:`connectors.k8s.kubeflow_webhook`);
    ``rayjobs``, ``rayclusters``, ``rayservices``: the Ray integrations (:mod:`connectors.k8s.ray_webhook`);
    ``sparkapplications``: the SparkApplication one (:mod:`connectors.k8s.spark_webhook`);
    ``appwrappers``: the AppWrapper one (:mod:`connectors.k8s.appwrapper_webhook`); ``trainjobs``: the TrainJob one
    (:mod:`connectors.k8s.trainjob_webhook`)."""
    if not url and service is None:
        raise ValueError("the webhook needs a url or a service")
    ca = ca_bundle(ca_pem)

    def client_config(path: str) -> dict[str, Any]:
        if url:
            return {**ca, "url": url.rstrip("/") + path}
        assert service is not None
        return {**ca, "service": {"name": service[0], "namespace": service[1], "port": service[2], "path": path}}

    def webhook(hook_name: str, path: str, rule: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": hook_name, "clientConfig": client_config(path),
            "rules": [{"operations": ["CREATE", "UPDATE"], **rule}],
            "failurePolicy": "Fail", "sideEffects": "None", "admissionReviewVersions": ["v1"], "timeoutSeconds": 10,
        }
        if object_selector is not None:
            out["objectSelector"] = object_selector
        return out

    webhooks = [webhook(hook.name, hook.path, {"apiGroups": ["kueue.x-k8s.io"], "apiVersions": ["v1beta2"],
                                               "resources": list(hook.resources), "scope": hook.scope})
                for hook in HOOKS]
    jobs = webhook(job_validation.WEBHOOK_NAME, job_validation.PATH,
                   {"apiGroups": ["batch"], "apiVersions": ["v1"], "resources": ["jobs"], "scope": "Namespaced"})
    pod_hook = webhook(pod_validation.WEBHOOK_NAME, pod_validation.PATH,
                   {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"], "scope": "Namespaced"})
    pod_hook["failurePolicy"] = pod_webhook.failure_policy(pods)
    deployment_hook = webhook(deployment_webhook.VALIDATING_NAME, deployment_webhook.VALIDATING_PATH,
                              {"apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"],
                               "scope": "Namespaced"})
    deployment_hook["failurePolicy"] = pod_webhook.failure_policy(deployments)
    statefulset_hook = webhook(statefulset_webhook.VALIDATING_NAME, statefulset_webhook.VALIDATING_PATH,
                               {"apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["statefulsets"],
                                "scope": "Namespaced"})
    statefulset_hook["failurePolicy"] = pod_webhook.failure_policy(statefulsets)
    selector = {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": list(excluded_namespaces)}]}
    for hook in (jobs, pod_hook, deployment_hook, statefulset_hook):
        hook["namespaceSelector"] = selector
    frameworks = [framework_webhook.registration(kind, client_config(kind.validating_path), selector, on=on,
                                                 mutating=False)
                  for kind, on in ((jobset_webhook.KIND, jobsets), (mpijob_webhook.KIND, mpijobs),
                                   (ray_webhook.RAYJOB_KIND, rayjobs), (ray_webhook.RAYCLUSTER_KIND, rayclusters),
                                   (appwrapper_webhook.KIND, appwrappers), (ray_webhook.RAYSERVICE_KIND, rayservices),
                                   (spark_webhook.KIND, sparkapplications))]
    frameworks.append(lws_webhook.registration(client_config(lws_webhook.VALIDATING_PATH), selector,
                                               on=leaderworkersets, mutating=False))
    frameworks += kubeflow_webhook.registrations(client_config, selector, kubeflow, mutating=False)
    frameworks.append(framework_webhook.registration(trainjob_webhook.KIND,
                                                     client_config(trainjob_webhook.KIND.validating_path), selector,
                                                     on=trainjobs, mutating=False))
    if object_selector is not None:
        for hook in frameworks:
            hook["objectSelector"] = object_selector
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": name}, "webhooks": [*webhooks, jobs, pod_hook, deployment_hook, statefulset_hook,
                                                          *frameworks]}


def _view(doc: dict[str, Any]) -> o.KObject | None:
    """The old object as its view, unchecked: it is stored already, and its faults are not the update's."""
    try:
        return msgspec.convert(doc, o.KueueObject, strict=False)
    except msgspec.ValidationError:
        return None


def _key(doc: dict[str, Any]) -> str:
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    name, namespace = meta.get("name", ""), meta.get("namespace", "")
    return f"{namespace}/{name}" if namespace else str(name)
