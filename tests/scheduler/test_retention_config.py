"""objectRetentionPolicies in a Kueue Configuration: accepted as Kueue writes it, bad values named."""

from __future__ import annotations

import pytest

from events.errors import InvalidInput
from kueue_es.scheduler.config import DEFAULT, load_config


def _doc(**workloads: object) -> dict:
    return {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
            "objectRetentionPolicies": {"workloads": workloads}}


def test_durations_in_ms_and_nil_keeps_forever() -> None:
    assert DEFAULT.workload_retention == (None, None)
    assert load_config(_doc(afterFinished="1h30m")).workload_retention == (5_400_000, None)
    assert load_config(_doc(afterFinished="0s", afterDeactivatedByKueue="10m")).workload_retention == (0, 600_000)
    assert load_config({"objectRetentionPolicies": {}}).workload_retention == (None, None)


@pytest.mark.parametrize(("field", "value", "words"), [
    ("afterFinished", "-1m", "Invalid value: -1m0s: must be greater than or equal to 0"),
    ("afterDeactivatedByKueue", "soon", "invalid duration"),
])
def test_bad_values_name_the_field(field: str, value: str, words: str) -> None:
    with pytest.raises(InvalidInput, match=rf"objectRetentionPolicies\.workloads\.{field}`: .*{words}"):
        load_config(_doc(**{field: value}), "kueue.yaml")
