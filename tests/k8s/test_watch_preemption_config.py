"""A PreemptionConfig whose label selectors Kueue cannot parse is stored by the apiserver (the CRD leaves a selector's
operator, keys and values free strings; Kueue serves no webhook for the kind), so the watch takes it like any other:
an update that makes a valid config's selector unparsable replaces the old rules in the log, as Kueue's next read of
the object sees only the new ones. Skipped, the log would keep preempting by rules the user changed."""

from __future__ import annotations

import msgspec
import pytest

from connectors.k8s.client import WatchEvent
from connectors.k8s.journal import LocalJournal
from connectors.k8s.mirror import Mirror
from connectors.k8s.resources import BY_KIND
from connectors.k8s.watch import Watcher
from events.log import MemoryLog

KIND = "PreemptionConfig"


def _config(rv: str, *rules: dict) -> msgspec.Raw:
    return msgspec.Raw(msgspec.json.encode({
        "apiVersion": "kueue.x-k8s.io/v1alpha1", "kind": KIND,
        "metadata": {"name": "pc", "uid": "u-pc", "resourceVersion": rv}, "spec": {"rules": list(rules)}}))


def _rule(name: str, trigger: str = "Always", **over: object) -> dict:
    return {"name": name, "activationPolicy": {"trigger": trigger},
            "candidateSelectors": [{"scope": "WithinClusterQueue"}], **over}


UNPARSABLE = [
    {"preemptorSelector": {"matchExpressions": [{"key": "test", "operator": "invalid"}]}},
    {"candidateSelectors": [{"scope": "WithinClusterQueue", "labelSelector": {
        "matchExpressions": [{"key": "kind", "operator": "Exists", "values": ["batch"]}]}}]},
    {"candidateSelectors": [{"scope": "AnyClusterQueue", "clusterQueueSelector": {
        "matchLabels": {"bad key!": "x"}}}]},
]


@pytest.mark.asyncio
@pytest.mark.parametrize("bad", UNPARSABLE, ids=["preemptorSelector", "labelSelector", "clusterQueueSelector"])
async def test_an_update_to_an_unparsable_selector_replaces_the_old_rules(bad: dict) -> None:
    journal = LocalJournal(MemoryLog(), Mirror())
    watcher = Watcher(None, journal.mirror, journal.append, kinds=[KIND])  # type: ignore[arg-type]  # no reads
    resource = BY_KIND[KIND]
    await watcher._handle(resource, WatchEvent(type="ADDED", object=_config("1", _rule("old"))))
    await watcher._handle(resource, WatchEvent(type="MODIFIED", object=_config(
        "2", _rule("new", "InsufficientQuota", **bad))))
    held = journal.mirror.state.preemption_configs["pc"]
    assert [(r.name, r.activation_policy.trigger) for r in held.spec.rules] == [("new", "InsufficientQuota")]
    assert not watcher.stats.skipped
