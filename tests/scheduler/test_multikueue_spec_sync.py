"""MultiKueueRemoteSpecSync's decision (:func:`kueue_es.scheduler.multikueue.remote_spec_patch`): which manager-side
spec edits reach the copy on the workload's worker, on plain objects (Kueue's RayService remote spec syncer: its
``serveConfigV2``, compared and forwarded alone; no other kind forwards any)."""

from __future__ import annotations

from typing import Any

import pytest

from kueue_es.scheduler.config import DEFAULT, load_config
from kueue_es.scheduler.multikueue import (
    ADAPTERS,
    RAYSERVICE_ADAPTER,
    REMOTE_SPEC_SYNC,
    remote_spec_patch,
)

OFF = load_config({"featureGates": {"MultiKueueRemoteSpecSync": False}})


def _service(serve: str | None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"rayClusterConfig": {"suspend": False}, **spec}
    if serve is not None:
        body["serveConfigV2"] = serve
    return {"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": {"name": "svc", "namespace": "default"},
            "spec": body}


def test_the_gate_is_beta_and_on_by_default() -> None:
    assert DEFAULT.gate("MultiKueueRemoteSpecSync") and not OFF.gate("MultiKueueRemoteSpecSync")


def test_a_rayservice_serve_config_edited_on_the_manager_goes_to_the_copy() -> None:
    """Only the field Kueue's syncer forwards is in the patch: the copy's suspension (the worker's Kueue's) and any
    other difference stay as they are."""
    remote = _service("applications: []", rayClusterConfig={"suspend": True}, upgradeStrategy={"type": "None"})
    local = _service("applications:\n- name: b\n")
    assert remote_spec_patch(DEFAULT, RAYSERVICE_ADAPTER, remote, local) == {
        "spec": {"serveConfigV2": "applications:\n- name: b\n"}}


def test_nothing_is_patched_while_the_copy_has_the_manager_serve_config() -> None:
    """Other spec differences are not forwarded (the copy keeps the spec it was made with)."""
    remote = _service("applications: []", rayClusterConfig={"suspend": True})
    local = _service("applications: []", rayClusterConfig={"suspend": False, "rayVersion": "2.9"})
    assert remote_spec_patch(DEFAULT, RAYSERVICE_ADAPTER, remote, local) is None


def test_a_serve_config_removed_on_the_manager_is_removed_from_the_copy() -> None:
    """An absent field and an empty one are the same (Go's zero string): removed on the manager, the patch nulls
    it on the copy; empty on one side and absent on the other, nothing is written."""
    assert remote_spec_patch(DEFAULT, RAYSERVICE_ADAPTER, _service("applications: []"), _service(None)) == {
        "spec": {"serveConfigV2": None}}
    assert remote_spec_patch(DEFAULT, RAYSERVICE_ADAPTER, _service("applications: []"), _service("")) == {
        "spec": {"serveConfigV2": None}}
    assert remote_spec_patch(DEFAULT, RAYSERVICE_ADAPTER, _service(""), _service(None)) is None
    assert remote_spec_patch(DEFAULT, RAYSERVICE_ADAPTER, {}, _service("x")) == {"spec": {"serveConfigV2": "x"}}


def test_with_the_gate_off_the_copy_keeps_what_it_was_made_with() -> None:
    assert remote_spec_patch(OFF, RAYSERVICE_ADAPTER, _service("applications: []"), _service("changed")) is None


@pytest.mark.parametrize("kind", sorted(set(ADAPTERS) - {RAYSERVICE_ADAPTER}), ids=lambda k: k[1])
def test_no_other_kind_forwards_its_spec(kind: tuple[str, str]) -> None:
    """Kueue gives a remote spec syncer to the RayService adapter only: another kind's copy keeps its spec, even
    one carrying a field of that name."""
    assert kind not in REMOTE_SPEC_SYNC
    assert remote_spec_patch(DEFAULT, kind, {"spec": {"serveConfigV2": "a", "entrypoint": "x"}},
                             {"spec": {"serveConfigV2": "b", "entrypoint": "y"}}) is None
