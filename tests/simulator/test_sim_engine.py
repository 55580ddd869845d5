"""The engine: decisions appended as one batch per decide() call and folded at the offsets the log gave."""

from __future__ import annotations

import anyio
import pytest

from events import objects as o
from events import schema as ev
from events.log import MemoryLog
from kueue_es import engine
from projections.cluster import ClusterState


def _objects() -> list[o.KObject]:
    quota = o.ResourceQuota(name="cpu", nominal_quota="2")
    return [
        o.ResourceFlavor(metadata=o.ObjectMeta(name="rf")),
        o.Namespace(metadata=o.ObjectMeta(name="ns")),
        o.ClusterQueue(metadata=o.ObjectMeta(name="cq"), spec=o.ClusterQueueSpec(
            namespace_selector=o.LabelSelector(),
            resource_groups=[o.ResourceGroup(covered_resources=["cpu"],
                                             flavors=[o.FlavorQuotas(name="rf", resources=[quota])])])),
        o.LocalQueue(metadata=o.ObjectMeta(name="lq", namespace="ns"), spec=o.LocalQueueSpec(cluster_queue="cq")),
    ] + [
        o.Workload(metadata=o.ObjectMeta(name=f"w{i}", namespace="ns", uid=f"uid-{i}"),
                   spec=o.WorkloadSpec(queue_name="lq", pod_sets=[o.PodSet(template=o.PodTemplateSpec(
                       spec=o.PodSpec(containers=[o.Container(resources=o.ResourceRequirements(
                           requests={"cpu": "1"}))])))]))
        for i in range(3)
    ]


def _upserts(t: int) -> list[ev.AnyEvent]:
    return [ev.ObjectUpserted(time=t, key=x.key, uid=x.metadata.uid, obj=x) for x in _objects()]


def test_observe_then_settle_keeps_state_and_log_in_step() -> None:
    async def go() -> None:
        log, state = MemoryLog(), ClusterState()
        seen: list[list[ev.Record]] = []
        recs = await engine.observe(log, state, _upserts(1000), seen.append)
        assert [r.offset for r in recs] == list(range(len(recs))) and seen == [recs]
        n = await engine.settle(log, state, on_records=seen.append)
        assert state.offset == await log.end_offset() - 1
        decisions = [r for batch in seen[1:] for r in batch]
        assert n == len(decisions) > 0
        reserved = {r.event.key for r in decisions if isinstance(r.event, ev.QuotaReserved)}
        assert reserved == {"ns/w0", "ns/w1"}  # 2 cpu of quota, 1 cpu each; w2 waits
        stored = [r async for r in log.read()]
        assert [r.event for r in stored] == [r.event for batch in seen for r in batch]
        assert all(isinstance(r.event, ev.Decision) and r.event.input < r.offset for r in decisions)
        # one decide() call is one batch: every record of a batch carries the same cycle
        for batch in seen[1:]:
            assert len({r.event.cycle for r in batch}) == 1
        assert await engine.settle(log, state) == 0  # quiet: nothing more to say

    anyio.run(go)


def test_settle_gives_up_on_a_scheduler_that_never_settles(monkeypatch) -> None:
    def chatty(state, config, now=None):
        return [ev.WorkloadPending(time=state.time, key="ns/w2", uid="uid-2", reason="R", message="again",
                                   cycle=state.last_cycle + 1, input=state.offset)]

    monkeypatch.setattr(engine, "decide", chatty)

    async def go() -> None:
        log, state = MemoryLog(), ClusterState()
        await engine.observe(log, state, _upserts(0))
        with pytest.raises(engine.SchedulerLivelock, match="did not settle after 5"):
            await engine.settle(log, state, max_batches=5)
        assert state.offset == await log.end_offset() - 1

    anyio.run(go)
