"""Fields of the wrong type: every one in a custom resource (Kueue's kinds), as the apiserver's schema validation
lists them; the first only in a built-in kind, whose JSON decoding stops there."""

from __future__ import annotations

from typing import Any

import pytest

from events.errors import InvalidInput
from events.manifests import decode_object


def _refusal(doc: dict[str, Any]) -> str:
    with pytest.raises(InvalidInput) as refused:
        decode_object(doc, "X")
    return str(refused.value)


def test_every_wrongly_typed_field_of_a_kueue_object_is_listed() -> None:
    doc = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": "w", "namespace": "n"},
           "spec": {"queueName": 5, "podSets": [{"name": "main", "count": "x", "template": {"spec": {
               "containers": [{"name": 1}]}}}], "priority": "high"}}
    assert _refusal(doc) == (
        "X: [field `spec.queueName`: expected `str`, got `int`, field `spec.podSets[0].count`: expected `int`, got "
        "`str`, field `spec.podSets[0].template.spec.containers[0].name`: expected `str`, got `int`, "
        "field `spec.priority`: expected `int | null`, got `str`]")


def test_a_built_in_kind_names_its_first_wrongly_typed_field_only() -> None:
    doc = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "n", "labels": 5},
           "spec": {"nodeName": 5, "containers": []}}
    assert _refusal(doc) == "X: field `metadata.labels`: expected `object`, got `int`"


def test_the_list_ends_at_an_entry_that_cannot_be_left_out() -> None:
    labels = {f"k{i}": [i] for i in range(5)}
    doc = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
           "metadata": {"name": "lq", "namespace": "n", "labels": labels}, "spec": {"clusterQueue": 5}}
    assert _refusal(doc) == "X: field `metadata.labels[...]`: expected `str`, got `array`"  # a map entry: the end
    doc = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "rf"},
           "spec": {"nodeLabels": 5, "nodeTaints": 6, "tolerations": 7, "topologyName": 8}}
    assert _refusal(doc).count("field `spec.") == 4
