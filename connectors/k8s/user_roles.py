"""The user-facing ClusterRoles Kueue's installation creates, which its RBAC guide tells administrators to
bind: ``kueue-batch-admin-role`` (manage every Kueue kind and the jobs of every integration, see every queue's
pending workloads) and ``kueue-batch-user-role`` (manage jobs, view LocalQueues, Workloads and their queue's
pending workloads). Both are empty ClusterRoles with an ``aggregationRule``: Kubernetes fills them from the
per-kind editor and viewer roles labelled ``rbac.kueue.x-k8s.io/batch-admin`` / ``batch-user``, so a role
added later joins them.

Built from one table of kinds rather than a copy of Kueue's files, by audience:

* a cluster-scoped Kueue kind (ClusterQueue, ResourceFlavor, ...) is the batch admin's alone; its viewer also
  joins Kubernetes' ``admin`` role;
* a namespaced Kueue kind (LocalQueue, Workload): the admin edits it, a batch user views it; its viewer joins
  Kubernetes' ``view``, ``edit`` and ``admin`` roles (a namespace's own users may read their queues);
* the job of each integration: both edit and view it; its viewer joins ``view``, ``edit`` and ``admin``.

Every per-kind role carries ``rbac.kueue.x-k8s.io/role: <kind>-<editor|viewer>``, a selector for one's own
aggregated roles. Names take the ``kueue-`` prefix of Kueue's default installation, which the guide binds.
"""

from __future__ import annotations

from typing import Any

from connectors.k8s import job_selection
from connectors.k8s.resources import KUEUE_RESOURCES, Resource

PREFIX = "kueue-"
ROLE_LABEL = "rbac.kueue.x-k8s.io/role"
BATCH_ADMIN = "rbac.kueue.x-k8s.io/batch-admin"
BATCH_USER = "rbac.kueue.x-k8s.io/batch-user"
VISIBILITY_GROUP = "visibility.kueue.x-k8s.io"
EDIT = ["create", "delete", "get", "list", "patch", "update", "watch"]
VIEW = ["get", "list", "watch"]

_K8S_AGGREGATE = "rbac.authorization.k8s.io/aggregate-to-"
"""+ admin, edit or view: the label Kubernetes' own user-facing roles aggregate."""
_TO_ADMIN = ("admin",)
_TO_ALL = ("view", "edit", "admin")

# audience -> (editor's Kueue labels, viewer's Kueue labels, the Kubernetes roles the viewer joins)
_AUDIENCES: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "cluster": ((BATCH_ADMIN,), (BATCH_ADMIN,), _TO_ADMIN),
    "namespace": ((BATCH_ADMIN,), (BATCH_ADMIN, BATCH_USER), _TO_ALL),
    "job": ((BATCH_ADMIN, BATCH_USER), (BATCH_ADMIN, BATCH_USER), _TO_ALL),
}

_NO_STATUS_RULE = frozenset({"Cohort"})
"""Kinds whose roles grant no ``status`` although the kind has one (Kueue's cohort roles)."""


def _kinds() -> list[tuple[Resource, str, bool]]:
    """(resource, audience, whether its roles read its ``status``): the Kueue kinds kueue-es installs, then
    the job kinds of its integrations (not Pods, nor the Deployments and StatefulSets of the pod integration:
    Kueue has no roles for them)."""
    kueue = [(r, "namespace" if r.namespaced else "cluster",
              r.status_subresource and r.kind not in _NO_STATUS_RULE) for r in KUEUE_RESOURCES]
    jobs = [(r, "job", True) for kind, r in job_selection.OWNER_RESOURCES.items() if kind != "Pod"]
    return kueue + jobs


def _role(noun: str, access: str, labels: tuple[str, ...], joins: tuple[str, ...],
          rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": f"{PREFIX}{noun}-{access}-role",
                         "labels": {ROLE_LABEL: f"{noun}-{access}", **dict.fromkeys(labels, "true"),
                                    **{f"{_K8S_AGGREGATE}{k}": "true" for k in joins}}},
            "rules": rules}


def _rules(group: str, plural: str, verbs: list[str], status: bool) -> list[dict[str, Any]]:
    rules = [{"apiGroups": [group], "resources": [plural], "verbs": verbs}]
    if status:
        rules.append({"apiGroups": [group], "resources": [f"{plural}/status"], "verbs": ["get"]})
    return rules


def per_kind_roles() -> list[dict[str, Any]]:
    """An editor and a viewer ClusterRole per kind, then the visibility API's pending-workloads viewers."""
    roles = []
    for r, audience, status in _kinds():
        editor, viewer, joins = _AUDIENCES[audience]
        noun = r.kind.lower()
        roles.append(_role(noun, "editor", editor, (), _rules(r.group, r.plural, EDIT, status)))
        roles.append(_role(noun, "viewer", viewer, joins, _rules(r.group, r.plural, VIEW, status)))
    for short, queues, labels in (("cq", "clusterqueues", (BATCH_ADMIN,)),
                                  ("lq", "localqueues", (BATCH_ADMIN, BATCH_USER))):
        roles.append(_role(f"pending-workloads-{short}", "viewer", labels, (),
                           _rules(VISIBILITY_GROUP, f"{queues}/pendingworkloads", VIEW, False)))
    return roles


def batch_role(persona: str, label: str) -> dict[str, Any]:
    """``kueue-batch-<persona>-role``: the union of the per-kind roles labelled ``label``."""
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": f"{PREFIX}batch-{persona}-role"},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {label: "true"}}]},
            "rules": []}


def user_roles() -> list[dict[str, Any]]:
    """What ``kueue-es manifests`` installs for people: the two batch roles, then the roles they aggregate."""
    return [batch_role("admin", BATCH_ADMIN), batch_role("user", BATCH_USER), *per_kind_roles()]

