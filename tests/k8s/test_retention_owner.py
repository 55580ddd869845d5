"""``afterDeactivatedByKueue`` carried out (connectors/k8s/retention.py): Kueue's job reconciler, the one
every integration runs through, deletes the deactivated Workload's job, whatever its kind, with background
propagation (``jobframework/reconciler.go`` ``handleWorkloadAfterDeactivatedPolicy``); a pod group's
reconciler deletes the group's Pods. A Workload no enabled integration runs is deleted by nothing, and the
decision is rejected, never reported applied."""

from __future__ import annotations

from typing import Any

import pytest
from fixtures.decision_workers import collecting
from fixtures.watched_jobs import configured

from connectors.k8s.mirror import Mirror
from connectors.k8s.pod_group import IS_GROUP_ANNOTATION
from connectors.k8s.retention import RetentionEnforcer
from events import objects as o
from events import schema as ev

KEY = "ns/wl"
DECISION = 41


class Client:
    """Records every delete (kind, name, uid precondition, propagation); each succeeds."""

    def __init__(self) -> None:
        self.deleted: list[tuple[str, str, str, str]] = []

    async def delete(self, resource: Any, name: str, namespace: str = "", *, uid: str = "",
                     resource_version: str = "", propagation: str = "Background") -> bytes:
        assert namespace == "ns"
        self.deleted.append((resource.kind, name, uid, propagation))
        return b"{}"


def _ref(api_version: str, kind: str, name: str, *, controller: bool = True) -> o.OwnerReference:
    return o.OwnerReference(api_version=api_version, kind=kind, name=name, uid=f"{name}-uid",
                            controller=controller)


def _enforcer(frameworks: list[str], *owners: o.OwnerReference, annotations: dict[str, str] | None = None,
              external: tuple[str, ...] = ()) -> tuple[RetentionEnforcer, Client, list[ev.AnyEvent], Mirror]:
    """The enforcer over a mirror holding a Configuration enabling ``frameworks`` (the SparkApplication's
    alpha gate on; ``external``: its ``integrations.externalFrameworks``) and a Workload owned by ``owners``,
    Kueue having decided RetentionExpired(target Job) for it."""
    mirror = configured({"integrations": {"frameworks": frameworks, "externalFrameworks": list(external)},
                         "featureGates": {"SparkApplicationIntegration": True}})
    wl = o.Workload(metadata=o.ObjectMeta(name="wl", namespace="ns", uid="wl-uid",
                                          owner_references=list(owners), annotations=annotations or {}),
                    spec=o.WorkloadSpec(queue_name="lq"))
    mirror.apply(ev.Record(mirror.offset + 1, ev.ObjectUpserted(time=9, key=KEY, uid="wl-uid", obj=wl)))
    mirror.state.workloads[KEY].retention_target = "Job"
    mirror.pending[KEY] = {DECISION: "RetentionExpired"}
    client = Client()
    enforcer, appended = collecting(RetentionEnforcer, client, mirror)
    return enforcer, client, appended, mirror


def _outcomes(appended: list[ev.AnyEvent]) -> list[tuple[str, int, str]]:
    return [(type(e).__name__, e.decision, getattr(e, "reason", ""))  # type: ignore[attr-defined]
            for e in appended]


@pytest.mark.asyncio
async def test_a_jobset_owned_workload_has_its_jobset_deleted() -> None:
    enforcer, client, appended, _ = _enforcer(["jobset.x-k8s.io/jobset"],
                                              _ref("jobset.x-k8s.io/v1alpha2", "JobSet", "js"))
    await enforcer.sync(KEY)
    assert client.deleted == [("JobSet", "js", "js-uid", "Background")]
    assert _outcomes(appended) == [("DecisionApplied", DECISION, "")]
    assert enforcer.stats.jobs_deleted == 1


@pytest.mark.asyncio
@pytest.mark.parametrize(("framework", "api_version", "kind"), [
    ("kubeflow.org/mpijob", "kubeflow.org/v2beta1", "MPIJob"),
    ("kubeflow.org/pytorchjob", "kubeflow.org/v1", "PyTorchJob"),
    ("ray.io/rayjob", "ray.io/v1", "RayJob"),
    ("ray.io/raycluster", "ray.io/v1", "RayCluster"),
    ("workload.codeflare.dev/appwrapper", "workload.codeflare.dev/v1beta2", "AppWrapper"),
    ("trainer.kubeflow.org/trainjob", "trainer.kubeflow.org/v1alpha1", "TrainJob"),
    ("sparkoperator.k8s.io/sparkapplication", "sparkoperator.k8s.io/v1beta2", "SparkApplication"),
    ("pod", "v1", "Pod"),
])
async def test_the_controller_of_any_integrated_kind_is_deleted(framework: str, api_version: str,
                                                                 kind: str) -> None:
    enforcer, client, appended, _ = _enforcer([framework], _ref(api_version, kind, "owner"))
    await enforcer.sync(KEY)
    assert client.deleted == [(kind, "owner", "owner-uid", "Background")]
    assert _outcomes(appended) == [("DecisionApplied", DECISION, "")]


@pytest.mark.asyncio
async def test_a_plain_job_is_deleted_as_before() -> None:
    enforcer, client, appended, mirror = _enforcer(["batch/job"], _ref("batch/v1", "Job", "train"))
    train = o.Job(metadata=o.ObjectMeta(name="train", namespace="ns", uid="train-uid"), spec=o.JobSpec())
    mirror.apply(ev.Record(mirror.offset + 1, ev.ObjectUpserted(time=9, key=train.key, uid="train-uid",
                                                                obj=train)))
    await enforcer.sync(KEY)
    assert client.deleted == [("Job", "train", "train-uid", "Background")]
    assert _outcomes(appended) == [("DecisionApplied", DECISION, "")]


@pytest.mark.asyncio
async def test_a_pod_group_has_its_pods_deleted_not_the_set_holding_them() -> None:
    """Kueue's pod reconciler deletes the group's Pods; the StatefulSet (or LeaderWorkerSet) keeping the group
    stays."""
    enforcer, client, appended, _ = _enforcer(
        ["statefulset"], _ref("apps/v1", "StatefulSet", "web", controller=False),
        _ref("v1", "Pod", "web-0", controller=False), _ref("v1", "Pod", "web-1", controller=False),
        annotations={IS_GROUP_ANNOTATION: "true"})
    await enforcer.sync(KEY)
    assert client.deleted == [("Pod", "web-0", "web-0-uid", "Background"),
                              ("Pod", "web-1", "web-1-uid", "Background")]
    assert _outcomes(appended) == [("DecisionApplied", DECISION, "")]


@pytest.mark.asyncio
async def test_a_leaderworkerset_group_has_its_pods_deleted() -> None:
    enforcer, client, _, _ = _enforcer(
        ["leaderworkerset.x-k8s.io/leaderworkerset"],
        _ref("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "lws"),
        _ref("v1", "Pod", "lws-0", controller=False), annotations={IS_GROUP_ANNOTATION: "true"})
    await enforcer.sync(KEY)
    assert client.deleted == [("Pod", "lws-0", "lws-0-uid", "Background")]


@pytest.mark.asyncio
@pytest.mark.parametrize(("frameworks", "owners", "annotations", "why"), [
    (["batch/job"], (_ref("jobset.x-k8s.io/v1alpha2", "JobSet", "js"),), None, "JobSet js"),
    (["batch/job"], (), None, "no owner"),
    (["batch/job"], (_ref("example.com/v1", "Thing", "t"),), None, "Thing t"),
    (["pod"], (), {IS_GROUP_ANNOTATION: "true"}, "no Pods"),
])
async def test_an_owner_no_enabled_integration_runs_is_not_deleted_and_the_decision_is_rejected(
        frameworks: list[str], owners: tuple[o.OwnerReference, ...], annotations: dict[str, str] | None,
        why: str) -> None:
    enforcer, client, appended, _ = _enforcer(frameworks, *owners, annotations=annotations)
    await enforcer.sync(KEY)
    assert client.deleted == []
    assert _outcomes(appended) == [("DecisionRejected", DECISION, "UnknownWorkloadOwner")]
    assert why in appended[0].message  # type: ignore[attr-defined]
    assert enforcer.stats.jobs_deleted == 0


@pytest.mark.asyncio
async def test_an_owner_of_an_external_kind_is_not_deleted_though_its_kind_has_a_built_in_ones_name() -> None:
    """A Workload of a kind an external controller runs for Kueue (``integrations.externalFrameworks``, here a
    ``Job`` of another group, as Volcano's): its own controller carries the retention out, as no reconciler of
    Kueue's runs that kind; kueue-es deletes nothing, least of all the batch/v1 Job of that name."""
    enforcer, client, appended, _ = _enforcer(["batch/job"], _ref("batch.volcano.sh/v1alpha1", "Job", "vj"),
                                              external=("Job.v1alpha1.batch.volcano.sh",))
    await enforcer.sync(KEY)
    assert client.deleted == []
    assert _outcomes(appended) == [("DecisionRejected", DECISION, "UnknownWorkloadOwner")]
    assert "batch.volcano.sh/v1alpha1 Job vj" in appended[0].message  # type: ignore[attr-defined]


def test_kueue_es_manifests_grant_deleting_every_kind_retention_deletes() -> None:
    """Each kind the enforcer may delete (``job_selection.OWNER_RESOURCES``) has a ``delete`` grant in the
    ClusterRole ``kueue-es manifests`` writes: without one the apiserver answers 403 and nothing is deleted."""
    from connectors.k8s import job_selection
    from connectors.k8s.manifests import cluster_role

    rules = cluster_role("kueue-es")["rules"]
    for resource in job_selection.OWNER_RESOURCES.values():
        assert any(resource.group in r["apiGroups"] and resource.plural in r["resources"] and "delete" in r["verbs"]
                   and "resourceNames" not in r for r in rules), resource.plural


@pytest.mark.asyncio
async def test_a_delete_the_apiserver_forbids_is_rejected_not_retried() -> None:
    """A 403 (an install whose role does not grant the delete) cannot succeed when tried again: the decision gets
    its outcome, rejected with the apiserver's words, and nothing is counted deleted."""
    from connectors.k8s.errors import Forbidden

    enforcer, client, appended, _ = _enforcer(["jobset.x-k8s.io/jobset"],
                                              _ref("jobset.x-k8s.io/v1alpha2", "JobSet", "js"))

    async def forbidden(*args: Any, **kwargs: Any) -> bytes:
        raise Forbidden('jobsets.jobset.x-k8s.io "js" is forbidden', 403, "Forbidden")

    client.delete = forbidden  # type: ignore[method-assign]
    await enforcer.sync(KEY)
    assert _outcomes(appended) == [("DecisionRejected", DECISION, "Forbidden")]
    assert enforcer.stats.jobs_deleted == 0
