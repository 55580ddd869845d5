"""The one place every Workload body an integration builds is finished, before any create or rewrite writes it.

Kueue finishes a job's pod sets where it builds them (``jobframework.JobPodSets`` runs ``SanitizePodSets``,
kubernetes-sigs/kueue#7425), so every create and every comparison sees them alike. Here every builder returns
:func:`workload`'s result: the Job's (:mod:`connectors.k8s.jobs`), the single Pod's (:mod:`connectors.k8s.pod_sync`,
a Deployment's Pods too), the pod group's (:mod:`connectors.k8s.pod_group`, a StatefulSet's too), the
LeaderWorkerSet's (:mod:`connectors.k8s.leaderworkerset`) and :func:`connectors.k8s.jobset.job_workload`, on which
every other kind builds (JobSet, MPIJob, the training operator's jobs, TrainJob, the Ray kinds, AppWrapper,
SparkApplication). Each create and each spec rewrite writes what a builder returned, so a new create path gets
the finished body without a step of its own.

The spec's fields every builder takes from the object's labels the same way (the queue, the priority, the
maximum execution time) are written by :func:`spec`. Finishing is the env folding of
:mod:`connectors.k8s.pod_set_env`. Not built here: copies of a Workload the
apiserver already holds (MultiKueue's worker copy, ConcurrentAdmission's variants), folded when first written.
The job's pod sets compared with its Workload (:func:`connectors.k8s.job_sync.equivalent_sets`) need no folding:
the comparison reads counts, tolerations and resources, never env.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from connectors.k8s import pod_set_env
from connectors.k8s.job_events import QUEUE_LABEL
from connectors.k8s.job_priority import workload_priority
from connectors.k8s.resources import KUEUE_GROUP, KUEUE_VERSION
from events.errors import InvalidInput
from events.goint import is_go_int
from projections.cluster import ClusterState

MAX_EXEC_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"

_INT32_MAX, _INT64_MAX = 2**31 - 1, 2**63 - 1


def spec(state: ClusterState, labels: Mapping[str, str], pod_sets: list[dict[str, Any]],
         pods_priority_class: str | None) -> dict[str, Any]:
    """The Workload spec of ``pod_sets`` for an object with ``labels`` whose pods name ``pods_priority_class``: the
    queue its label names (none under manageJobsWithoutQueueName: the Workload waits in no queue), the priority
    (:func:`connectors.k8s.job_priority.workload_priority`) and the maximum execution time
    (:func:`compared_max_execution_seconds`: a label the webhooks would refuse is none, not an error), as
    Kueue's job framework writes them for every kind. Raises what the priority's lookup raises."""
    out: dict[str, Any] = {"queueName": labels[QUEUE_LABEL]} if labels.get(QUEUE_LABEL) else {}
    out["podSets"] = pod_sets
    priority = workload_priority(state, labels, pods_priority_class)
    if priority is not None:
        out["priorityClassRef"], out["priority"] = priority
    max_exec = compared_max_execution_seconds(labels)
    if max_exec is not None:
        out["maximumExecutionTimeSeconds"] = max_exec
    return out


def max_execution_seconds(labels: Mapping[str, str]) -> int | None:
    """``spec.maximumExecutionTimeSeconds`` from an object's ``kueue.x-k8s.io/max-exec-time-seconds`` label, as
    Kueue reads it (none without the label; none either for a value beyond int32, which its webhook lets through).
    Raises :class:`InvalidInput` for a value Kueue's job webhook refuses at creation — not an integer, or not
    greater than 0 — worded as that webhook words it. For the webhooks only: a Workload is built from
    :func:`compared_max_execution_seconds`."""
    text = labels.get(MAX_EXEC_LABEL)
    if text is None:
        return None
    where = f"metadata.labels[{MAX_EXEC_LABEL}]: Invalid value:"
    if not is_go_int(text):
        raise InvalidInput(f'{where} "{text}": strconv.Atoi: parsing "{text}": invalid syntax')
    value = int(text)
    if not -_INT64_MAX - 1 <= value <= _INT64_MAX:  # strconv.Atoi's range: int64's minimum parses
        raise InvalidInput(f'{where} "{text}": strconv.Atoi: parsing "{text}": value out of range')
    if value <= 0:
        raise InvalidInput(f"{where} {value}: should be greater than 0")
    return value if value <= _INT32_MAX else None


def compared_max_execution_seconds(labels: Mapping[str, str]) -> int | None:
    """The maximum execution time as Kueue's job framework reads it when it builds an object's Workload and
    when it compares the object with it (one reading for both, ``strconv.ParseInt(value, 10, 32)``): a value
    that does not parse as an int32, or is not above 0, counts as none. Such a label reaches a job its webhook
    did not refuse it on: a suspended job updated under the generic update rules (the training operator's
    kinds, AppWrapper), or one the webhook never saw; its Workload then has no maximum execution time."""
    try:
        return max_execution_seconds(labels)
    except InvalidInput:
        return None


def workload(metadata: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    """The Workload body of ``metadata`` and ``spec`` (plain data, taken over, not copied) as it is written."""
    return pod_set_env.deduplicated({"apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION}", "kind": "Workload",
                                     "metadata": metadata, "spec": spec})
