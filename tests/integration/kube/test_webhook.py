"""The mutating webhook for batch/v1 Jobs, served over HTTPS by kueue-es and called by the real apiserver.

A self-signed CA signs the serving certificate for 127.0.0.1 (kept in a Secret, so a second replica serves the
same one); the MutatingWebhookConfiguration carries the CA as its caBundle (scoped to this test's namespaces, so
other tests never see it). A Job created unsuspended with the queue label is stored suspended; a Job without the
label in a namespace with a LocalQueue ``default`` gets the label and is suspended; a Job whose
max-exec-time-seconds label Kueue refuses is only defaulted (refusing it is the validating Job webhook's,
``test_job_validating_webhook.py``); elsewhere an unlabelled Job is left alone; while a
WorkloadPriorityClass ``default`` exists, a Job naming no class is labelled with it; and with the
connector running, a labelled Job created unsuspended starts only once admitted (the webhook does not undo the
connector's unsuspend).
"""

from __future__ import annotations

import contextlib
import secrets
from typing import Any

import msgspec
import pytest
from kubehelp import (
    cluster_queue,
    connect,
    create,
    eventually,
    flavor,
    free_port,
    get,
    job,
    kueue_es,
    local_queue,
    namespace,
    priority_class,
)

from connectors.k8s import crds
from connectors.k8s.errors import Forbidden
from connectors.k8s.resources import BY_KIND, KUEUE_RESOURCES, Resource
from connectors.k8s.settings import KubeSettings
from connectors.k8s.validating import CONFIGURATION_NAME as VALIDATING_CONFIGURATION_NAME
from connectors.k8s.validating import VALIDATING_CONFIGS
from connectors.k8s.webhook import (
    CONFIGURATION_NAME,
    DEFAULT_PRIORITY_CLASS,
    MUTATING_CONFIGS,
    PRIORITY_LABEL,
    QUEUE_LABEL,
    WebhookServer,
    certificate,
    configuration,
    default_priority_class_lookup,
    default_queue_lookup,
    namespace_managed_lookup,
)
from connectors.k8s.webhook import register as register_webhook
from connectors.k8s.webhook import serve as serve_webhook
from connectors.k8s.workload_body import MAX_EXEC_LABEL
from kueue_es.scheduler.config import load_config

pytestmark = pytest.mark.kube
JOBS = BY_KIND["Job"]


async def _dry_run(kc, ns: str, doc: dict[str, Any]) -> dict[str, Any]:
    out = await kc.request("POST", JOBS.collection_path(ns), query=[("dryRun", "All")], body=doc)
    return msgspec.json.decode(out)


@pytest.mark.asyncio
async def test_jobs_are_suspended_and_defaulted_at_creation(kube_apiserver, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        sfx = secrets.token_hex(3)
        selector = {"matchLabels": {"kueue-es-webhook-test": sfx}}
        ns = await namespace(kc, "wh", labels={"kueue-es-webhook-test": sfx})
        bare = await namespace(kc, "wh-bare", labels={"kueue-es-webhook-test": sfx})
        outside = await namespace(kc, "wh-out")
        # the first replica makes the certificate and keeps it in the Secret; the next one serves the same
        settings = KubeSettings(webhook_hosts="127.0.0.1", webhook_secret=f"cert-{sfx}", lease_namespace=outside)
        bundle = await certificate(kc, settings)
        assert await certificate(kc, settings) == bundle
        _, cert, key = bundle.write(tmp_path / "certs")
        server = WebhookServer(default_queue_lookup(kc), default_priority_class_lookup(kc))
        port = free_port()
        await server.start("127.0.0.1", port, str(cert), str(key))
        name = f"kueue-es-test-{sfx}"
        try:
            await register_webhook(kc, configuration(bundle.ca_pem, url=f"https://127.0.0.1:{port}", name=name,
                                                     namespace_selector=selector))

            async def effective() -> bool:  # the apiserver picks the configuration up asynchronously
                with contextlib.suppress(Exception):
                    out = await _dry_run(kc, ns, job(ns, "probe", "q", suspend=False))
                    return out["spec"]["suspend"] is True
                return False

            await eventually(effective, what="the webhook configuration in effect")

            labelled = await create(kc, job(ns, "labelled", "user-queue", suspend=False))
            assert labelled["spec"]["suspend"] is True
            assert labelled["metadata"]["labels"][QUEUE_LABEL] == "user-queue"
            capped = await create(kc, job(ns, "capped", "user-queue", labels={MAX_EXEC_LABEL: "0"}))
            assert capped["spec"]["suspend"] is True, "refusing it is the validating webhook's (vjob.kb.io)"

            await create(kc, local_queue(ns, "default", "nowhere"))
            unlabelled = job(ns, "unlabelled", "x", suspend=False)
            del unlabelled["metadata"]["labels"]
            got = await create(kc, unlabelled)
            assert got["metadata"]["labels"][QUEUE_LABEL] == "default" and got["spec"]["suspend"] is True
            with_labels = job(ns, "other-labels", "x", suspend=False)
            with_labels["metadata"]["labels"] = {"team": "a"}
            got = await create(kc, with_labels)
            assert got["metadata"]["labels"] == {"team": "a", QUEUE_LABEL: "default"} and got["spec"]["suspend"]

            plain = job(bare, "plain", "x", suspend=False)
            del plain["metadata"]["labels"]
            got = await create(kc, plain)
            assert QUEUE_LABEL not in (got["metadata"].get("labels") or {}) and got["spec"]["suspend"] is False

            not_selected = await create(kc, job(outside, "untouched", "user-queue", suspend=False))
            assert not_selected["spec"]["suspend"] is False, "only the namespaces the configuration selects"
            assert server.reviews >= 4 and server.patched >= 3

            # --- a WorkloadPriorityClass named "default" labels every Job that names none ------------------------
            await create(kc, priority_class(DEFAULT_PRIORITY_CLASS, 500))
            try:
                plain = job(bare, "defaulted-class", "x", suspend=False)
                del plain["metadata"]["labels"]
                got = await create(kc, plain)
                labels = got["metadata"]["labels"]  # the apiserver copies the template's labels first
                assert labels[PRIORITY_LABEL] == "default" and QUEUE_LABEL not in labels, "with a queue name or not"
                assert got["spec"]["suspend"] is False, "no queue name: not suspended"
                named = job(bare, "named-class", "x", suspend=False, labels={PRIORITY_LABEL: "gold"})
                assert (await create(kc, named))["metadata"]["labels"][PRIORITY_LABEL] == "gold"
            finally:  # the class is cluster-wide: no other test's Job may get it
                await kc.delete(BY_KIND["WorkloadPriorityClass"], DEFAULT_PRIORITY_CLASS)

            # --- with the connector: created unsuspended, yet it starts only once admitted ----------------------
            fl, cq = f"f-{sfx}", f"cq-{sfx}"
            await create(kc, flavor(fl))
            await create(kc, cluster_queue(cq, {fl: {"cpu": 1}}))
            await create(kc, local_queue(bare, "user-queue", cq))
            async with kueue_es(kc, tmp_path / "log") as (_connector, _journal):
                first = await create(kc, job(bare, "first", "user-queue", cpu="1", suspend=False))
                second = await create(kc, job(bare, "second", "user-queue", cpu="1", suspend=False))
                assert first["spec"]["suspend"] is True and second["spec"]["suspend"] is True

                async def running(n: str) -> bool:
                    return not (await get(kc, "Job", n, bare))["spec"].get("suspend")

                async def either() -> bool:  # which one goes first is the queue's (same second, then uid)
                    return await running("first") or await running("second")

                await eventually(either, timeout=90, what="one Job to start")
                assert not (await running("first") and await running("second")), "quota for one only"
                # (not the connector's count of Jobs started: it manages the whole session-long cluster, where an
                # earlier test's queued Job may be admitted meanwhile)
        finally:
            with contextlib.suppress(Exception):
                await kc.delete(MUTATING_CONFIGS, name)
            await server.stop()


@pytest.mark.asyncio
async def test_no_default_priority_class_in_a_namespace_the_selector_leaves_out(kube_apiserver, tmp_path) -> None:
    """Kueue's #15851: with ``managedJobsNamespaceSelector``, a Job created in a namespace it leaves out is stored
    as it came, without the ``default`` WorkloadPriorityClass label a Job of a selected namespace gets."""
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        sfx = secrets.token_hex(3)
        scope = {"kueue-es-webhook-test": sfx}
        selected = await namespace(kc, "wh-sel", labels={**scope, f"managed-{sfx}": "yes"})
        left_out = await namespace(kc, "wh-left", labels=scope)
        settings = KubeSettings(webhook_hosts="127.0.0.1", webhook_secret=f"cert-{sfx}", lease_namespace=left_out)
        bundle = await certificate(kc, settings)
        _, cert, key = bundle.write(tmp_path / "certs")
        config = load_config({"managedJobsNamespaceSelector": {"matchLabels": {f"managed-{sfx}": "yes"}}})
        server = WebhookServer(default_queue_lookup(kc), default_priority_class_lookup(kc),
                               namespace_managed=namespace_managed_lookup(kc, config))
        port = free_port()
        await server.start("127.0.0.1", port, str(cert), str(key))
        name = f"kueue-es-test-{sfx}"
        try:
            await register_webhook(kc, configuration(bundle.ca_pem, url=f"https://127.0.0.1:{port}", name=name,
                                                     namespace_selector={"matchLabels": scope}))

            async def effective() -> bool:
                with contextlib.suppress(Exception):
                    return (await _dry_run(kc, selected, job(selected, "probe", "q", suspend=False)))["spec"]["suspend"]
                return False

            await eventually(effective, what="the webhook configuration in effect")
            await create(kc, priority_class(DEFAULT_PRIORITY_CLASS, 500))
            try:
                got = {}
                for ns in (selected, left_out):
                    plain = job(ns, "plain", "x", suspend=False)
                    del plain["metadata"]["labels"]
                    got[ns] = (await create(kc, plain))["metadata"].get("labels") or {}
                assert got[selected].get(PRIORITY_LABEL) == "default"
                assert PRIORITY_LABEL not in got[left_out], "left out: not labelled"
            finally:  # the class is cluster-wide: no other test's Job may get it
                await kc.delete(BY_KIND["WorkloadPriorityClass"], DEFAULT_PRIORITY_CLASS)
        finally:
            with contextlib.suppress(Exception):
                await kc.delete(MUTATING_CONFIGS, name)
            await server.stop()


@pytest.mark.asyncio
async def test_served_and_registered_from_the_kube_settings(kube_apiserver, tmp_path) -> None:
    """What ``kueue-es run --kube`` does with ``webhook_port`` and ``webhook_register``: one configuration for
    every namespace but kube-system and its own (a queued Job's child Job, its parent read from the apiserver, left
    running); the validating webhooks for the Kueue kinds and the CRDs'
    conversion go through the same server, trusting its CA."""
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        own, other = await namespace(kc, "wh-own"), await namespace(kc, "wh-any")
        port = free_port()
        settings = KubeSettings(webhook_port=port, webhook_address="127.0.0.1", webhook_hosts="127.0.0.1",
                                webhook_register=True, webhook_url=f"https://127.0.0.1:{port}", lease_namespace=own)
        server = await serve_webhook(kc, settings)
        try:
            async def effective() -> bool:
                with contextlib.suppress(Exception):
                    return (await _dry_run(kc, other, job(other, "probe", "q", suspend=False)))["spec"]["suspend"]
                return False

            await eventually(effective, what="the registered webhook in effect")
            parent = await create(kc, job(other, "j", "q", suspend=False))
            assert parent["spec"]["suspend"] is True
            # a queued Job's child: the webhook reads the parent from the apiserver and leaves the child running
            child = job(other, "j-child", "q", suspend=False)
            child["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "j",
                                                     "uid": parent["metadata"]["uid"], "controller": True}]
            assert (await create(kc, child))["spec"]["suspend"] is False, "its Kueue-managed ancestor is queued"
            assert (await create(kc, job(own, "j", "q", suspend=False)))["spec"]["suspend"] is False, \
                "its own namespace is left out"

            async def capped_refused() -> bool:  # registered after the mutating one: in effect a little later
                try:
                    await _dry_run(kc, other, job(other, "capped", "q", labels={MAX_EXEC_LABEL: "0"}))
                except Forbidden as exc:
                    return 'admission webhook "vjob.kb.io" denied the request' in str(exc)
                return False

            await eventually(capped_refused, what="the Job validating webhook in effect")
            await create(kc, job(own, "capped", "q", labels={MAX_EXEC_LABEL: "0"}))  # left out by both

            mwc = msgspec.json.decode(await kc.get(MUTATING_CONFIGS, CONFIGURATION_NAME))
            ca = mwc["webhooks"][0]["clientConfig"]["caBundle"]
            vwc = msgspec.json.decode(await kc.get(VALIDATING_CONFIGS, VALIDATING_CONFIGURATION_NAME))
            assert {h["clientConfig"]["caBundle"] for h in vwc["webhooks"]} == {ca}, "the same server and CA"
            for r in KUEUE_RESOURCES:
                crd = msgspec.json.decode(await kc.get(crds.CRD_RESOURCE, f"{r.plural}.{r.group}"))
                assert crd["spec"]["conversion"] == {"strategy": "Webhook", "webhook": {
                    "conversionReviewVersions": ["v1"],
                    "clientConfig": {"url": f"https://127.0.0.1:{port}/convert", "caBundle": ca}}}, r.kind
            cq = f"wh-cq-{own}"
            await create(kc, cluster_queue(cq, {}, cohortName="team"))
            v1beta1 = Resource("ClusterQueue", "kueue.x-k8s.io", "v1beta1", "clusterqueues", False)

            async def converted() -> dict[str, Any] | None:
                with contextlib.suppress(Exception):
                    got = msgspec.json.decode(await kc.get(v1beta1, cq))
                    return got if got["spec"].get("cohort") == "team" else None
                return None

            assert "cohortName" not in (await eventually(converted, what="v1beta1 read through the webhook"))["spec"]
            assert server.conversions > 0
            assert server.validations > 0, "the ClusterQueue went through the validating webhook"
        finally:
            with contextlib.suppress(Exception):
                await kc.delete(MUTATING_CONFIGS, CONFIGURATION_NAME)
            with contextlib.suppress(Exception):  # cluster-wide, failurePolicy Fail: gone before this server stops
                await kc.delete(VALIDATING_CONFIGS, VALIDATING_CONFIGURATION_NAME)
            await crds.install(kc)  # strategy None again: this server stops
            await server.stop()
