"""Kueue's DRA device check, case by case: its ``pkg/cache/scheduler/dra/checker_test.go``
(``TestCheckerFindFeasibleNodes``) asks which candidate nodes keep a pod whose claims name
ResourceClaimTemplates, and how many the check drops (``draNoFit``). Each case here is one of its cases,
against kueue-es's own check (:mod:`kueue_es.scheduler.tas.devices`) through a TAS placement on two nodes,
``x1`` and ``x2``.

Kueue's fixture: ``gpu-node`` publishes ``gpu-0`` and ``gpu-1``; ``cpu-node`` publishes nothing. Here ``x1``
plays ``gpu-node`` and ``x2`` ``cpu-node`` (BestFit would pick ``x1`` first when both fit, so a case where
only ``x1`` fits and a case where both fit differ in the not-fit message, which counts ``draNoFit``).
"""

from __future__ import annotations

from typing import Any

import pytest
from test_dra_device_feasibility import (
    DRIVER,
    _class,
    _exactly,
    _gpu,
    _place,
    _rule,
    _slice,
    _state,
    _template,
)

from kueue_es.scheduler.tas import NoPlacement, Placement

ONE_GPU_NODE = "x1"
TWO_NODES = 'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 2; excluded: draNoFit: 2'


def _two_gpus(**device: Any) -> dict[str, Any]:
    """Kueue's ``gpuSlice``: ``gpu-0`` and ``gpu-1`` on ``x1`` (``device``: fields of ``gpu-0``)."""
    return _slice("x1", [_gpu("gpu-0", **device), _gpu("gpu-1")])


def _first_available(count: int) -> dict[str, Any]:
    """Kueue's ``fallbackOneTemplate`` / ``fallbackTwoTemplate``: ``count`` of class ``full``, else of
    ``slice``."""
    return {"name": "gpu", "firstAvailable": [
        {"name": "full", "deviceClassName": "full.example.com", "count": count},
        {"name": "slice", "deviceClassName": "slice.example.com", "count": count}]}


def _driver_slice(node: str, driver: str, device: str) -> dict[str, Any]:
    s = _slice(node, [_gpu(device)], name=f"{node}-{device}")
    s["spec"]["driver"] = driver
    return s


FULL = _class("full.example.com", ['device.driver == "full.example.com"'])
SLICE = _class("slice.example.com", ['device.driver == "slice.example.com"'])

CASES: list[tuple[str, tuple[dict[str, Any], ...], str, bool, str | None]] = [
    # (Kueue's case, objects, template, KueueDRAIntegrationDeviceTaints, node placed or None: no node fits)
    ("DRA pod filters out nodes without matching devices", (_two_gpus(),), "gpu-template", False,
     ONE_GPU_NODE),
    ("multiple claims on one pod", (_two_gpus(), _template("pair", _exactly(), {
        "name": "gpu2", "exactly": {"deviceClassName": DRIVER, "count": 1}})), "pair", False, ONE_GPU_NODE),
    ("device with binding conditions stays feasible",
     (_slice("x1", [_gpu("gpu-0", bindingConditions=["example.com/device-ready"])]),), "gpu-template", False,
     ONE_GPU_NODE),
    ("a DeviceTaintRule makes the devices it selects unusable",
     (_two_gpus(), _rule("maintenance", driver=DRIVER)), "gpu-template", True, None),
    ("a DeviceTaintRule naming one device leaves the rest allocatable",
     (_two_gpus(), _rule("one-device", driver=DRIVER, device="gpu-0")), "gpu-template", True, ONE_GPU_NODE),
    ("a NoExecute DeviceTaintRule keeps the devices out too",
     (_two_gpus(), _rule("draining", "NoExecute", driver=DRIVER)), "gpu-template", True, None),
    ("a None DeviceTaintRule leaves the devices allocatable",
     (_two_gpus(), _rule("informational", "None", driver=DRIVER)), "gpu-template", True, ONE_GPU_NODE),
    ("DeviceTaintRules do not apply when KueueDRAIntegrationDeviceTaints is off",
     (_two_gpus(), _rule("maintenance", driver=DRIVER)), "gpu-template", False, ONE_GPU_NODE),
    ("a taint the driver publishes in the ResourceSlice makes the device unusable",
     (_slice("x1", [_gpu(taints=[{"key": "example.com/maintenance", "effect": "NoSchedule"}])]),),
     "gpu-template", True, None),
    ("a taint the driver publishes in the ResourceSlice is ignored when KueueDRAIntegrationDeviceTaints is "
     "off",
     (_slice("x1", [_gpu(taints=[{"key": "example.com/maintenance", "effect": "NoSchedule"}])]),),
     "gpu-template", False, ONE_GPU_NODE),
    ("a firstAvailable request is feasible when one alternative fits by itself",
     (FULL, SLICE, _driver_slice("x1", "slice.example.com", "slice-0"),
      _template("fallback", _first_available(1))),
     "fallback", False, ONE_GPU_NODE),
    ("a firstAvailable request whose alternatives only fit together is infeasible",
     (FULL, SLICE, _driver_slice("x1", "full.example.com", "full-0"),
      _driver_slice("x1", "slice.example.com", "slice-0"), _template("fallback", _first_available(2))),
     "fallback", False, None),
]


@pytest.mark.parametrize(("objects", "template", "taints", "want"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_kueue_checker_case(objects: tuple[dict[str, Any], ...], template: str, taints: bool,
                            want: str | None) -> None:
    found = _place(_state(*objects), taints=taints, template=template)
    if want is None:
        assert isinstance(found, NoPlacement) and found.message == TWO_NODES
    else:
        assert isinstance(found, Placement), found
        assert [values[-1] for values, _ in found.domains] == [want]
