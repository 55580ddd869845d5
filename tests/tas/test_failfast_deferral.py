"""FailFast's deferral of a failed node replacement (Kueue main, scheduler.go ``tryDeferFailedTASReplacement``,
@03efb7f0): what the deferred pass says. Its placement and host-port rules are in the scenarios
``tas-node-failure-in-flight-*``."""

from __future__ import annotations

from fixtures.provflow import Flow

from events import schema as ev
from kueue_es.scheduler.tasplace import DEFERRED_REPLACEMENT


def test_a_deferred_replacement_fails_its_pass_in_kueues_words() -> None:
    """Kueue requeues the deferred entry for its second pass with the message it set, which its SecondPassFailed
    Event carries: not the replacement's own failure (which the evictions in flight will lift)."""
    f = Flow("tas-node-failure-in-flight-preemption-deferred.yaml")
    x0 = f.state.nodes["x0"]
    f.at(10, [ev.ObjectDeleted(time=0, key="x0", uid=x0.metadata.uid, kind="Node")])
    (failed,) = f.at(11)
    assert isinstance(failed, ev.SecondPassFailed) and failed.key == "default/foo"
    assert failed.message == DEFERRED_REPLACEMENT == (
        "Workload has an unhealthy node, but will fit after in-flight evictions complete")
