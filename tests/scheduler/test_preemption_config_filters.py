"""ConfigurablePreemptions' numeric-label constraint read as Kueue reads it: the label as a Go int32 (a sign
allowed, anything else or out of range is no value), else ``fallbackValue``, else the candidate is out; bounds
before the comparison with the preemptor's own value, which needs a value too. And which triggers' rules Kueue can
evaluate at all: a label selector it cannot parse makes its trigger fail, whatever other rules it has."""

from __future__ import annotations

from types import SimpleNamespace

import msgspec
import pytest

from events import objects as o
from kueue_es.scheduler.preemption_config import _label_value, _numeric_ok, evaluable


@pytest.mark.parametrize(("raw", "fallback", "want"), [
    ("7", None, 7), ("+7", None, 7), ("-3", None, -3), ("007", None, 7),
    ("2147483647", None, 2147483647), ("2147483648", 5, 5), ("-2147483649", None, None),
    ("7.0", -1, -1), ("", 2, 2), ("seven", None, None), ("٣", None, None), (None, 4, 4), (None, None, None),
])
def test_a_label_reads_as_a_go_int32_or_the_fallback(raw: str | None, fallback: int | None, want: int | None) -> None:
    labels = {} if raw is None else {"size": raw}
    assert _label_value(labels, "size", fallback) == want


def _wl(**labels: str) -> SimpleNamespace:
    return SimpleNamespace(labels=labels)


def test_bounds_then_the_comparison_with_the_preemptor() -> None:
    nl = o.PreemptionConfigNumericLabel(key="size", comparison="LessThan", min_value=1, max_value=8)
    preemptor = _wl(size="5")
    assert _numeric_ok(nl, preemptor, _wl(size="4"))
    assert not _numeric_ok(nl, preemptor, _wl(size="5")), "not less than the preemptor's"
    assert not _numeric_ok(nl, preemptor, _wl(size="0")), "under minValue"
    assert not _numeric_ok(nl, _wl(size="50"), _wl(size="9")), "over maxValue"
    assert not _numeric_ok(nl, preemptor, _wl()), "no label, no fallback: incomparable"
    assert not _numeric_ok(nl, _wl(), _wl(size="2")), "the preemptor has no value to compare with"


def test_a_fallback_stands_for_a_missing_label_on_either_side() -> None:
    nl = o.PreemptionConfigNumericLabel(key="size", fallback_value=-1, comparison="GreaterThanOrEqual")
    assert _numeric_ok(nl, _wl(), _wl()), "-1 >= -1"
    assert not _numeric_ok(nl, _wl(size="3"), _wl())


def test_without_a_comparison_or_bounds_the_label_must_only_hold_an_integer() -> None:
    nl = o.PreemptionConfigNumericLabel(key="size")
    assert _numeric_ok(nl, _wl(), _wl(size="12"))
    assert not _numeric_ok(nl, _wl(size="1"), _wl(size="big"))


def _config(*rules: dict) -> o.PreemptionConfig:
    return msgspec.convert({"metadata": {"name": "pc"}, "spec": {"rules": list(rules)}}, o.PreemptionConfig)


def _rule(name: str, trigger: str = "Always", preemptor: dict | None = None, **selector: object) -> dict:
    rule = {"name": name, "activationPolicy": {"trigger": trigger},
            "candidateSelectors": [{"scope": "WithinClusterQueue", **selector}]}
    if preemptor is not None:
        rule["preemptorSelector"] = preemptor
    return rule


INVALID_OPERATOR = {"matchExpressions": [{"key": "test", "operator": "invalid"}]}


def test_an_unparsable_preemptor_selector_fails_its_trigger_only() -> None:
    config = _config(_rule("good"), _rule("bad", preemptor=INVALID_OPERATOR), _rule("iq", "InsufficientQuota"))
    assert not evaluable(config, "Always", _wl()), "the sound rule of the same trigger does not save it"
    assert evaluable(config, "InsufficientQuota", _wl())


@pytest.mark.parametrize("selector", [
    {"labelSelector": INVALID_OPERATOR},
    {"labelSelector": {"matchExpressions": [{"key": "kind", "operator": "Exists", "values": ["batch"]}]}},
    {"labelSelector": {"matchExpressions": [{"key": "bad key!", "operator": "DoesNotExist"}]}},
    {"clusterQueueSelector": {"matchExpressions": [{"key": "tier", "operator": "In", "values": []}]}},
    {"clusterQueueSelector": {"matchLabels": {"tier": "not a value"}}},
], ids=["operator", "exists-with-values", "bad-key", "in-without-values", "bad-value"])
def test_an_applying_rule_whose_candidate_selector_does_not_parse_fails_its_trigger(selector: dict) -> None:
    config = _config(_rule("bad", preemptor={"matchLabels": {"team": "x"}}, **selector))
    assert not evaluable(config, "Always", _wl(team="x"))
    assert evaluable(config, "Always", _wl(team="y")), "not built for a preemptor its rule does not apply to"


def test_sound_selectors_are_evaluable() -> None:
    config = _config(_rule("r", preemptor={}, labelSelector={"matchExpressions": [
        {"key": "example.com/kind", "operator": "NotIn", "values": ["batch"]}]}, clusterQueueSelector={}))
    assert evaluable(config, "Always", _wl())
