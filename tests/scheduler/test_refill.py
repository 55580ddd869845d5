"""FairSharingRefill's budget and its Fit-only rule, on the objects of scenarios/fair-sharing-refill.yaml (a cohort
where refill-rich borrows 6 of refill-poor's quota and two cpus are free): one cycle, as ``kueue-es schedule``
runs it.

* The budget bounds the successors a cycle pops: with a budget of 1 and three free cpus, refill-poor admits its
  head and one successor; its third workload is not popped, and the over-share queue takes the last cpu.
* A successor whose assignment does not fit as it is is deferred, not acted on: WaitingForQuota, Kueue's
  "evaluated mid-cycle" message, back on its queue's heap.
* An admission with nothing behind it in its queue pops nothing and spends no budget.
"""

from __future__ import annotations

import copy
from pathlib import Path

from fixtures import fastyaml

from kueue_es.commands.schedule import schedule
from kueue_es.scheduler import refill

CASE = Path(__file__).parent / "scenarios" / "fair-sharing-refill.yaml"


def _spec() -> dict:
    return fastyaml.safe_load(CASE.read_text())


def _workload(objects: list[dict], name: str) -> dict:
    return next(o for o in objects if o["kind"] == "Workload" and o["metadata"]["name"] == name)


def _set_cpu(wl: dict, cpu: str) -> None:
    wl["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu
    if "status" in wl:
        wl["status"]["admission"]["podSetAssignments"][0]["resourceUsage"]["cpu"] = cpu


def _add(objects: list[dict], like: str, name: str, created: str, cpu: str = "1") -> None:
    wl = copy.deepcopy(_workload(objects, like))
    wl["metadata"].update(name=name, uid=f"uid-{name}", creationTimestamp=created)
    _set_cpu(wl, cpu)
    objects.append(wl)


def _run(objects: list[dict], tmp_path: Path, gate: bool = True) -> dict:
    spec = _spec()
    if not gate:
        spec["config"]["featureGates"] = {"FairSharingRefill": False}
    state, config = tmp_path / "state.yaml", tmp_path / "config.yaml"
    state.write_text(fastyaml.safe_dump_all(objects))
    config.write_text(fastyaml.safe_dump(spec["config"]))
    result = schedule(str(state), 1, str(config))
    return {i["metadata"]["name"]: i["status"] for i in result["items"]}


def _admitted(status: dict | None) -> bool:
    return status is not None and any(c["type"] == "QuotaReserved" and c["status"] == "True"
                                      for c in status.get("conditions", []))


def _quota_reserved(status: dict) -> dict:
    return next(c for c in status["conditions"] if c["type"] == "QuotaReserved")


def test_the_budget_bounds_the_successors_a_cycle_pops(tmp_path, monkeypatch) -> None:
    objects = _spec()["objects"]
    _set_cpu(_workload(objects, "rich-active"), "7")  # three cpus free
    _add(objects, "poor-b", "poor-c", "2024-01-01T00:04:00Z")
    monkeypatch.setattr(refill, "BUDGET", 1)
    got = _run(objects, tmp_path)
    assert sorted(k for k, s in got.items() if _admitted(s)) == ["poor-a", "poor-b", "rich-pending"]
    assert "poor-c" not in got  # never popped: untouched
    monkeypatch.setattr(refill, "BUDGET", 2)
    got = _run(objects, tmp_path)
    assert sorted(k for k, s in got.items() if _admitted(s)) == ["poor-a", "poor-b", "poor-c"]


def test_a_successor_that_does_not_fit_as_it_is_is_deferred(tmp_path) -> None:
    objects = [o for o in _spec()["objects"] if o["metadata"]["name"] not in ("poor-a", "poor-b")]
    _set_cpu(_workload(objects, "rich-active"), "6")  # four cpus free; refill-rich may borrow 8
    _add(objects, "rich-pending", "rich-borrow", "2024-01-01T00:05:00Z", "5")
    got = _run(objects, tmp_path)
    assert _admitted(got["rich-pending"])
    cond = _quota_reserved(got["rich-borrow"])
    assert (cond["status"], cond["reason"]) == ("False", "WaitingForQuota")
    assert cond["message"] == (
        "Workload was evaluated mid-cycle and is deferred to the next scheduling cycle: couldn't assign flavors to "
        "pod set main: insufficient unused quota for cpu in flavor default, 2 more needed")
    off = _run(objects, tmp_path, gate=False)
    assert "rich-borrow" not in off  # without refill it is not looked at in this cycle


def test_an_admission_with_an_empty_backlog_spends_no_budget(tmp_path, monkeypatch) -> None:
    objects = _spec()["objects"]
    _set_cpu(_workload(objects, "rich-active"), "7")  # three cpus free
    _workload(objects, "rich-pending")["metadata"]["creationTimestamp"] = "2024-01-01T00:05:00Z"
    monkeypatch.setattr(refill, "BUDGET", 1)
    got = _run(objects, tmp_path)
    # poor-a, then its successor poor-b; rich-pending, alone in its queue, pops nothing
    assert sorted(k for k, s in got.items() if _admitted(s)) == ["poor-a", "poor-b", "rich-pending"]


def _make_variant(wl: dict) -> None:
    wl["metadata"]["annotations"] = {"kueue.x-k8s.io/workload-allowed-resource-flavors": "default"}
    wl["metadata"]["ownerReferences"] = [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                                          "name": "parent-x", "uid": "uid-parent-x", "controller": True,
                                          "blockOwnerDeletion": True}]


def test_a_variant_admission_does_not_refill_under_concurrent_admission(tmp_path, monkeypatch) -> None:
    """Kueue's refill stops at a ConcurrentAdmission variant (``VariantAdmitted``): the cycle's snapshot does
    not hold this admission, so a successor could be a second variant of the same parent."""
    objects = _spec()["objects"]
    _set_cpu(_workload(objects, "rich-active"), "7")  # three cpus free
    _make_variant(_workload(objects, "poor-a"))
    monkeypatch.setattr(refill, "BUDGET", 1)
    spec = _spec()
    for concurrent, want in ((True, ["poor-a", "rich-pending"]),
                             (False, ["poor-a", "poor-b", "rich-pending"])):
        config = {**spec["config"],
                  "featureGates": {"FairSharingRefill": True, "ConcurrentAdmission": concurrent}}
        state, path = tmp_path / "state.yaml", tmp_path / "config.yaml"
        state.write_text(fastyaml.safe_dump_all(objects))
        path.write_text(fastyaml.safe_dump(config))
        got = {i["metadata"]["name"]: i["status"] for i in schedule(str(state), 1, str(path))["items"]}
        assert sorted(k for k, s in got.items() if _admitted(s)) == want, concurrent
