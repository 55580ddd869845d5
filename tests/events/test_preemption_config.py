"""ConfigurablePreemptions' PreemptionConfig (kueue.x-k8s.io/v1alpha1) at the edge: it loads as Kueue's CRD serves
it, only at v1alpha1, and every bound of the CRD refuses the object naming the file and the field."""

from __future__ import annotations

import pytest
from fixtures import fastyaml

from events import objects as o
from events.errors import InvalidInput
from events.manifests import load_text


def _doc(rules: list, version: str = "v1alpha1") -> dict:
    return {"apiVersion": f"kueue.x-k8s.io/{version}", "kind": "PreemptionConfig", "metadata": {"name": "pc"},
            "spec": {"rules": rules}}


def _load(doc: dict) -> o.KObject:
    return load_text(fastyaml.safe_dump(doc), "pc.yaml").objects[0]


def _rule(**over) -> dict:
    return {"name": "r", "activationPolicy": {"trigger": "Always"}, "candidateSelectors": [{"scope": "AnyClusterQueue"}],
            **over}


def test_a_preemption_config_loads_every_field() -> None:
    pc = _load(_doc([_rule(
        name="defrag", preemptorSelector={"matchLabels": {"tier": "gold"}},
        activationPolicy={"trigger": "QuotaFeasibleAndInsufficientTopology"},
        candidateSelectors=[{
            "scope": "WithinCohortTree",
            "clusterQueueSelector": {"matchExpressions": [{"key": "p", "operator": "NotIn", "values": ["x"]}]},
            "labelSelector": {"matchLabels": {"a": "b"}},
            "numericLabels": [{"key": "example.com/size", "fallbackValue": -1, "comparison": "LessThan",
                               "minValue": 0, "maxValue": 8}],
            "priority": {"mode": "Boosted", "comparison": "LessThanOrEqual"},
        }])]))
    assert isinstance(pc, o.PreemptionConfig)
    rule = pc.spec.rules[0]
    assert rule.activation_policy.trigger == "QuotaFeasibleAndInsufficientTopology"
    assert rule.preemptor_selector is not None and rule.preemptor_selector.match_labels == {"tier": "gold"}
    sel = rule.candidate_selectors[0]
    assert sel.numeric_labels[0] == o.PreemptionConfigNumericLabel(
        key="example.com/size", fallback_value=-1, comparison="LessThan", min_value=0, max_value=8)
    assert sel.priority == o.PreemptionConfigPriority(mode="Boosted", comparison="LessThanOrEqual")


def test_only_v1alpha1_is_served() -> None:
    with pytest.raises(InvalidInput, match="pc.yaml"):
        _load(_doc([_rule()], version="v1beta2"))


@pytest.mark.parametrize(("rules", "error"), [
    ([_rule(activationPolicy={})], "field `spec.rules[0].activationPolicy.trigger` is required"),
    ([_rule(activationPolicy={"trigger": "Sometimes"})],
     "field `spec.rules[0].activationPolicy.trigger`: Unsupported value: 'Sometimes'"),
    ([_rule(name="")], "field `spec.rules[0].name` is required"),
    ([_rule(name="Bad_Name")], "field `spec.rules[0].name`: 'Bad_Name' must be at most 63"),
    ([_rule(), _rule()], "field `spec.rules[1]`: Duplicate value: {\"name\":\"r\"}"),
    ([_rule(name=f"r{i}") for i in range(65)], "field `spec.rules`: must have at most 64 items, has 65"),
    ([_rule(candidateSelectors=[{}])], "field `spec.rules[0].candidateSelectors[0].scope` is required"),
    ([_rule(candidateSelectors=[{"scope": "SameCohort"}])],
     "field `spec.rules[0].candidateSelectors[0].scope`: Unsupported value: 'SameCohort'"),
    ([_rule(candidateSelectors=[{"scope": "AnyClusterQueue", "numericLabels": [{"comparison": "LessThan"}]}])],
     "field `spec.rules[0].candidateSelectors[0].numericLabels[0].key` is required"),
    ([_rule(candidateSelectors=[{"scope": "AnyClusterQueue", "numericLabels": [{"key": "k", "minValue": -1}]}])],
     "field `spec.rules[0].candidateSelectors[0].numericLabels[0].minValue`: should be greater than or equal to 0"),
    ([_rule(candidateSelectors=[{"scope": "AnyClusterQueue", "numericLabels": [{"key": "k", "minValue": 10,
                                                                                 "maxValue": 1}]}])],
     "field `spec.rules[0].candidateSelectors[0].numericLabels[0]`: minValue must be less than or equal to maxValue"),
    ([_rule(candidateSelectors=[{"scope": "AnyClusterQueue", "numericLabels": [{"key": "k", "minValue": 5,
                                                                                 "maxValue": 4}]}])],
     "minValue must be less than or equal to maxValue"),
    ([_rule(candidateSelectors=[{"scope": "AnyClusterQueue", "numericLabels": [{"key": "k", "minValue": -5,
                                                                                 "maxValue": -1}]}])],
     "numericLabels[0].minValue`: should be greater than or equal to 0"),
    ([_rule(candidateSelectors=[{"scope": "AnyClusterQueue", "numericLabels": [{"key": "k", "comparison": "Less"}]}])],
     "numericLabels[0].comparison`: Unsupported value: 'Less'"),
    ([_rule(candidateSelectors=[{"scope": "AnyClusterQueue", "priority": {"comparison": "LessThan"}}])],
     "field `spec.rules[0].candidateSelectors[0].priority.mode` is required"),
    ([_rule(candidateSelectors=[{"scope": "AnyClusterQueue", "priority": {"mode": "Effective",
                                                                          "comparison": "LessThan"}}])],
     "priority.mode`: Unsupported value: 'Effective'"),
    ([_rule(candidateSelectors=[{"scope": "AnyClusterQueue", "labelSelector": {
        "matchExpressions": [{"operator": "In", "values": ["x"]}]}}])], "key"),
])
def test_refusals_name_the_object_and_the_field(rules: list, error: str) -> None:
    with pytest.raises(InvalidInput, match="pc.yaml") as exc:
        _load(_doc(rules))
    assert error in str(exc.value)


@pytest.mark.parametrize("bounds", [{}, {"minValue": 5}, {"maxValue": 5}, {"minValue": 1, "maxValue": 10},
                                    {"minValue": 4, "maxValue": 4}, {"minValue": 0, "maxValue": 0}])
def test_numeric_label_bounds_kueue_allows(bounds: dict) -> None:
    """Kueue's webhook/core preemptionconfig_test: either bound alone, or a minValue at most the maxValue."""
    pc = _load(_doc([_rule(candidateSelectors=[{"scope": "WithinClusterQueue",
                                                "numericLabels": [{"key": "example.com/number-of-tpus", **bounds}]}])]))
    assert isinstance(pc, o.PreemptionConfig)


@pytest.mark.parametrize("rule", [
    _rule(preemptorSelector={"matchExpressions": [{"key": "test", "operator": "invalid"}]}),
    _rule(preemptorSelector={"matchLabels": {"bad key!": "x"}}),
    _rule(candidateSelectors=[{"scope": "AnyClusterQueue", "labelSelector": {
        "matchExpressions": [{"key": "a", "operator": "Near"}]}}]),
    _rule(candidateSelectors=[{"scope": "AnyClusterQueue", "labelSelector": {
        "matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}}]),
    _rule(candidateSelectors=[{"scope": "AnyClusterQueue", "clusterQueueSelector": {
        "matchExpressions": [{"key": "a", "operator": "In", "values": []}]}}]),
], ids=["preemptor-operator", "preemptor-key", "label-operator", "label-values", "cluster-queue-values"])
def test_a_selector_kueue_cannot_parse_loads_as_the_apiserver_stores_it(rule: dict) -> None:
    """The CRD leaves a selector's operator, keys and values free strings and Kueue serves no webhook for the kind:
    Kueue meets the fault only when it evaluates the rule (kueue_es.scheduler.preemption_config.evaluable)."""
    pc = _load(_doc([rule]))
    assert isinstance(pc, o.PreemptionConfig) and pc.spec.rules[0].name == "r"


def test_every_fault_is_named_together() -> None:
    with pytest.raises(InvalidInput) as exc:
        _load(_doc([_rule(activationPolicy={}, candidateSelectors=[{"scope": "Nowhere"}])]))
    assert "activationPolicy.trigger` is required" in str(exc.value)
    assert "candidateSelectors[0].scope`: Unsupported value: 'Nowhere'" in str(exc.value)
