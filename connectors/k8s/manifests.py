"""Everything to install kueue-es in a cluster: CRDs, least-privilege RBAC, the Deployment, and the cluster-wide
registrations its replicas complete with their CA (:func:`registrations`), so that deleting the manifests
uninstalls all of it.

RBAC grants exactly what the connector does:

* read (get/list/watch) every kind it watches: Namespaces, Nodes, Pods, PriorityClasses, LimitRanges,
  RuntimeClasses, ResourceClaimTemplates, DeviceClasses, ResourceSlices, ResourceClaims and DeviceTaintRules (DRA),
  Jobs and the Kueue kinds;
* Workloads: create (the Job integration), patch (the ``kueue.x-k8s.io/resource-in-use`` finalizer taken off;
  ``spec.active``, the queue name, priority and pod sets kept in step with the Job; a prebuilt one adopted), delete
  (orphans whose Job is gone, Workloads a Job no longer matches or has too many of, ``afterFinished`` retention);
  their ``status``: patch;
* Jobs: patch (suspend/unsuspend, inject and restore the template), delete (``afterDeactivatedByKueue``
  retention, which deletes the job of every other integration too: JobSets, MPIJobs, the training operator's
  jobs, RayJobs, RayClusters, RayServices, LeaderWorkerSets, AppWrappers, TrainJobs, SparkApplications),
  ``jobs/status``: patch (clear startTime);
* JobSets (jobset.x-k8s.io): get/list/watch (the JobSet integration's own watch), patch (suspend/unsuspend,
  inject and restore the replicated Jobs' pod templates), whichever frameworks a replica's Configuration lists;
* MPIJobs (kubeflow.org): the same, for the MPIJob integration (its replicas' pod templates);
* the training operator's PyTorchJobs, TFJobs, XGBoostJobs, PaddleJobs and JAXJobs (kubeflow.org): the same, for
  their integrations, and their ``finalizers`` (update: they own their Workloads);
* RayJobs and RayClusters (ray.io): the same, for the Ray integrations (their head's and worker groups' pod
  templates, a RayJob's submitter template); RayServices the same (their cluster config's templates) and their
  ``finalizers`` (update: they own their Workloads);
* AppWrappers (workload.codeflare.dev): the same, for the AppWrapper integration (its components' ``podSetInfos``),
  and their ``finalizers`` (update: they own their Workloads);
* SparkApplications (sparkoperator.k8s.io): the same, for the SparkApplication integration (its roles' labels,
  annotations, node selector, tolerations and gates, its executors' count), and their ``finalizers`` (update: they
  own their Workloads);
* TrainJobs (trainer.kubeflow.org): the same, for the TrainJob integration (their ``podTemplateOverrides``), and
  TrainingRuntimes and ClusterTrainingRuntimes: read (get, list, watch), a TrainJob's pod sets being its runtime's;
* the ``finalizers`` subresource (update) of each kind kueue-es makes the owner of what it creates with
  ``blockOwnerDeletion``: Jobs, JobSets, MPIJobs, RayJobs, RayClusters, RayServices, AppWrappers, SparkApplications
  and TrainJobs (their
  Workloads), Workloads (their ProvisioningRequests), ProvisioningRequests (their PodTemplates) and Pods (below), which the ``OwnerReferencesPermissionEnforcement`` admission plugin
  requires, as Kueue's role grants it;
* the ``status`` (get, patch) of each kind a MultiKueue manager runs on a worker: JobSets, MPIJobs, the training
  operator's jobs, RayJobs, RayClusters, AppWrappers and TrainJobs (the worker's copy's status replaces the
  manager's, as Kueue's adapters write it; batch/v1 Jobs' is above);
* ClusterQueues' and LocalQueues' ``status``: patch (Kueue's queue status);
* ClusterQueues, ResourceFlavors, AdmissionChecks, Topologies: patch (the resource-in-use finalizer);
* Leases (coordination.k8s.io) in its own namespace only, for leader election: get/create/update;
* the webhooks: the MutatingWebhookConfiguration of the Job and Pod webhooks and the ValidatingWebhookConfiguration of the
  Kueue kinds and Jobs (create; get/update by name) and, in its own namespace, the Secret that holds the serving
  certificate every replica shares (create; get by name);
* Pods: patch (the topology ungater lifts the scheduling gate and sets the node selector; the pod integration
  lifts the admission gate, merges the admission in and drops its finalizer), delete (the pod integration stops a
  Pod as Kueue does), ``pods/status``: patch (the ``TerminationTarget`` condition first), ``pods/finalizers``:
  update (a Workload is created with its Pod as owner, ``blockOwnerDeletion``);
* ProvisioningRequests (autoscaling.x-k8s.io): create, delete; PodTemplates: get, create, patch (their owner);
  AdmissionChecks' ``status``: patch (the provisioning checks' Active condition);
* Events (core/v1): create (Kueue's Events for the decisions carried out; never updated or patched);
* its own CRDs, by name: get, patch (the conversion webhook's ``caBundle``);
* the visibility API: its APIServices (create; get/update by name), in its own namespace the Service, Endpoints
  and EndpointSlice that route them to the leader (create; get/update by name), and, in ``kube-system``, the
  apiserver's ``extension-apiserver-authentication`` ConfigMap (the requestheader CA; through the bootstrap Role
  ``extension-apiserver-authentication-reader``, as Kueue binds it);

and, for people rather than the controller, the ClusterRoles Kueue's installation creates and its RBAC guide
binds (:mod:`connectors.k8s.user_roles`): ``kueue-batch-admin-role`` and ``kueue-batch-user-role``,
aggregating the per-kind editor and viewer roles.

The Deployment runs ``kueue-es run --kube`` as a non-root user with a read-only root filesystem, serving the
batch/v1 Job, Pod, Deployment, StatefulSet and JobSet mutating webhooks, the validating webhooks for Jobs, the Kueue kinds
and the others and the CRDs' conversion
webhook (the CRDs call it for v1beta1 <-> v1beta2) on port 9443 behind the Service ``kueue-es-webhook`` (it makes a
self-signed CA, keeps it in the Secret ``kueue-es-webhook-server-cert``, registers the Mutating- and
ValidatingWebhookConfigurations and sets the CRDs' conversion ``caBundle``: until a replica has started, only
v1beta2 is readable), and Kueue's visibility API on port 8082 for
the aggregation layer behind the Service ``kueue-es-visibility`` (installed here, as Kueue's manifests install
theirs, in the form the leader registers: :func:`connectors.k8s.visibility.service`; the leader registers the
APIServices ``v1beta2``/``v1beta1.visibility.kueue.x-k8s.io`` with its serving CA and points that Service at its own
pod IP through Endpoints and an EndpointSlice); the
embedded log lives on a volume at ``/var/lib/kueue-es`` (an ``emptyDir`` by default: a new pod rebuilds its
state by relisting, Workload statuses carry what was admitted; use a PersistentVolumeClaim or Kafka to keep
the history). Every replica serves Kueue's Prometheus metrics over plain HTTP on port 8080 (``/metrics``; the
leader's carry them, a standby's only its process metrics).
"""

from __future__ import annotations

from typing import Any

from connectors.k8s import job_selection, validating, webhook
from connectors.k8s.crds import CRD_RESOURCE, all_crds, webhook_conversion
from connectors.k8s.multikueue_adapters import ADAPTERS as MULTIKUEUE_ADAPTERS
from connectors.k8s.resources import (
    ALL,
    APPWRAPPERS,
    CLUSTER_TRAINING_RUNTIMES,
    DEPLOYMENTS,
    JOBSETS,
    KUBEFLOW_GROUP,
    KUBEFLOW_JOBS,
    KUEUE_GROUP,
    KUEUE_RESOURCES,
    LEADER_WORKER_SETS,
    LEASES,
    MPIJOBS,
    POD_TEMPLATES,
    PROVISIONING_REQUESTS,
    RAY_GROUP,
    RAYCLUSTERS,
    RAYJOBS,
    RAYSERVICES,
    REPLICA_SETS,
    SPARK_APPLICATIONS,
    STATEFUL_SETS,
    TRAINING_RUNTIMES,
    TRAINJOBS,
)
from connectors.k8s.user_roles import user_roles
from connectors.k8s.validating import CONFIGURATION_NAME as VALIDATING_CONFIGURATION_NAME
from connectors.k8s.visibility import (
    API_SERVICES,
    ENDPOINT_SLICES,
    ENDPOINTS,
    SERVICES,
    apiservice_names,
    apiservices,
)
from connectors.k8s.visibility import service as visibility_service
from connectors.k8s.webhook import CONFIGURATION_NAME

DEFAULT_NAMESPACE = "kueue-system"
DEFAULT_NAME = "kueue-es"
DEFAULT_IMAGE = "kueue-es:0.1.0"
HEALTH_PORT = 8081
METRICS_PORT = 8080
WEBHOOK_PORT = 9443
WEBHOOK_SERVICE = "kueue-es-webhook"
WEBHOOK_SECRET = "kueue-es-webhook-server-cert"
VISIBILITY_PORT = 8082
VISIBILITY_SERVICE = "kueue-es-visibility"
READ = ["get", "list", "watch"]
MULTIKUEUE_OWNERS = sorted({a.resource for a in MULTIKUEUE_ADAPTERS.values()
                            if a.resource.group != "batch" and a.mirrors_status}, key=lambda r: (r.group, r.plural))
"""The kinds besides batch/v1 Jobs whose status a MultiKueue manager writes (its adapters'; not LeaderWorkerSets,
whose status is not mirrored)."""


def _labels(name: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": name, "app.kubernetes.io/component": "controller"}


def _retention_deletes() -> list[dict[str, Any]]:
    """``delete`` on each kind ``afterDeactivatedByKueue`` deletes besides Jobs and Pods (granted above): the
    jobs of every integration (:data:`connectors.k8s.job_selection.OWNER_RESOURCES`)."""
    by_group: dict[str, list[str]] = {}
    for r in job_selection.OWNER_RESOURCES.values():
        if r.plural not in ("jobs", "pods"):
            by_group.setdefault(r.group, []).append(r.plural)
    return [{"apiGroups": [group], "resources": sorted(plurals), "verbs": ["delete"]}
            for group, plurals in sorted(by_group.items())]


def cluster_role(name: str = DEFAULT_NAME) -> dict[str, Any]:
    by_group: dict[str, list[str]] = {}
    for r in ALL:
        by_group.setdefault(r.group, []).append(r.plural)
    rules: list[dict[str, Any]] = [
        {"apiGroups": [group], "resources": sorted(plurals), "verbs": READ} for group, plurals in by_group.items()
    ]
    rules += [
        {"apiGroups": [KUEUE_GROUP], "resources": ["workloads"], "verbs": ["create", "patch", "delete"]},
        {"apiGroups": [KUEUE_GROUP], "resources": ["workloads/status"], "verbs": ["get", "patch"]},
        {"apiGroups": [KUEUE_GROUP], "resources": ["clusterqueues/status", "localqueues/status"],
         "verbs": ["get", "patch"]},
        {"apiGroups": [KUEUE_GROUP], "resources": ["admissionchecks", "clusterqueues", "resourceflavors",
                                                   "topologies"], "verbs": ["patch"]},
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["patch", "delete"]},
        {"apiGroups": ["batch"], "resources": ["jobs/status"], "verbs": ["get", "patch"]},
        {"apiGroups": ["batch"], "resources": ["jobs/finalizers"], "verbs": ["update"]},
        {"apiGroups": [KUEUE_GROUP], "resources": ["workloads/finalizers"], "verbs": ["update"]},
        {"apiGroups": [JOBSETS.group], "resources": [JOBSETS.plural], "verbs": [*READ, "patch"]},
        {"apiGroups": [JOBSETS.group], "resources": [f"{JOBSETS.plural}/finalizers"], "verbs": ["update"]},
        {"apiGroups": [MPIJOBS.group], "resources": [MPIJOBS.plural], "verbs": [*READ, "patch"]},
        {"apiGroups": [MPIJOBS.group], "resources": [f"{MPIJOBS.plural}/finalizers"], "verbs": ["update"]},
        {"apiGroups": [KUBEFLOW_GROUP], "resources": [r.plural for r in KUBEFLOW_JOBS.values()],
         "verbs": [*READ, "patch"]},
        {"apiGroups": [KUBEFLOW_GROUP], "resources": [f"{r.plural}/finalizers" for r in KUBEFLOW_JOBS.values()],
         "verbs": ["update"]},
        {"apiGroups": [RAY_GROUP], "resources": [RAYCLUSTERS.plural, RAYJOBS.plural], "verbs": [*READ, "patch"]},
        {"apiGroups": [RAY_GROUP], "resources": [f"{RAYCLUSTERS.plural}/finalizers", f"{RAYJOBS.plural}/finalizers"],
         "verbs": ["update"]},
        {"apiGroups": [RAY_GROUP], "resources": [RAYSERVICES.plural], "verbs": [*READ, "patch"]},
        {"apiGroups": [RAY_GROUP], "resources": [f"{RAYSERVICES.plural}/finalizers"], "verbs": ["update"]},
        {"apiGroups": [SPARK_APPLICATIONS.group], "resources": [SPARK_APPLICATIONS.plural], "verbs": [*READ, "patch"]},
        {"apiGroups": [SPARK_APPLICATIONS.group], "resources": [f"{SPARK_APPLICATIONS.plural}/finalizers"],
         "verbs": ["update"]},
        {"apiGroups": [LEADER_WORKER_SETS.group], "resources": [LEADER_WORKER_SETS.plural], "verbs": [*READ]},
        {"apiGroups": [APPWRAPPERS.group], "resources": [APPWRAPPERS.plural], "verbs": [*READ, "patch"]},
        {"apiGroups": [APPWRAPPERS.group], "resources": [f"{APPWRAPPERS.plural}/finalizers"], "verbs": ["update"]},
        {"apiGroups": [LEADER_WORKER_SETS.group], "resources": [f"{LEADER_WORKER_SETS.plural}/finalizers"],
         "verbs": ["update"]},
        {"apiGroups": [TRAINJOBS.group], "resources": [TRAINJOBS.plural], "verbs": [*READ, "patch"]},
        {"apiGroups": [TRAINJOBS.group], "resources": [f"{TRAINJOBS.plural}/finalizers"], "verbs": ["update"]},
        {"apiGroups": [TRAINJOBS.group], "resources": [TRAINING_RUNTIMES.plural, CLUSTER_TRAINING_RUNTIMES.plural],
         "verbs": [*READ]},
        *({"apiGroups": [r.group], "resources": [f"{r.plural}/status"], "verbs": ["get", "patch"]}
          for r in MULTIKUEUE_OWNERS),
        {"apiGroups": [PROVISIONING_REQUESTS.group], "resources": [f"{PROVISIONING_REQUESTS.plural}/finalizers"],
         "verbs": ["update"]},
        {"apiGroups": ["admissionregistration.k8s.io"], "resources": ["mutatingwebhookconfigurations"],
         "verbs": ["create"]},
        {"apiGroups": ["admissionregistration.k8s.io"], "resources": ["mutatingwebhookconfigurations"],
         "resourceNames": [CONFIGURATION_NAME], "verbs": ["get", "update"]},
        {"apiGroups": ["admissionregistration.k8s.io"], "resources": ["validatingwebhookconfigurations"],
         "verbs": ["create"]},
        {"apiGroups": ["admissionregistration.k8s.io"], "resources": ["validatingwebhookconfigurations"],
         "resourceNames": [VALIDATING_CONFIGURATION_NAME], "verbs": ["get", "update"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["patch", "delete"]},
        *_retention_deletes(),
        {"apiGroups": [STATEFUL_SETS.group], "resources": [STATEFUL_SETS.plural], "verbs": READ},
        {"apiGroups": [REPLICA_SETS.group], "resources": [DEPLOYMENTS.plural, REPLICA_SETS.plural], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch"]},
        {"apiGroups": [""], "resources": ["pods/finalizers"], "verbs": ["update"]},
        {"apiGroups": [""], "resources": [POD_TEMPLATES.plural], "verbs": ["get", "create", "patch"]},
        {"apiGroups": [PROVISIONING_REQUESTS.group], "resources": [PROVISIONING_REQUESTS.plural],
         "verbs": ["create", "delete"]},
        {"apiGroups": [KUEUE_GROUP], "resources": ["admissionchecks/status", "multikueueclusters/status"],
         "verbs": ["patch"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
        {"apiGroups": [CRD_RESOURCE.group], "resources": [CRD_RESOURCE.plural],
         "resourceNames": sorted(f"{r.plural}.{r.group}" for r in KUEUE_RESOURCES), "verbs": ["get", "patch"]},
        {"apiGroups": [API_SERVICES.group], "resources": [API_SERVICES.plural], "verbs": ["create"]},
        {"apiGroups": [API_SERVICES.group], "resources": [API_SERVICES.plural],
         "resourceNames": apiservice_names(), "verbs": ["get", "update"]},
    ]
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name, "labels": _labels(name)},
        "rules": rules,
    }


def rbac(namespace: str = DEFAULT_NAMESPACE, name: str = DEFAULT_NAME) -> list[dict[str, Any]]:
    subject = [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": name, "namespace": namespace, "labels": _labels(name)}},
        cluster_role(name),
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": name, "labels": _labels(name)},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
         "subjects": subject},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": f"{name}-leader-election", "namespace": namespace, "labels": _labels(name)},
         "rules": [{"apiGroups": [LEASES.group], "resources": [LEASES.plural],
                    "verbs": ["get", "create", "update"]},
                   {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
                   {"apiGroups": [""], "resources": ["secrets"], "resourceNames": [WEBHOOK_SECRET],
                    "verbs": ["get"]},
                   # MultiKueue workers' kubeconfigs: Secrets in Kueue's namespace, named by MultiKueueClusters,
                   # each read and then watched
                   {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch"]},
                   # ... or ClusterProfiles there (MultiKueueClusterProfile), each read and then watched
                   {"apiGroups": ["multicluster.x-k8s.io"], "resources": ["clusterprofiles"],
                    "verbs": ["get", "list", "watch"]},
                   {"apiGroups": ["", ENDPOINT_SLICES.group],
                    "resources": [SERVICES.plural, ENDPOINTS.plural, ENDPOINT_SLICES.plural], "verbs": ["create"]},
                   {"apiGroups": ["", ENDPOINT_SLICES.group],
                    "resources": [SERVICES.plural, ENDPOINTS.plural, ENDPOINT_SLICES.plural],
                    "resourceNames": [VISIBILITY_SERVICE], "verbs": ["get", "update"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": f"{name}-leader-election", "namespace": namespace, "labels": _labels(name)},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": f"{name}-leader-election"},
         "subjects": subject},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": f"{name}-auth-reader", "namespace": "kube-system", "labels": _labels(name)},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                     "name": "extension-apiserver-authentication-reader"},
         "subjects": subject},
    ]


def deployment(namespace: str = DEFAULT_NAMESPACE, name: str = DEFAULT_NAME, image: str = DEFAULT_IMAGE,
               log: str = "", replicas: int = 2) -> dict[str, Any]:
    args = ["run", "--kube", "--log", log or "/var/lib/kueue-es/log"]
    probe = {"httpGet": {"path": "/healthz", "port": "health"}, "periodSeconds": 10}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": _labels(name)},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": _labels(name)},
            "template": {
                "metadata": {"labels": _labels(name)},
                "spec": {
                    "serviceAccountName": name,
                    "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532,
                                        "fsGroup": 65532, "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [{
                        "name": "kueue-es",
                        "image": image,
                        "args": args,
                        "env": [
                            {"name": "KUEUE_ES_KUBE_LEASE_NAMESPACE",
                             "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                            {"name": "KUEUE_ES_SCHEDULER_INSTANCE_ID",
                             "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                            {"name": "KUEUE_ES_KUBE_WEBHOOK_PORT", "value": str(WEBHOOK_PORT)},
                            {"name": "KUEUE_ES_KUBE_WEBHOOK_SECRET", "value": WEBHOOK_SECRET},
                            {"name": "KUEUE_ES_KUBE_WEBHOOK_SERVICE", "value": WEBHOOK_SERVICE},
                            {"name": "KUEUE_ES_KUBE_WEBHOOK_REGISTER", "value": "true"},
                            {"name": "KUEUE_ES_KUBE_VISIBILITY_PORT", "value": str(VISIBILITY_PORT)},
                            {"name": "KUEUE_ES_KUBE_VISIBILITY_SERVICE", "value": VISIBILITY_SERVICE},
                            {"name": "KUEUE_ES_KUBE_VISIBILITY_REGISTER", "value": "true"},
                            {"name": "KUEUE_ES_KUBE_VISIBILITY_ADVERTISE_ADDRESS",
                             "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                            {"name": "KUEUE_ES_METRICS_PORT", "value": str(METRICS_PORT)},
                        ],
                        "ports": [{"name": "health", "containerPort": HEALTH_PORT},
                                  {"name": "webhook", "containerPort": WEBHOOK_PORT},
                                  {"name": "visibility", "containerPort": VISIBILITY_PORT},
                                  {"name": "metrics", "containerPort": METRICS_PORT}],
                        "livenessProbe": {**probe, "initialDelaySeconds": 15},
                        "readinessProbe": {"httpGet": {"path": "/readyz", "port": "health"}, "periodSeconds": 5},
                        "resources": {"requests": {"cpu": "500m", "memory": "512Mi"},
                                      "limits": {"memory": "2Gi"}},
                        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                            "capabilities": {"drop": ["ALL"]}},
                        "volumeMounts": [{"name": "log", "mountPath": "/var/lib/kueue-es"},
                                         {"name": "tmp", "mountPath": "/tmp"}],
                    }],
                    "volumes": [{"name": "log", "emptyDir": {}}, {"name": "tmp", "emptyDir": {}}],
                },
            },
        },
    }


def webhook_service(namespace: str = DEFAULT_NAMESPACE, name: str = DEFAULT_NAME) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": WEBHOOK_SERVICE, "namespace": namespace, "labels": _labels(name)},
            "spec": {"selector": _labels(name),
                     "ports": [{"name": "webhook", "port": 443, "targetPort": "webhook"}]}}


def namespace_object(namespace: str = DEFAULT_NAMESPACE) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}


def everything(namespace: str = DEFAULT_NAMESPACE, name: str = DEFAULT_NAME, image: str = DEFAULT_IMAGE,
               log: str = "") -> list[dict[str, Any]]:
    converting = webhook_conversion(service=(WEBHOOK_SERVICE, namespace, 443))
    return [*all_crds(converting), namespace_object(namespace), *rbac(namespace, name), *user_roles(),
            webhook_service(namespace, name), visibility_service(namespace, VISIBILITY_SERVICE, VISIBILITY_PORT),
            deployment(namespace, name, image, log), *registrations(namespace)]


def registrations(namespace: str = DEFAULT_NAMESPACE) -> list[dict[str, Any]]:
    """The cluster-wide objects a replica registers as it starts — the MutatingWebhookConfiguration of the Job and
    Pod webhooks (the Pod one changes nothing unless the Kueue Configuration turns the pod integration on),
    the ValidatingWebhookConfiguration of the Kueue kinds and Jobs, the visibility APIServices — installed with the
    rest so that deleting the manifests deletes them too: left behind, the webhooks (``failurePolicy: Fail``) would
    refuse every Job and Kueue object, and the APIServices would break the apiserver's discovery. They go without a
    ``caBundle``: the first replica that serves sets it, and a later ``kubectl apply`` leaves it. The Pod,
    Deployment, StatefulSet and JobSet webhooks go with ``failurePolicy: Ignore``, as the Deployment runs Kueue's
    default frameworks (no ``pod``, ``deployment``, ``statefulset`` or ``jobset.x-k8s.io/jobset``); a replica whose
    Kueue Configuration turns one of those integrations on registers its webhooks with ``Fail``."""
    service = (WEBHOOK_SERVICE, namespace, 443)
    return [webhook.configuration(b"", service=service, excluded_namespaces=("kube-system", namespace)),
            validating.configuration(b"", service=service, excluded_namespaces=("kube-system", namespace)),
            *apiservices(namespace, VISIBILITY_SERVICE)]
