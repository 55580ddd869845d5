"""A ProvisioningRequest the apiserver refuses to create, then lets through, against the real apiserver.

Kueue's check controller (``handleError``, #4114/#4190) shows a failed create on the check, still Pending,
records a Warning ``FailedCreate`` Event on the Workload, and tries again after a backoff. Here a
ValidatingAdmissionPolicy denies every ProvisioningRequest of the test's namespace: the stored Workload's
check shows ``Error creating ProvisioningRequest "<name>": <the denial>`` and the Event is there, the quota
still reserved; once the policy's binding is deleted, a later attempt creates the request (before this fix the
refused request stayed the check's for ever: never created again, the quota held).
"""

from __future__ import annotations

import contextlib
from typing import Any

import msgspec
import pytest
from kubehelp import connect, create, eventually, get, job, kueue_es, provisioning_queues, workload_events

from connectors.k8s.errors import KubeError, NotFound
from connectors.k8s.jobs import workload_name
from connectors.k8s.resources import PROVISIONING_REQUESTS, Resource

pytestmark = pytest.mark.kube
WAIT = 60.0  # generous: two cores shared with other test runs
POLICIES = Resource("ValidatingAdmissionPolicy", "admissionregistration.k8s.io", "v1",
                    "validatingadmissionpolicies", False)
BINDINGS = Resource("ValidatingAdmissionPolicyBinding", "admissionregistration.k8s.io", "v1",
                    "validatingadmissionpolicybindings", False)
DENIAL = "no ProvisioningRequests in this namespace"


def _policy(name: str, ns: str) -> tuple[dict[str, Any], dict[str, Any]]:
    policy = {"apiVersion": POLICIES.api_version, "kind": POLICIES.kind, "metadata": {"name": name},
              "spec": {"failurePolicy": "Fail",
                       "matchConstraints": {"resourceRules": [{
                           "apiGroups": ["autoscaling.x-k8s.io"], "apiVersions": ["*"],
                           "operations": ["CREATE"], "resources": ["provisioningrequests"]}]},
                       "validations": [{"expression": "false", "message": DENIAL}]}}
    binding = {"apiVersion": BINDINGS.api_version, "kind": BINDINGS.kind, "metadata": {"name": name},
               "spec": {"policyName": name, "validationActions": ["Deny"],
                        "matchResources": {"namespaceSelector": {
                            "matchLabels": {"kubernetes.io/metadata.name": ns}}}}}
    return policy, binding


def _probe(ns: str) -> dict[str, Any]:
    return {"apiVersion": PROVISIONING_REQUESTS.api_version, "kind": "ProvisioningRequest",
            "metadata": {"name": "probe", "namespace": ns},
            "spec": {"provisioningClassName": "x",
                     "podSets": [{"podTemplateRef": {"name": "p"}, "count": 1}]}}


async def _denied(kc, ns: str) -> bool:
    """Whether the policy is in force: a dry-run create of a request in ``ns`` is refused with its message."""
    try:
        await kc.request("POST", PROVISIONING_REQUESTS.collection_path(ns), body=_probe(ns),
                         query=[("dryRun", "All")])
    except KubeError as exc:
        return DENIAL in str(exc)
    return False


def _check(wl: dict[str, Any], name: str) -> dict[str, Any]:
    return next((c for c in (wl.get("status") or {}).get("admissionChecks") or [] if c["name"] == name), {})


@pytest.mark.asyncio
async def test_a_denied_request_shows_on_the_check_and_is_created_once_allowed(
        kube_apiserver, tmp_path) -> None:
    async with await connect(kube_apiserver) as kc:
        check, ns = await provisioning_queues(kc, "provdeny", {"cpu": 4})
        policy, binding = _policy(f"deny-provreq-{ns}", ns)
        await kc.create(POLICIES, policy)
        await kc.create(BINDINGS, binding)
        try:
            await eventually(lambda: _denied(kc, ns), WAIT, "the policy in force")
            async with kueue_es(kc, tmp_path / "log"):
                j = await create(kc, job(ns, "j1", "user-queue", cpu="1"))
                wl_name = workload_name("j1", j["metadata"]["uid"])
                pr_name = f"{wl_name}-{check}-1"
                prefix = f'Error creating ProvisioningRequest "{pr_name}": '

                async def shown() -> dict[str, Any] | None:
                    try:
                        wl = await get(kc, "Workload", wl_name, ns)
                    except NotFound:  # not made yet
                        return None
                    return wl if _check(wl, check).get("message", "").startswith(prefix) else None

                wl = await eventually(shown, WAIT, "the error on the check")
                state = _check(wl, check)
                assert state["state"] == "Pending" and DENIAL in state["message"], state
                assert any(c["type"] == "QuotaReserved" and c["status"] == "True"
                           for c in wl["status"]["conditions"]), "the quota is kept"

                async def failed_create() -> list[tuple[str, str, str]]:
                    return [e for e in await workload_events(kc, wl) if e[1] == "FailedCreate"]

                (kind, _, message), *_ = await eventually(failed_create, WAIT, "the FailedCreate Event")
                assert kind == "Warning" and message.startswith(prefix) and DENIAL in message

                await kc.delete(BINDINGS, binding["metadata"]["name"])

                async def created() -> dict[str, Any] | None:
                    try:
                        return msgspec.json.decode(await kc.get(PROVISIONING_REQUESTS, pr_name, ns))
                    except NotFound:
                        return None

                pr = await eventually(created, WAIT,
                                      "the request created once the policy no longer denies it")
                assert pr["metadata"]["ownerReferences"][0]["name"] == wl_name
        finally:
            for resource, name in ((BINDINGS, binding["metadata"]["name"]),
                                   (POLICIES, policy["metadata"]["name"])):
                with contextlib.suppress(NotFound):
                    await kc.delete(resource, name)
