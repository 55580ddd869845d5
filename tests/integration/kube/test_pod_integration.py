"""Kueue's plain-Pod integration against the real apiserver: kueue-es's Pod webhook (registered for this test's
namespaces only) and the connector with the Kueue Configuration's ``pod`` framework on.

A queued Pod in a managed namespace is stored gated (``kueue.x-k8s.io/admission``), labelled
``kueue.x-k8s.io/managed=true`` and with Kueue's finalizer; it gets its Workload ``pod-<name>-<hash>`` (owned by
it) and, once that is admitted, is ungated with the flavor's node labels as its nodeSelector. A Pod in a namespace
the ``managedJobsNamespaceSelector`` leaves out, or without a queue name, is left alone. There is no kubelet: the
test plays it, and the Pod that succeeds finishes its Workload and loses the finalizer. A Pod whose Workload is
preempted is marked ``TerminationTarget`` and deleted, and the Pod that preempted it starts. A Pod's Workload
carries the ``resource-in-use`` finalizer: deleted, it holds until its Pod is stopped. A gated Pod's Workload
follows its priority-class and queue labels; a Pod behind an admission check is told what it waits for.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from typing import Any

import msgspec
import pytest
from kubehelp import (
    connect,
    create,
    eventually,
    get,
    kueue_es,
    namespace,
    pod_webhooks,
    priority_class,
    provisioning_check,
    queues,
    scheduling_gates,
    versions,
)

from connectors.k8s import crds, pod_sync
from connectors.k8s.errors import NotFound
from connectors.k8s.resources import BY_KIND, PROVISIONING_REQUESTS
from kueue_es.scheduler.config import load_config
from projections.metrics import families

pytestmark = pytest.mark.kube
PODS, NAMESPACES = BY_KIND["Pod"], BY_KIND["Namespace"]
Q = "kueue.x-k8s.io/queue-name"
GATE = "kueue.x-k8s.io/admission"
GATES = [GATE, "kueue.x-k8s.io/topology"]
"""Under Kueue's default TopologyAwareScheduling the webhook also adds the topology gate, lifted at start here."""


def _pod(ns: str, name: str, labels: dict[str, str] | None = None, cpu: str = "1") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "labels": labels or {}},
            "spec": {"restartPolicy": "Never",
                     "containers": [{"name": "c", "image": "busybox:1.36", "command": ["sleep", "10"],
                                     "resources": {"requests": {"cpu": cpu}}}]}}


@contextlib.asynccontextmanager
async def _pod_webhook(kc, tmp_path, sfx: str, config):
    """The Pod webhooks (:func:`kubehelp.pod_webhooks`) for the namespaces labelled ``kueue-es-pod-test=<sfx>``."""
    await crds.install(kc)
    async with pod_webhooks(kc, tmp_path / "certs", "kueue-es-pod-test", sfx, config) as server:
        yield server


async def _label(kc, ns: str, labels: dict[str, str]) -> None:
    await kc.patch(NAMESPACES, ns, {"metadata": {"labels": labels}})


async def _webhook_in_effect(kc, ns: str) -> None:
    """Wait until a queued Pod created in ``ns`` would be gated: the apiserver picks the configuration up
    asynchronously."""

    async def effective() -> bool:
        with contextlib.suppress(Exception):
            out = await kc.request("POST", PODS.collection_path(ns), query=[("dryRun", "All")],
                                   body=_pod(ns, "probe", {Q: "user-queue"}))
            return GATE in scheduling_gates(msgspec.json.decode(out))
        return False

    await eventually(effective, what="the pod webhook in effect")


@pytest.mark.asyncio
async def test_a_queued_pod_is_gated_gets_its_workload_starts_once_admitted_and_finishes_it(
        kube_apiserver, tmp_path) -> None:
    sfx = secrets.token_hex(3)
    config = load_config({"integrations": {"frameworks": ["batch/job", "pod"]},
                          "managedJobsNamespaceSelector": {"matchLabels": {f"managed-{sfx}": "yes"}}})
    async with await connect(kube_apiserver) as kc, _pod_webhook(kc, tmp_path, sfx, config):
        q = await queues(kc, "pods", {"cpu": 1}, sfx=sfx, flavor_labels={"pool": "a"})
        await _label(kc, q.ns, {"kueue-es-pod-test": sfx, f"managed-{sfx}": "yes"})
        outside = await namespace(kc, "pods-out", labels={"kueue-es-pod-test": sfx})

        await _webhook_in_effect(kc, q.ns)

        created = await create(kc, _pod(q.ns, "single", {Q: "user-queue"}))
        assert scheduling_gates(created) == GATES
        assert created["metadata"]["labels"]["kueue.x-k8s.io/managed"] == "true"
        assert created["metadata"]["finalizers"] == ["kueue.x-k8s.io/managed"]
        unqueued = await create(kc, _pod(q.ns, "unqueued"))
        elsewhere = await create(kc, _pod(outside, "elsewhere", {Q: "user-queue"}))
        for untouched in (unqueued, elsewhere):
            assert not scheduling_gates(untouched) and "finalizers" not in untouched["metadata"]
            assert "kueue.x-k8s.io/managed" not in untouched["metadata"].get("labels", {})

        async with kueue_es(kc, tmp_path / "log", config=config) as (connector, journal):
            wl_name = pod_sync.workload_name("single", created["metadata"]["uid"])

            async def started() -> dict[str, Any] | None:
                pod = await get(kc, "Pod", "single", q.ns)
                return pod if not scheduling_gates(pod) else None

            pod = await eventually(started, what="the pod ungated once its workload is admitted")
            assert pod["spec"]["nodeSelector"] == {"pool": "a"}
            assert pod["metadata"]["labels"]["kueue.x-k8s.io/podset"] == "main"
            wl = await get(kc, "Workload", wl_name, q.ns)
            assert wl["metadata"]["ownerReferences"][0] | {"uid": ""} == {
                "apiVersion": "v1", "kind": "Pod", "name": "single", "uid": "", "controller": True,
                "blockOwnerDeletion": True}
            assert [ps["count"] for ps in wl["spec"]["podSets"]] == [1]
            assert wl["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]
            assert wl["status"]["admission"]["clusterQueue"] == q.cq
            assert connector.pods is not None and connector.pods.stats.created == 1

            def gate_removals() -> list[Any]:
                return next(f.samples for f in families(journal.mirror.state)
                            if f.spec.name == "kueue_pod_scheduling_gate_removal_seconds")

            (labels, counts, _), = await eventually(gate_removals,
                                                    what="the admission gate's removal observed")
            assert labels == (GATE, q.cq, "false") and counts[-1] == 1, "timed from the Admitted transition"
            ours = {k for k in journal.mirror.state.workloads if k.partition("/")[0] in (q.ns, outside)}
            assert ours == {f"{q.ns}/{wl_name}"}, "the unqueued pod and the pod outside the managed namespaces got none"

            # no kubelet here: play it — the pod ran and succeeded
            await kc.patch(PODS, "single", {"status": {"phase": "Succeeded", "message": "done"}}, q.ns,
                           subresource="status")

            async def finished() -> dict[str, Any] | None:
                got = await get(kc, "Workload", wl_name, q.ns)
                cond = next((c for c in got["status"].get("conditions", []) if c["type"] == "Finished"), None)
                return cond if cond and cond["status"] == "True" else None

            cond = await eventually(finished, what="the workload finished")
            assert (cond["reason"], cond["message"]) == ("Succeeded", "done")

            async def finalized() -> bool:
                return not (await get(kc, "Pod", "single", q.ns))["metadata"].get("finalizers")

            await eventually(finalized, what="Kueue's finalizer gone from the pod")

            async def released() -> bool:
                return not (await get(kc, "Workload", wl_name, q.ns))["metadata"].get("finalizers")

            await eventually(released, what="the finished workload's resource-in-use finalizer gone")
            for untouched in ("unqueued",):
                assert not (await get(kc, "Pod", untouched, q.ns))["metadata"].get("finalizers")


@pytest.mark.asyncio
async def test_a_preempted_pod_is_marked_and_deleted_and_its_workload_goes_with_it(kube_apiserver, tmp_path) -> None:
    sfx = secrets.token_hex(3)
    config = load_config({"integrations": {"frameworks": ["pod"]}})
    async with await connect(kube_apiserver) as kc, _pod_webhook(kc, tmp_path, sfx, config):
        q = await queues(kc, "pods-pre", {"cpu": 1}, sfx=sfx,
                         preemption={"withinClusterQueue": "LowerPriority"})
        await _label(kc, q.ns, {"kueue-es-pod-test": sfx})
        await create(kc, priority_class(f"low-{sfx}", 10))
        await create(kc, priority_class(f"high-{sfx}", 1000))

        await _webhook_in_effect(kc, q.ns)
        async with kueue_es(kc, tmp_path / "log", config=config) as (_connector, _journal):
            low = await create(kc, _pod(q.ns, "low", {Q: "user-queue", "kueue.x-k8s.io/priority-class": f"low-{sfx}"}))

            async def ungated(name: str) -> bool:
                return not scheduling_gates(await get(kc, "Pod", name, q.ns))

            await eventually(lambda: ungated("low"), what="the low-priority pod started")
            await create(kc, _pod(q.ns, "high", {Q: "user-queue", "kueue.x-k8s.io/priority-class": f"high-{sfx}"}))

            async def gone(name: str) -> bool:
                try:
                    await get(kc, "Pod", name, q.ns)
                except NotFound:
                    return True
                return False

            await eventually(lambda: gone("low"), what="the preempted pod deleted (its finalizer dropped)")
            await eventually(lambda: ungated("high"), what="the high-priority pod started in its place")
            low_wl = pod_sync.workload_name("low", low["metadata"]["uid"])
            await eventually(lambda: gone_workload(kc, q.ns, low_wl), what="the preempted pod's workload deleted")
            # Stopped once: one Stopped Event in this namespace (not the connector's count, which takes in the
            # Pods other tests left running in this session's apiserver, that a connector on a new log stops)
            events = msgspec.json.decode(await kc.request("GET", f"/api/v1/namespaces/{q.ns}/events"))["items"]
            stopped = [e for e in events if e["involvedObject"]["kind"] == "Pod" and e["reason"] == "Stopped"]
            assert [(e["involvedObject"]["name"], e["reportingComponent"]) for e in stopped] == [
                ("low", "pod-kueue-controller")]


async def gone_workload(kc, ns: str, name: str) -> bool:
    try:
        await get(kc, "Workload", name, ns)
    except NotFound:
        return True
    return False


@pytest.mark.asyncio
async def test_a_pod_group_is_held_until_complete_then_admitted_as_one_workload_and_ungated(
        kube_apiserver, tmp_path) -> None:
    sfx = secrets.token_hex(3)
    config = load_config({"integrations": {"frameworks": ["batch/job", "pod"]}})
    group = {Q: "user-queue", "kueue.x-k8s.io/pod-group-name": "trio"}
    async with await connect(kube_apiserver) as kc, _pod_webhook(kc, tmp_path, sfx, config):
        q = await queues(kc, "podgroup", {"cpu": 3}, sfx=sfx, flavor_labels={"pool": "a"})
        await _label(kc, q.ns, {"kueue-es-pod-test": sfx})

        def member(name: str, cpu: str) -> dict[str, Any]:
            pod = _pod(q.ns, name, group, cpu=cpu)
            pod["metadata"]["annotations"] = {"kueue.x-k8s.io/pod-group-total-count": "3"}
            return pod

        await _webhook_in_effect(kc, q.ns)
        async with kueue_es(kc, tmp_path / "log", config=config):
            first = await create(kc, member("a", "1"))
            assert scheduling_gates(first) == GATES and "kueue.x-k8s.io/role-hash" in first["metadata"]["annotations"]
            await create(kc, member("b", "1"))
            await asyncio.sleep(2)
            with pytest.raises(NotFound):  # two of three: no Workload yet
                await get(kc, "Workload", "trio", q.ns)
            await create(kc, member("c", "500m"))

            async def all_started() -> list[dict[str, Any]] | None:
                pods = [await get(kc, "Pod", n, q.ns) for n in "abc"]
                return pods if not any(scheduling_gates(p) for p in pods) else None

            pods = await eventually(all_started, what="every pod of the group ungated")
            assert {p["spec"]["nodeSelector"]["pool"] for p in pods} == {"a"}
            wl = await get(kc, "Workload", "trio", q.ns)
            assert wl["metadata"]["annotations"]["kueue.x-k8s.io/is-group-workload"] == "true"
            assert sorted(ps["count"] for ps in wl["spec"]["podSets"]) == [1, 2]
            assert sorted(r["name"] for r in wl["metadata"]["ownerReferences"]) == ["a", "b", "c"]
            assert wl["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]
            for n in "abc":  # no kubelet here: play it — every pod of the group succeeded
                await kc.patch(PODS, n, {"status": {"phase": "Succeeded"}}, q.ns, subresource="status")

            async def released() -> dict[str, Any] | None:
                got = await get(kc, "Workload", "trio", q.ns)
                return None if got["metadata"].get("finalizers") else got

            done = await eventually(released, what="the finished group workload's resource-in-use finalizer gone")
            (cond,) = [c for c in done["status"]["conditions"] if c["type"] == "Finished"]
            assert (cond["status"], cond["message"]) == ("True", "Pods succeeded: 3/3.")


@pytest.mark.asyncio
async def test_a_pod_groups_workload_whose_pods_went_while_kueue_es_was_down_goes_at_its_restart(
        kube_apiserver, tmp_path) -> None:
    """No watch sees the group's last Pods go: the first list after the restart finds none of them, and the
    group's Workload is finished ``OwnerNotFound``, loses its finalizer on the version showing that, and is
    deleted, as the garbage collector would delete it once none of its owners is left."""
    sfx = secrets.token_hex(3)
    config = load_config({"integrations": {"frameworks": ["batch/job", "pod"]}})
    group = {Q: "user-queue", "kueue.x-k8s.io/pod-group-name": "duo"}
    async with await connect(kube_apiserver) as kc, _pod_webhook(kc, tmp_path, sfx, config):
        q = await queues(kc, "podgone", {"cpu": 2}, sfx=sfx, flavor_labels={"pool": "a"})
        await _label(kc, q.ns, {"kueue-es-pod-test": sfx})
        await _webhook_in_effect(kc, q.ns)
        for name in "ab":
            pod = _pod(q.ns, name, group)
            pod["metadata"]["annotations"] = {"kueue.x-k8s.io/pod-group-total-count": "2"}
            await create(kc, pod)
        async with kueue_es(kc, tmp_path / "log", config=config):
            async def started() -> bool:
                return not any([scheduling_gates(await get(kc, "Pod", n, q.ns)) for n in "ab"])

            await eventually(started, what="the group admitted and its pods ungated")
        for name in "ab":  # gone while kueue-es is down: Kueue's finalizer taken off by hand
            await kc.patch(PODS, name, {"metadata": {"finalizers": None}}, q.ns)
            await kc.delete(PODS, name, q.ns)
        wl = await get(kc, "Workload", "duo", q.ns)
        assert wl["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]
        seen: list[dict[str, Any]] = []
        rv = wl["metadata"]["resourceVersion"]

        async def record() -> None:
            async for w in versions(kc, BY_KIND["Workload"], rv, field_selector=f"metadata.namespace={q.ns}"):
                seen.append(w)

        recorder = asyncio.create_task(record())
        try:
            async with kueue_es(kc, tmp_path / "log", config=config):
                async def gone() -> bool:
                    with contextlib.suppress(NotFound):
                        await get(kc, "Workload", "duo", q.ns)
                        return False
                    return True

                await eventually(gone, what="the group's Workload gone at the restart")
                await eventually(lambda: any(not w["metadata"].get("finalizers") for w in seen),
                                 what="the recorder to see the Workload without its finalizer")
        finally:
            recorder.cancel()
        unfinalized = [w for w in seen if not w["metadata"].get("finalizers")]
        assert all([(c["status"], c["reason"]) for c in w["status"]["conditions"] if c["type"] == "Finished"]
                   == [("True", "OwnerNotFound")] for w in unfinalized), "finished before its finalizer went"


PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"


def _prebuilt(ns: str, name: str, pod_sets: list[tuple[str, int, str]]) -> dict[str, Any]:
    """A Workload as a user prebuilds it for Pods like :func:`_pod`: (pod set, count, cpu per pod)."""
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": name, "namespace": ns},
            "spec": {"queueName": "user-queue", "podSets": [
                {"name": ps, "count": count, "template": {"spec": {"restartPolicy": "Never", "containers": [
                    {"name": "c", "image": "busybox:1.36", "resources": {"requests": {"cpu": cpu}}}]}}}
                for ps, count, cpu in pod_sets]}}


async def _workload_names(kc, ns: str) -> list[str]:
    raw = await kc.request("GET", f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads")
    return sorted(w["metadata"]["name"] for w in msgspec.json.decode(raw)["items"])


@pytest.mark.asyncio
async def test_pods_and_a_pod_group_run_on_the_prebuilt_workloads_they_name(kube_apiserver, tmp_path) -> None:
    """A Pod naming a Workload not there yet stays gated with none made; once it is created the Pod adopts it (its
    controller owner, the uid label) and starts on it. A Pod naming one its spec does not match finishes it
    ``OutOfSync`` and stays gated. A pod group's Pods become owners of the Workload they name and start on it."""
    sfx = secrets.token_hex(3)
    config = load_config({"integrations": {"frameworks": ["pod"]}})
    async with await connect(kube_apiserver) as kc, _pod_webhook(kc, tmp_path, sfx, config):
        q = await queues(kc, "pods-prebuilt", {"cpu": 3}, sfx=sfx, flavor_labels={"pool": "a"})
        await _label(kc, q.ns, {"kueue-es-pod-test": sfx})

        await _webhook_in_effect(kc, q.ns)
        group = {Q: "user-queue", "kueue.x-k8s.io/pod-group-name": "duo", PREBUILT: "pre-duo"}

        def member(name: str) -> dict[str, Any]:
            pod = _pod(q.ns, name, group)
            pod["metadata"]["annotations"] = {"kueue.x-k8s.io/pod-group-total-count": "2"}
            return pod

        async with kueue_es(kc, tmp_path / "log", config=config) as (connector, _journal):
            single = await create(kc, _pod(q.ns, "single", {Q: "user-queue", PREBUILT: "pre-single"}))
            await create(kc, _prebuilt(q.ns, "too-big", [("main", 1, "5")]))
            await create(kc, _pod(q.ns, "mismatched", {Q: "user-queue", PREBUILT: "too-big"}))
            members = [await create(kc, member(n)) for n in "ab"]

            async def out_of_sync() -> dict[str, Any] | None:
                got = await get(kc, "Workload", "too-big", q.ns)
                cond = next((c for c in (got.get("status") or {}).get("conditions", []) if c["type"] == "Finished"),
                            None)
                return cond if cond and cond["status"] == "True" else None

            cond = await eventually(out_of_sync, what="the mismatched prebuilt workload finished")
            assert (cond["reason"], cond["message"]) == (
                "OutOfSync", "The prebuilt workload is out of sync with its user job")
            assert await _workload_names(kc, q.ns) == ["too-big"], "none made for the Pods naming theirs"
            assert scheduling_gates(await get(kc, "Pod", "single", q.ns)) == GATES

            await create(kc, _prebuilt(q.ns, "pre-single", [("main", 1, "1")]))
            role = members[0]["metadata"]["annotations"]["kueue.x-k8s.io/role-hash"]
            await create(kc, _prebuilt(q.ns, "pre-duo", [(role, 2, "1")]))

            async def started(name: str) -> dict[str, Any] | None:
                pod = await get(kc, "Pod", name, q.ns)
                return pod if not scheduling_gates(pod) else None

            for name in ("single", "a", "b"):
                pod = await eventually(lambda name=name: started(name), what=f"pod {name} started on its workload")
                assert pod["spec"]["nodeSelector"] == {"pool": "a"}
            wl = await get(kc, "Workload", "pre-single", q.ns)
            assert [(r["kind"], r["name"], r["uid"], r.get("controller")) for r in wl["metadata"]["ownerReferences"]] \
                == [("Pod", "single", single["metadata"]["uid"], True)]
            assert wl["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == single["metadata"]["uid"]
            duo = await get(kc, "Workload", "pre-duo", q.ns)
            assert sorted((r["name"], r.get("controller", False)) for r in duo["metadata"]["ownerReferences"]) == [
                ("a", False), ("b", False)]
            assert duo["status"]["admission"]["clusterQueue"] == q.cq
            assert scheduling_gates(await get(kc, "Pod", "mismatched", q.ns)) == GATES
            assert await _workload_names(kc, q.ns) == ["pre-duo", "pre-single", "too-big"]
            assert connector.pods is not None and connector.pods.stats.created == 0


@pytest.mark.asyncio
async def test_a_deleted_workload_has_its_pod_stopped_before_its_finalizer_lets_it_go(kube_apiserver, tmp_path) -> None:
    """The Workload's ``resource-in-use`` finalizer holds it once deleted until its running Pod is stopped
    (``TerminationTarget`` ``WorkloadDeleted``, deleted); then the Workload goes."""
    sfx = secrets.token_hex(3)
    config = load_config({"integrations": {"frameworks": ["pod"]}})
    async with await connect(kube_apiserver) as kc, _pod_webhook(kc, tmp_path, sfx, config):
        q = await queues(kc, "pods-del", {"cpu": 1}, sfx=sfx)
        await _label(kc, q.ns, {"kueue-es-pod-test": sfx})

        await _webhook_in_effect(kc, q.ns)
        async with kueue_es(kc, tmp_path / "log", config=config) as (connector, _journal):
            pod = await create(kc, _pod(q.ns, "doomed", {Q: "user-queue"}))
            wl_name = pod_sync.workload_name("doomed", pod["metadata"]["uid"])

            async def ungated() -> bool:
                return not scheduling_gates(await get(kc, "Pod", "doomed", q.ns))

            await eventually(ungated, what="the pod started")
            await kc.delete(BY_KIND["Workload"], wl_name, q.ns)

            async def pod_gone() -> bool:
                try:
                    await get(kc, "Pod", "doomed", q.ns)
                except NotFound:
                    return True
                return False

            await eventually(pod_gone, what="the pod of the deleted workload stopped and gone")
            await eventually(lambda: gone_workload(kc, q.ns, wl_name), what="the workload let go")
            events = msgspec.json.decode(await kc.request("GET", f"/api/v1/namespaces/{q.ns}/events"))["items"]
            assert [e["message"] for e in events if e["involvedObject"]["kind"] == "Pod" and e["reason"] == "Stopped"
                    ] == ["Workload is deleted"]
            assert connector.pods is not None and connector.pods.stats.finalizers_removed == 1


def _wpc(name: str, value: int) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": name},
            "value": value}


@pytest.mark.asyncio
async def test_a_gated_pods_workload_follows_its_priority_class_and_queue_labels(kube_apiserver, tmp_path) -> None:
    """As Kueue's reconciler for any job it runs: a changed ``kueue.x-k8s.io/priority-class`` gives the Pod's Workload
    the class and its value (``UpdatedWorkload`` on the Pod); a changed queue name moves the Workload of a gated Pod
    (here out of a LocalQueue that does not exist, into one that admits it). A class that does not exist gets the
    Pod no Workload and the Warning ``WorkloadPriorityClassNotFound``, until the class is there."""
    sfx = secrets.token_hex(3)
    config = load_config({"integrations": {"frameworks": ["pod"]}})
    async with await connect(kube_apiserver) as kc, _pod_webhook(kc, tmp_path, sfx, config):
        q = await queues(kc, "pods-sync", {"cpu": 1}, sfx=sfx)
        await _label(kc, q.ns, {"kueue-es-pod-test": sfx})
        await create(kc, _wpc(f"low-{sfx}", 10))
        await create(kc, _wpc(f"high-{sfx}", 1000))

        await _webhook_in_effect(kc, q.ns)
        async with kueue_es(kc, tmp_path / "log", config=config) as (connector, _journal):
            pc = "kueue.x-k8s.io/priority-class"
            mover = await create(kc, _pod(q.ns, "mover", {Q: "nowhere", pc: f"low-{sfx}"}))
            waiter = await create(kc, _pod(q.ns, "waiter", {Q: "user-queue", pc: f"later-{sfx}"}))
            wl_name = pod_sync.workload_name("mover", mover["metadata"]["uid"])

            async def workload(name: str, want: Any) -> dict[str, Any] | None:
                with contextlib.suppress(NotFound):
                    got = await get(kc, "Workload", name, q.ns)
                    return got if want(got) else None
                return None

            await eventually(lambda: workload(wl_name, lambda w: w["spec"].get("priority") == 10),
                             what="the gated pod's workload, in a queue that does not exist")
            await kc.patch(PODS, "mover", {"metadata": {"labels": {pc: f"high-{sfx}"}}}, q.ns)
            got = await eventually(lambda: workload(wl_name, lambda w: w["spec"].get("priority") == 1000),
                                   what="the workload given the pod's new priority class")
            assert got["spec"]["priorityClassRef"]["name"] == f"high-{sfx}" and got["spec"]["queueName"] == "nowhere"
            await kc.patch(PODS, "mover", {"metadata": {"labels": {Q: "user-queue"}}}, q.ns)

            async def ungated() -> bool:
                return not scheduling_gates(await get(kc, "Pod", "mover", q.ns))

            await eventually(ungated, what="the pod started from the queue it names now")
            assert (await get(kc, "Workload", wl_name, q.ns))["spec"]["queueName"] == "user-queue"

            async def pod_events(reason: str) -> list[dict[str, Any]] | None:
                items = msgspec.json.decode(await kc.request("GET", f"/api/v1/namespaces/{q.ns}/events"))["items"]
                out = [e for e in items if e["involvedObject"]["kind"] == "Pod" and e["reason"] == reason]
                return out or None

            (updated,) = await eventually(lambda: pod_events("UpdatedWorkload"), what="UpdatedWorkload on the pod")
            assert (updated["involvedObject"]["name"], updated["message"]) == (
                "mover", f"Updated workload priority class: {q.ns}/{wl_name}")
            (missing,) = await eventually(lambda: pod_events("WorkloadPriorityClassNotFound"),
                                          what="the missing class reported on the pod")
            assert (missing["type"], missing["involvedObject"]["name"], missing["message"]) == (
                "Warning", "waiter", f'WorkloadPriorityClass "later-{sfx}" not found')
            waiter_wl = pod_sync.workload_name("waiter", waiter["metadata"]["uid"])
            with pytest.raises(NotFound):
                await get(kc, "Workload", waiter_wl, q.ns)
            await create(kc, _wpc(f"later-{sfx}", 5))
            await eventually(lambda: workload(waiter_wl, lambda w: w["spec"].get("priority") == 5),
                             what="the waiting pod's workload, once its class is there")
            assert connector.pods is not None and connector.pods.stats.requeued == 1


def _provisioning(provisioned: str, message: str) -> dict[str, Any]:
    """What the cluster autoscaler writes on a ProvisioningRequest: accepted, capacity there or on its way."""
    now = "2026-01-01T00:00:00Z"
    return {"status": {"conditions": [
        {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "accepted", "lastTransitionTime": now},
        {"type": "Provisioned", "status": provisioned, "reason": "Provisioned" if provisioned == "True" else "Waiting",
         "message": message, "lastTransitionTime": now}]}}


@pytest.mark.asyncio
async def test_a_gated_pod_is_told_what_its_admission_check_waits_for(kube_apiserver, tmp_path) -> None:
    """Kueue's ``UpdatedAdmissionCheck`` on a Pod whose Workload holds quota behind a ProvisioningRequest check, once
    per new message, from ``pod-kueue-controller``; the Pod starts once the capacity is provisioned."""
    sfx = secrets.token_hex(3)
    config = load_config({"integrations": {"frameworks": ["pod"]}})
    async with await connect(kube_apiserver) as kc, _pod_webhook(kc, tmp_path, sfx, config):
        await crds.install(kc, docs=[crds.provisioning_request_crd()])
        check = await provisioning_check(kc, sfx)
        q = await queues(kc, "pods-checks", {"cpu": 1}, sfx=sfx,
                         admissionChecksStrategy={"admissionChecks": [{"name": check}]})
        await _label(kc, q.ns, {"kueue-es-pod-test": sfx})

        await _webhook_in_effect(kc, q.ns)
        async with kueue_es(kc, tmp_path / "log", config=config):
            pod = await create(kc, _pod(q.ns, "checked", {Q: "user-queue"}))
            pr_name = f"{pod_sync.workload_name('checked', pod['metadata']['uid'])}-{check}-1"

            async def request() -> bool:
                with contextlib.suppress(NotFound):
                    await kc.get(PROVISIONING_REQUESTS, pr_name, q.ns)
                    return True
                return False

            async def told(n: int) -> list[dict[str, Any]] | None:
                items = msgspec.json.decode(await kc.request("GET", f"/api/v1/namespaces/{q.ns}/events"))["items"]
                found = sorted((e for e in items if e["involvedObject"]["kind"] == "Pod"
                                and e["reason"] == "UpdatedAdmissionCheck"), key=lambda e: e["eventTime"])
                return found if len(found) == n else None

            await eventually(request, what="the ProvisioningRequest")
            await kc.patch(PROVISIONING_REQUESTS, pr_name, _provisioning("False", "capacity in 10m"), q.ns,
                           subresource="status")
            (first,) = await eventually(lambda: told(1), what="UpdatedAdmissionCheck on the gated pod")
            assert (first["involvedObject"]["name"], first["reportingComponent"], first["message"]) == (
                "checked", "pod-kueue-controller", f"{check}: capacity in 10m")
            await kc.patch(PROVISIONING_REQUESTS, pr_name, _provisioning("False", "capacity in 5m"), q.ns,
                           subresource="status")
            found = await eventually(lambda: told(2), what="the new message on the gated pod")
            assert found[1]["message"] == f"{check}: capacity in 5m"
            await kc.patch(PROVISIONING_REQUESTS, pr_name, _provisioning("True", "capacity is ready"), q.ns,
                           subresource="status")

            async def ungated() -> bool:
                return not scheduling_gates(await get(kc, "Pod", "checked", q.ns))

            await eventually(ungated, what="the pod started once provisioned")
            assert await told(2) is not None, "nothing more once admitted"


@pytest.mark.asyncio
async def test_a_pods_admission_gate_holds_its_workload_until_removed_from_the_pod(kube_apiserver, tmp_path) -> None:
    """Under ``AdmissionGatedBy`` (beta, on), as for a Job (KEP-6915 covers Pods): a Pod created with
    ``kueue.x-k8s.io/admission-gated-by`` gets a Workload carrying it, which is not admitted although its queue has
    room; the annotation removed from the Pod, the Workload's goes too and the Pod starts."""
    sfx = secrets.token_hex(3)
    config = load_config({"integrations": {"frameworks": ["pod"]}})
    admission_gate = "kueue.x-k8s.io/admission-gated-by"
    async with await connect(kube_apiserver) as kc, _pod_webhook(kc, tmp_path, sfx, config):
        q = await queues(kc, "pods-gated", {"cpu": 1}, sfx=sfx)
        await _label(kc, q.ns, {"kueue-es-pod-test": sfx})
        await _webhook_in_effect(kc, q.ns)
        doc = _pod(q.ns, "held", {Q: "user-queue"})
        doc["metadata"]["annotations"] = {admission_gate: "example.com/approver"}
        created = await create(kc, doc)
        wl_name = pod_sync.workload_name("held", created["metadata"]["uid"])
        async with kueue_es(kc, tmp_path / "log", config=config):

            async def gated() -> dict[str, Any] | None:
                with contextlib.suppress(NotFound):
                    wl = await get(kc, "Workload", wl_name, q.ns)
                    conditions = (wl.get("status") or {}).get("conditions") or []
                    if any(c["type"] == "QuotaReserved" and c["reason"] == "AdmissionGated" for c in conditions):
                        return wl
                return None

            wl = await eventually(gated, what="the pod's workload held by its admission gate")
            assert wl["metadata"]["annotations"][admission_gate] == "example.com/approver"
            await asyncio.sleep(1)
            assert scheduling_gates(await get(kc, "Pod", "held", q.ns)), "not started while gated"
            await kc.patch(PODS, "held", {"metadata": {"annotations": {admission_gate: None}}}, q.ns)

            async def ungated() -> bool:
                return not scheduling_gates(await get(kc, "Pod", "held", q.ns))

            await eventually(ungated, what="the pod started once its gate was removed")
            wl = await get(kc, "Workload", wl_name, q.ns)
            assert admission_gate not in (wl["metadata"].get("annotations") or {})
