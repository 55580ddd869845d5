"""End to end on a real apiserver: a TAS Job behind a ProvisioningRequest check, two-phase admission, node replacement.

The cluster has no scheduler, kubelet, job controller or cluster autoscaler: the test plays them. It creates the
Nodes (labels, allocatable, Ready), the Job's pods (from the Job's template once it runs), binds them to the node
their ungated node selector names, sets the ProvisioningRequest's conditions and a Node's readiness.

1. first pass, in a ``kueue-es run --kube`` process: the Workload holds quota with ``delayedTopologyRequest: Pending`` and no topology, is not
   Admitted, its Job stays suspended; a ProvisioningRequest and its PodTemplate appear (attempt 1);
2. that ``kueue-es run --kube`` process is stopped (SIGTERM); the autoscaler marks the request Provisioned;
   kueue-es starts again in another process (the test's) from the same log: it replays, relists, goes on;
3. second pass: the check is Ready (with the request's podSetUpdates), the admission gets its
   ``topologyAssignment`` (``delayedTopologyRequest: Ready``) in the tightest rack, Admitted=True; the Job is
   unsuspended with the TAS gate; its pods are ungated one per assigned node (rank mode, by completion index);
4. node failure: the node of pod 0 goes NotReady and the pod fails: ``status.unhealthyNodes`` lists the node, the
   assignment is rewritten in place onto the free node of the same rack, the Workload stays admitted (no
   eviction, the Job keeps running), and the pod the job controller creates again is ungated onto that node.

And a pod ungated onto a node cordoned before it was bound: Kueue's node controller fails it (TerminatedByKueue),
and its successor is ungated onto the other node.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
from kubehelp import (
    connect,
    create,
    eventually,
    get,
    kueue_config_file,
    kueue_es,
    provisioning_check,
    queues,
    versions,
)

from connectors.k8s import crds
from connectors.k8s.jobs import workload_name
from connectors.k8s.resources import BY_KIND, POD_TEMPLATES, PROVISIONING_REQUESTS
from events import objects as o
from events import schema as ev
from events.tas_assignment import decode

pytestmark = pytest.mark.kube
REPO = Path(__file__).resolve().parents[3]
KUEUE = "kueue.x-k8s.io/v1beta2"
RACK = "cloud.example.com/rack"
HOSTNAME = "kubernetes.io/hostname"
GATE = "kueue.x-k8s.io/topology"
NOW = "2026-01-01T00:00:00Z"
WAIT = 120.0  # generous: two cores shared with many other test runs
NODES, PODS, JOBS, WORKLOADS = BY_KIND["Node"], BY_KIND["Pod"], BY_KIND["Job"], BY_KIND["Workload"]


def _cond(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == type_), None)


def _true(obj: dict[str, Any], type_: str) -> bool:
    c = _cond(obj, type_)
    return c is not None and c["status"] == "True"


def _domains(psa: dict[str, Any]) -> list[tuple[tuple[str, ...], int]]:
    ta = msgspec.convert(psa["topologyAssignment"], o.TopologyAssignment)
    return [(tuple(d.values), d.count) for d in decode(ta)]


@contextlib.asynccontextmanager
async def _process(cluster, log_dir: Path):
    """``kueue-es run --kube`` over ``log_dir`` as its own process (no leader election, no health server); stopped
    with SIGTERM (its graceful stop) when the block ends."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUEUE_ES_")}
    env.update({"KUEUE_ES_KUBE_LEADER_ELECTION": "false", "KUEUE_ES_KUBE_WATCH_TIMEOUT_S": "30",
                "KUEUE_ES_SCHEDULER_KUEUE_CONFIG": str(kueue_config_file())})
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kueue_es", "run", "--kube", "--kubeconfig", cluster.kubeconfig, "--log", str(log_dir),
        "--health-port", "0", cwd=REPO, env=env, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE)
    assert proc.stderr is not None
    tail: list[bytes] = []

    async def drain() -> None:
        assert proc.stderr is not None
        while line := await proc.stderr.readline():
            tail[:] = [*tail[-30:], line]

    drainer = asyncio.create_task(drain())
    try:
        yield proc
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        try:
            code = await asyncio.wait_for(proc.wait(), WAIT)
        except TimeoutError:
            proc.kill()
            raise
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(drainer, 5)
        assert code == 0, b"".join(tail).decode(errors="replace")


async def _node(kc, name: str, rack: str, pool: str) -> None:
    await create(kc, {"apiVersion": "v1", "kind": "Node",
                      "metadata": {"name": name, "labels": {RACK: rack, HOSTNAME: name, "pool": pool}}})
    await _node_ready(kc, name, True)


async def _node_ready(kc, name: str, ready: bool) -> None:
    """What the kubelet and the node lifecycle controller do: the Ready condition, and the ``not-ready`` taint
    (the apiserver puts it on every new Node) only while the node is not Ready."""
    taints = None if ready else [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]
    await kc.patch(NODES, name, {"spec": {"taints": taints}})
    cond = {"type": "Ready", "status": "True" if ready else "False", "reason": "KubeletReady" if ready else
            "KubeletNotReady", "message": "test", "lastHeartbeatTime": NOW, "lastTransitionTime": NOW}
    await kc.patch(NODES, name, {"status": {"allocatable": {"cpu": "1", "pods": "10"},
                                            "capacity": {"cpu": "1", "pods": "10"}, "conditions": [cond]}},
                   subresource="status")


async def _setup(kc, sfx: str) -> dict[str, Any]:
    pool, topo = f"tas-{sfx}", f"topo-{sfx}"
    racks = {"a": [f"{sfx}-a1", f"{sfx}-a2", f"{sfx}-a3"], "b": [f"{sfx}-b1", f"{sfx}-b2", f"{sfx}-b3", f"{sfx}-b4"]}
    for rack, names in racks.items():
        for n in names:
            await _node(kc, n, f"{sfx}-rack-{rack}", pool)
    await create(kc, {"apiVersion": KUEUE, "kind": "Topology", "metadata": {"name": topo},
                      "spec": {"levels": [{"nodeLabel": RACK}, {"nodeLabel": HOSTNAME}]}})
    check = await provisioning_check(kc, sfx)
    ns, _, cq, _ = await queues(kc, "tas", {"cpu": 8}, sfx=sfx, flavor_labels={"pool": pool},
                                flavor_spec={"topologyName": topo},
                                admissionChecksStrategy={"admissionChecks": [{"name": check}]})
    return {"ns": ns, "check": check, "cq": cq, "racks": racks, "pool": pool}


def _job(ns: str, name: str, count: int) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": ns, "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
        "spec": {
            "suspend": True, "parallelism": count, "completions": count, "completionMode": "Indexed",
            "template": {
                "metadata": {"labels": {"app": name}, "annotations": {"kueue.x-k8s.io/podset-required-topology": RACK}},
                "spec": {"restartPolicy": "Never",
                         "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "60"],
                                         "resources": {"requests": {"cpu": "1"}}}]},
            },
        },
    }


async def _job_pod(kc, job: dict[str, Any], index: int) -> dict[str, Any]:
    """What the job controller creates: a pod from the Job's current template, with its completion index."""
    tmpl = job["spec"]["template"]
    meta, name = tmpl.get("metadata") or {}, job["metadata"]["name"]
    labels = {**(meta.get("labels") or {}), "batch.kubernetes.io/job-completion-index": str(index),
              "batch.kubernetes.io/job-name": name}
    annotations = {**(meta.get("annotations") or {}), "batch.kubernetes.io/job-completion-index": str(index)}
    return await create(kc, {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"{name}-{index}-{secrets.token_hex(3)}", "namespace": job["metadata"]["namespace"],
                     "labels": labels, "annotations": annotations,
                     "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name,
                                          "uid": job["metadata"]["uid"], "controller": True}]},
        "spec": tmpl["spec"]})


async def _bind_and_run(kc, pod: dict[str, Any]) -> None:
    """What the scheduler and the kubelet do: bind the pod to the node its selector names, run it."""
    ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
    node = pod["spec"]["nodeSelector"][HOSTNAME]
    await kc.request("POST", PODS.object_path(name, ns, "binding"), body={
        "apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node}})
    await kc.patch(PODS, name, {"status": {"phase": "Running"}}, ns, subresource="status")


async def _watch_workload(kc, ns: str, name: str, rv: str, seen: list[dict[str, Any]]) -> None:
    """Every version of the Workload the apiserver stores after ``rv`` (a transient status is not missed)."""
    async for obj in versions(kc, WORKLOADS, rv):
        if obj["metadata"].get("name") == name and obj["metadata"].get("namespace") == ns:
            seen.append(obj)


@pytest.mark.asyncio
async def test_tas_job_with_provisioning_request_two_phases_restart_and_node_replacement(
        kube_apiserver, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        await crds.install(kc, docs=[crds.provisioning_request_crd()])
        sfx = secrets.token_hex(3)
        env = await _setup(kc, sfx)
        ns, check, racks = env["ns"], env["check"], env["racks"]
        log_dir = tmp_path / "log"

        async def workload() -> dict[str, Any] | None:
            with contextlib.suppress(Exception):
                return await get(kc, "Workload", wl_name, ns)
            return None

        # --- first pass, in a process of its own: quota only, the topology waits; a ProvisioningRequest ---------
        async with _process(kube_apiserver, log_dir):
            job = await create(kc, _job(ns, "train", 2))
            wl_name = workload_name("train", job["metadata"]["uid"])
            wl_key = f"{ns}/{wl_name}"

            async def reserved() -> dict[str, Any] | None:
                wl = await workload()
                return wl if wl is not None and _true(wl, "QuotaReserved") else None

            wl = await eventually(reserved, WAIT, "QuotaReserved on the TAS Workload")
            assert wl["spec"]["podSets"][0]["topologyRequest"] == {
                "required": RACK, "podIndexLabel": "batch.kubernetes.io/job-completion-index"}
            (psa,) = wl["status"]["admission"]["podSetAssignments"]
            assert psa["delayedTopologyRequest"] == "Pending" and "topologyAssignment" not in psa
            assert not _true(wl, "Admitted")
            assert [(c["name"], c["state"]) for c in wl["status"]["admissionChecks"]] == [(check, "Pending")]

            async def check_active() -> bool:  # kueue-es is the check's controller
                ac = await get(kc, "AdmissionCheck", check)
                conds = (ac.get("status") or {}).get("conditions") or []
                return [(c["type"], c["status"], c["reason"]) for c in conds] == [("Active", "True", "Active")]

            await eventually(check_active, WAIT, "the AdmissionCheck's Active condition")
            pr_name = f"{wl_name}-{check}-1"

            async def request() -> dict[str, Any] | None:
                with contextlib.suppress(Exception):
                    return msgspec.json.decode(await kc.get(PROVISIONING_REQUESTS, pr_name, ns))
                return None

            pr = await eventually(request, WAIT, "the ProvisioningRequest")
            assert pr["spec"]["provisioningClassName"] == "check-capacity.autoscaling.x-k8s.io"
            assert pr["metadata"]["ownerReferences"][0]["uid"] == wl["metadata"]["uid"]
            (ps,) = pr["spec"]["podSets"]
            assert ps["count"] == 2

            async def template_owned_by_request() -> dict[str, Any] | None:
                pt = msgspec.json.decode(await kc.get(POD_TEMPLATES, ps["podTemplateRef"]["name"], ns))
                owners = pt["metadata"].get("ownerReferences") or []
                return pt if [r["uid"] for r in owners if r.get("controller")] == [pr["metadata"]["uid"]] else None

            pt = await eventually(template_owned_by_request, WAIT, "the PodTemplate, owned by the request")
            assert not pt["template"]["spec"].get("schedulingGates"), "no TAS gate before the topology is known"
            assert pt["template"]["spec"]["nodeSelector"] == {"pool": env["pool"]}
            assert (await get(kc, "Job", "train", ns))["spec"]["suspend"] is True

        # --- kueue-es is down; the autoscaler provisions ------------------------------------------------------
        await kc.patch(PROVISIONING_REQUESTS, pr_name, {"status": {"conditions": [
            {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "accepted",
             "lastTransitionTime": NOW},
            {"type": "Provisioned", "status": "True", "reason": "Provisioned", "message": "capacity is ready",
             "lastTransitionTime": NOW}]}}, ns, subresource="status")

        # --- another process: the log replays, the relist sees the request Provisioned; the second pass ----------
        async with kueue_es(kc, log_dir, sync_timeout=WAIT) as (connector, journal):
            async def admitted() -> dict[str, Any] | None:
                wl = await workload()
                return wl if wl is not None and _true(wl, "Admitted") else None

            wl = await eventually(admitted, WAIT, "Admitted=True after the second pass")
            (state,) = wl["status"]["admissionChecks"]
            assert state["state"] == "Ready" and state["message"] == "capacity is ready"
            assert state["podSetUpdates"] == [{"name": "main", "annotations": {
                "autoscaling.x-k8s.io/consume-provisioning-request": pr_name,
                "autoscaling.x-k8s.io/provisioning-class-name": "check-capacity.autoscaling.x-k8s.io"}}]
            (psa,) = wl["status"]["admission"]["podSetAssignments"]
            assert psa["delayedTopologyRequest"] == "Ready"
            a1, a2, a3 = racks["a"]
            # BestFit: the tightest rack that fits (3 free nodes, not 4), its nodes in name order
            assert _domains(psa) == [((a1,), 1), ((a2,), 1)]

            async def running() -> dict[str, Any] | None:
                j = await get(kc, "Job", "train", ns)
                return j if not j["spec"].get("suspend") else None

            job = await eventually(running, WAIT, "the Job to be unsuspended")
            tmpl = job["spec"]["template"]
            assert tmpl["spec"]["schedulingGates"] == [{"name": GATE}]
            assert tmpl["spec"]["nodeSelector"] == {"pool": env["pool"]}
            assert tmpl["metadata"]["annotations"]["kueue.x-k8s.io/workload"] == wl_name
            assert tmpl["metadata"]["annotations"]["autoscaling.x-k8s.io/consume-provisioning-request"] == pr_name
            assert tmpl["metadata"]["labels"]["kueue.x-k8s.io/podset"] == "main"

            # the job controller creates the pods; the ungater places each on the node its rank falls in: pod 1,
            # alone at first, goes to the second domain (greedy filling would have put it on the first)
            async def ungated(name: str) -> dict[str, Any] | None:
                p = await get(kc, "Pod", name, ns)
                return p if not p["spec"].get("schedulingGates") else None

            placed = {}
            for index, node in ((1, a2), (0, a1)):
                p = await _job_pod(kc, job, index)
                p = await eventually(lambda n=p["metadata"]["name"]: ungated(n), WAIT, f"pod {index} to be ungated")
                assert p["spec"]["nodeSelector"] == {"pool": env["pool"], HOSTNAME: node}
                placed[str(index)] = p
                await _bind_and_run(kc, p)
            # counted once the ungater reads its patches' answers, which may come after the test saw the pods
            await eventually(lambda: connector.ungater.stats.ungated == 2, WAIT, "the ungater to count both pods")

            # --- node failure: a1 goes NotReady; its pod fails; the node is replaced in place ------------------
            seen: list[dict[str, Any]] = []
            rv = (await get(kc, "Workload", wl_name, ns))["metadata"]["resourceVersion"]
            watcher = asyncio.create_task(_watch_workload(kc, ns, wl_name, rv, seen))
            try:
                await _node_ready(kc, a1, False)
                await kc.patch(PODS, placed["0"]["metadata"]["name"], {"status": {"phase": "Failed"}}, ns,
                               subresource="status")

                async def replaced() -> dict[str, Any] | None:
                    wl = await workload()
                    if wl is None or wl["status"].get("unhealthyNodes"):
                        return None
                    (psa,) = wl["status"]["admission"]["podSetAssignments"]
                    return wl if _domains(psa) == [((a2,), 1), ((a3,), 1)] else None

                wl = await eventually(replaced, WAIT, "the assignment rewritten onto the free node of rack a")
                await eventually(lambda: any(v["status"].get("unhealthyNodes") == [{"name": a1}] for v in seen),
                                 WAIT, "status.unhealthyNodes listing the failed node")
            finally:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher
            assert _true(wl, "Admitted") and not _true(wl, "Evicted")
            assert not any(_true(v, "Evicted") or not _true(v, "Admitted") for v in seen)
            assert (await get(kc, "Job", "train", ns))["spec"].get("suspend") is False

            # the job controller replaces the failed pod: it is ungated onto the new node
            again = await _job_pod(kc, await get(kc, "Job", "train", ns), 0)
            again = await eventually(lambda: ungated(again["metadata"]["name"]), WAIT, "the new pod to be ungated")
            assert again["spec"]["nodeSelector"] == {"pool": env["pool"], HOSTNAME: a3}
            node = await get(kc, "Node", a3)
            assert node["metadata"]["labels"][RACK] == f"{sfx}-rack-a"

            # --- the log: one reservation, one request, every decision applied, none rejected ------------------
            await eventually(lambda: not journal.mirror.pending.get(wl_key), WAIT, "no pending decisions")
            records = [r async for r in journal.log.read()]
            mine = [r for r in records if r.event.key == wl_key]
            kinds = [type(r.event).__name__ for r in mine if isinstance(r.event, ev.Decision)]
            assert kinds.count("QuotaReserved") == 1 and kinds.count("ProvisioningRequestCreated") == 1
            at = {k: [r.offset for r in mine if type(r.event).__name__ == k]
                  for k in ("UnhealthyNodesChanged", "TopologyAssigned")}
            assert len(at["TopologyAssigned"]) == 2, "the second pass, then the replacement"
            assert at["TopologyAssigned"][0] < at["UnhealthyNodesChanged"][0] < at["TopologyAssigned"][1]
            assert "WorkloadEvicted" not in kinds
            decided = {r.offset for r in mine if isinstance(r.event, ev.Decision)}
            applied = sorted(r.event.decision for r in mine if isinstance(r.event, ev.DecisionApplied))
            assert applied == sorted(decided)
            assert not [r for r in mine if isinstance(r.event, ev.DecisionRejected)]
        # The Nodes stay: deleting them would make the next test's kueue-es (which sees the whole cluster)
        # evict this still-admitted Workload for node failures.


@pytest.mark.asyncio
async def test_a_pod_pinned_to_a_node_cordoned_before_it_was_bound_is_failed_and_replaced(kube_apiserver,
                                                                                         tmp_path) -> None:
    """Kueue's node controller (s38 review-tas2 MEDIUM-3): a pod ungated onto a node that is cordoned before the
    scheduler binds it can never run there. It is set Failed (TerminatedByKueue, Event PodTerminatedByKueue), the
    node is replaced, and the pod the job controller makes again is ungated onto the replacement."""
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        sfx = secrets.token_hex(3)
        pool, topo = f"tas-{sfx}", f"topo-{sfx}"
        n1, n2 = f"{sfx}-c1", f"{sfx}-c2"
        for n in (n1, n2):
            await _node(kc, n, f"{sfx}-rack-c", pool)
        await create(kc, {"apiVersion": KUEUE, "kind": "Topology", "metadata": {"name": topo},
                          "spec": {"levels": [{"nodeLabel": RACK}, {"nodeLabel": HOSTNAME}]}})
        ns, _, _, _ = await queues(kc, "tas", {"cpu": 4}, sfx=sfx, flavor_labels={"pool": pool},
                                   flavor_spec={"topologyName": topo})
        async with kueue_es(kc, tmp_path / "log", sync_timeout=WAIT) as (connector, _):
            job = await create(kc, _job(ns, "pinned", 1))

            async def running() -> dict[str, Any] | None:
                j = await get(kc, "Job", "pinned", ns)
                return j if not j["spec"].get("suspend") else None

            job = await eventually(running, WAIT, "the Job to be unsuspended")

            async def ungated(name: str) -> dict[str, Any] | None:
                p = await get(kc, "Pod", name, ns)
                return p if not p["spec"].get("schedulingGates") else None

            first = await _job_pod(kc, job, 0)
            first = await eventually(lambda: ungated(first["metadata"]["name"]), WAIT, "the pod to be ungated")
            host = first["spec"]["nodeSelector"][HOSTNAME]
            other = n2 if host == n1 else n1
            # kubectl cordon: unschedulable, and the node lifecycle controller's taint; the pod is never bound
            await kc.patch(NODES, host, {"spec": {"unschedulable": True, "taints": [
                {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]}})

            async def failed() -> dict[str, Any] | None:
                p = await get(kc, "Pod", first["metadata"]["name"], ns)
                return p if p["status"].get("phase") == "Failed" else None

            pod = await eventually(failed, WAIT, "the pinned pod to be failed")
            cond = _cond(pod, "TerminatedByKueue")
            assert cond is not None and (cond["status"], cond["reason"], cond["message"]) == (
                "True", "UnschedulableOnAssignedNode", "Pod terminated by Kueue NodeController due to node taint")

            async def event() -> dict[str, Any] | None:
                items = msgspec.json.decode(await kc.request(
                    "GET", f"/api/v1/namespaces/{ns}/events")).get("items") or []
                return next((e for e in items if e["involvedObject"].get("uid") == pod["metadata"]["uid"]
                             and e["reason"] == "PodTerminatedByKueue"), None)

            e = await eventually(event, WAIT, "the PodTerminatedByKueue Event")
            assert (e["type"], e["message"]) == ("Normal", "Pod terminated by Kueue NodeController due to node taint")
            assert connector.pinned_pods.stats.failed == 1

            again = await _job_pod(kc, await get(kc, "Job", "pinned", ns), 0)
            again = await eventually(lambda: ungated(again["metadata"]["name"]), WAIT, "the new pod to be ungated")
            assert again["spec"]["nodeSelector"][HOSTNAME] == other
        # the nodes stay (see above); the cordoned one fails nothing more: no pod is pinned to it any more
