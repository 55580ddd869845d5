"""The API resources the connector reads and writes: one table, so the watcher, the CRD generator and the RBAC
rules agree on group, version, plural and scope."""

from __future__ import annotations

from dataclasses import dataclass

from events import objects as o

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSION = "v1beta2"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
"""On a Workload created for a Job: the Job's uid."""
MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"
"""On a Job: the fewest pods it may run with under partial admission (its pod set's ``minCount``)."""


@dataclass(frozen=True)
class Resource:
    kind: str
    group: str
    version: str
    plural: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    status_subresource: bool = False
    field_selector: str = ""
    """Server-side filter of what is listed and watched (objects leaving it are seen as deleted)."""
    optional: bool = False
    """Served only where its CRD is installed (another project's API): absent means none exist."""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def collection_path(self, namespace: str = "") -> str:
        """``/api/v1/pods``, ``/apis/batch/v1/namespaces/ns/jobs``, ..."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if namespace and self.namespaced:
            return f"{base}/namespaces/{namespace}/{self.plural}"
        return f"{base}/{self.plural}"

    def object_path(self, name: str, namespace: str = "", subresource: str = "") -> str:
        path = f"{self.collection_path(namespace)}/{name}"
        return f"{path}/{subresource}" if subresource else path

    @property
    def view(self) -> type[o.KObject]:
        return o.KINDS[self.kind]


# The short names are Kueue's, kind by kind (ac, co, mkc, mkconf, prc, topo and wpc since Kueue #11540; a Workload's
# no longer "wl", left to Kubernetes' own Workload kind, since #8472).
KUEUE_RESOURCES: tuple[Resource, ...] = (
    Resource("ResourceFlavor", KUEUE_GROUP, KUEUE_VERSION, "resourceflavors", False, ("flavor", "flavors", "rf")),
    Resource("ClusterQueue", KUEUE_GROUP, KUEUE_VERSION, "clusterqueues", False, ("cq",), status_subresource=True),
    Resource("Cohort", KUEUE_GROUP, KUEUE_VERSION, "cohorts", False, ("co",), status_subresource=True),
    Resource("LocalQueue", KUEUE_GROUP, KUEUE_VERSION, "localqueues", True, ("queue", "queues", "lq"),
             status_subresource=True),
    Resource("Workload", KUEUE_GROUP, KUEUE_VERSION, "workloads", True, ("kwl", "kueueworkload"),
             status_subresource=True),
    Resource("WorkloadPriorityClass", KUEUE_GROUP, KUEUE_VERSION, "workloadpriorityclasses", False, ("wpc",)),
    Resource("Topology", KUEUE_GROUP, KUEUE_VERSION, "topologies", False, ("topo",)),
    Resource("AdmissionCheck", KUEUE_GROUP, KUEUE_VERSION, "admissionchecks", False, ("ac",), status_subresource=True),
    Resource("ProvisioningRequestConfig", KUEUE_GROUP, KUEUE_VERSION, "provisioningrequestconfigs", False, ("prc",)),
    Resource("MultiKueueConfig", KUEUE_GROUP, KUEUE_VERSION, "multikueueconfigs", False, ("mkconf",)),
    Resource("MultiKueueCluster", KUEUE_GROUP, KUEUE_VERSION, "multikueueclusters", False, ("mkc",),
             status_subresource=True),
)

CORE_RESOURCES: tuple[Resource, ...] = (
    Resource("Namespace", "", "v1", "namespaces", False),
    Resource("Node", "", "v1", "nodes", False),
    Resource("Pod", "", "v1", "pods", True, field_selector="status.phase!=Succeeded,status.phase!=Failed"),
    Resource("Job", "batch", "v1", "jobs", True),
    Resource("PriorityClass", "scheduling.k8s.io", "v1", "priorityclasses", False),
    Resource("LimitRange", "", "v1", "limitranges", True),
    Resource("RuntimeClass", "node.k8s.io", "v1", "runtimeclasses", False),
    Resource("ResourceClaimTemplate", "resource.k8s.io", "v1", "resourceclaimtemplates", True, optional=True),
    Resource("DeviceClass", "resource.k8s.io", "v1", "deviceclasses", False, optional=True),
    Resource("ResourceSlice", "resource.k8s.io", "v1", "resourceslices", False, optional=True),
    Resource("ResourceClaim", "resource.k8s.io", "v1", "resourceclaims", True, optional=True),
    Resource("DeviceTaintRule", "resource.k8s.io", "v1", "devicetaintrules", False, optional=True),
)

AUTOSCALING_GROUP = "autoscaling.x-k8s.io"
PROVISIONING_REQUESTS = Resource("ProvisioningRequest", AUTOSCALING_GROUP, "v1", "provisioningrequests", True,
                                 ("provreq", "provreqs"), status_subresource=True, optional=True)
"""The cluster autoscaler's API (its CRD is installed with the autoscaler, not by kueue-es)."""

PREEMPTION_CONFIGS = Resource("PreemptionConfig", KUEUE_GROUP, "v1alpha1", "preemptionconfigs", False, ("preempcfg",),
                              optional=True)
"""ConfigurablePreemptions' alpha PreemptionConfig: its CRD is installed only with Kueue's alpha APIs
(:func:`connectors.k8s.crds.preemption_config_crd`), so a cluster without it lists none."""

ALL: tuple[Resource, ...] = CORE_RESOURCES + KUEUE_RESOURCES + (PREEMPTION_CONFIGS, PROVISIONING_REQUESTS)
BY_KIND: dict[str, Resource] = {r.kind: r for r in ALL}

WATCHED: tuple[str, ...] = tuple(r.kind for r in ALL)
"""Every kind the watcher lists and watches, in the order it starts them (queues before workloads)."""

LEASES = Resource("Lease", "coordination.k8s.io", "v1", "leases", True)
SECRETS = Resource("Secret", "", "v1", "secrets", True)
"""Read (a MultiKueue worker's kubeconfig, in Kueue's namespace), never watched."""
POD_TEMPLATES = Resource("PodTemplate", "", "v1", "podtemplates", True)
"""Written (a ProvisioningRequest's pod templates), never watched."""
DEPLOYMENTS = Resource("Deployment", "apps", "v1", "deployments", True, status_subresource=True)
REPLICA_SETS = Resource("ReplicaSet", "apps", "v1", "replicasets", True, status_subresource=True)
STATEFUL_SETS = Resource("StatefulSet", "apps", "v1", "statefulsets", True, status_subresource=True)
"""The parents of the Pods Kueue's ``deployment`` and ``statefulset`` integrations hold: not watched into the log
(their Pods are); the pod integration watches the StatefulSets' status revisions (:mod:`connectors.k8s.statefulsets`)."""
JOBSET_GROUP = "jobset.x-k8s.io"
JOBSETS = Resource("JobSet", JOBSET_GROUP, "v1alpha2", "jobsets", True, status_subresource=True, optional=True)
"""Kueue's ``jobset.x-k8s.io/jobset`` framework (another project's API, served where its CRD is installed): listed
and watched by the JobSet integration itself (:mod:`connectors.k8s.jobset_integration`), not put in the log."""
KUBEFLOW_GROUP = "kubeflow.org"
MPIJOBS = Resource("MPIJob", KUBEFLOW_GROUP, "v2beta1", "mpijobs", True, status_subresource=True, optional=True)
"""Kueue's ``kubeflow.org/mpijob`` framework (the MPI operator's API, served where its CRD is installed): listed and
watched by the MPIJob integration itself (:mod:`connectors.k8s.mpijob_integration`), not put in the log."""
RAY_GROUP = "ray.io"
RAYJOBS = Resource("RayJob", RAY_GROUP, "v1", "rayjobs", True, status_subresource=True, optional=True)
RAYCLUSTERS = Resource("RayCluster", RAY_GROUP, "v1", "rayclusters", True, status_subresource=True, optional=True)
"""Kueue's ``ray.io/rayjob`` and ``ray.io/raycluster`` frameworks (KubeRay's API, served where its CRDs are
installed): listed and watched by the Ray integrations themselves (:mod:`connectors.k8s.ray_integration`), not put
in the log."""
RAYSERVICES = Resource("RayService", RAY_GROUP, "v1", "rayservices", True, status_subresource=True, optional=True)
"""Kueue's ``ray.io/rayservice`` framework, as the other Ray kinds: watched by its own integration."""
LWS_GROUP = "leaderworkerset.x-k8s.io"
LEADER_WORKER_SETS = Resource("LeaderWorkerSet", LWS_GROUP, "v1", "leaderworkersets", True, status_subresource=True,
                              optional=True)
"""Kueue's ``leaderworkerset.x-k8s.io/leaderworkerset`` framework (served where the LWS CRD is installed): listed and
watched by the LeaderWorkerSet integration itself (:mod:`connectors.k8s.lws_integration`), not put in the log."""

APPWRAPPER_GROUP = "workload.codeflare.dev"
APPWRAPPERS = Resource("AppWrapper", APPWRAPPER_GROUP, "v1beta2", "appwrappers", True, status_subresource=True,
                       optional=True)
"""Kueue's ``workload.codeflare.dev/appwrapper`` framework (the AppWrapper project's API, served where its CRD is
installed): listed and watched by the AppWrapper integration itself (:mod:`connectors.k8s.appwrapper_integration`),
not put in the log."""

SPARK_GROUP = "sparkoperator.k8s.io"
SPARK_APPLICATIONS = Resource("SparkApplication", SPARK_GROUP, "v1beta2", "sparkapplications", True,
                              status_subresource=True, optional=True)
"""Kueue's ``sparkoperator.k8s.io/sparkapplication`` framework (the Spark operator's API): watched by its own
integration (:mod:`connectors.k8s.spark_integration`), not put in the log."""
TRAINER_GROUP = "trainer.kubeflow.org"
TRAINJOBS = Resource("TrainJob", TRAINER_GROUP, "v1alpha1", "trainjobs", True, status_subresource=True, optional=True)
TRAINING_RUNTIMES = Resource("TrainingRuntime", TRAINER_GROUP, "v1alpha1", "trainingruntimes", True, optional=True)
CLUSTER_TRAINING_RUNTIMES = Resource("ClusterTrainingRuntime", TRAINER_GROUP, "v1alpha1", "clustertrainingruntimes",
                                     False, optional=True)
"""Kueue's ``trainer.kubeflow.org/trainjob`` framework (Kubeflow Trainer v2's API, served where its CRDs are
installed): TrainJobs and the runtimes they name, listed and watched by the TrainJob integration itself
(:mod:`connectors.k8s.trainjob_integration`), not put in the log."""

KUBEFLOW_JOBS = {kind: Resource(kind, KUBEFLOW_GROUP, "v1", f"{kind.lower()}s", True, status_subresource=True,
                                optional=True)
                 for kind in ("PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob")}
"""Kind -> the Kubeflow training operator's kubeflow.org/v1 jobs (Kueue's ``kubeflow.org/pytorchjob``, ...
frameworks): listed and watched by their integrations (:mod:`connectors.k8s.kubeflow_integration`), not put in the
log."""

