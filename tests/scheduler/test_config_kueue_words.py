"""A Configuration Kueue refuses is refused in the words Kueue's validation prints (``field.NotSupported``:
``Unsupported value: <value as Go shows it>: supported values: "a", "b"``), naming the field."""

from __future__ import annotations

import pytest

from events.errors import InvalidInput
from events.field_errors import go_quote, go_string_slice
from kueue_es.scheduler.config import load_config

V1BETA2 = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"}


@pytest.mark.parametrize(("doc", "error"), [
    ({"fairSharing": {"preemptionStrategies": ["LessThanInitialShare", "Never"]}},
     'field `fairSharing.preemptionStrategies`: Unsupported value: []v1beta2.PreemptionStrategy{"LessThanInitialShare",'
     ' "Never"}: supported values: "LessThanOrEqualToFinalShare", "LessThanInitialShare", '
     '"LessThanOrEqualToFinalShare,LessThanInitialShare"'),
    ({"featureGates": {"QuotaCheckStrategy": True}, "resources": {"quotaCheckStrategy": "Sometimes"}},
     'Configuration: field `resources.quotaCheckStrategy`: Unsupported value: "Sometimes": supported values: '
     '"IgnoreUndeclared", "BlockUndeclared"'),
    ({"waitForPodsReady": {"requeuingStrategy": {"timestamp": "Admission"}}},
     'field `waitForPodsReady.requeuingStrategy.timestamp`: Unsupported value: "Admission": supported values: '
     '"Creation", "Eviction"'),
])
def test_an_unsupported_value_is_refused_in_kueue_s_words(doc: dict, error: str) -> None:
    with pytest.raises(InvalidInput) as err:
        load_config({**V1BETA2, **doc}, "kueue.yaml")
    assert str(err.value) == f"kueue.yaml: {error}"


def test_values_are_quoted_as_go_quotes_them() -> None:
    assert go_quote('a"b\\c\nd\x01é\u200b') == '"a\\"b\\\\c\\nd\\x01é\\u200b"'
    assert go_string_slice("v1beta2.PreemptionStrategy", ["A", "B"]) == '[]v1beta2.PreemptionStrategy{"A", "B"}'
