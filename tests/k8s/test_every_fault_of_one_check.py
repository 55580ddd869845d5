"""A Workload with several faults of one kind is refused for every one of them, in order, whether it comes through
``kueue-es import`` or through the validating webhook: each check lists all it finds wrong (as the apiserver's
schema validation and Kueue's webhook list theirs), not only its first (:mod:`events.manifests`,
:mod:`events.object_rules`)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from test_validating_review import _message, _review, wl

from events.errors import InvalidInput
from events.manifests import load_text

AT = "spec.podSets[0].template.spec.containers[0]"


def _container(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["spec"]["podSets"][0]["template"]["spec"]["containers"][0]


def _quantities_that_do_not_parse(doc: dict[str, Any]) -> None:
    _container(doc)["resources"] = {"requests": {"cpu": "lots"}, "limits": {"memory": "plenty"}}


def _negative_requests(doc: dict[str, Any]) -> None:
    _container(doc)["resources"] = {"requests": {"cpu": "-1", "memory": "-2Gi"}}


def _reclaimable_pods_of_no_pod_set(doc: dict[str, Any]) -> None:
    doc["status"]["reclaimablePods"] = [{"name": "x", "count": 1}, {"name": "y", "count": 1}]


CASES: list[tuple[Callable[[dict[str, Any]], None], list[str]]] = [
    (_quantities_that_do_not_parse, [  # what the projections need: the CRD's schema
        f"field `{AT}.resources: cpu`: invalid quantity 'lots'",
        f"field `{AT}.resources: memory`: invalid quantity 'plenty'"]),
    (_negative_requests, [  # WorkloadValidateResourcesAreNonNegative (beta, on)
        f'field `{AT}.resources.requests[cpu]`: Invalid value: "-1": must be greater than or equal to 0',
        f'field `{AT}.resources.requests[memory]`: Invalid value: "-2Gi": must be greater than or equal to 0']),
    (_reclaimable_pods_of_no_pod_set, [  # Kueue's webhook (and what the watch holds a stored one to)
        'field `status.reclaimablePods[x].name`: Unsupported value: "x": supported values: "main"',
        'field `status.reclaimablePods[y].name`: Unsupported value: "y": supported values: "main"']),
]


@pytest.mark.parametrize(("fault", "errors"), CASES, ids=[f.__name__.strip("_") for f, _ in CASES])
def test_every_fault_of_one_check_is_named_through_import_and_the_webhook(
        fault: Callable[[dict[str, Any]], None], errors: list[str]) -> None:
    doc = copy.deepcopy(wl())
    fault(doc)
    listed = "[" + ", ".join(errors) + "]"
    assert _message(_review("Workload", doc)) == f"Workload team/w: {listed}"
    with pytest.raises(InvalidInput) as refused:
        load_text(yaml.safe_dump(doc), "objects.yaml")
    assert str(refused.value) == f"objects.yaml: document 1 (Workload w): {listed}"
