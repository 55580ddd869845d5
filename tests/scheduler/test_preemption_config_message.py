"""ConfigurablePreemptions: the message Kueue v0.20 writes on a PreemptionConfig's victim (its Preempted and Evicted
conditions and Events), naming the preemptor, the config and the rules that chose it."""

from __future__ import annotations

from kueue_es.scheduler.preemption import configured_message


def test_the_configured_message_lists_rules_by_name_with_their_selector_indexes() -> None:
    """The preemptor's key, the config, then each rule that selected the victim with its selectors' indexes. Kueue
    keeps the rules in a Go map (random order): kueue-es sorts them by name, one rule met twice having its indexes
    together."""
    assert configured_message("ns/p", "c", (("b", (0,)), ("a", (2,)), ("b", (3,)))) == (
        "Preempted by ns/p because of preemption config c rule a/2; b/0,3")


def test_the_configured_message_is_not_cut_to_an_underlying_causes_length() -> None:
    """Kueue writes the config's name as the eviction's underlying cause, not this text: nothing cuts it to the
    316 characters an ``underlyingCause`` holds."""
    long = configured_message("ns/p", "c", tuple((f"rule-{i:03}", (0, 1)) for i in range(40)))
    assert len(long) > 316 and long.endswith("rule-038/0,1; rule-039/0,1")
