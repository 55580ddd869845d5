"""Fields of the wrong type: every one in a custom resource (Kueue's kinds), as the apiserver's schema validation
lists them; the first only in a built-in kind, whose JSON decoding stops there."""

from __future__ import annotations

from typing import Any

import pytest

from events.errors import InvalidInput
from events.manifests import MAX_TYPE_ERRORS, decode_object


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


def test_a_map_entry_is_named_by_its_key_and_the_list_is_bounded() -> None:
    labels = {"fine": "x", "a": [1], "b": {"c": 1}}
    doc = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
           "metadata": {"name": "lq", "namespace": "n", "labels": labels}, "spec": {"clusterQueue": 5}}
    assert _refusal(doc) == (
        "X: [field `metadata.labels[a]`: expected `str`, got `array`, field `metadata.labels[b]`: expected `str`, got "
        "`object`, field `spec.clusterQueue`: expected `str`, got `int`]")
    doc["metadata"]["labels"] = {f"k{i}": [i] for i in range(MAX_TYPE_ERRORS + 5)}
    assert _refusal(doc).count("expected `str`, got `array`") == MAX_TYPE_ERRORS
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "n"}, "spec": {"containers": [
        {"name": "c", "resources": {"requests": {"cpu": "1", "memory": [1]}}}]}}
    assert _refusal(pod) == (
        "X: field `spec.containers[0].resources.requests[memory]`: expected `int | float | str`, got `array`")


def test_the_list_ends_at_a_list_item_which_cannot_be_left_out() -> None:
    doc = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
           "spec": {"resourceGroups": [{"coveredResources": [5], "flavors": []}], "cohortName": 5}}
    assert _refusal(doc) == "X: field `spec.resourceGroups[0].coveredResources[0]`: expected `str`, got `int`"
