"""Smoke tests for the real kube-apiserver + etcd fixture (see conftest.py).

Besides checking that the cluster works with kubernetes_asyncio, these pin down
the behaviour later watch-expiry tests rely on: a watch resumed from a
resourceVersion that predates an apiserver restart, or (with the watch cache
bypassed) an etcd compaction, fails with 410 Gone, every time.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator

import pytest
from kubernetes_asyncio import client, config, watch
from kubernetes_asyncio.client.exceptions import ApiException

pytestmark = pytest.mark.kube


async def _api(cluster) -> client.ApiClient:
    return await config.new_client_from_config(config_file=cluster.kubeconfig)


async def _namespace(api: client.ApiClient, prefix: str) -> str:
    name = f"{prefix}-{secrets.token_hex(3)}"
    await client.CoreV1Api(api).create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    return name


def _job(name: str) -> client.V1Job:
    return client.V1Job(
        api_version="batch/v1",
        kind="Job",
        metadata=client.V1ObjectMeta(name=name, labels={"kueue.x-k8s.io/queue-name": "user-queue"}),
        spec=client.V1JobSpec(
            suspend=True,
            parallelism=2,
            completions=2,
            template=client.V1PodTemplateSpec(
                spec=client.V1PodSpec(
                    restart_policy="Never",
                    containers=[
                        client.V1Container(
                            name="main",
                            image="busybox:1.36",
                            command=["true"],
                            resources=client.V1ResourceRequirements(requests={"cpu": "1", "memory": "200Mi"}),
                        )
                    ],
                )
            ),
        ),
    )


async def _collect(stream: AsyncIterator[dict], n: int) -> list[dict]:
    events = []
    async for event in stream:
        events.append(event)
        if len(events) == n:
            break
    return events


@pytest.mark.asyncio
async def test_version_and_rbac(kube_apiserver) -> None:
    async with await _api(kube_apiserver) as api:
        info = await client.VersionApi(api).get_code()
        assert info.git_version == kube_apiserver.version

        # The admin is in system:masters; RBAC is on, so anybody else is denied by default.
        review = await client.AuthorizationV1Api(api).create_self_subject_access_review(
            client.V1SelfSubjectAccessReview(
                spec=client.V1SelfSubjectAccessReviewSpec(
                    resource_attributes=client.V1ResourceAttributes(verb="*", group="*", resource="*")
                )
            )
        )
        assert review.status.allowed
        api.set_default_header("Impersonate-User", "nobody")
        with pytest.raises(ApiException) as denied:
            await client.BatchV1Api(api).list_job_for_all_namespaces()
        assert denied.value.status == 403


@pytest.mark.asyncio
async def test_namespace_and_suspended_job_roundtrip_list_and_watch(kube_apiserver) -> None:
    async with await _api(kube_apiserver) as api:
        batch = client.BatchV1Api(api)
        ns = await _namespace(api, "smoke")

        created = await batch.create_namespaced_job(ns, _job("job-a"))
        assert created.metadata.uid
        got = await batch.read_namespaced_job("job-a", ns)
        assert got.spec.suspend is True
        assert got.spec.parallelism == 2
        assert got.metadata.labels["kueue.x-k8s.io/queue-name"] == "user-queue"
        assert got.spec.template.spec.containers[0].resources.requests == {"cpu": "1", "memory": "200Mi"}
        # Nothing but the apiserver runs: no job controller, so no status beyond defaults.
        assert not got.status.active

        listed = await batch.list_namespaced_job(ns)
        assert [j.metadata.name for j in listed.items] == ["job-a"]
        list_rv = listed.metadata.resource_version

        async with watch.Watch() as w:
            stream = w.stream(batch.list_namespaced_job, ns, resource_version=list_rv, timeout_seconds=30)
            collector = asyncio.create_task(_collect(stream, 3))
            await batch.create_namespaced_job(ns, _job("job-b"))
            await batch.patch_namespaced_job("job-a", ns, {"spec": {"suspend": False}})
            # Background propagation: with Orphan (batch/v1's default) the object would wait for
            # the garbage collector (kube-controller-manager), which does not run here.
            await batch.delete_namespaced_job("job-b", ns, propagation_policy="Background")
            events = await asyncio.wait_for(collector, 30)

        assert [(e["type"], e["object"].metadata.name) for e in events] == [
            ("ADDED", "job-b"),
            ("MODIFIED", "job-a"),
            ("DELETED", "job-b"),
        ]
        assert events[1]["object"].spec.suspend is False
        rvs = [int(e["object"].metadata.resource_version) for e in events]
        assert rvs == sorted(rvs) and rvs[0] > int(list_rv)

        await batch.delete_namespaced_job("job-a", ns, propagation_policy="Background")


async def _configmap_rv(api: client.ApiClient, ns: str) -> str:
    """Create a ConfigMap, then write more so etcd's revision moves past its resourceVersion."""
    core = client.CoreV1Api(api)
    cm = await core.create_namespaced_config_map(
        ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="cm"), data={"n": "0"})
    )
    for i in range(1, 4):
        await core.patch_namespaced_config_map("cm", ns, {"data": {"n": str(i)}})
    return cm.metadata.resource_version


async def _watch_from(api: client.ApiClient, ns: str, rv: str, expect: int = 3) -> list[dict]:
    """Watch ConfigMaps in ns from rv until `expect` events arrived; an ApiException (410) propagates."""
    async with watch.Watch() as w:
        # timeout_seconds: no silent 410 retry inside kubernetes_asyncio, and no hanging.
        stream = w.stream(
            client.CoreV1Api(api).list_namespaced_config_map, ns, resource_version=rv, timeout_seconds=20
        )
        return await _collect(stream, expect)


@pytest.mark.asyncio
@pytest.mark.parametrize("round", [1, 2])
async def test_watch_from_before_apiserver_restart_is_410_gone(kube_apiserver, round: int) -> None:
    async with await _api(kube_apiserver) as api:
        ns = await _namespace(api, f"restart{round}")
        rv = await _configmap_rv(api, ns)
        # Before the restart the watch cache still covers rv: replays the 3 patches.
        assert [e["type"] for e in await _watch_from(api, ns, rv)] == ["MODIFIED"] * 3

        await kube_apiserver.arestart_apiserver()

        # The same client keeps working against the restarted apiserver ...
        assert (await client.CoreV1Api(api).read_namespaced_config_map("cm", ns)).data == {"n": "3"}
        # ... but the old resourceVersion is gone.
        with pytest.raises(ApiException) as gone:
            await _watch_from(api, ns, rv)
        assert gone.value.status == 410, gone.value
        assert "too old resource version" in gone.value.reason


@pytest.mark.asyncio
async def test_compaction_alone_does_not_expire_the_watch_cache(kube_apiserver) -> None:
    """With the watch cache on, compaction is invisible to watches until the apiserver restarts."""
    async with await _api(kube_apiserver) as api:
        ns = await _namespace(api, "cached")
        rv = await _configmap_rv(api, ns)
        assert await kube_apiserver.acompact_etcd() > int(rv)
        assert [e["type"] for e in await _watch_from(api, ns, rv)] == ["MODIFIED"] * 3

        await kube_apiserver.arestart_apiserver()
        with pytest.raises(ApiException) as gone:
            await _watch_from(api, ns, rv)
        assert gone.value.status == 410, gone.value


@pytest.mark.asyncio
@pytest.mark.parametrize("round", [1, 2])
async def test_watch_from_before_etcd_compaction_is_410_gone(
    kube_apiserver_no_watch_cache, round: int
) -> None:
    cluster = kube_apiserver_no_watch_cache
    async with await _api(cluster) as api:
        ns = await _namespace(api, f"compact{round}")
        rv = await _configmap_rv(api, ns)
        # Served from etcd's history: the 3 patches after rv.
        assert [e["type"] for e in await _watch_from(api, ns, rv)] == ["MODIFIED"] * 3

        assert await cluster.acompact_etcd() > int(rv)

        with pytest.raises(ApiException) as gone:
            await _watch_from(api, ns, rv)
        assert gone.value.status == 410, gone.value
        # Reads at the compacted revision are gone too; the current state is not.
        with pytest.raises(ApiException) as gone_list:
            await client.CoreV1Api(api).list_namespaced_config_map(
                ns, resource_version=rv, resource_version_match="Exact"
            )
        assert gone_list.value.status == 410
        assert (await client.CoreV1Api(api).read_namespaced_config_map("cm", ns)).data == {"n": "3"}
