"""The ConcurrentAdmission variant writer (:mod:`connectors.k8s.variants`) and the Events of what it carries out,
against Kueue's variant controller (``pkg/controller/concurrentadmission/controller.go``): a variant whose create
meets 409 AlreadyExists is skipped with no ``CreatedVariant`` Event, and an Event about a variant names it with its
uid, as Kueue's recorder does for every object it records on."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from fixtures.decision_workers import collecting

from connectors.k8s.decision_events import kueue_events
from connectors.k8s.errors import AlreadyExists
from connectors.k8s.mirror import Mirror
from connectors.k8s.variants import VariantWriter
from events import objects as o
from events import schema as ev
from events.timefmt import format_time, parse_time

T0 = parse_time("2026-01-01T00:00:00Z")
BASE: dict[str, Any] = {"cycle": 1, "input": 1}
PARENT, PARENT_UID = "job-8f2a1", "job-8f2a1-uid"
VARIANT = "job-variant-spot-b3786"
KEY = f"default/{VARIANT}"


class Client:
    """Serves the parent; a create answers the created variant with its new uid, or 409 AlreadyExists."""

    def __init__(self, *, exists: bool = False) -> None:
        self.exists = exists
        self.created: list[str] = []

    async def get(self, resource: Any, name: str, namespace: str = "", subresource: str = "") -> bytes:
        assert (resource.kind, name) == ("Workload", PARENT)
        return msgspec.json.encode({"metadata": {"name": PARENT, "namespace": "default", "uid": PARENT_UID},
                                    "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1}]}})

    async def create(self, resource: Any, body: dict[str, Any], namespace: str = "") -> bytes:
        if self.exists:
            raise AlreadyExists(f'workloads.kueue.x-k8s.io "{VARIANT}" already exists', 409, "AlreadyExists")
        self.created.append(body["metadata"]["name"])
        return msgspec.json.encode({**body, "metadata": {**body["metadata"], "uid": "variant-uid"}})


def _parent() -> o.Workload:
    return o.Workload(metadata=o.ObjectMeta(name=PARENT, namespace="default", uid=PARENT_UID, resource_version="1",
                                            creation_timestamp=format_time(T0)),
                      spec=o.WorkloadSpec(queue_name="lq", pod_sets=[o.PodSet(count=1)]))


def _decided(*also: ev.Decision) -> tuple[Mirror, list[int]]:
    """A mirror holding the parent and the decision to create its variant (with ``also``), their offsets."""
    mirror = Mirror()
    records = [ev.ObjectUpserted(time=T0, key=f"default/{PARENT}", uid=PARENT_UID, obj=_parent()),
               ev.VariantCreated(time=T0 + 1_000, key=KEY, parent=PARENT, parent_uid=PARENT_UID, flavor="spot",
                                 **BASE), *also]
    mirror.apply_batch([ev.Record(off, e) for off, e in enumerate(records)])
    return mirror, list(range(1, len(records)))


async def _sync(mirror: Mirror, client: Client) -> list[ev.AnyEvent]:
    writer, appended = collecting(VariantWriter, client, mirror)
    await writer.sync(KEY)
    return appended


def _ready_events(mirror: Mirror, outcomes: list[ev.AnyEvent]) -> list[tuple[str, str, str]]:
    start = max(mirror.kube_events.awaiting) + 1
    mirror.apply_batch([ev.Record(start + i, e) for i, e in enumerate(outcomes)])
    return [(e.involved.name, e.involved.uid, e.reason) for entry in mirror.kube_events.ready.values()
            for e in kueue_events(entry.event, entry.before)]  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_a_variant_created_records_created_variant_on_its_parent() -> None:
    mirror, (made,) = _decided()
    outcomes = await _sync(mirror, Client())
    assert [(type(e).__name__, e.decision, e.uid) for e in outcomes] == [  # type: ignore[union-attr]
        ("DecisionApplied", made, "variant-uid")]
    assert _ready_events(mirror, outcomes) == [(PARENT, PARENT_UID, "CreatedVariant")]


@pytest.mark.asyncio
async def test_a_variant_that_exists_already_is_skipped_and_records_nothing() -> None:
    """Kueue's ``createVariants`` logs "Variant already exists" and goes on to the next flavor on AlreadyExists,
    before its ``Eventf(parent, ..., CreatedVariant, ...)``."""
    mirror, (made,) = _decided()
    outcomes = await _sync(mirror, Client(exists=True))
    assert [(type(e).__name__, e.decision, getattr(e, "reason", "")) for e in outcomes] == [
        ("DecisionRejected", made, "AlreadyExists")]
    assert _ready_events(mirror, outcomes) == []


@pytest.mark.asyncio
async def test_an_event_about_a_variant_not_read_back_yet_names_its_uid() -> None:
    """A variant decided on before the watch showed it (kueue-es's projection holds it from its creation) has no
    uid in the log yet; Kueue records on a variant it read, uid and all. The Event takes the uid its write
    learnt: here the create's answer, the activation carried out with it."""
    off = ev.VariantActivation(time=T0 + 2_000, key=KEY, uid="", active=False, **BASE,
                               message='Variant Workload deactivated due to Parent Workload "default/job-8f2a1" '
                                       "not active")
    mirror, _ = _decided(off)
    outcomes = await _sync(mirror, Client())
    assert {e.uid for e in outcomes} == {"variant-uid"}
    assert _ready_events(mirror, outcomes) == [(PARENT, PARENT_UID, "CreatedVariant"),
                                               (VARIANT, "variant-uid", "DeactivatedVariant")]
