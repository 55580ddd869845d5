"""What Kueue's LeaderWorkerSet integration (``leaderworkerset.x-k8s.io/leaderworkerset``) decides, as pure data.

A LeaderWorkerSet (leaderworkerset.x-k8s.io/v1) runs ``spec.replicas`` groups of ``leaderWorkerTemplate.size``
pods each: a leader (from ``leaderTemplate``, when given) and workers (from ``workerTemplate``). Kueue admits each
group on its own Workload, which its LeaderWorkerSet reconciler makes beforehand and the group's pods then run on
as a prebuilt pod group (Kueue's ``pkg/controller/jobs/leaderworkerset``); :mod:`connectors.k8s.lws_integration`
does the I/O around these decisions:

* **the Workloads** (:func:`plan`): one per group index ``0 .. replicas-1`` (``replicas`` default 1; during a
  rolling update with a surge, ``status.replicas`` when larger and not every group is updated yet), named by
  Kueue's rule over ``<name>-<index>`` (:func:`workload_name`); those missing are made, those of an index beyond
  the count are deleted (a scale-down), the rest kept. On a worker, the copy a MultiKueue manager made of its set
  (the origin label) names them from the manager's set's UID (:func:`owner_uid`) and gets none made: its groups run
  on the Workloads the manager copies there;
* **one Workload** (:func:`workload_for`): pod sets ``leader`` (1 pod, from ``leaderTemplate``) and ``worker``
  (``size - 1``), or a single ``main`` pod set of ``size`` pods without a leader template; each pod set's template
  its template's spec, labels and annotations (but the ``leaderworkerset.sigs.k8s.io`` keys other than the
  set-name label); under TopologyAwareScheduling a topology request from the template's TAS annotations (a
  ``kueue.x-k8s.io/podset-group-name`` on both makes them one PodSet group, reference §2.7 rule 25), the workers
  ranked by ``leaderworkerset.sigs.k8s.io/worker-index``; the LeaderWorkerSet its controller owner,
  ``kueue.x-k8s.io/is-group-workload: "true"``, the set's own uid as ``kueue.x-k8s.io/job-uid`` (Kueue #9898: what
  ties a set's groups together, e.g. for TAS spreading), its owner's kind, name and the group index in annotations, the
  queue name, priority (the WorkloadPriorityClass label, else the leader's then the worker's PriorityClass) and
  the labels to copy;
* **its pods** (:func:`pod_marks`, Kueue's LeaderWorkerSet pod reconciler): a pod the LeaderWorkerSet controller
  made from a template Kueue's webhook marked (``kueue.x-k8s.io/pod-suspending-parent: leaderworkerset``), once it
  carries its group index and while it is not ``kueue.x-k8s.io/managed``, is made a member of its group's pod
  group: managed, the set's queue name (unless it has one, or the set names none), the group's Workload as its group name and prebuilt
  Workload (annotations under ``WorkloadIdentifierAnnotations``, labels with it off), the group's size as its
  total, and its role (``leader``, ``worker`` or ``main``) as its role hash, so that its role is a pod set's
  name; a member still gated whose queue name is not the set's is given the set's;
* **the webhooks** (:func:`default_marks`, :func:`create_errors`, :func:`update_errors`).
"""

from __future__ import annotations

from typing import Any

from connectors.k8s import job_validation, workload_body, workload_names
from connectors.k8s.copied_metadata import GROUP_GATED, copied, gated_annotations
from connectors.k8s.job_events import QUEUE_LABEL
from connectors.k8s.job_priority import PRIORITY_LABEL
from connectors.k8s.jobs import topology_request
from connectors.k8s.pod_group import IS_GROUP_ANNOTATION
from connectors.k8s.pod_roles import GROUP_LABEL, ROLE_HASH_ANNOTATION, TOTAL_COUNT_ANNOTATION
from connectors.k8s.prebuilt import KEY as PREBUILT_KEY
from connectors.k8s.resources import JOB_UID_LABEL, LEADER_WORKER_SETS
from events import objects as o
from events.errors import InvalidInput
from kueue_es.scheduler.config import MULTIKUEUE_ORIGIN_LABEL, KeysToCopy
from projections.cluster import ClusterState
from projections.in_use import FINALIZER
from projections.workloads import MANAGED_LABEL

KIND = "LeaderWorkerSet"
FRAMEWORK_NAME = "leaderworkerset"
"""What Kueue's webhook writes in ``kueue.x-k8s.io/pod-suspending-parent`` of the pod templates it marks."""
SUSPENDING_PARENT = "kueue.x-k8s.io/pod-suspending-parent"
SERVING = "kueue.x-k8s.io/pod-group-serving"
LWS_KEY_PREFIX = "leaderworkerset.sigs.k8s.io"
"""The LeaderWorkerSet controller's label and annotation domain."""
SET_NAME_LABEL = f"{LWS_KEY_PREFIX}/name"
GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
LEADER_NAME_ANNOTATION = "leaderworkerset.sigs.k8s.io/leader-name"
"""On a worker pod: its leader's name (a leader has none)."""
LEADER, WORKER, MAIN = "leader", "worker", "main"
OWNER_GVK_ANNOTATION = "kueue.x-k8s.io/job-owner-gvk"
OWNER_NAME_ANNOTATION = "kueue.x-k8s.io/job-owner-name"
INDEX_ANNOTATION = "kueue.x-k8s.io/component-workload-index"
GVK = f"{LEADER_WORKER_SETS.api_version}, Kind={KIND}"
"""The owner's kind as Kueue writes it (a Go GroupVersionKind printed)."""
ORIGIN_UID_ANNOTATION = "kueue.x-k8s.io/multikueue-origin-uid"
"""On a MultiKueue manager's copy of a LeaderWorkerSet on a worker: the UID of the manager's set, which its group
Workloads' names are made from there."""


def workload_name(name: str, uid: str, index: int | str, short: bool = False) -> str:
    """Kueue's name for the Workload of group ``index`` of LeaderWorkerSet ``name`` (``uid``): the owner rule over
    ``<name>-<index>``; ``short``: the ``ShortWorkloadNames`` gate."""
    return workload_names.owner_workload_name(KIND, LEADER_WORKER_SETS.group, f"{name}-{index}", uid, short=short)


def owner_of(obs: o.Workload) -> tuple[str, str] | None:
    """``(name, uid)`` of the LeaderWorkerSet that controls Workload ``obs`` (None: none does)."""
    return workload_names.controlled_by(obs, LEADER_WORKER_SETS)


# --- reading one --------------------------------------------------------------------------------------------


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _lwt(lws: dict[str, Any]) -> dict[str, Any]:
    return _dict(_dict(lws.get("spec")).get("leaderWorkerTemplate"))


def size(lws: dict[str, Any]) -> int:
    """Pods per group (``leaderWorkerTemplate.size``, default 1)."""
    return _int(_lwt(lws).get("size"), 1)


def has_leader(lws: dict[str, Any]) -> bool:
    return isinstance(_lwt(lws).get("leaderTemplate"), dict)


def _remote_copy(lws: dict[str, Any]) -> bool:
    """Whether the set is a MultiKueue manager's copy on this worker (it carries the origin label)."""
    return MULTIKUEUE_ORIGIN_LABEL in _dict(_dict(lws.get("metadata")).get("labels"))


def owner_uid(lws: dict[str, Any]) -> str:
    """The UID the set's group Workloads are named from (Kueue's ``GetOwnerUID``): the manager's set's, on a
    MultiKueue copy that says it, so that the groups run on the Workloads the manager copied here; else its own."""
    meta = _dict(lws.get("metadata"))
    origin_uid = _dict(meta.get("annotations")).get(ORIGIN_UID_ANNOTATION)
    if _remote_copy(lws) and isinstance(origin_uid, str):
        return origin_uid
    return str(meta.get("uid", ""))


def queue_name(lws: dict[str, Any]) -> str:
    return str(_dict(_dict(lws.get("metadata")).get("labels")).get(QUEUE_LABEL, ""))


def group_count(lws: dict[str, Any]) -> int:
    """How many groups get a Workload: ``spec.replicas`` (default 1), or ``status.replicas`` when larger during a
    rolling update with a surge that has not updated every group yet (Kueue's ``filterWorkloads``)."""
    spec, status = _dict(lws.get("spec")), _dict(lws.get("status"))
    replicas = _int(spec.get("replicas"), 1)
    current = _int(status.get("replicas"), 0)
    if current > replicas and _surging(spec, status, replicas):
        return current
    return replicas


def _surging(spec: dict[str, Any], status: dict[str, Any], replicas: int) -> bool:
    rolling = _dict(_dict(spec.get("rolloutStrategy")).get("rollingUpdateConfiguration"))
    return max_surge(rolling.get("maxSurge"), replicas) > 0 and _int(status.get("updatedReplicas"), 0) < replicas


def max_surge(surge: Any, replicas: int) -> int:
    """The groups ``maxSurge`` allows above ``replicas`` (``spec.replicas``), as Kueue v0.20 reads it (#14405): a
    number as it is; a percentage (``"25%"``) of ``replicas``, rounded up, as LeaderWorkerSet scales it (Kueue
    v0.19 read every percentage as 0); another string as Go's ``IntValue`` reads it, its integer or 0."""
    if not isinstance(surge, str):
        return _int(surge, 0)
    if surge.endswith("%"):
        percent = _atoi(surge[:-1])
        return 0 if percent is None else -((-percent * replicas) // 100)  # ceil
    return _atoi(surge) or 0


def _atoi(value: str) -> int | None:
    """Go's ``strconv.Atoi``: an optional sign and ASCII digits (not the other digits ``str.isdigit`` takes)."""
    digits = value[1:] if value[:1] in ("+", "-") else value
    return int(value) if digits.isascii() and digits.isdigit() else None


MAX_REPLICAS = 1_000_000
"""The most ``spec.replicas`` Kueue takes (#12715, v0.18.3): a bound on the Workloads one set has made."""


def replica_count_error(lws: dict[str, Any]) -> str | None:
    """Kueue's error for a ``spec.replicas`` (default 1) below 0 or above :data:`MAX_REPLICAS`, in its words; None
    when it is within them."""
    replicas = _int(_dict(lws.get("spec")).get("replicas"), 1)
    if replicas < 0:
        return f"invalid LeaderWorkerSet replicas: must be >= 0, got {replicas}"
    if replicas > MAX_REPLICAS:
        return f"invalid LeaderWorkerSet replicas: must be <= {MAX_REPLICAS}, got {replicas}"
    return None


def plan(lws: dict[str, Any], existing: list[str], *, short: bool = False) -> tuple[list[tuple[str, int]], list[str],
                                                                                   list[str]]:
    """``(to create as (name, index), to keep, to delete)`` given the names of the Workloads the LeaderWorkerSet
    controls now (Kueue's ``filterWorkloads``); each list sorted. A MultiKueue manager's copy gets none made: the
    manager copies its group Workloads here (named from :func:`owner_uid`). Raises
    :class:`~events.errors.InvalidInput` with Kueue's error for a replica count it refuses
    (:func:`replica_count_error`), which plans nothing."""
    error = replica_count_error(lws)
    if error is not None:
        raise InvalidInput(error)
    name, uid = str(_dict(lws.get("metadata")).get("name", "")), owner_uid(lws)
    left = set(existing)
    create, keep = [], []
    for index in range(group_count(lws)):
        wl_name = workload_name(name, uid, index, short=short)
        if wl_name in left:
            keep.append(wl_name)
            left.discard(wl_name)
        elif not _remote_copy(lws):
            create.append((wl_name, index))
    return create, sorted(keep), sorted(left)


# --- one Workload -------------------------------------------------------------------------------------------


def _template_metadata(template: dict[str, Any]) -> dict[str, Any]:
    """The template's labels and annotations as a pod set keeps them (Kueue #10330): the annotations Kueue reads
    from a pod set (TAS, spreading) and the labels its PodTemplates carry; the LeaderWorkerSet controller's own
    ``leaderworkerset.sigs.k8s.io`` keys dropped, as Kueue drops them, but its set-name label."""
    meta = _dict(template.get("metadata"))
    out = {}
    for field in ("labels", "annotations"):
        kept = {k: v for k, v in _dict(meta.get(field)).items()
                if not k.startswith(LWS_KEY_PREFIX) or k == SET_NAME_LABEL}
        if kept:
            out[field] = kept
    return out


def _pod_set(name: str, count: int, template: dict[str, Any], tas: bool, index_label: str | None) -> dict[str, Any]:
    pod_set: dict[str, Any] = {"name": name, "count": count, "template": {"spec": _dict(template.get("spec"))}}
    metadata = _template_metadata(template)
    if metadata:
        pod_set["template"] = {"metadata": metadata, **pod_set["template"]}
    if tas:
        annotations = _dict(_dict(template.get("metadata")).get("annotations"))
        request = topology_request(annotations, index_label or "")
        if index_label is None:
            request.pop("podIndexLabel", None)
        pod_set["topologyRequest"] = request
    return pod_set


def pod_sets(lws: dict[str, Any], *, tas: bool) -> list[dict[str, Any]]:
    """The pod sets of each group's Workload: ``leader`` and ``worker``, or ``main`` alone (module docstring)."""
    lwt, total = _lwt(lws), size(lws)
    out = []
    worker_name, worker_count = MAIN, total
    if has_leader(lws):
        out.append(_pod_set(LEADER, 1, lwt["leaderTemplate"], tas, None))
        worker_name, worker_count = WORKER, total - 1
    out.append(_pod_set(worker_name, worker_count, _dict(lwt.get("workerTemplate")), tas, WORKER_INDEX_LABEL))
    return out


def pod_priority_class(lws: dict[str, Any]) -> str | None:
    """The PriorityClass Kueue reads from a group's pod sets: the first that names one (leader, then workers)."""
    for pod_set in pod_sets(lws, tas=False):
        name = pod_set["template"]["spec"].get("priorityClassName")
        if name:
            return str(name)
    return None


def workload_for(state: ClusterState, keys: KeysToCopy, lws: dict[str, Any], name: str, index: int) -> dict[str, Any]:
    """The Workload of group ``index`` under ``name`` (module docstring). Raises
    :class:`~connectors.k8s.job_priority.WorkloadPriorityClassNotFound` or
    :class:`~connectors.k8s.job_priority.PriorityClassNotFound` for a class the log does not hold."""
    meta = _dict(lws.get("metadata"))
    labels = _dict(meta.get("labels"))
    spec = workload_body.spec(state, labels, pod_sets(lws, tas=state.tas_enabled), pod_priority_class(lws))
    lws_annotations = _dict(meta.get("annotations"))
    annotations = {**copied(keys.annotations, lws_annotations), IS_GROUP_ANNOTATION: "true",
                   OWNER_GVK_ANNOTATION: GVK, OWNER_NAME_ANNOTATION: str(meta.get("name", "")),
                   INDEX_ANNOTATION: str(index), **gated_annotations(state, lws_annotations, GROUP_GATED)}
    wl_meta: dict[str, Any] = {
        "name": name, "namespace": meta.get("namespace", ""), "annotations": annotations, "finalizers": [FINALIZER],
        "ownerReferences": [workload_names.controller_ref(LEADER_WORKER_SETS, str(meta.get("name", "")),
                                                          str(meta.get("uid", "")))]}
    wl_meta["labels"] = {**copied(keys.labels, labels), JOB_UID_LABEL: str(meta.get("uid", ""))}
    return workload_body.workload(wl_meta, spec)


# --- its pods -----------------------------------------------------------------------------------------------


def pod_marks(pod_meta: o.ObjectMeta, lws: dict[str, Any] | None, *, short: bool = False,
              gated: bool = False, in_annotations: bool = True) -> dict[str, Any] | None:
    """The metadata merge patch that makes a pod of a LeaderWorkerSet Kueue holds a member of its group's pod group
    (module docstring); None when there is nothing to do: not a pod Kueue's webhook marked, one without its group
    index yet, or a LeaderWorkerSet gone.

    A pod is taken as a member already by Kueue's ``kueue.x-k8s.io/managed`` label, as Kueue's newest reconciler
    takes it (not by a queue name, which a pod made from a template that names one carries from the start): it
    keeps its queue name, or is given the set's when it has none. A set naming no queue (held under
    ``manageJobsWithoutQueueName``, the only way its templates are marked) has its pods made members all the same,
    with no queue name, as Kueue's reconciler, which reads no queue name, does: the pod integration then runs them on
    their group's Workload, which names none either. A member still held by Kueue's scheduling gate (``gated``)
    whose queue name is not the set's is given the set's: Kueue's backfill for sets whose templates never named one
    (pods then skipped by the pod integration for good); the pod webhook refuses the change on a pod not
    gated.

    ``in_annotations``: Kueue's ``WorkloadIdentifierAnnotations`` gate (beta, on by default). On, the group
    name and the prebuilt Workload's name are written as annotations of their keys, not as labels (Kueue's
    #10311: a group Workload's name may then be longer than a label value, 63 characters); off, as labels. A
    member adopted in the other form keeps it: under the gate the readers take either
    (:func:`connectors.k8s.pod_roles.group_name`, :func:`connectors.k8s.prebuilt.name_in`)."""
    labels, annotations = pod_meta.labels, pod_meta.annotations
    if annotations.get(SUSPENDING_PARENT) != FRAMEWORK_NAME or lws is None:
        return None
    queue = queue_name(lws)
    if MANAGED_LABEL in labels:
        return ({"metadata": {"labels": {QUEUE_LABEL: queue}}} if queue and gated and labels.get(QUEUE_LABEL) != queue
                else None)
    index = labels.get(GROUP_INDEX_LABEL)
    if index is None:
        return None
    wl_name = workload_name(str(_dict(lws.get("metadata")).get("name", "")), owner_uid(lws), index, short=short)
    role = MAIN
    if has_leader(lws):
        role = WORKER if LEADER_NAME_ANNOTATION in annotations else LEADER
    identifiers = {GROUP_LABEL: wl_name, PREBUILT_KEY: wl_name}
    return {"metadata": {
        "labels": {MANAGED_LABEL: "true", **({} if labels.get(QUEUE_LABEL) or not queue else {QUEUE_LABEL: queue}),
                   **({} if in_annotations else identifiers)},
        "annotations": {**(identifiers if in_annotations else {}), TOTAL_COUNT_ANNOTATION: str(size(lws)),
                        ROLE_HASH_ANNOTATION: role}}}


# --- the webhooks -------------------------------------------------------------------------------------------


def default_marks(lws: dict[str, Any], *, tas: bool = False) -> list[tuple[str, dict[str, str], dict[str, str]]]:
    """What Kueue's mutating webhook adds to each pod template of a LeaderWorkerSet it holds: ``(template field,
    labels, annotations)`` — the set's queue name (once defaulted; replacing any the template names, so its
    pods are born in the set's queue: Kueue moved that write from its pod reconciler to the webhook in #4932,
    which is also why a queue change while no group is ready rolls the pods), the WorkloadPriorityClass label
    the LeaderWorkerSet names, and the annotations that make its pods held by their parent and their group a
    serving one. A set held without a queue name (``manageJobsWithoutQueueName``) gets no queue label. Under
    ``TopologyAwareScheduling`` (``tas``), the workers of a set with a leader (worker indexes from 1) also get
    ``kueue.x-k8s.io/pod-index-offset: "1"``, so the TAS ungater ranks them from 0 — unless their template
    names a pod-set group, whose ranks the group places (Kueue's #8685)."""
    queue = queue_name(lws)
    wpc = _dict(_dict(lws.get("metadata")).get("labels")).get(PRIORITY_LABEL)
    labels = {**({QUEUE_LABEL: queue} if queue else {}), **({PRIORITY_LABEL: wpc} if wpc else {})}
    annotations = {SUSPENDING_PARENT: FRAMEWORK_NAME, SERVING: "true"}
    if not has_leader(lws):
        return [("workerTemplate", labels, annotations)]
    worker = annotations
    worker_notes = _dict(_dict(_dict(_lwt(lws).get("workerTemplate")).get("metadata")).get("annotations"))
    if tas and job_validation.GROUP_NAME not in worker_notes:
        worker = {**annotations, job_validation.POD_INDEX_OFFSET: "1"}
    return [("leaderTemplate", labels, annotations), ("workerTemplate", labels, worker)]


def create_errors(lws: dict[str, Any]) -> list[str]:
    """What Kueue refuses in a LeaderWorkerSet being created (and, as its webhook checks the new object as a
    created one, updated): a queue name that is not a DNS-1123 subdomain, and a ``spec.replicas`` (default 1)
    below 0 or above :data:`MAX_REPLICAS` (:func:`replicas_field_errors`). Either startup policy goes: Kueue
    runs a set whose workers come once its leader is ready (``LeaderReady``) since #4023 (v0.11) — the group's
    Workload is made from the set, its leader is started on its own and its workers as they come — and its
    webhook has no startup-policy rule."""
    labels = _dict(_dict(lws.get("metadata")).get("labels"))
    return job_validation.name_label_errors(labels, QUEUE_LABEL) + replicas_field_errors(lws)


def replicas_field_errors(lws: dict[str, Any]) -> list[str]:
    """Kueue's #12715 in its webhook: a ``spec.replicas`` out of ``[0, MAX_REPLICAS]`` is refused at creation
    and on update, not only left unplanned by the reconciler (:func:`replica_count_error`), so a set Kueue
    would never make Workloads for is not stored. Kueue's tests compare the path and type only; the detail is
    kueue-es's."""
    replicas = _int(_dict(lws.get("spec")).get("replicas"), 1)
    if replicas < 0:
        return [job_validation.invalid("spec.replicas", replicas, "must be greater than or equal to 0")]
    if replicas > MAX_REPLICAS:
        return [job_validation.invalid("spec.replicas", replicas,
                                       f"must be less than or equal to {MAX_REPLICAS}")]
    return []


def update_errors(old: dict[str, Any], new: dict[str, Any], *, immutable_size: bool = True) -> list[str]:
    """What Kueue refuses in an update: a queue name changed while a replica of ``old`` is ready, or removed
    (Kueue's #4932, v0.18, the Deployment's and StatefulSet's rule: while none is ready the set may be sent to
    another queue or given one, its pending group Workloads following it in the reconciler), a
    WorkloadPriorityClass label removed or added while a replica is ready
    (:func:`connectors.k8s.job_validation.priority_class_update`; Kueue's "suspended" LWS has no ready replica),
    and, for one that named a queue, a leader template added or removed or a pod spec changed in what admission
    looks at (:func:`_template_errors`) and, ``immutable_size`` (Kueue's ``LWSImmutableGroupSize``), a changed group
    size: a group's Workload keeps the pod counts it was made with, so a larger group would run pods its quota does
    not cover."""
    errors = []
    requeued = queue_name(old) != queue_name(new)
    if requeued and (not job_validation.no_ready_replica(old) or not queue_name(new)):
        errors.append(job_validation.invalid(f"metadata.labels[{QUEUE_LABEL}]", queue_name(new),
                                             job_validation.IMMUTABLE))
    errors += job_validation.priority_class_update(old, new, suspended=job_validation.no_ready_replica(old))
    if queue_name(old):
        errors += _template_errors(old, new)
        if immutable_size and size(new) != size(old):
            errors.append(job_validation.invalid("spec.leaderWorkerTemplate.size", size(new),
                                                 job_validation.IMMUTABLE))
    return errors


def _template_errors(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """A leader template added or removed, or a template's pod spec changed in what admission looks at (Kueue's
    ``ValidateImmutablePodGroupPodSpec``, :func:`connectors.k8s.job_validation.pod_group_spec_errors`): a serving
    group may roll to a new image, env or command, not to other requests or placement."""
    errors = []
    path = "spec.leaderWorkerTemplate"
    old_leader, new_leader = _lwt(old).get("leaderTemplate"), _lwt(new).get("leaderTemplate")
    if (old_leader is None) != (new_leader is None):
        errors.append(job_validation.invalid(f"{path}.leaderTemplate", new_leader, job_validation.IMMUTABLE))
    elif isinstance(old_leader, dict) and isinstance(new_leader, dict):
        errors += _pod_spec_errors(old_leader, new_leader, f"{path}.leaderTemplate.spec")
    errors += _pod_spec_errors(_dict(_lwt(old).get("workerTemplate")), _dict(_lwt(new).get("workerTemplate")),
                               f"{path}.workerTemplate.spec")
    return errors


def _pod_spec_errors(old_template: dict[str, Any], new_template: dict[str, Any], path: str) -> list[str]:
    return job_validation.pod_group_spec_errors(_dict(old_template.get("spec")), _dict(new_template.get("spec")), path)
