"""ConcurrentAdmission against the real apiserver: a Workload of a ClusterQueue with a ``concurrentAdmissionPolicy``
is labelled a parent, its variants are created as Kueue's variant controller makes them (names, labels,
annotations, owner, the preemption gate), the one whose flavor has room is admitted, the other, below it under
RetainFirstAdmission, gets ``spec.active: false``, and the parent shows the admitted variant's admission; once its
flavor leaves the ClusterQueue, that variant is deleted."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest
from kubehelp import cluster_queue, connect, create, eventually, flavor, get, kueue_es, local_queue, namespace

from connectors.k8s import crds
from connectors.k8s.errors import NotFound
from connectors.k8s.resources import BY_KIND
from kueue_es.scheduler.config import load_config
from kueue_es.scheduler.variants import variant_name

pytestmark = pytest.mark.kube
PARENT_LABEL = "kueue.x-k8s.io/concurrent-admission-parent"
ALLOWED = "kueue.x-k8s.io/workload-allowed-resource-flavors"
CONFIG = load_config({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                      "featureGates": {"ConcurrentAdmission": True}})


def _cond(obj: dict[str, Any], type_: str) -> tuple[str, str, str] | None:
    c = next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == type_), None)
    return None if c is None else (c["status"], c["reason"], c["message"])


@pytest.mark.asyncio
async def test_a_parent_is_pursued_through_its_variants(kube_apiserver, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        ns = await namespace(kc, "concurrent")
        sfx = ns.rsplit("-", 1)[1]
        preferred, fallback, cq = f"od-{sfx}", f"spot-{sfx}", f"cq-{sfx}"
        for f in (preferred, fallback):
            await create(kc, flavor(f))
        await create(kc, cluster_queue(cq, {preferred: {"cpu": 1}, fallback: {"cpu": 4}},
                                       concurrentAdmissionPolicy={"migration": {"mode": "RetainFirstAdmission"}}))
        await create(kc, local_queue(ns, "lq", cq))
        async with kueue_es(kc, tmp_path / "log", config=CONFIG):
            parent = await create(kc, {
                "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                "metadata": {"name": "job-sample-8f2a1", "namespace": ns, "labels": {"app": "sample"},
                             "annotations": {"note": "kept"}},
                "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 2, "template": {"spec": {
                    "containers": [{"name": "c", "image": "busybox",
                                    "resources": {"requests": {"cpu": "1"}}}]}}}]}})
            uid = parent["metadata"]["uid"]
            names = {f: variant_name("job-sample-8f2a1", uid, f) for f in (preferred, fallback)}

            async def admitted_parent() -> dict[str, Any] | None:
                p = await get(kc, "Workload", "job-sample-8f2a1", ns)
                return p if _cond(p, "Admitted") and _cond(p, "Admitted")[0] == "True" else None

            p = await eventually(admitted_parent, timeout=30, what="the parent admitted through a variant")
            # labelled before it is admitted (the status waits for the label's write), as Kueue does
            assert p["metadata"]["labels"] == {"app": "sample", PARENT_LABEL: "true"}
            assert _cond(p, "Admitted") == ("True", "Admitted", f"The variant {names[fallback]} is admitted")
            assert p["status"]["admission"]["podSetAssignments"][0]["flavors"] == {"cpu": fallback}

            async def existing(name: str) -> dict[str, Any] | None:
                try:
                    return await get(kc, "Workload", name, ns)
                except NotFound:
                    return None

            for f, name in names.items():
                # the variants are created side by side: the parent may be admitted through one before the other's
                # creation has gone through (as with Kueue's variant controller)
                v = await eventually(lambda n=name: existing(n), what=f"the variant {name} created")
                meta = v["metadata"]
                assert meta["labels"] == {"app": "sample"}
                assert meta["annotations"] == {"note": "kept", ALLOWED: f}
                assert meta["ownerReferences"] == [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                                                    "name": "job-sample-8f2a1", "uid": uid, "controller": True,
                                                    "blockOwnerDeletion": True}]
                assert v["spec"]["podSets"] == parent["spec"]["podSets"]
                assert v["spec"]["preemptionGates"] == [{"name": "kueue.x-k8s.io/concurrent-admission"}]

            async def deactivated() -> dict[str, Any] | None:
                v = await get(kc, "Workload", names[preferred], ns)
                return v if v["spec"].get("active") is False else None

            await eventually(deactivated, what="the variant below the admitted one deactivated")
            admitted = await get(kc, "Workload", names[fallback], ns)
            assert _cond(admitted, "Admitted")[0] == "True"
            assert admitted["spec"].get("active", True) is True
            listed = msgspec.json.decode(await kc.request("GET", BY_KIND["Workload"].collection_path(ns)))
            assert sorted(w["metadata"]["name"] for w in listed["items"]) == sorted(
                ["job-sample-8f2a1", *names.values()])  # one variant per flavor, no more

            # its flavor taken out of the ClusterQueue, the deactivated variant is deleted
            narrowed = cluster_queue(cq, {fallback: {"cpu": 4}})["spec"]["resourceGroups"]
            await kc.patch(BY_KIND["ClusterQueue"], cq, {"spec": {"resourceGroups": narrowed}})

            async def deleted() -> bool:
                return await existing(names[preferred]) is None

            await eventually(deleted, what="the stale variant deleted")
            assert (await get(kc, "Workload", names[fallback], ns))["metadata"]["uid"] == admitted["metadata"]["uid"]


def _workload(ns: str, name: str, queue: str, priority: int, **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": name, "namespace": ns, **meta},
            "spec": {"queueName": queue, "priority": priority, "podSets": [{"name": "main", "count": 1, "template": {
                "spec": {"containers": [{"name": "c", "image": "busybox",
                                         "resources": {"requests": {"cpu": "1"}}}]}}}]}}


@pytest.mark.asyncio
async def test_one_variant_at_a_time_may_preempt(kube_apiserver, tmp_path) -> None:
    """Both variants must preempt (each flavor's quota lent to, and used by, the other ClusterQueue): a variant is
    held by its closed concurrent-admission gate until the controller opens it in its status, one variant at a
    time: only that one preempts, the other's gate stays closed (for 5 minutes)."""
    gate = "kueue.x-k8s.io/concurrent-admission"
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        ns = await namespace(kc, "concurrent-gate")
        sfx = ns.rsplit("-", 1)[1]
        preferred, fallback, cq, other = f"res-{sfx}", f"spot-{sfx}", f"cq-{sfx}", f"other-{sfx}"
        for f in (preferred, fallback):
            await create(kc, flavor(f))
        await create(kc, cluster_queue(cq, {preferred: {"cpu": 1}, fallback: {"cpu": 1}}, cohortName=f"pool-{sfx}",
                                       preemption={"reclaimWithinCohort": "Any"},
                                       concurrentAdmissionPolicy={"migration": {"mode": "TryPreferredFlavors"}}))
        await create(kc, cluster_queue(other, {preferred: {"cpu": 0}, fallback: {"cpu": 0}}, cohortName=f"pool-{sfx}"))
        await create(kc, local_queue(ns, "lq", cq))
        await create(kc, local_queue(ns, "lq-other", other))
        async with kueue_es(kc, tmp_path / "log", config=CONFIG):
            for i in range(2):
                await create(kc, _workload(ns, f"low-{i}", "lq-other", 0))

            async def both_low_admitted() -> bool:
                lows = [await get(kc, "Workload", f"low-{i}", ns) for i in range(2)]
                return all((_cond(w, "Admitted") or ("",))[0] == "True" for w in lows)

            await eventually(both_low_admitted, timeout=30, what="the low workloads admitted by borrowing")
            parent = await create(kc, _workload(ns, "job-sample-8f2a1", "lq", 100))
            names = {f: variant_name("job-sample-8f2a1", parent["metadata"]["uid"], f) for f in (preferred, fallback)}

            async def positions() -> dict[str, dict[str, str]]:
                out = {}
                for f, name in names.items():
                    try:
                        v = await get(kc, "Workload", name, ns)
                    except NotFound:
                        v = {}
                    out[f] = {g["name"]: g["position"] for g in (v.get("status") or {}).get("preemptionGates") or []}
                return out

            async def one_opened() -> str | None:
                opened = [f for f, gates in (await positions()).items() if gates.get(gate) == "Open"]
                return opened[0] if opened else None

            # the first variant the scheduler finds blocked has its gate opened (which one is first depends on
            # which the watch brings back first, as in Kueue); the other's stays closed
            first = await eventually(one_opened, timeout=30, what="one variant's gate opened")
            on: dict[str, str] = {}
            for i in range(2):
                low = await get(kc, "Workload", f"low-{i}", ns)
                on[low["status"]["admission"]["podSetAssignments"][0]["flavors"]["cpu"]] = f"low-{i}"
            victim, spared = on[first], on[fallback if first == preferred else preferred]

            async def preempted() -> bool:
                w = await get(kc, "Workload", victim, ns)
                return (_cond(w, "Preempted") or ("",))[0] == "True"

            await eventually(preempted, timeout=30, what="the opened variant's flavor's borrower preempted")
            other_gates = (await positions())[fallback if first == preferred else preferred]
            assert other_gates.get(gate) != "Open"
            assert (_cond(await get(kc, "Workload", spared, ns), "Preempted") or ("",))[0] != "True"
            # the preemptor's UID as the apiserver gave it to the variant (UNKNOWN, as Kueue says, had it preempted
            # before the watch brought the variant back), never an empty one
            opened_uid = (await get(kc, "Workload", names[first], ns))["metadata"]["uid"]
            message = _cond(await get(kc, "Workload", victim, ns), "Preempted")[2]
            assert f"(UID: {opened_uid}," in message or "(UID: UNKNOWN," in message, message

            # the opened variant shows it was blocked, and keeps showing it: read back with its uid, the variant the
            # log made keeps its conditions (it is not taken as a new Workload without them, its gate's next
            # opening and its sibling's then left to chance)
            held = names[first]

            async def blocked() -> bool:
                v = await get(kc, "Workload", held, ns)
                return (_cond(v, "BlockedOnPreemptionGates") or ("",))[0] == "True"

            await eventually(blocked, timeout=30, what="the opened variant shown BlockedOnPreemptionGates")
            await asyncio.sleep(2)
            shown = await get(kc, "Workload", held, ns)
            assert (_cond(shown, "BlockedOnPreemptionGates") or ("",))[:2] == ("True", "PreemptionGated"), shown
