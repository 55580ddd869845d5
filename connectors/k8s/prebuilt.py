"""Prebuilt Workloads: a batch/v1 Job (or a JobSet, an MPIJob: the shared reconciler's step,
:meth:`connectors.k8s.jobframework.JobReconciler._with_prebuilt`) that names the Workload it runs on instead of
being given one.

A Job carrying ``kueue.x-k8s.io/prebuilt-workload-name: <name>`` (a label, or an annotation of the same key) runs
on the Workload ``<name>`` of its namespace, created beforehand — by a user, or by MultiKueue on a worker —
rather than on one the Job integration builds (Kueue's ``pkg/controller/jobframework``):

* which key names it is Kueue's ``WorkloadIdentifierAnnotations`` gate (beta, on): on, the annotation when it is
  not empty, else the label; off, the label when not empty, else the annotation only when its value could not
  be a label value (longer than 63 characters): :func:`name_of`;
* while no Workload of that name exists the Job is given none: it waits, suspended (a running one is suspended,
  recorded as ``Stopped`` "missing workload"), and is looked at again when the Workload arrives (the mirror
  indexes Jobs by the names they carry: :func:`names_carried`);
* a Workload another object controls is not the Job's: the Job waits as if it were missing;
* one without a controller is adopted: the Job becomes its controller owner and its ``kueue.x-k8s.io/job-uid``
  label is set to the Job's uid (:func:`adoption_patch`);
* one the Job controls but which is not equivalent to it (:func:`connectors.k8s.job_sync.equivalent`) is finished
  ``OutOfSync`` (:data:`OUT_OF_SYNC`, :data:`OUT_OF_SYNC_MESSAGE`) — Kueue then treats it as no Workload at all,
  so no ``FinishedWorkload`` Event is recorded on the Job — and the Job waits as for a missing one; an elastic
  Job's scaled-up slice (it names the slice it replaces) is not compared, as Kueue's ``ensureOneWorkload``
  skips its in-sync check.

From there on it is the Job's Workload as a generated one is: started and stopped with it, finished with it,
finished and deleted when the Job goes (it is owned by it), its queue name following the Job's
(:mod:`connectors.k8s.job_sync`). No ``CreatedWorkload`` Event: nothing was created.
"""

from __future__ import annotations

from typing import Any

import msgspec

from connectors.k8s.resources import JOB_UID_LABEL
from events import objects as o

KEY = "kueue.x-k8s.io/prebuilt-workload-name"
"""The label key, and the annotation key, naming a Job's prebuilt Workload."""
LABEL_VALUE_MAX = 63
OUT_OF_SYNC = "OutOfSync"
OUT_OF_SYNC_MESSAGE = "The prebuilt workload is out of sync with its user job"
MISSING = "missing workload"
"""The ``Stopped`` message of a running Job whose prebuilt Workload is not (or not usably) there."""


def name_of(job: o.Job, annotation_first: bool) -> str:
    """The name of the Job's prebuilt Workload (empty: it has none). ``annotation_first``: the
    ``WorkloadIdentifierAnnotations`` gate."""
    return name_in(job.metadata, annotation_first)


def name_in(meta: o.ObjectMeta, annotation_first: bool) -> str:
    """:func:`name_of` for any object's metadata (a Job's, a Pod's: Kueue reads both alike)."""
    label = meta.labels.get(KEY, "")
    annotation = meta.annotations.get(KEY, "")
    if annotation_first:
        return annotation or label
    if label:
        return label
    return annotation if len(annotation) > LABEL_VALUE_MAX else ""


def names_carried(job: o.Job) -> tuple[str, ...]:
    """Every Workload name the Job's label or annotation carries, whichever the gate reads (none: empty)."""
    names = {job.metadata.labels.get(KEY, ""), job.metadata.annotations.get(KEY, "")} - {""}
    return tuple(sorted(names))


def controller_ref(job_name: str, job_uid: str) -> dict[str, Any]:
    """The controller ownerReference a Job's Workload carries, generated or adopted."""
    return {"apiVersion": "batch/v1", "kind": "Job", "name": job_name, "uid": job_uid, "controller": True,
            "blockOwnerDeletion": True}


def adoption_patch(job: Any, obs: o.Workload, ref: dict[str, Any] | None = None) -> dict[str, Any]:
    """The merge patch that makes ``job`` (a Job, or any kind's: then ``ref``, its controller ownerReference) the
    controller of Workload ``obs``: its owner references with the job's (in place of any earlier reference to the
    same job), the job's uid label, conditioned on the Workload's resourceVersion."""
    refs = [msgspec.to_builtins(r) for r in obs.metadata.owner_references if r.uid != job.metadata.uid]
    ref = ref if ref is not None else controller_ref(job.metadata.name, job.metadata.uid)
    return {"metadata": {"resourceVersion": obs.metadata.resource_version,
                         "ownerReferences": [*refs, ref],
                         "labels": {JOB_UID_LABEL: job.metadata.uid}}}


def controller_uid(obs: o.Workload) -> str | None:
    """The uid of the object controlling the Workload (None: nothing does)."""
    return next((r.uid for r in obs.metadata.owner_references if r.controller), None)
