"""The Kueue Configuration in the log (``kueue_es.scheduler.config_record``): what is recorded when, how it reads."""

from __future__ import annotations

import pytest

from events import schema as ev
from events.errors import InvalidInput
from kueue_es.scheduler.config import DEFAULT, load_config
from kueue_es.scheduler.config_record import (
    DEFAULT_DOCUMENT,
    describe,
    document_of,
    fingerprint,
    in_force,
    pending,
)
from projections.cluster import ClusterState

FULL = {
    "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
    "fairSharing": {"preemptionStrategies": ["LessThanInitialShare"]},
    "admissionFairSharing": {"usageHalfLifeTime": "10m", "usageSamplingInterval": "1m"},
    "waitForPodsReady": {"timeout": "5m", "blockAdmission": True, "recoveryTimeout": "1m"},
    "resources": {"excludeResourcePrefixes": ["example.com/"], "transformations": [{"input": "x"}]},
    "objectRetentionPolicies": {"workloads": {"afterFinished": "1h"}},
    "featureGates": {"TASBalancedPlacement": True},
    "manageJobsWithoutQueueName": True,
}


def test_a_summary_names_what_departs_from_kueues_defaults() -> None:
    assert describe(DEFAULT) == "Kueue's defaults"
    assert describe(load_config(FULL)) == (
        "fairSharing (LessThanInitialShare); admissionFairSharing (usageHalfLifeTime 10m, usageSamplingInterval 1m); "
        "waitForPodsReady (timeout 5m, blockAdmission, recoveryTimeout 1m); resources (excludeResourcePrefixes "
        "example.com/; 1 transformation(s)); objectRetentionPolicies.workloads (afterFinished 1h); featureGates "
        "(TASBalancedPlacement=true)")


def test_a_decoded_configuration_has_a_document_that_loads_back_as_it() -> None:
    assert document_of(DEFAULT) == DEFAULT_DOCUMENT
    config = load_config(FULL)
    assert load_config(document_of(config)) == config
    assert fingerprint(FULL) == fingerprint(dict(reversed(FULL.items()))), "key order does not matter"
    assert fingerprint(FULL) != fingerprint(DEFAULT_DOCUMENT)


def test_recorded_when_not_in_force_and_read_back_once_per_record() -> None:
    state = ClusterState()
    (first,) = pending(state, FULL, writer="a", source="f.yaml")
    assert first.document == FULL and first.writer == "a" and first.source == "f.yaml" and first.time == 0
    assert first.id == f"config-{fingerprint(FULL)}"
    assert in_force(state) is None
    state.apply(ev.Record(0, first))
    assert pending(state, dict(FULL), writer="b") == [], "an equal document is the one in force"
    loaded = in_force(state)
    assert loaded == load_config(FULL) and in_force(state) is loaded
    (second,) = pending(state, DEFAULT_DOCUMENT, writer="b")
    state.apply(ev.Record(1, second))
    assert in_force(state) == DEFAULT and state.config_offset == 1


def test_an_invalid_recorded_document_is_an_error_naming_its_offset() -> None:
    state = ClusterState()
    state.apply(ev.Record(7, ev.ConfigRecorded(time=0, document={**DEFAULT_DOCUMENT, "featureGates": {"Nope": True}})))
    with pytest.raises(InvalidInput, match=r"log offset 7 \(ConfigRecorded\): field `featureGates`"):
        in_force(state)
