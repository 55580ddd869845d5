"""ConfigurablePreemptions' alpha PreemptionConfig CRD against the real apiserver: it installs (v1alpha1 only,
cluster-scoped), a PreemptionConfig is created and decoded by the view the watcher uses, the CRD's bounds refuse
an unknown trigger, scope or comparison, a negative bound, a minValue above the maxValue, a bad rule name and two rules of one name (not a label
selector Kueue cannot parse: the CRD leaves it free), and the connector watches PreemptionConfigs into the log, their
deletion too, and an update to such a selector."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator

import msgspec
import pytest
from kubehelp import connect, eventually

from connectors.k8s import crds
from connectors.k8s.errors import Invalid, KubeError
from connectors.k8s.journal import LocalJournal
from connectors.k8s.mirror import Mirror
from connectors.k8s.resources import PREEMPTION_CONFIGS
from connectors.k8s.watch import Watcher
from events import objects as o
from events import schema as ev
from events.log import MemoryLog

pytestmark = pytest.mark.kube


def _config(name: str, rules: list) -> dict:
    return {"apiVersion": "kueue.x-k8s.io/v1alpha1", "kind": "PreemptionConfig", "metadata": {"name": name},
            "spec": {"rules": rules}}


def _rule(**over) -> dict:
    return {"name": "r", "activationPolicy": {"trigger": "InsufficientQuota"},
            "candidateSelectors": [{"scope": "WithinCohortTree", "priority": {"mode": "Base", "comparison": "LessThan"},
                                    "numericLabels": [{"key": "example.com/size", "comparison": "LessThan",
                                                       "minValue": 0}]}], **over}


@pytest.mark.asyncio
async def test_the_preemption_config_crd_serves_and_bounds_the_kind(kube_apiserver) -> None:
    async with await connect(kube_apiserver) as kc:
        assert await crds.install(kc, docs=[crds.preemption_config_crd()]) == ["preemptionconfigs.kueue.x-k8s.io"]
        sfx = secrets.token_hex(3)
        await kc.create(PREEMPTION_CONFIGS, _config(f"hero-{sfx}", [_rule()]))
        got = msgspec.json.decode(await kc.get(PREEMPTION_CONFIGS, f"hero-{sfx}"), type=o.PreemptionConfig)
        assert got.spec.rules[0].candidate_selectors[0].priority == o.PreemptionConfigPriority(mode="Base", comparison="LessThan")
        bad = [
            [_rule(activationPolicy={"trigger": "Sometimes"})],
            [_rule(candidateSelectors=[{"scope": "SameCohort"}])],
            [_rule(candidateSelectors=[{"scope": "AnyClusterQueue",
                                        "numericLabels": [{"key": "k", "comparison": "Less"}]}])],
            [_rule(candidateSelectors=[{"scope": "AnyClusterQueue", "numericLabels": [{"key": "k", "maxValue": -1}]}])],
            [_rule(candidateSelectors=[{"scope": "AnyClusterQueue",
                                        "numericLabels": [{"key": "k", "minValue": 5, "maxValue": 4}]}])],
            [_rule(candidateSelectors=[{"scope": "AnyClusterQueue", "priority": {"mode": "Effective",
                                                                                 "comparison": "LessThan"}}])],
            [_rule(name="Bad_Name")],
            [_rule(), _rule()],
            [_rule(activationPolicy={})],
        ]
        for i, rules in enumerate(bad):
            with pytest.raises((Invalid, KubeError)):
                await kc.create(PREEMPTION_CONFIGS, _config(f"bad-{i}-{sfx}", rules))


async def _events(log: MemoryLog, name: str) -> list[ev.ObjectUpserted | ev.ObjectDeleted]:
    return [r.event async for r in log.read()
            if isinstance(r.event, ev.ObjectUpserted | ev.ObjectDeleted) and r.event.key == name]


@contextlib.asynccontextmanager
async def _watching(kc) -> AsyncIterator[tuple[MemoryLog, LocalJournal, Watcher]]:
    """PreemptionConfigs watched into a fresh log: the CRD installed, the watch synced; stopped on exit."""
    await crds.install(kc, docs=[crds.preemption_config_crd()])
    log = MemoryLog()
    journal = LocalJournal(log, Mirror())
    watcher = Watcher(kc, journal.mirror, journal.append, kinds=("PreemptionConfig",), timeout_seconds=30,
                      backoff_s=0.2)
    task = asyncio.create_task(watcher.run())
    try:
        await asyncio.wait_for(watcher.wait_synced(), 30)
        yield log, journal, watcher
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@pytest.mark.asyncio
async def test_preemption_configs_are_watched_into_the_log(kube_apiserver) -> None:
    async with await connect(kube_apiserver) as kc, _watching(kc) as (log, _, _):
        name = f"watched-{secrets.token_hex(3)}"
        await kc.create(PREEMPTION_CONFIGS, _config(name, [_rule()]))

        async def upserted() -> o.PreemptionConfig | None:
            found = [e.obj for e in await _events(log, name) if isinstance(e, ev.ObjectUpserted)]
            return found[-1] if found and isinstance(found[-1], o.PreemptionConfig) else None

        pc = await eventually(upserted, what="the PreemptionConfig in the log")
        assert pc.spec.rules[0].activation_policy.trigger == "InsufficientQuota"
        await kc.delete(PREEMPTION_CONFIGS, name)

        async def deleted() -> bool:
            return any(isinstance(e, ev.ObjectDeleted) and e.kind == "PreemptionConfig"
                       for e in await _events(log, name))

        await eventually(deleted, what="the PreemptionConfig's deletion in the log")


@pytest.mark.asyncio
async def test_an_update_to_a_selector_kueue_cannot_parse_is_stored_and_watched(kube_apiserver) -> None:
    async with await connect(kube_apiserver) as kc, _watching(kc) as (_, journal, watcher):
        name = f"unparsable-{secrets.token_hex(3)}"
        try:
            await kc.create(PREEMPTION_CONFIGS, _config(name, [_rule(name="old")]))
            stored = msgspec.json.decode(await kc.get(PREEMPTION_CONFIGS, name))
            stored["spec"]["rules"] = [_rule(name="new", preemptorSelector={
                "matchExpressions": [{"key": "test", "operator": "invalid"}]})]
            await kc.replace(PREEMPTION_CONFIGS, name, stored)  # the apiserver takes it: no enum, no webhook

            async def replaced() -> bool:
                held = journal.mirror.state.preemption_configs.get(name)
                return held is not None and [r.name for r in held.spec.rules] == ["new"]

            await eventually(replaced, what="the updated PreemptionConfig's rules in the log")
            assert not watcher.stats.skipped
        finally:
            with contextlib.suppress(KubeError):
                await kc.delete(PREEMPTION_CONFIGS, name)
