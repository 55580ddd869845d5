"""A Pod that leaves the non-terminal Pod watch by succeeding, while its Workload waits for its pods' scheduling
(WaitForPodsReadyUnscheduledTimeout), is read once and kept as succeeded, as Kueue counts it; kept ones go at a
relist once no longer needed (:mod:`connectors.k8s.succeeded_pods`)."""

from __future__ import annotations

import asyncio

import msgspec
import pytest
from fixtures.eventgen import meta, upsert

from connectors.k8s import succeeded_pods as sp
from connectors.k8s.errors import Forbidden, NotFound
from events import objects as o
from tests.projections.test_proj_pods_scheduled import ON, SCHEDULED, UNSCHEDULED, Log, at


class _Client:
    """Answers a Pod read with ``pods`` (name -> the Pod as the apiserver has it; absent: 404)."""

    def __init__(self, pods: dict[str, o.Pod]) -> None:
        self.pods = pods
        self.reads: list[str] = []

    async def get(self, resource, name: str, namespace: str = "", subresource: str = "") -> bytes:  # noqa: ANN001
        self.reads.append(name)
        if name not in self.pods:
            raise NotFound("not found", 404, "NotFound")
        return msgspec.json.encode(self.pods[name])


def _pod(name: str, phase: str, uid: str = "") -> o.Pod:
    m = meta(name, "ns", annotations={"kueue.x-k8s.io/workload": "w1"}, labels={"kueue.x-k8s.io/podset": "main"})
    if uid:
        m = msgspec.structs.replace(m, uid=uid)
    return o.Pod(metadata=m, spec=o.PodSpec(node_name="n1"),
                 status=o.PodStatus(phase=phase, conditions=[o.Condition(type="PodScheduled", status="True")]))


def test_a_succeeded_pod_of_a_waiting_workload_is_kept_as_succeeded() -> None:
    log = Log(ON)
    log.admit(at(1))
    log.pod(at(3), "p0", bound=True)
    assert log.shown() == UNSCHEDULED
    left = log.state.pods["ns/p0"]
    assert sp.awaits(log.state, left)
    done = _pod("p0", "Succeeded", uid=left.metadata.uid)
    client = _Client({"p0": done})
    kept = asyncio.run(sp.left_succeeded(client, left))  # type: ignore[arg-type]
    assert kept is not None and kept.status.phase == "Succeeded" and kept.metadata.annotations == {
        "kueue.x-k8s.io/workload": "w1"}
    gap = asyncio.run(sp.Reads().unlisted(client, log.state, "ns/p0"))
    assert gap is not None and gap.status.phase == "Succeeded", "succeeded while no watch ran: a relist keeps it"
    log.observe(upsert(kept, at(4)))
    assert asyncio.run(sp.Reads().unlisted(client, log.state, "ns/p0")) is not None, "succeeded, the workload waits"
    assert asyncio.run(sp.Reads().unlisted(_Client({}), log.state, "ns/p0")) is None, "gone: deleted"
    log.pod(at(5), "p1", bound=True)
    assert log.shown() == SCHEDULED, "the succeeded pod fills its slot"
    assert not sp.awaits(log.state, log.state.pods["ns/p0"]), "PodsScheduled=True: nothing more to wait for"
    assert asyncio.run(sp.Reads().unlisted(client, log.state, "ns/p0")) is None, "a relist lets it go"


def test_a_failed_gone_or_recreated_pod_is_not_kept_and_nothing_is_read_while_untracked() -> None:
    log = Log(ON)
    log.admit(at(1))
    log.pod(at(3), "p0", bound=True)
    left = log.state.pods["ns/p0"]
    for now in ({"p0": _pod("p0", "Failed", uid=left.metadata.uid)}, {},
                {"p0": _pod("p0", "Succeeded", uid="another")}):
        assert asyncio.run(sp.left_succeeded(_Client(now), left)) is None  # type: ignore[arg-type]
    off = Log({"waitForPodsReady": {"timeout": "5m"}})
    off.admit(at(1))
    off.pod(at(3), "p0", bound=True)
    assert not sp.awaits(off.state, off.state.pods["ns/p0"]), "not tracked: the watch reads nothing"
    pending = Log(ON)
    pending.pod(at(3), "p0", bound=True)
    assert not sp.awaits(pending.state, pending.state.pods["ns/p0"]), "not admitted"


class _Refusing(_Client):
    """Refuses the first ``refusals`` reads (a GET forbidden for that Pod, a 503 loop)."""

    def __init__(self, pods: dict[str, o.Pod], refusals: int) -> None:
        super().__init__(pods)
        self.refusals = refusals

    async def get(self, resource, name: str, namespace: str = "", subresource: str = "") -> bytes:  # noqa: ANN001
        if self.refusals:
            self.refusals -= 1
            self.reads.append(name)
            raise Forbidden(f'pods "{name}" is forbidden', 403, "Forbidden")
        return await super().get(resource, name, namespace, subresource)


def test_a_pod_whose_read_keeps_failing_counts_as_gone_after_a_few_tries_and_a_failure_is_raised_before() -> None:
    """The watch resumes before a Pod event whose read failed, so a read that always fails would hold back every
    later Pod event: one Pod version gets ``READ_ATTEMPTS`` tries, then its leaving is a deletion."""
    log = Log(ON)
    log.admit(at(1))
    log.pod(at(3), "p0", bound=True)
    left = log.state.pods["ns/p0"]
    done = _pod("p0", "Succeeded", uid=left.metadata.uid)
    reads = sp.Reads()
    forbidden = _Refusing({"p0": done}, refusals=100)
    for _ in range(sp.READ_ATTEMPTS - 1):
        with pytest.raises(Forbidden):
            asyncio.run(reads.left_succeeded(forbidden, left))  # type: ignore[arg-type]
    assert asyncio.run(reads.left_succeeded(forbidden, left)) is None  # type: ignore[arg-type]
    assert (len(forbidden.reads), reads.given_up) == (sp.READ_ATTEMPTS, 1)

    flaky = _Refusing({"p0": done}, refusals=sp.READ_ATTEMPTS - 1)
    for _ in range(sp.READ_ATTEMPTS - 1):
        with pytest.raises(Forbidden):
            asyncio.run(reads.unlisted(flaky, log.state, "ns/p0"))  # type: ignore[arg-type]
    kept = asyncio.run(reads.unlisted(flaky, log.state, "ns/p0"))  # type: ignore[arg-type]
    assert kept is not None and kept.status.phase == "Succeeded", "a read that succeeds in time is taken"
    once = _Refusing({"p0": done}, refusals=1)
    with pytest.raises(Forbidden):
        asyncio.run(reads.left_succeeded(once, left))  # type: ignore[arg-type]
    assert asyncio.run(reads.left_succeeded(once, left)) is not None, "a success forgot the earlier failures"
