"""A MultiKueue workload's owner is read before the workload holds quota: Kueue's MultiKueue controller checks the
owner's ``spec.managedBy`` at its first reconcile, quota or not (workload.go @ 0013485603, Reconcile), so a
workload whose owner is not handed to MultiKueue is rejected while pending, and never reserves quota for nothing."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest
from fixtures.multikueue_states import KEY, MK_CONFIG, START, apply, owned_state

from connectors.k8s.multikueue import MultiKueueConnector
from connectors.k8s.resources import JOBSETS
from kueue_es.scheduler import settle


class JobSetsManager:
    """The manager's apiserver holding JobSets whose ``spec.managedBy`` is ``managed_by``."""

    def __init__(self, managed_by: str | None) -> None:
        self.managed_by = managed_by
        self.read: list[str] = []

    async def get(self, resource: Any, name: str, namespace: str = "") -> bytes:
        self.read.append(f"{resource.kind}:{namespace}/{name}")
        spec = {} if self.managed_by is None else {"managedBy": self.managed_by}
        return msgspec.json.encode({"metadata": {"name": name, "namespace": namespace}, "spec": spec})


@pytest.mark.asyncio
async def test_a_pending_workloads_owner_is_read_and_one_not_handed_to_multikueue_is_rejected_without_quota(
        tmp_path: Path) -> None:
    state = owned_state(tmp_path, JOBSETS.api_version, JOBSETS.kind)
    wl = state.workloads[KEY]
    assert not wl.reserving and wl.check_states["mk"].state == "Pending"
    manager = JobSetsManager(None)
    journal = SimpleNamespace(mirror=SimpleNamespace(state=state, workloads={}))
    mk = MultiKueueConnector(manager, journal, append=None)  # type: ignore[arg-type]
    observed = await mk._observe_owners(START, [KEY])
    assert manager.read == ["JobSet:default/a"]
    assert [(e.key, e.managed_by) for e in observed] == [(KEY, "")]
    apply(state, *observed)
    settle(state, MK_CONFIG, now=START)
    wl = state.workloads[KEY]
    assert wl.check_states["mk"].state == "Rejected"
    assert wl.check_states["mk"].message == (
        'The owner is not managed by Kueue: Expecting spec.managedBy to be "kueue.x-k8s.io/multikueue" not ""')
    assert not wl.reserving and wl.active, "rejected before it reserved: not deactivated, nothing released"
    assert await mk._observe_owners(START, [KEY]) == [], "read once: the field is immutable"
