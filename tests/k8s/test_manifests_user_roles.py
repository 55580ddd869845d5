"""The user-facing ClusterRoles `kueue-es manifests` installs, as Kueue's installation creates them: Kueue's
rbac.md binds ``kueue-batch-admin-role`` (all namespaces) and ``kueue-batch-user-role`` (a RoleBinding per
namespace), which aggregate the per-kind editor and viewer roles by their labels
``rbac.kueue.x-k8s.io/batch-admin`` / ``batch-user``; each per-kind role also carries
``rbac.kueue.x-k8s.io/role: <kind>-<editor|viewer>`` (Kueue #11205), and the read-only ones the labels that
aggregate them into Kubernetes' own ``admin``/``edit``/``view`` (#10482)."""

from __future__ import annotations

from typing import Any

import pytest

from connectors.k8s import manifests
from connectors.k8s.resources import KUEUE_RESOURCES
from kueue_es.commands.manifests import documents

ADMIN, USER = "kueue-batch-admin-role", "kueue-batch-user-role"


def _cluster_roles(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == "ClusterRole"}


def _aggregated(roles: dict[str, dict[str, Any]], name: str) -> list[dict[str, Any]]:
    """The rules Kubernetes' ClusterRole aggregation controller gives ``name``: those of every ClusterRole
    whose labels match one of its selectors."""
    selectors = [s["matchLabels"] for s in roles[name]["aggregationRule"]["clusterRoleSelectors"]]
    return [rule for role in roles.values() for rule in role.get("rules", [])
            if any(sel.items() <= role["metadata"].get("labels", {}).items() for sel in selectors)]


def _grants(rules: list[dict[str, Any]], verb: str, group: str, resource: str) -> bool:
    return any(group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"] for r in rules)


@pytest.fixture(scope="module")
def roles() -> dict[str, dict[str, Any]]:
    return _cluster_roles(manifests.everything())


def test_the_batch_roles_aggregate_the_per_kind_roles_by_kueues_labels(roles) -> None:
    assert roles[ADMIN]["aggregationRule"] == {
        "clusterRoleSelectors": [{"matchLabels": {"rbac.kueue.x-k8s.io/batch-admin": "true"}}]}
    assert roles[USER]["aggregationRule"] == {
        "clusterRoleSelectors": [{"matchLabels": {"rbac.kueue.x-k8s.io/batch-user": "true"}}]}
    assert roles[ADMIN]["rules"] == [] and roles[USER]["rules"] == []  # the aggregation controller fills them


def test_a_batch_admin_manages_every_kueue_kind_and_a_batch_user_views_queues_and_workloads(roles) -> None:
    admin, user = _aggregated(roles, ADMIN), _aggregated(roles, USER)
    for r in KUEUE_RESOURCES:
        for verb in ("create", "delete", "get", "list", "patch", "update", "watch"):
            assert _grants(admin, verb, "kueue.x-k8s.io", r.plural), (verb, r.plural)
    for plural in ("workloads", "localqueues"):
        for verb in ("get", "list", "watch"):
            assert _grants(user, verb, "kueue.x-k8s.io", plural), (verb, plural)
        assert not _grants(user, "create", "kueue.x-k8s.io", plural), plural
        assert _grants(user, "get", "kueue.x-k8s.io", f"{plural}/status")
    for plural in ("clusterqueues", "resourceflavors", "cohorts", "topologies", "admissionchecks"):
        assert not _grants(user, "get", "kueue.x-k8s.io", plural), plural  # cluster-scoped: admins' only
    assert _grants(user, "get", "visibility.kueue.x-k8s.io", "localqueues/pendingworkloads")
    assert not _grants(user, "get", "visibility.kueue.x-k8s.io", "clusterqueues/pendingworkloads")
    assert _grants(admin, "list", "visibility.kueue.x-k8s.io", "clusterqueues/pendingworkloads")
    assert _grants(admin, "list", "visibility.kueue.x-k8s.io", "localqueues/pendingworkloads")


def test_both_manage_the_jobs_of_every_integration(roles) -> None:
    for name in (ADMIN, USER):
        rules = _aggregated(roles, name)
        for group, plural in [("batch", "jobs"), ("jobset.x-k8s.io", "jobsets"), ("kubeflow.org", "mpijobs"),
                              ("kubeflow.org", "pytorchjobs"), ("kubeflow.org", "jaxjobs"),
                              ("ray.io", "rayjobs"), ("ray.io", "rayclusters"), ("ray.io", "rayservices"),
                              ("leaderworkerset.x-k8s.io", "leaderworkersets"),
                              ("workload.codeflare.dev", "appwrappers"),
                              ("trainer.kubeflow.org", "trainjobs"),
                              ("sparkoperator.k8s.io", "sparkapplications")]:
            for verb in ("create", "delete", "get", "list", "patch", "update", "watch"):
                assert _grants(rules, verb, group, plural), (name, verb, plural)
            assert _grants(rules, "get", group, f"{plural}/status"), (name, plural)
        assert not _grants(rules, "create", "", "pods")  # Kueue has no role for the pod integration's kinds


def test_the_per_kind_roles_carry_kueues_names_and_labels(roles) -> None:
    cq_editor, cq_viewer = roles["kueue-clusterqueue-editor-role"], roles["kueue-clusterqueue-viewer-role"]
    assert cq_editor["metadata"]["labels"] == {"rbac.kueue.x-k8s.io/role": "clusterqueue-editor",
                                               "rbac.kueue.x-k8s.io/batch-admin": "true"}
    assert cq_viewer["metadata"]["labels"] == {"rbac.kueue.x-k8s.io/role": "clusterqueue-viewer",
                                               "rbac.kueue.x-k8s.io/batch-admin": "true",
                                               "rbac.authorization.k8s.io/aggregate-to-admin": "true"}
    assert cq_viewer["rules"] == [
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["clusterqueues"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["clusterqueues/status"], "verbs": ["get"]}]
    assert roles["kueue-localqueue-viewer-role"]["metadata"]["labels"] == {
        "rbac.kueue.x-k8s.io/role": "localqueue-viewer", "rbac.kueue.x-k8s.io/batch-admin": "true",
        "rbac.kueue.x-k8s.io/batch-user": "true", "rbac.authorization.k8s.io/aggregate-to-view": "true",
        "rbac.authorization.k8s.io/aggregate-to-edit": "true",
        "rbac.authorization.k8s.io/aggregate-to-admin": "true"}
    assert roles["kueue-job-editor-role"]["metadata"]["labels"] == {
        "rbac.kueue.x-k8s.io/role": "job-editor", "rbac.kueue.x-k8s.io/batch-admin": "true",
        "rbac.kueue.x-k8s.io/batch-user": "true"}
    assert roles["kueue-cohort-editor-role"]["rules"] == [  # Kueue's cohort roles grant no status
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["cohorts"],
         "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]}]
    assert roles["kueue-pending-workloads-lq-viewer-role"]["rules"] == [
        {"apiGroups": ["visibility.kueue.x-k8s.io"], "resources": ["localqueues/pendingworkloads"],
         "verbs": ["get", "list", "watch"]}]
    per_kind = [n for n, r in roles.items() if "rbac.kueue.x-k8s.io/role" in r["metadata"].get("labels", {})]
    assert all(n.startswith("kueue-") and n.endswith("-role") for n in per_kind)
    assert all(roles[n]["metadata"]["labels"]["rbac.kueue.x-k8s.io/role"] == n[len("kueue-"):-len("-role")]
               for n in per_kind)
    # an editor and a viewer per Kueue kind and per job kind (15), and the two pending-workloads viewers
    assert len(per_kind) == 2 * (len(KUEUE_RESOURCES) + 15) + 2


def test_the_rbac_part_carries_them_too() -> None:
    assert {ADMIN, USER, "kueue-workload-viewer-role"} <= _cluster_roles(documents("rbac")).keys()
