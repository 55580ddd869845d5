"""ProvisioningRequest pieces that need no cluster: the autoscaler's CRD, the checks' Active condition, and the
status writer leaving request decisions to their applier (which tests/integration/kube/test_tas_connector.py
runs against the real apiserver)."""

from __future__ import annotations

import msgspec
import pytest

from connectors.k8s import crds
from connectors.k8s.checkstatus import desired_active
from connectors.k8s.journal import LocalJournal
from connectors.k8s.mirror import Mirror
from connectors.k8s.writer import StatusWriter
from events import objects as o
from events import schema as ev
from events.log import MemoryLog

WL = o.Workload(metadata=o.ObjectMeta(name="wl", namespace="ns", uid="wl-uid", resource_version="1"),
                spec=o.WorkloadSpec(queue_name="lq", pod_sets=[o.PodSet(count=2)]))
OWNER = o.OwnerReference(api_version="kueue.x-k8s.io/v1beta2", kind="Workload", name="wl", uid="wl-uid",
                         controller=True, block_owner_deletion=True)


async def _journal(*events: ev.AnyEvent) -> LocalJournal:
    journal = LocalJournal(MemoryLog(), Mirror())
    await journal.append([ev.ObjectUpserted(time=1, key=WL.key, uid=WL.metadata.uid, obj=WL), *events])
    return journal


def created(attempt: int = 1) -> ev.ProvisioningRequestCreated:
    name = f"wl-prov-{attempt}"
    template = o.PodTemplate(api_version="v1", metadata=o.ObjectMeta(name=f"ppt-{name}-main", namespace="ns",
                                                                    owner_references=[OWNER]),
                             template=o.PodTemplateSpec(spec=o.PodSpec(containers=[o.Container(name="c", image="i")])))
    request = o.ProvisioningRequest(
        api_version="autoscaling.x-k8s.io/v1",
        metadata=o.ObjectMeta(name=name, namespace="ns", labels={"kueue.x-k8s.io/managed": "true"},
                              owner_references=[OWNER]),
        spec=o.ProvisioningRequestSpec(provisioning_class_name="check-capacity.autoscaling.x-k8s.io", pod_sets=[
            o.ProvisioningRequestPodSet(pod_template_ref=o.PodTemplateRef(name=f"ppt-{name}-main"), count=2)]))
    return ev.ProvisioningRequestCreated(time=2, key=WL.key, uid="wl-uid", cycle=1, input=0, check="prov",
                                         attempt=attempt, request=request, pod_templates=[template])


async def _records(journal: LocalJournal) -> list[ev.Record]:
    return [r async for r in journal.log.read()]


async def _outcomes(journal: LocalJournal) -> list[tuple[str, int, str]]:
    return [(type(r.event).__name__, r.event.decision, getattr(r.event, "reason", ""))
            for r in await _records(journal) if isinstance(r.event, ev.DecisionApplied | ev.DecisionRejected)]


@pytest.mark.asyncio
async def test_the_status_writer_leaves_request_decisions_to_their_applier() -> None:
    journal = await _journal(created())
    writer = StatusWriter(None, journal)  # type: ignore[arg-type]
    await writer.sync(WL.key)  # status already as desired: the writer acknowledges what it wrote, nothing else
    assert await _outcomes(journal) == []


def test_the_provisioning_request_crd_is_the_autoscalers_v1() -> None:
    doc = crds.provisioning_request_crd()
    assert doc["metadata"]["name"] == "provisioningrequests.autoscaling.x-k8s.io"
    (version,) = doc["spec"]["versions"]
    assert version["name"] == "v1" and version["subresources"] == {"status": {}}
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["required"] == ["podSets", "provisioningClassName"]
    assert spec["properties"]["podSets"]["items"]["properties"]["count"]["minimum"] == 1
    # what the connector creates fits the schema's fields
    body = msgspec.to_builtins(created().request)
    assert set(body["spec"]) <= set(spec["properties"])


def test_the_active_condition_of_a_provisioning_check() -> None:
    ref = o.AdmissionCheckParameters(api_group="kueue.x-k8s.io", kind="ProvisioningRequestConfig", name="prc")
    ac = o.AdmissionCheck(metadata=o.ObjectMeta(name="prov", generation=2), spec=o.AdmissionCheckSpec(
        controller_name="kueue.x-k8s.io/provisioning-request", parameters=ref))
    config = o.ProvisioningRequestConfig(metadata=o.ObjectMeta(name="prc"))
    t = 1_767_225_600_000  # 2026-01-01T00:00:00Z
    (cond,) = desired_active(ac, {}, t) or []
    assert cond == {"type": "Active", "status": "False", "reason": "BadParametersRef",
                    "message": 'provisioningrequestconfigs.kueue.x-k8s.io "prc" not found',
                    "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 2}
    shown = msgspec.structs.replace(ac, status=o.AdmissionCheckStatus(conditions=[
        o.Condition(type="Other", status="True"), msgspec.convert(cond, o.Condition)]))
    assert desired_active(shown, {}, t + 5000) is None, "already shown: nothing to write"
    other, active = desired_active(shown, {"prc": config}, t + 5000) or []
    assert other["type"] == "Other"
    assert (active["status"], active["reason"], active["lastTransitionTime"]) == ("True", "Active",
                                                                                 "2026-01-01T00:00:05Z")
    foreign = msgspec.structs.replace(ac, spec=o.AdmissionCheckSpec(controller_name="example.com/mine"))
    assert desired_active(foreign, {"prc": config}, t) is None, "another controller's check"

