"""MultiKueue copies wait for the workload's other admission checks: while it is on no worker yet and a check
other than its MultiKueue one is not Ready, no copy is made and none deleted, whatever the dispatcher (Kueue
#9866, in v0.20 and cherry-picked to 0.16 as #10405: ``nominateAndSynchronizeWorkers`` returns first, else
"the Job may start running on the selected worker before the other admission checks are satisfied")."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import msgspec
import pytest
from fixtures.multikueue_states import KEY, START, WorkerApi, apply, other_check_state, shown_nominating

from connectors.k8s.multikueue import MultiKueueConnector
from connectors.k8s.multikueue_worker import Worker
from events import objects as o
from events import schema as ev
from kueue_es.scheduler import settle
from kueue_es.scheduler.multikueue import copies_on
from projections.admissionchecks import ALL_AT_ONCE_DISPATCHER, INCREMENTAL_DISPATCHER

EXTERNAL = "example.com/dispatcher"


class Manager:
    async def get(self, resource, name: str, namespace: str = "") -> bytes:
        return msgspec.json.encode({"metadata": {"name": name, "namespace": namespace, "labels": {}},
                                    "spec": {"queueName": "lq", "podSets": []}})


def _connector(state, workers: dict[str, WorkerApi]) -> MultiKueueConnector:
    journal = SimpleNamespace(mirror=SimpleNamespace(state=state, workloads={}))
    mk = MultiKueueConnector(Manager(), journal, append=None)  # type: ignore[arg-type]
    for name, client in workers.items():
        worker = Worker(name, b"kubeconfig", client=client, connected=True)  # type: ignore[arg-type]
        mk.workers[name] = worker
    return mk


def _nominated_by(state, dispatcher: str, t: int) -> None:
    """What ``dispatcher`` nominated: an external one writes worker1 on the Workload, the log observes it."""
    if dispatcher == EXTERNAL:
        apply(state, shown_nominating(state, ["worker1"], t))


def _ready(t: int, check_state: str = "Ready") -> ev.AdmissionCheckStateChanged:
    """The other check's controller set its state (``check_state``) on the workload."""
    return ev.AdmissionCheckStateChanged(time=t, key=KEY, check="other", state=check_state)


LEFT = {"metadata": {"name": "job-a", "namespace": "default", "uid": "left",
                     "labels": {"kueue.x-k8s.io/multikueue-origin": "multikueue"}}}
"""A copy of the workload on worker2, this origin's."""


@pytest.mark.asyncio
@pytest.mark.parametrize("dispatcher", [ALL_AT_ONCE_DISPATCHER, INCREMENTAL_DISPATCHER, EXTERNAL])
async def test_no_copy_is_made_nor_deleted_until_every_other_check_is_ready(tmp_path: Path, dispatcher: str
                                                                             ) -> None:
    state, config = other_check_state(tmp_path, dispatcher)
    _nominated_by(state, dispatcher, START + 1)
    wl = state.workloads[KEY]
    assert wl.check_states["other"].state == "Pending" and wl.reserving and not wl.cluster_name
    worker1, worker2 = WorkerApi(), WorkerApi()
    mk = _connector(state, {"worker1": worker1, "worker2": worker2})
    mk.workers["worker2"].workloads[KEY] = LEFT
    await mk.sync_copies("multikueue")
    assert (worker1.created, worker2.created, worker2.deleted) == ([], [], []), "none made, none deleted"

    ready = _ready(START + 2)
    mk._on_applied([ev.Record(state.offset + 1, ready)])  # what the log moved, as the connector follows it
    apply(state, ready)
    settle(state, config, now=START + 2)
    await mk.sync_copies("multikueue")
    assert [c["metadata"]["name"] for c in worker1.created] == ["job-a"], "made once the other check is Ready"
    if dispatcher == EXTERNAL:  # worker1 alone nominated: the copy left on worker2 goes
        assert worker2.deleted == ["Workload:default/job-a"]


def test_a_copy_made_before_still_wins_while_the_copies_are_held_back(tmp_path: Path) -> None:
    """Copies made while every check was Ready, one gone Pending since: Kueue reads the copies before its
    guard, so the first admitted places the workload there, and its copies then follow that worker."""
    state, config = other_check_state(tmp_path, ALL_AT_ONCE_DISPATCHER)
    apply(state, _ready(START + 1))
    settle(state, config, now=START + 1)
    assert copies_on(state, state.workloads[KEY]) == ("worker1", "worker2")
    apply(state, _ready(START + 2, "Pending"))
    assert copies_on(state, state.workloads[KEY]) is None
    admitted = o.Condition(type="Admitted", status="True", reason="Admitted",
                           last_transition_time="2024-01-01T00:00:03Z")
    apply(state, ev.RemoteWorkloadObserved(time=START + 3, key=KEY, cluster="worker1", conditions=[admitted]))
    decided = settle(state, config, now=START + 3)
    assert [type(d).__name__ for d in decided[0]] == ["WorkerClusterAssigned", "AdmissionCheckUpdated"]
    assert copies_on(state, state.workloads[KEY]) == ("worker1",)
