"""Kueue's visibility API over the projected state: which workloads are pending, in what order, at which positions.

Each ``visibility/*.yaml`` case is a state loaded as ``kueue-es schedule`` loads it (``objects``, an optional
Kueue ``config``), then ``cycles`` scheduling cycles run as ``kueue-es schedule`` runs them, then the ``then``
objects upserted (arrivals after those cycles). ``parked``/``active``/``sticky``/``preemptor`` assert where
workloads wait, so a case shows that parked (inadmissible) ones are listed too. Each query names
``clusterQueue`` or ``localQueue`` (``NS/NAME``) with optional ``offset`` and ``limit``, and expects
``want`` — the items in order as
``{workload, localQueue, inClusterQueue, inLocalQueue, priority}``, or ``notFound`` — and/or ``document``, the
whole PendingWorkloadsSummary.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fixtures import fastyaml

from events import schema as ev
from events.manifests import load_text
from kueue_es.scheduler import visibility
from kueue_es.scheduler.config import DEFAULT
from kueue_es.scheduler.cycle import run_cycle
from kueue_es.statefile import LoadedState, load_state
from projections import queue_status
from projections.owners import WorkloadOwners

CASES = sorted((Path(__file__).parent / "visibility").glob("*.yaml"))


def load_case(spec: dict[str, Any], tmp_path: Path, *, reverse: bool = False,
              config: bool = True) -> tuple[LoadedState, WorkloadOwners]:
    objects = list(reversed(spec["objects"])) if reverse else spec["objects"]
    docs = [*objects, *([spec["config"]] if config and "config" in spec else [])]
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "state.yaml"
    path.write_text(fastyaml.safe_dump_all(docs))
    owners = WorkloadOwners()
    loaded = load_state(str(path), record=owners.apply)
    state = loaded.state
    for _ in range(spec.get("cycles", 0)):
        for e in run_cycle(state, loaded.config, loaded.now, state.last_cycle + 1):
            state.apply(ev.Record(state.offset + 1, e))
    if "then" in spec:
        for obj in load_text(fastyaml.safe_dump_all(spec["then"])).objects:
            rec = ev.Record(state.offset + 1, ev.ObjectUpserted(time=loaded.now, key=obj.key, uid=obj.metadata.uid,
                                                                obj=obj))
            state.apply(rec)
            owners.apply(rec)
    return loaded, owners


def query(loaded: LoadedState, q: dict[str, Any]) -> list[visibility.PendingWorkload] | None:
    kw = {"offset": q.get("offset"), "limit": q.get("limit")}
    if "clusterQueue" in q:
        return visibility.in_cluster_queue(loaded.state, loaded.config, q["clusterQueue"], **kw)
    ns, name = q["localQueue"].split("/")
    return visibility.in_local_queue(loaded.state, loaded.config, ns, name, **kw)


def rows(items: list[visibility.PendingWorkload]) -> list[dict[str, Any]]:
    return [{"workload": w.key, "localQueue": w.local_queue, "inClusterQueue": w.position_in_cluster_queue,
             "inLocalQueue": w.position_in_local_queue, "priority": w.priority} for w in items]


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_visibility_case(case: Path, tmp_path: Path) -> None:
    spec = fastyaml.safe_load(case.read_text())
    loaded, owners = load_case(spec, tmp_path)
    state = loaded.state
    for key in spec.get("parked", []):
        wl = state.workloads[key]
        assert key in state.queues[wl.cluster_queue].inadmissible, f"{key} is not parked"
    for key in spec.get("active", []):
        wl = state.workloads[key]
        assert key in state.queues[wl.cluster_queue].entries, f"{key} is not active"
    if "sticky" in spec:
        wl = state.workloads[spec["sticky"]]
        assert state.queues[wl.cluster_queue].sticky == spec["sticky"]
    if "preemptor" in spec:  # waiting for its preemptions, sticky or not
        wl = state.workloads[spec["preemptor"]]
        assert state.queues[wl.cluster_queue].preemptor == spec["preemptor"]
    assert spec["queries"]
    for q in spec["queries"]:
        got = query(loaded, q)
        assert "want" in q or "document" in q, f"{case.stem}: query {q} expects nothing"
        if q.get("want") == "notFound":
            assert got is None, f"{q}: {got}"
            continue
        assert got is not None, f"{q}: not found"
        if "want" in q:
            assert rows(got) == q["want"], q
        if "document" in q:
            assert visibility.summary(got, owners=owners) == q["document"], q


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_the_answer_does_not_depend_on_arrival_order(case: Path, tmp_path: Path) -> None:
    spec = fastyaml.safe_load(case.read_text())
    forward, _ = load_case(spec, tmp_path / "f")
    backward, _ = load_case(spec, tmp_path / "b", reverse=True)
    for q in spec["queries"]:
        assert query(forward, q) == query(backward, q), q


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_the_status_counts_what_is_listed(case: Path, tmp_path: Path) -> None:
    """``status.pendingWorkloads`` of every ClusterQueue and LocalQueue counts the workloads the visibility
    API lists for it (Kueue counts a ClusterQueue's heap, inadmissible set and the workload in flight,
    PendingTotal, and lists the same three, Snapshot over DumpAll); a stopped LocalQueue shows 0 and is not
    found."""
    loaded, _ = load_case(fastyaml.safe_load(case.read_text()), tmp_path)
    state = loaded.state
    for cq in sorted(state.cluster_queues):
        listed = visibility.in_cluster_queue(state, loaded.config, cq, limit=visibility.MAX_LIMIT)
        status = queue_status.cluster_queue_status(state, cq, loaded.now)
        assert listed is not None and status is not None
        assert status["pendingWorkloads"] == len(listed), cq
    for key in sorted(state.local_queues):
        ns, name = key.split("/")
        listed = visibility.in_local_queue(state, loaded.config, ns, name, limit=visibility.MAX_LIMIT)
        status = queue_status.local_queue_status(state, key, loaded.now)
        assert status is not None
        assert status["pendingWorkloads"] == len(listed or []), key


def test_without_admission_fair_sharing_priority_orders(tmp_path: Path) -> None:
    spec = fastyaml.safe_load((Path(__file__).parent / "visibility" / "admission-fair-sharing.yaml").read_text())
    loaded, _ = load_case(spec, tmp_path, config=False)
    assert loaded.config is DEFAULT
    got = visibility.in_cluster_queue(loaded.state, loaded.config, "cq")
    assert got is not None
    assert [w.key for w in got] == ["team/a-high", "team/b-low", "team/b-late"]


def test_visibility_follows_the_default_queue_order(tmp_path: Path) -> None:
    """queue-order-timestamps.yaml without its configuration: the PodsReady-timeout eviction moves the queue time,
    the preemption while borrowing does not."""
    spec = fastyaml.safe_load((Path(__file__).parent / "visibility" / "queue-order-timestamps.yaml").read_text())
    loaded, _ = load_case(spec, tmp_path, config=False)
    got = visibility.in_cluster_queue(loaded.state, loaded.config, "cq")
    assert got is not None
    assert [w.key for w in got] == ["team/reclaimed", "team/fresh", "team/timed-out"]


@pytest.mark.parametrize(("limit", "offset", "want"), [
    (None, None, (1000, 0)), (0, 0, (1000, 0)), (5, 3, (5, 3)), (-1, -7, (0, 0)),
    (100_000, 0, (100_000, 0)), (100_001, 0, (100_000, 0)), (10**12, 10**12, (100_000, 10**12)),
])
def test_limit_and_offset_are_defaulted_and_clamped_as_kueue_does(limit, offset, want) -> None:
    assert visibility.bounded(limit, offset) == want


def test_summary_document_shape() -> None:
    item = visibility.PendingWorkload(key="ns/w", name="w", namespace="ns", created=1_701_790_923_000, priority=3,
                                      local_queue="user-queue", position_in_cluster_queue=4,
                                      position_in_local_queue=1)
    doc = visibility.summary([item], "v1beta1")
    assert doc == {
        "kind": "PendingWorkloadsSummary", "apiVersion": "visibility.kueue.x-k8s.io/v1beta1", "metadata": {},
        "items": [{"metadata": {"name": "w", "namespace": "ns", "creationTimestamp": "2023-12-05T15:42:03Z"},
                   "priority": 3, "localQueueName": "user-queue", "positionInClusterQueue": 4,
                   "positionInLocalQueue": 1}]}
    assert list(doc["items"][0]) == ["metadata", "priority", "localQueueName", "positionInClusterQueue",
                                      "positionInLocalQueue"]


def test_a_memoised_order_lasts_until_the_next_record_or_another_configuration(tmp_path: Path) -> None:
    spec = fastyaml.safe_load((Path(__file__).parent / "visibility" / "admission-fair-sharing.yaml").read_text())
    loaded, _ = load_case(spec, tmp_path)
    state = loaded.state
    fair = [w.key for w in visibility.in_cluster_queue(state, loaded.config, "cq") or []]
    assert fair == ["team/b-low", "team/b-late", "team/a-high"]
    assert [w.key for w in visibility.in_cluster_queue(state, DEFAULT, "cq") or []] == [
        "team/a-high", "team/b-low", "team/b-late"]
    late = load_text(fastyaml.safe_dump({**spec["objects"][-1], "metadata": {
        "name": "b-urgent", "namespace": "team", "uid": "u-b-urgent", "creationTimestamp": "2024-01-01T00:00:30Z"},
        "spec": {**spec["objects"][-1]["spec"], "priority": 50}})).objects[0]
    state.apply(ev.Record(state.offset + 1, ev.ObjectUpserted(time=loaded.now, key=late.key, uid="u-b-urgent",
                                                              obj=late)))
    assert [w.key for w in visibility.in_cluster_queue(state, DEFAULT, "cq") or []] == [
        "team/b-urgent", "team/a-high", "team/b-low", "team/b-late"]
    assert [w.key for w in visibility.in_cluster_queue(state, loaded.config, "cq") or []] == [
        "team/b-urgent", "team/b-low", "team/b-late", "team/a-high"]


def test_an_admission_fair_sharing_page_is_read_without_sorting_the_whole_queue(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The served pages rank the LocalQueues by usage and read their own sorted lists; only the definition
    (:func:`visibility.straightforward`) sorts every pending workload."""
    spec = fastyaml.safe_load((Path(__file__).parent / "visibility" / "admission-fair-sharing.yaml").read_text())
    loaded, _ = load_case(spec, tmp_path)
    want = visibility.straightforward(loaded.state, loaded.config, "cq")
    want_lq = visibility.straightforward(loaded.state, loaded.config, namespace="team", name="lq-b", offset=1)
    loaded.state.derived.clear()

    def no_sort(*_: Any) -> list[str]:
        raise AssertionError("the whole queue order was sorted")

    monkeypatch.setattr(visibility, "_order", no_sort)
    assert visibility.in_cluster_queue(loaded.state, loaded.config, "cq") == want
    assert [w.key for w in want or []] == ["team/b-low", "team/b-late", "team/a-high"]
    got = visibility.in_local_queue(loaded.state, loaded.config, "team", "lq-b", offset=1)
    assert got == want_lq and [(w.key, w.position_in_cluster_queue) for w in got or []] == [("team/b-late", 1)]
