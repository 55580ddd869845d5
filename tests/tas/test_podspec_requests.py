"""Topology placement counts the pod spec's requests, not the ones the Configuration's ``resources`` rules leave for
quota (Kueue v0.19 #12006): for node fit and for the node usage of admitted workloads alike.

``podspec/*.yaml`` are scheduler cases (``objects``, ``config``, ``cycles``, ``want``: per workload ``admitted``
with its flavors, ``resourceUsage`` and topology domains, or ``pending`` with its QuotaReserved reason and a
``message`` substring), run as ``kueue-es schedule`` runs them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
from fixtures import fastyaml
from fixtures.tasbuild import admitted_workload_obj, flavor_obj, node_obj, topology_obj, upsert

from events import objects as o
from events import schema as ev
from events.tas_assignment import decode
from kueue_es.commands.schedule import schedule
from projections import snapshot
from projections.cluster import ClusterState
from projections.request_rules import ResourceTransformation, compile_rules
from projections.workloads import PodSetInfo, _nameless, pod_set_info

CASES = sorted((Path(__file__).parent / "podspec").glob("*.yaml"))


def _domains(adm: dict[str, Any]) -> dict[str, list[list[Any]]]:
    return {p["name"]: [[*d.values, d.count] for d in decode(msgspec.convert(p["topologyAssignment"],
                                                                             o.TopologyAssignment))]
            for p in adm["podSetAssignments"] if "topologyAssignment" in p}


def _reserved(status: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == "QuotaReserved")


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_case(case: Path, tmp_path: Path) -> None:
    spec = fastyaml.safe_load(case.read_text())
    state, config = tmp_path / "state.yaml", tmp_path / "config.yaml"
    state.write_text(fastyaml.safe_dump_all(spec["objects"]))
    config.write_text(fastyaml.safe_dump(spec["config"]))
    result = schedule(str(state), spec["cycles"], str(config))
    got = {f"{i['metadata']['namespace']}/{i['metadata']['name']}": i["status"] for i in result["items"]}
    assert set(got) == set(spec["want"])
    for key, want in spec["want"].items():
        status = got[key]
        if "admitted" in want:
            w, adm = want["admitted"], status.get("admission")
            assert adm is not None, f"{key}: not admitted: {_reserved(status)}"
            assert adm["clusterQueue"] == w["clusterQueue"]
            assert {p["name"]: p["flavors"] for p in adm["podSetAssignments"]} == w["flavors"]
            assert {p["name"]: p["resourceUsage"] for p in adm["podSetAssignments"]} == w["usage"]
            assert _domains(adm) == w["topology"]
        else:
            reserved = _reserved(status)
            assert "admission" not in status
            assert (reserved["status"], reserved["reason"]) == ("False", want["pending"]), reserved
            assert want["message"] in reserved["message"], reserved["message"]


def _template(requests: dict[str, str], overhead: dict[str, str] | None = None,
              pod_requests: dict[str, str] | None = None) -> o.PodTemplateSpec:
    return msgspec.convert({"spec": {
        "containers": [{"name": "c", "resources": {"requests": requests}}],
        **({"overhead": overhead} if overhead else {}),
        **({"resources": {"requests": pod_requests}} if pod_requests else {}),
    }}, o.PodTemplateSpec)


GPU_TO_CREDITS = compile_rules(["example.com/"], [ResourceTransformation(
    input="nvidia.com/gpu", strategy="Replace", outputs={"example.com/credits": "2"})], "test")


def test_placement_takes_the_pod_spec_requests_before_the_rules() -> None:
    ps = o.PodSet(name="main", count=2, template=_template(
        {"cpu": "1", "nvidia.com/gpu": "1", "example.com/license": "1"}, overhead={"cpu": "100m"}))
    info = pod_set_info(ps, rules=GPU_TO_CREDITS)
    assert info.requests == (("cpu", 1100), ("example.com/credits", 2)), "quota: excluded and transformed"
    assert info.placement_requests == (("cpu", 1100), ("example.com/license", 1), ("nvidia.com/gpu", 1)), \
        "placement: the pod's own requests, overhead included"


def test_without_rules_a_pod_set_carries_no_placement_of_its_own() -> None:
    """The common case stays as compact (and encodes as) before: placement is derived from the requests."""
    ps = o.PodSet(name="main", count=1, template=_template({"cpu": "1", "nvidia.com/gpu": "1"}))
    info = pod_set_info(ps)
    assert info.placement is None
    assert info.placement_requests == info.requests == (("cpu", 1000), ("nvidia.com/gpu", 1))
    untouched = compile_rules(["example.com/"], [], "test")
    assert pod_set_info(ps, rules=untouched).placement is None, "rules that touch none of its resources"


def test_pod_level_requests_are_placed_as_quota_counts_them() -> None:
    """Pod-level requests (at least the containers' aggregate), as Kueue's PodRequests gives them to both."""
    ps = o.PodSet(name="main", count=1, template=_template({"cpu": "1", "nvidia.com/gpu": "1"},
                                                           pod_requests={"cpu": "3"}))
    info = pod_set_info(ps, rules=GPU_TO_CREDITS)
    assert dict(info.placement_requests) == {"cpu": 3000, "nvidia.com/gpu": 1}
    assert dict(info.requests) == {"cpu": 3000, "example.com/credits": 2}


def _gpu_state(rules: bool) -> ClusterState:
    """A 4-GPU node n1, and (admitted on it) a workload of one pod asking for 3 GPUs; with ``rules``, under a
    Configuration excluding ``nvidia.com/``."""
    state = ClusterState()
    events: list[ev.Event] = []
    if rules:
        events.append(ev.ConfigRecorded(time=0, document={
            "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
            "resources": {"excludeResourcePrefixes": ["nvidia.com/"]}}))
    events += [upsert(topology_obj("default", ["hostname"])), upsert(flavor_obj("tas", "default")),
               upsert(node_obj({"name": "n1", "labels": {"hostname": "n1"},
                                "allocatable": {"cpu": 8, "nvidia.com/gpu": 4, "pods": 110}}))]
    events.append(upsert(admitted_workload_obj({"name": "held", "requests": {"cpu": 1, "nvidia.com/gpu": 3},
                                                "domains": [["n1", 1]]}, ["hostname"])))
    for i, e in enumerate(events):
        state.apply(ev.Record(i, e))
    return state


def test_admitted_usage_counts_what_the_rules_excluded() -> None:
    state = _gpu_state(rules=True)
    assert state.tas.usage["tas"]["n1"] == {"cpu": 1000, "nvidia.com/gpu": 3, "pods": 1}


def test_restored_from_an_older_snapshot_placement_is_taken_anew() -> None:
    """A snapshot written before version 45 has no placement of its own in its pod sets: under rules, restoring
    takes the workloads' templates again for it, so admitted usage counts the excluded GPUs at once."""
    state = _gpu_state(rules=True)
    taken = snapshot.take(state)
    assert taken.version >= 45
    old = msgspec.structs.replace(taken, version=44, workloads=[
        msgspec.structs.replace(wl, pod_sets=tuple(msgspec.structs.replace(ps, placement=None)
                                                   for ps in wl.pod_sets))
        for wl in taken.workloads])
    restored = snapshot.restore(old)
    assert restored.tas.usage["tas"]["n1"] == {"cpu": 1000, "nvidia.com/gpu": 3, "pods": 1}
    assert snapshot.digest(restored) == snapshot.digest(state)


def test_without_rules_the_snapshot_of_a_pod_set_is_unchanged_but_for_its_placement_slot() -> None:
    state = _gpu_state(rules=False)
    assert state.tas.usage["tas"]["n1"] == {"cpu": 1000, "nvidia.com/gpu": 3, "pods": 1}
    assert all(ps.placement is None for wl in state.workloads.values() for ps in wl.pod_sets)


def test_a_shape_encodes_a_pod_set_without_placement_as_before_version_45() -> None:
    """Shapes parked in an older snapshot (bytes) still match equal workloads: a pod set with no placement of its
    own is encoded in a shape without the placement slot; one with it, with it."""
    fields = len(PodSetInfo.__struct_fields__)
    plain = pod_set_info(o.PodSet(name="main", count=1, template=_template({"cpu": "1"})))
    ruled = pod_set_info(o.PodSet(name="main", count=1, template=_template({"nvidia.com/gpu": "1"})),
                         rules=GPU_TO_CREDITS)
    assert len(msgspec.msgpack.decode(_nameless((plain,)))) == fields - 1
    assert len(msgspec.msgpack.decode(_nameless((ruled,)))) == fields
