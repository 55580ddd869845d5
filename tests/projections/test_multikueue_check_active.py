"""A MultiKueue AdmissionCheck's Active condition as Kueue's check controller computes it, case by case of
Kueue's pkg/controller/admissionchecks/multikueue/admissioncheck_test.go TestReconcile (admissioncheck.go
``Reconcile``: ``BadConfig`` when the config cannot be read; the config's clusters missing, then those not
Active, each list in the config's order; ``SomeActiveClusters`` (still active) while one is usable,
``NoUsableClusters`` when none is)."""

from __future__ import annotations

import msgspec
import pytest

from events import objects as o
from projections.admissionchecks import ClusterLink, MultiKueueWorld, check_active

MK = "kueue.x-k8s.io/multikueue"


def _check(controller: str = MK) -> o.AdmissionCheck:
    return msgspec.convert({"metadata": {"name": "ac1"}, "spec": {
        "controllerName": controller, "parameters": {
            "apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "config1"}}}, o.AdmissionCheck)


def _world(config: list[str] | None, clusters: dict[str, bool]) -> MultiKueueWorld:
    """``config1`` naming the clusters ``config`` (None: no config), and each cluster of ``clusters`` created,
    its connection observed up (True) or down (False)."""
    configs = {} if config is None else {"config1": msgspec.convert(
        {"metadata": {"name": "config1"}, "spec": {"clusters": config}}, o.MultiKueueConfig)}
    made = {name: msgspec.convert({"metadata": {"name": name}, "spec": {"clusterSource": {"kubeConfig": {
        "location": name}}}}, o.MultiKueueCluster) for name in clusters}
    links = {name: ClusterLink(up, "" if up else "ByTest", "" if up else "by test", 0)
             for name, up in clusters.items()}
    return MultiKueueWorld(configs, made, links)


@pytest.mark.parametrize(("config", "clusters", "want"), [
    pytest.param(None, {}, (False, "BadConfig", 'Cannot load the AdmissionChecks parameters: '
                            'MultiKueueConfig.kueue.x-k8s.io "config1" not found'), id="missing config"),
    pytest.param(["worker1"], {}, (False, "NoUsableClusters", "Missing clusters: [worker1]"),
                 id="missing cluster"),
    pytest.param(["worker1"], {"worker1": False}, (False, "NoUsableClusters", "Inactive clusters: [worker1]"),
                 id="inactive cluster"),
    pytest.param(["worker1", "worker2", "worker3"], {"worker1": False, "worker2": False},
                 (False, "NoUsableClusters",
                  "Missing clusters: [worker3], Inactive clusters: [worker1 worker2]"),
                 id="all clusters missing or inactive"),
    pytest.param(["worker1", "worker2", "worker3"], {"worker1": False, "worker2": True},
                 (True, "SomeActiveClusters", "Missing clusters: [worker3], Inactive clusters: [worker1]"),
                 id="partially active"),
    pytest.param(["worker1"], {"worker1": True}, (True, "Active", "The admission check is active"),
                 id="active"),
    pytest.param(["worker3", "worker1", "worker2"], {"worker3": False, "worker2": False},
                 (False, "NoUsableClusters",
                  "Missing clusters: [worker1], Inactive clusters: [worker3 worker2]"),
                 id="lists in the config's order, not sorted"),
])
def test_a_multikueue_checks_active_condition(config: list[str] | None, clusters: dict[str, bool],
                                              want: tuple[bool, str, str]) -> None:
    """The BadConfig text names the kind (controller-runtime's cache reader, as Kueue's integration test shows
    it); Kueue's unit test, on a fake client, shows the resource (``multikueueconfigs.kueue.x-k8s.io``)."""
    assert check_active(_check(), {}, _world(config, clusters)) == want


def test_another_controllers_check_is_as_its_status_says() -> None:
    """TestReconcile "unmanaged": a check of another controller is not written by the MultiKueue
    controller."""
    assert check_active(_check("not-multikueue"), {}, _world(["worker1"], {"worker1": True})) == (
        False, "", "")
