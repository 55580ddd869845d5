"""Kueue's ``statefulset`` integration against the real apiserver: kueue-es's StatefulSet and Pod webhooks (for this
test's namespaces only) and the connector with ``pod`` and ``statefulset`` among the frameworks.

A StatefulSet naming a queue is stored with its pod template making its pods one serving pod group (group name
``statefulset-<name>-<hash>``, total = replicas, fast admission); its pods are gated by the Pod webhook, the group
gets one Workload of all its replicas as soon as its first pod exists, and once that is admitted every pod is
ungated; they carry no Kueue finalizer (Kueue #8530). The test cluster runs no kube-controller-manager: the test
makes the pods as the StatefulSet controller would (ordinal names, ``apps.kubernetes.io/pod-index``, the StatefulSet
their controller). The validating webhook refuses a resize other than to or from zero and a template change of what
admission looks at (the group's role); scaled to zero, its pods go
as they are deleted, and the group's Workload is put on hold (Kueue v0.20, #12233: QuotaReserved=False ``OnHold``,
its admission gone) and stays: scaled up again to another size, the same Workload is resized to the new replicas
and its hold cleared (#15279). The Workload of a group whose set is gone goes with its pods (also when they end
and go in one burst, the Workload moving on under its let-go). With the
StatefulSet's status revisions (set by the test through the status subresource, as the controller would), the older
revision's pods are let go during a rolling update once the group's Workload is admitted (not before: they stay
gated), the group's Workload is deleted and made anew once none of its pods has its role, and every pod is let go
(ungated) once the StatefulSet is gone, pods it orphaned too (``--cascade=orphan``: found by their group's name).
The StatefulSet is an owner of its group's Workload (Kueue #4799), so a deactivated one stays, same uid, while its
stopped pods are gone and made again, and is admitted again once reactivated.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from kubehelp import (
    connect,
    create,
    eventually,
    get,
    kueue_es,
    pod_webhooks,
    queues,
    scheduling_gates,
    versions,
)

from connectors.k8s import crds
from connectors.k8s.client import KubeClient
from connectors.k8s.errors import Forbidden, NotFound
from connectors.k8s.resources import BY_KIND, STATEFUL_SETS
from connectors.k8s.statefulset_webhook import workload_name
from kueue_es.scheduler.config import load_config

pytestmark = pytest.mark.kube
NAMESPACES = BY_KIND["Namespace"]
PODS = BY_KIND["Pod"]
Q = "kueue.x-k8s.io/queue-name"
GATE = "kueue.x-k8s.io/admission"
FINALIZER = "kueue.x-k8s.io/managed"
REVISION = "controller-revision-hash"


def _statefulset(ns: str, name: str, labels: dict[str, str] | None = None, replicas: int = 2) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": name, "namespace": ns, "labels": labels or {}},
            "spec": {"replicas": replicas, "serviceName": name, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "busybox:1.36",
                                                           "command": ["sleep", "3600"],
                                                           "resources": {"requests": {"cpu": "1"}}}]}}}}


def _replica(sts: dict[str, Any], ordinal: int, revision: str = "") -> dict[str, Any]:
    """A pod as the StatefulSet controller makes one: its template, its ordinal as name suffix and label, and
    ``revision`` (when given) as its ``controller-revision-hash``."""
    meta, name = sts["spec"]["template"]["metadata"], sts["metadata"]["name"]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{name}-{ordinal}", "namespace": sts["metadata"]["namespace"],
                         "labels": {**meta["labels"], "apps.kubernetes.io/pod-index": str(ordinal),
                                    "statefulset.kubernetes.io/pod-name": f"{name}-{ordinal}",
                                    **({REVISION: revision} if revision else {})},
                         "annotations": dict(meta.get("annotations") or {}),
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": name,
                                              "uid": sts["metadata"]["uid"], "controller": True,
                                              "blockOwnerDeletion": True}]},
            "spec": {**sts["spec"]["template"]["spec"], "hostname": f"{name}-{ordinal}", "subdomain": name}}


@pytest.mark.asyncio
async def test_a_queued_statefulsets_pods_are_one_serving_group_admitted_together(kube_apiserver, tmp_path) -> None:
    async with _statefulset_cluster(kube_apiserver, tmp_path, "sts", 2, "web") as (kc, q, config, sts):
        group = workload_name("web")
        template = sts["spec"]["template"]["metadata"]
        assert template["labels"]["kueue.x-k8s.io/pod-group-name"] == group
        assert template["annotations"]["kueue.x-k8s.io/pod-group-total-count"] == "2"
        assert template["annotations"]["kueue.x-k8s.io/pod-group-serving"] == "true"

        # no kube-controller-manager: make the pods as the StatefulSet controller would, one at a time
        first = await create(kc, _replica(sts, 0))
        assert GATE in scheduling_gates(first) and first["metadata"]["labels"]["kueue.x-k8s.io/managed"] == "true"
        assert not first["metadata"].get("finalizers"), "no Kueue finalizer on a pod its parent holds (#8530)"
        async with kueue_es(kc, tmp_path / "log", config=config):
            async def admitted() -> dict[str, Any] | None:
                with contextlib.suppress(Exception):
                    wl = await get(kc, "Workload", group, q.ns)
                    return wl if wl.get("status", {}).get("admission") else None
                return None

            wl = await eventually(admitted, what="the group's workload (fast admission) admitted")
            assert [ps["count"] for ps in wl["spec"]["podSets"]] == [2], "the whole group counted"
            second = await create(kc, _replica(sts, 1))
            assert GATE in scheduling_gates(second)

            async def all_ungated() -> bool:
                return all([not scheduling_gates(await get(kc, "Pod", f"web-{i}", q.ns)) for i in (0, 1)])

            await eventually(all_ungated, what="both pods of the admitted group ungated")
            assert (await get(kc, "Pod", "web-1", q.ns))["spec"]["nodeSelector"] == {"pool": "a"}

            # a template change of what admission looks at is refused, in Kueue's words; one that got past the
            # webhook rolls: the controller deletes web-1 (never placed here, so let go) and makes it anew from
            # the new template, another role than the Workload's; as Kueue, the group leaves it gated rather than
            # starting it with an admission made for another role
            containers = [{**sts["spec"]["template"]["spec"]["containers"][0],
                           "resources": {"requests": {"cpu": "500m"}}}]
            with pytest.raises(Forbidden, match=r"spec\.template\.spec\.containers\[0\]\.resources\.requests: "
                                                r'Invalid value: \{"cpu":"500m"\}: field is immutable'):
                await kc.patch(STATEFUL_SETS, "web", {"spec": {"template": {"spec": {"containers": containers}}}},
                               q.ns)
            updated = _past_the_webhook(sts, containers)
            await kc.delete(PODS, "web-1", q.ns)

            await eventually(lambda: _gone(kc, q.ns, "web-1"), what="the old revision's web-1 let go")
            renewed = await create(kc, _replica(updated, 1))
            role = "kueue.x-k8s.io/role-hash"
            assert renewed["metadata"]["annotations"][role] != first["metadata"]["annotations"][role]
            await asyncio.sleep(2.0)  # the connector's turns over the group, were it to start the new pod
            assert GATE in scheduling_gates(await get(kc, "Pod", "web-1", q.ns)), "another role than the Workload's"
            assert await get(kc, "Workload", group, q.ns), "the Workload stays while web-0 is its own"

        async def validating() -> bool:
            try:
                await kc.patch(STATEFUL_SETS, "web", {"spec": {"replicas": 3}}, q.ns)
            except Forbidden as exc:
                return "spec.replicas: Invalid value: 3: field is immutable" in str(exc)
            return False

        await eventually(validating, what="a resize of the group refused")

        # scaled to zero (allowed), its pods deleted and ended as its controller and the kubelets would end them:
        # with no Kueue finalizer they go, so that the StatefulSet may scale up again
        await kc.patch(STATEFUL_SETS, "web", {"spec": {"replicas": 0}}, q.ns)
        async with kueue_es(kc, tmp_path / "log", config=config):
            for i in (0, 1):
                with contextlib.suppress(NotFound):  # the Workload put on hold: kueue-es may stop the pod first
                    await kc.patch(PODS, f"web-{i}", {"status": {"phase": "Failed"}}, q.ns, subresource="status")
                    await kc.delete(PODS, f"web-{i}", q.ns)

            async def pods_gone() -> bool:
                return all([await _gone(kc, q.ns, f"web-{i}") for i in (0, 1)])

            await eventually(pods_gone, what="the ended pods of the StatefulSet scaled to zero let go")

            # Kueue v0.20 (#12233): the set stays an owner at zero and its Workload is put on hold, its quota given
            # back; it stays once its pods are gone
            async def on_hold() -> dict[str, Any] | None:
                wl = await get(kc, "Workload", group, q.ns)
                reserved = [c for c in wl.get("status", {}).get("conditions", []) if c["type"] == "QuotaReserved"]
                held = reserved and (reserved[0]["status"], reserved[0]["reason"], reserved[0]["message"]) == (
                    "False", "OnHold", "StatefulSet scaled to zero; workload on hold")
                return wl if held and not wl["status"].get("admission") else None

            held = await eventually(on_hold, what="the group's Workload on hold, its admission gone")
            assert "StatefulSet" in [r["kind"] for r in held["metadata"]["ownerReferences"]], "the set still owns it"

            # Kueue's #15279: scaled up again to another size, the same Workload is resized and its hold cleared
            resized = msgspec.json.decode(await kc.patch(STATEFUL_SETS, "web", {"spec": {"replicas": 3}}, q.ns))
            assert resized["spec"]["template"]["metadata"]["annotations"][
                "kueue.x-k8s.io/pod-group-total-count"] == "3"
            for i in range(3):
                await create(kc, _replica(resized, i))

            async def recounted() -> dict[str, Any] | None:
                wl = await get(kc, "Workload", group, q.ns)
                reserved = [c for c in wl.get("status", {}).get("conditions", []) if c["type"] == "QuotaReserved"]
                released = reserved and (reserved[0]["reason"], reserved[0]["message"]) != (
                    "OnHold", "StatefulSet scaled to zero; workload on hold")
                return wl if released and [ps["count"] for ps in wl["spec"]["podSets"]] == [3] else None

            wl = await eventually(recounted, what="the group's Workload resized to 3 replicas and no longer on hold")
            assert wl["metadata"]["uid"] == held["metadata"]["uid"], "the same Workload, not one made anew"
            for i in range(3):
                pod = await get(kc, "Pod", f"web-{i}", q.ns)
                assert not pod["metadata"].get("deletionTimestamp"), "no pod removed as beyond the old count"


async def _revisions(kc: KubeClient, ns: str, name: str, current: str, update: str) -> None:
    """Set the StatefulSet's status revisions, as its controller would in a rolling update."""
    await kc.patch(STATEFUL_SETS, name, {"status": {"replicas": 2, "currentRevision": current,
                                                     "updateRevision": update}}, ns, subresource="status")


async def _webhook_in_effect(kc: KubeClient, ns: str) -> None:
    """Wait until the mutating StatefulSet webhook answers (the apiserver picks configurations up asynchronously):
    a dry-run StatefulSet comes back with its pod group label."""
    async def effective() -> bool:
        with contextlib.suppress(Exception):
            out = msgspec.json.decode(await kc.request(
                "POST", STATEFUL_SETS.collection_path(ns), query=[("dryRun", "All")],
                body=_statefulset(ns, "probe", {Q: "user-queue"})))
            return "kueue.x-k8s.io/pod-group-name" in out["spec"]["template"]["metadata"]["labels"]
        return False

    await eventually(effective, what="the mutating StatefulSet webhook in effect")


@contextlib.asynccontextmanager
async def _statefulset_cluster(kube_apiserver: Any, tmp_path: Path, queue: str, cpu: int,
                               name: str) -> AsyncIterator[tuple[KubeClient, Any, Any, dict[str, Any]]]:
    """A namespace with a queue of ``cpu`` CPUs, the pod and StatefulSet webhooks in effect for it, and a
    StatefulSet ``name`` naming the queue, stored (mutated by the webhook): (client, queues, config, StatefulSet)."""
    sfx = secrets.token_hex(3)
    config = load_config({"integrations": {"frameworks": ["batch/job", "pod", "statefulset"]}})
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        async with pod_webhooks(kc, tmp_path / "certs", "kueue-es-sts-test", sfx, config):
            q = await queues(kc, queue, {"cpu": cpu}, sfx=sfx, flavor_labels={"pool": "a"})
            await kc.patch(NAMESPACES, q.ns, {"metadata": {"labels": {"kueue-es-sts-test": sfx}}})
            await _webhook_in_effect(kc, q.ns)
            sts = msgspec.json.decode(await kc.create(STATEFUL_SETS, _statefulset(q.ns, name, {Q: "user-queue"}),
                                                      q.ns))
            yield kc, q, config, sts


def _past_the_webhook(sts: dict[str, Any], containers: list[dict[str, Any]]) -> dict[str, Any]:
    """The StatefulSet with ``containers`` in its template, as stored had the update not met the validating
    webhook (which refuses it, as Kueue's: a queued group's role is fixed; registered fail-open by ``kueue-es
    manifests``, it can miss one): the pods of the new revision, of another role, are made from it."""
    template = {**sts["spec"]["template"], "spec": {**sts["spec"]["template"]["spec"], "containers": containers}}
    return {**sts, "spec": {**sts["spec"], "template": template}}


async def _gone(kc: KubeClient, ns: str, name: str, kind: str = "Pod") -> bool:
    with contextlib.suppress(NotFound):
        await get(kc, kind, name, ns)
        return False
    return True


@pytest.mark.asyncio
async def test_the_statefulset_reconciler_lets_go_of_the_older_revision_and_the_group_gets_a_new_workload(
        kube_apiserver, tmp_path) -> None:
    async with _statefulset_cluster(kube_apiserver, tmp_path, "sts-rev", 2, "db") as (kc, q, config, sts):
        group = workload_name("db")
        await _revisions(kc, q.ns, "db", "db-v1", "db-v1")
        for i in (0, 1):
            await create(kc, _replica(sts, i, "db-v1"))
        async with kueue_es(kc, tmp_path / "log", config=config):
            async def started(names: tuple[str, ...]) -> bool:
                return all([not scheduling_gates(await get(kc, "Pod", n, q.ns)) for n in names])

            await eventually(lambda: started(("db-0", "db-1")), what="the admitted group's pods ungated")
            first = await get(kc, "Workload", group, q.ns)
            assert not any([(await get(kc, "Pod", f"db-{i}", q.ns))["metadata"].get("finalizers")
                            for i in (0, 1)]), "no Kueue finalizer on the StatefulSet's pods (#8530)"

            # a rolling update that changes what admission looks at (past the webhook): the older revision's pods,
            # already started by the admitted group, are the controller's to replace (nothing holds them)
            containers = [{**sts["spec"]["template"]["spec"]["containers"][0],
                           "resources": {"requests": {"cpu": "500m"}}}]
            updated = _past_the_webhook(sts, containers)
            await _revisions(kc, q.ns, "db", "db-v1", "db-v2")

            async def let_go(names: tuple[str, ...]) -> bool:
                pods = [await get(kc, "Pod", n, q.ns) for n in names]
                return all(not scheduling_gates(p) and FINALIZER not in (p["metadata"].get("finalizers") or [])
                           for p in pods)

            await kc.delete(PODS, "db-1", q.ns)
            await eventually(lambda: _gone(kc, q.ns, "db-1"), what="the old db-1 gone at once")
            renewed = await create(kc, _replica(updated, 1, "db-v2"))
            assert GATE in scheduling_gates(renewed) and not renewed["metadata"].get("finalizers")
            await asyncio.sleep(2.0)  # the connector's turns over the group, were it to let the new pod go
            assert GATE in scheduling_gates(await get(kc, "Pod", "db-1", q.ns)), "the update revision's: kept"
            assert (await get(kc, "Workload", group, q.ns))["metadata"]["uid"] == first["metadata"]["uid"]

            # the last pod of the Workload's role goes: the Workload no longer matches the group and is
            # deleted; a new one, made from the new pods, is admitted and starts them
            await kc.delete(PODS, "db-0", q.ns)
            await eventually(lambda: _gone(kc, q.ns, "db-0"), what="the old db-0 gone at once")

            async def renewed_admitted() -> dict[str, Any] | None:
                with contextlib.suppress(NotFound):
                    wl = await get(kc, "Workload", group, q.ns)
                    if wl["metadata"]["uid"] != first["metadata"]["uid"] and wl.get("status", {}).get("admission"):
                        return wl
                return None

            second = await eventually(renewed_admitted, what="a new workload for the new revision admitted")
            role = renewed["metadata"]["annotations"]["kueue.x-k8s.io/role-hash"]
            assert [(ps["name"], ps["count"]) for ps in second["spec"]["podSets"]] == [(role, 2)]
            await create(kc, _replica(updated, 0, "db-v2"))
            await eventually(lambda: started(("db-0", "db-1")), what="the new revision's pods started")
            await _revisions(kc, q.ns, "db", "db-v2", "db-v2")

            # one deleted with --cascade=orphan: the garbage collector takes the pods' ownerReferences before
            # the StatefulSet goes (the test does, as it would); its pod, gated (asking more than the queue
            # has, its group's Workload is never admitted), is let go, found by its group's name
            big = _statefulset(q.ns, "cache", {Q: "user-queue"}, replicas=1)
            big["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "3"}}
            cache = msgspec.json.decode(await kc.create(STATEFUL_SETS, big, q.ns))
            await _revisions(kc, q.ns, "cache", "cache-v1", "cache-v1")
            orphan = await create(kc, _replica(cache, 0, "cache-v1"))
            assert GATE in scheduling_gates(orphan) and not orphan["metadata"].get("finalizers")
            await kc.patch(PODS, "cache-0", {"metadata": {"ownerReferences": None}}, q.ns)
            await asyncio.sleep(1.0)
            assert not await let_go(("cache-0",)), "its StatefulSet still there: kept gated"
            await kc.delete(STATEFUL_SETS, "cache", q.ns)

            async def released() -> bool:  # ungated; then, running on no admission, stopped (and, no finalizer, gone)
                with contextlib.suppress(NotFound):
                    return await let_go(("cache-0",))
                return True

            await eventually(released, what="the pods a StatefulSet orphaned let go")


@pytest.mark.asyncio
async def test_a_pending_groups_workload_is_rewritten_in_place_once_none_of_its_pods_has_its_role(
        kube_apiserver, tmp_path) -> None:
    """As newer Kueue's reconciler: the group's Workload, holding no quota (too little here), no longer matches once
    the last pod of its role is replaced by one of the changed template; that one gated, the Workload is rewritten
    in place (same uid) with the new role and the new pod among its owners, not deleted. Meanwhile, the rolling
    update under way, the current revision's pods are not let go, the Workload not being admitted (Kueue v0.19.7
    #16401, v0.20.0 #16329): they stay gated (with no Kueue finalizer, Kueue #8530)."""
    async with _statefulset_cluster(kube_apiserver, tmp_path, "sts-upd", 1, "kv") as (kc, q, config, sts):
        group = workload_name("kv")
        await _revisions(kc, q.ns, "kv", "kv-v1", "kv-v1")
        for i in (0, 1):
            await create(kc, _replica(sts, i, "kv-v1"))
        async with kueue_es(kc, tmp_path / "log", config=config):
            async def made() -> dict[str, Any] | None:
                with contextlib.suppress(NotFound):
                    return await get(kc, "Workload", group, q.ns)
                return None

            first = await eventually(made, what="the group's workload made (2 cpu: not admitted on 1)")
            containers = [{**sts["spec"]["template"]["spec"]["containers"][0],
                           "resources": {"requests": {"cpu": "600m"}}}]  # 1.2 cpu: still too much
            updated = _past_the_webhook(sts, containers)  # the webhook refuses it (see the first test)
            # a rolling update: the pods replaced one by one, highest ordinal first; the Workload not admitted,
            # the current revision's pods are not let go (so neither run on no quota nor, ungated while not
            # admitted, are stopped: the group is never empty)
            await _revisions(kc, q.ns, "kv", "kv-v1", "kv-v2")
            renewed = {}
            for i in (1, 0):
                await kc.delete(PODS, f"kv-{i}", q.ns)
                await eventually(lambda i=i: _gone(kc, q.ns, f"kv-{i}"), what=f"the old kv-{i} gone")
                renewed[i] = await create(kc, _replica(updated, i, "kv-v2"))
                if i == 1:
                    await asyncio.sleep(2.0)  # the connector's turns over the group, were it to let kv-0 go
                    assert not await _gone(kc, q.ns, "kv-0"), "not let go, then stopped as not admitted"
                    held = await get(kc, "Pod", "kv-0", q.ns)
                    assert GATE in scheduling_gates(held) and not held["metadata"].get("finalizers"), (
                        "the current revision's pod: held until the Workload is admitted")
            role = renewed[1]["metadata"]["annotations"]["kueue.x-k8s.io/role-hash"]

            async def rewritten() -> dict[str, Any] | None:
                wl = await get(kc, "Workload", group, q.ns)
                return wl if [ps["name"] for ps in wl["spec"]["podSets"]] == [role] else None

            wl = await eventually(rewritten, what="the workload rewritten with the new role")
            assert wl["metadata"]["uid"] == first["metadata"]["uid"], "updated in place, not made anew"
            assert [ps["count"] for ps in wl["spec"]["podSets"]] == [2]
            owners = {r["uid"] for r in wl["metadata"]["ownerReferences"]}
            assert renewed[1]["metadata"]["uid"] in owners, "the group's pod when it was rewritten: an owner"
            assert not (wl.get("status") or {}).get("admission")


@pytest.mark.asyncio
async def test_the_workload_of_a_group_whose_pods_all_end_and_go_at_once_goes_with_them(kube_apiserver, tmp_path) -> None:
    """An admitted StatefulSet deleted (no garbage collector runs here: the test ends and deletes its pods), its pods
    ended and deleted in one burst, so that the connector's pass may find none of them left: the group's Workload is
    let go (finished ``OwnerNotFound``, unfinalized) and deleted
    as the garbage collector would, even when the Workload moves on under that let-go — the status writes of what
    the group's passes just recorded (``WaitingForReplacementPods``, ``Finished``) refuse it for the older version:
    it is done on the newer one (the flake of the test above, where the same race left the Workload behind). As
    Kueue takes the finalizer off the version its Finished write returned, no version of the Workload loses the
    finalizer before it shows ``Finished``."""
    async with _statefulset_cluster(kube_apiserver, tmp_path, "sts-end", 2, "db") as (kc, q, config, sts):
        group = workload_name("db")
        for i in (0, 1):
            await create(kc, _replica(sts, i))
        seen: list[dict[str, Any]] = []
        rv = (await kc.list(BY_KIND["Workload"])).metadata.resource_version

        async def record() -> None:
            async for wl in versions(kc, BY_KIND["Workload"], rv, field_selector=f"metadata.namespace={q.ns}"):
                if wl["metadata"]["name"] == group:
                    seen.append(wl)

        recorder = asyncio.create_task(record())
        async with kueue_es(kc, tmp_path / "log", config=config):
            async def admitted() -> bool:
                with contextlib.suppress(NotFound):
                    return bool((await get(kc, "Workload", group, q.ns)).get("status", {}).get("admission"))
                return False

            await eventually(admitted, what="the group's Workload admitted")
            await kc.delete(STATEFUL_SETS, "db", q.ns)  # scaled to zero, the set would keep it on hold
            await asyncio.gather(*(kc.patch(PODS, f"db-{i}", {"status": {"phase": "Failed"}}, q.ns,
                                            subresource="status") for i in (0, 1)))
            await asyncio.gather(*(kc.delete(PODS, f"db-{i}", q.ns) for i in (0, 1)))

            await eventually(lambda: _gone(kc, q.ns, group, "Workload"), what="the group's Workload gone with its pods")
            await eventually(lambda: any(not w["metadata"].get("finalizers") for w in seen),
                             what="the recorder to see the Workload without its finalizer")
        recorder.cancel()
        unfinalized = [w for w in seen if "kueue.x-k8s.io/resource-in-use" not in w["metadata"].get("finalizers", [])]
        assert all(any(c["type"] == "Finished" and c["status"] == "True" for c in w["status"].get("conditions", []))
                   for w in unfinalized), [(w["metadata"]["resourceVersion"], w["status"].get("conditions"))
                                           for w in unfinalized]


@pytest.mark.asyncio
async def test_a_deactivated_statefulsets_workload_stays_while_its_pods_are_remade(kube_apiserver, tmp_path) -> None:
    """statefulset_test.go "shouldn't delete deactivated Workload" (Kueue #4799): the set is an owner of its group's
    Workload (not the controller), so the Workload deactivated, its pods stopped and gone, stays. The pods the
    controller makes again join it, and reactivated it is admitted again with the same uid. Had it gone with its
    pods, the remade ones would have got a new, active Workload (another uid). No garbage collector runs here."""
    async with _statefulset_cluster(kube_apiserver, tmp_path, "sts-off", 2, "app") as (kc, q, config, sts):
        group = workload_name("app")
        for i in (0, 1):
            await create(kc, _replica(sts, i))
        async with kueue_es(kc, tmp_path / "log", config=config):
            async def owned_and_admitted() -> dict[str, Any] | None:
                with contextlib.suppress(NotFound):
                    wl = await get(kc, "Workload", group, q.ns)
                    kinds = [r["kind"] for r in wl["metadata"].get("ownerReferences") or []]
                    if "StatefulSet" in kinds and (wl.get("status") or {}).get("admission"):
                        return wl
                return None

            async def started() -> bool:
                return all([not scheduling_gates(await get(kc, "Pod", f"app-{i}", q.ns)) for i in (0, 1)])

            first = await eventually(owned_and_admitted, what="the group's Workload admitted, the set an owner")
            # as Kueue's e2e waits for ready replicas: a pod gated when deactivated stays (not Kueue's to stop)
            await eventually(started, what="both pods started before the Workload is deactivated")
            refs = first["metadata"]["ownerReferences"]
            assert [r["kind"] for r in refs] == ["Pod", "Pod", "StatefulSet"], "the set after the pods"
            assert refs[-1] == {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "app",
                                "uid": sts["metadata"]["uid"]}, "an owner, not the controller"

            await kc.patch(BY_KIND["Workload"], group, {"spec": {"active": False}}, q.ns)

            async def pods_gone() -> bool:
                return all([await _gone(kc, q.ns, f"app-{i}") for i in (0, 1)])

            await eventually(pods_gone, what="the deactivated Workload's pods stopped and gone")
            for i in (0, 1):  # the controller makes them again, gated by the Pod webhook
                assert GATE in scheduling_gates(await create(kc, _replica(sts, i)))

            await kc.patch(BY_KIND["Workload"], group, {"spec": {"active": True}}, q.ns)
            await eventually(started, what="the remade pods started once the Workload is reactivated and admitted")
            wl = await get(kc, "Workload", group, q.ns)
            assert wl["metadata"]["uid"] == first["metadata"]["uid"], "the same Workload, not one made anew"
            assert wl["spec"].get("active", True) and wl["status"].get("admission")
