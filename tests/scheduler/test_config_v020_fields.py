"""Kueue v0.20's Configuration fields the older copy of its types lacked: ``metrics.localQueueMetrics`` and
``visibilityServer`` (v1beta2 only). A valid file with them loads; their values are type-checked as Kueue's decoder
types them; an invalid LocalQueue selector stops Kueue v0.20 from starting while the stanza is enabled (#16379)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from events import objects as o
from events.errors import InvalidInput
from kueue_es.scheduler.config import load_config

V1BETA2 = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"}


def lq_metrics(stanza: dict[str, Any]) -> dict[str, Any]:
    return {**V1BETA2, "metrics": {"localQueueMetrics": stanza}}


def test_a_v0_20_file_with_local_queue_metrics_and_a_visibility_server_loads() -> None:
    cfg = load_config({**lq_metrics({"enable": True, "localQueueSelector": {
        "matchLabels": {"team": "ml"}, "matchExpressions": [{"key": "tier", "operator": "Exists"}]}}),
        "visibilityServer": {"bindAddress": "0.0.0.0", "bindPort": 8082}}, "kueue.yaml")
    assert cfg.metrics is not None and cfg.metrics.local_queue_metrics is not None
    assert cfg.metrics.local_queue_metrics.enable
    assert cfg.metrics.local_queue_metrics.local_queue_selector == o.LabelSelector(
        match_labels={"team": "ml"}, match_expressions=[o.LabelSelectorRequirement(key="tier", operator="Exists")])


@pytest.mark.parametrize(("doc", "error"), [
    ({**V1BETA2, "visibilityServer": {"bindPort": "8082"}}, "`visibilityServer.bindPort`: Expected `int | null`"),
    ({**V1BETA2, "visibilityServer": {"bindPort": 2**31}}, "`visibilityServer.bindPort`: Expected `int` <= 2147483647"),
    ({**V1BETA2, "visibilityServer": {"bindAddress": 1}}, "`visibilityServer.bindAddress`: Expected `str | null`"),
    ({**V1BETA2, "visibilityServer": []}, "`visibilityServer`: Expected `object | null`, got `array`"),
    (lq_metrics({"enable": "yes"}), "`metrics.localQueueMetrics.enable`: Expected `bool`, got `str`"),
    (lq_metrics({"enable": True, "localQueueSelector": {"matchLabels": ["team"]}}),
     "`metrics.localQueueMetrics.localQueueSelector.matchLabels`: Expected `object`, got `array`"),
])
def test_their_values_are_type_checked(doc: dict[str, Any], error: str) -> None:
    with pytest.raises(InvalidInput, match=f"^kueue.yaml: Configuration: field {re.escape(error)}"):
        load_config(doc, "kueue.yaml")


def test_their_unknown_fields_are_refused() -> None:
    with pytest.raises(InvalidInput, match='strict decoding error: unknown field '
                                           '"metrics.localQueueMetrics.namespaceSelector", '
                                           'unknown field "visibilityServer.port"$'):
        load_config({**V1BETA2, "visibilityServer": {"port": 1},
                     "metrics": {"localQueueMetrics": {"namespaceSelector": {}}}})


def test_v1beta1_has_neither() -> None:
    for doc in ({"metrics": {"localQueueMetrics": {"enable": True}}}, {"visibilityServer": {"bindPort": 8082}}):
        with pytest.raises(InvalidInput, match="strict decoding error: unknown field"):
            load_config({"apiVersion": "config.kueue.x-k8s.io/v1beta1", "kind": "Configuration", **doc})


BAD_SELECTORS = [
    ({"matchExpressions": [{"key": "team", "operator": "InvalidOp", "values": ["ml"]}]},
     "matchExpressions[0].operator`: 'InvalidOp' is not a valid selector operator"),
    ({"matchExpressions": [{"key": "team", "operator": "In"}]}, "matchExpressions[0].values`: must be specified"),
    ({"matchExpressions": [{"key": "team", "operator": "Exists", "values": ["ml"]}]},
     "matchExpressions[0].values`: may not be specified"),
    ({"matchExpressions": [{"key": "bad key", "operator": "Exists"}]}, "matchExpressions[0].key`: the name part"),
    ({"matchLabels": {"team": "not valid!"}}, "matchLabels`: value 'not valid!' of key 'team'"),
]


@pytest.mark.parametrize(("selector", "error"), BAD_SELECTORS)
def test_an_invalid_local_queue_selector_is_refused_while_the_stanza_is_enabled(selector: dict, error: str) -> None:
    with pytest.raises(InvalidInput, match="^kueue.yaml: Configuration: field "
                                           f"`metrics.localQueueMetrics.localQueueSelector.{re.escape(error)}"):
        load_config(lq_metrics({"enable": True, "localQueueSelector": selector}), "kueue.yaml")
    load_config(lq_metrics({"enable": False, "localQueueSelector": selector}))  # disabled: not read
    load_config(lq_metrics({"localQueueSelector": selector}))
