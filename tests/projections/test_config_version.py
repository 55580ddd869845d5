"""A v1beta1 Configuration is read with v1beta1's meaning, the same way by the scheduler (load_config) and by the fold
(the recorded document): fairSharing and waitForPodsReady are off unless their stanza says ``enable: true``."""

from __future__ import annotations

import pytest

from events import schema as ev
from events.errors import InvalidInput
from kueue_es.scheduler.config import load_config
from kueue_es.scheduler.config_record import document_of, in_force, load_recorded
from projections import config_version, fair_share, gates
from projections.admissionchecks import INCREMENTAL_DISPATCHER
from projections.cluster import ClusterState
from projections.pods_ready import waits_for_pods_ready
from projections.queue_order import order_of

V1BETA1 = {"apiVersion": "config.kueue.x-k8s.io/v1beta1", "kind": "Configuration"}
V1BETA2 = {**V1BETA1, "apiVersion": "config.kueue.x-k8s.io/v1beta2"}


@pytest.mark.parametrize(("stanza", "on"), [
    ({"enable": False}, False),
    ({"enable": False, "preemptionStrategies": ["LessThanInitialShare"]}, False),
    ({}, False),  # v1beta1's switch is off unless set
    ({"enable": "false"}, False),  # refused at load; a recorded one decoded loosely
    ({"enable": True}, True),
    ({"enable": "true", "preemptionStrategies": ["LessThanInitialShare"]}, True),
])
def test_v1beta1_fair_sharing_is_on_only_when_enabled(stanza: dict, on: bool) -> None:
    doc = {**V1BETA1, "fairSharing": stanza}
    if isinstance(stanza.get("enable", False), bool):
        assert load_config(doc).fair_sharing_enabled is on
    else:  # Kueue's decoder refuses a string for a bool; a log recorded before kueue-es did is read as then
        with pytest.raises(InvalidInput, match=r"field `fairSharing.enable`: Expected `bool`, got `str`"):
            load_config(doc)
    assert fair_share.enabled(doc) is on
    assert load_recorded(ev.ConfigRecorded(time=0, document=doc), 4).fair_sharing_enabled is on


def test_an_enabled_v1beta1_fair_sharing_without_strategies_gets_both() -> None:
    cfg = load_config({**V1BETA1, "fairSharing": {"enable": True}})
    assert cfg.fair_sharing is not None
    assert cfg.fair_sharing.preemption_strategies == ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]
    named = load_config({**V1BETA1, "fairSharing": {"enable": True, "preemptionStrategies": ["LessThanInitialShare"]}})
    assert named.fair_sharing is not None and named.fair_sharing.preemption_strategies == ["LessThanInitialShare"]


def test_a_v1beta2_fair_sharing_stanza_switches_it_on() -> None:
    doc = {**V1BETA2, "fairSharing": {"preemptionStrategies": ["LessThanInitialShare"]}}
    assert load_config(doc).fair_sharing_enabled and fair_share.enabled(doc)
    empty = {**V1BETA2, "fairSharing": {}}  # refused in a file (the newest Kueue); a log that recorded one reads it
    assert load_config(empty, strict=False).fair_sharing_enabled and fair_share.enabled(empty)


@pytest.mark.parametrize(("stanza", "on"), [
    (None, False),  # no stanza: off in v1beta1 (v1beta2 defaults one in)
    ({"timeout": "1m"}, False),
    ({"blockAdmission": True}, False),
    ({"enable": False, "blockAdmission": True}, False),
    ({"enable": True}, True),
    ({"enable": "true", "timeout": "1m"}, True),
])
def test_v1beta1_wait_for_pods_ready_is_on_only_when_enabled(stanza: dict | None, on: bool) -> None:
    doc = dict(V1BETA1) if stanza is None else {**V1BETA1, "waitForPodsReady": stanza}
    if stanza is None or isinstance(stanza.get("enable", False), bool):
        cfg = load_config(doc)
        assert cfg.pods_ready.enable is on
        assert cfg.blocks_admission is (on and stanza is not None and stanza.get("blockAdmission", True))
    else:  # refused at load, as Kueue's decoder refuses it; a recorded one is read loosely, as before
        with pytest.raises(InvalidInput, match=r"field `waitForPodsReady.enable`: Expected `bool`, got `str`"):
            load_config(doc)
    assert waits_for_pods_ready(doc) is on
    assert load_recorded(ev.ConfigRecorded(time=0, document=doc), 4).pods_ready.enable is on


def test_an_enabled_v1beta1_wait_for_pods_ready_blocks_admission_and_times_out_in_5m_by_default() -> None:
    cfg = load_config({**V1BETA1, "waitForPodsReady": {"enable": True}})
    assert cfg.blocks_admission and cfg.pods_ready.timeout == "5m"
    kept = load_config({**V1BETA1, "waitForPodsReady": {"enable": True, "blockAdmission": False, "timeout": "2m"}})
    assert not kept.blocks_admission and kept.pods_ready.timeout == "2m"


def test_v1beta2_wait_for_pods_ready_keeps_its_meaning() -> None:
    assert load_config(dict(V1BETA2)).pods_ready.enable and waits_for_pods_ready(dict(V1BETA2))
    doc = {**V1BETA2, "waitForPodsReady": {"timeout": "1m"}}
    assert not load_config(doc).blocks_admission and waits_for_pods_ready(doc)


def test_a_v1beta1_stanza_that_is_off_sets_no_requeuing_timestamp() -> None:
    """Kueue drops the stanza, its requeuingStrategy with it: the eviction timestamp (the default) stands."""
    off = {**V1BETA1, "waitForPodsReady": {"requeuingStrategy": {"timestamp": "Creation"}}}
    assert order_of(off).eviction_timestamp
    on = {**V1BETA1, "waitForPodsReady": {"enable": True, "requeuingStrategy": {"timestamp": "Creation"}}}
    assert not order_of(on).eviction_timestamp
    config = load_config(on)
    assert config.wait_for_pods_ready is not None
    assert config.wait_for_pods_ready.requeuing_strategy.timestamp == "Creation"


def test_the_conversion_is_idempotent_and_leaves_other_versions_alone() -> None:
    doc = {**V1BETA1, "fairSharing": {"enable": True}, "waitForPodsReady": {"timeout": "1m"},
           "queueVisibility": {"updateIntervalSeconds": 5}, "integrations": {"podOptions": {}, "frameworks": ["pod"]}}
    hub = config_version.as_hub(doc)
    assert hub is not None and config_version.as_hub(hub) == hub
    assert "queueVisibility" not in hub and hub["integrations"] == {"frameworks": ["pod"]}
    assert hub["waitForPodsReady"] == {"enable": False}
    assert doc["waitForPodsReady"] == {"timeout": "1m"}, "the document given is not changed"
    v1beta2 = {**V1BETA2, "fairSharing": {}}
    assert config_version.as_hub(v1beta2) is v1beta2 and config_version.as_hub(None) is None


@pytest.mark.parametrize("doc", [
    {**V1BETA1, "fairSharing": {"enable": True}, "waitForPodsReady": {"enable": True}},
    {**V1BETA1, "fairSharing": {"enable": False}, "waitForPodsReady": {"timeout": "1m"}},
    dict(V1BETA1),
])
def test_a_v1beta1_configuration_s_document_loads_back_as_it(doc: dict) -> None:
    config = load_config(doc)
    again = document_of(config)
    assert load_config(again) == config
    assert fair_share.enabled(again) is config.fair_sharing_enabled
    assert waits_for_pods_ready(again) is config.pods_ready.enable


def test_a_v1beta1_switch_that_is_no_boolean_is_refused() -> None:
    with pytest.raises(InvalidInput, match="waitForPodsReady.enable"):
        load_config({**V1BETA1, "waitForPodsReady": {"enable": "maybe"}})
    with pytest.raises(InvalidInput, match="fairSharing.enable"):
        load_config({**V1BETA1, "fairSharing": {"enable": "maybe"}})


def test_a_v1beta1_timeout_that_does_not_parse_is_refused_even_off() -> None:
    with pytest.raises(InvalidInput, match="waitForPodsReady.timeout"):
        load_config({**V1BETA1, "waitForPodsReady": {"timeout": "soon"}})


@pytest.mark.parametrize(("doc", "fair", "ready"), [
    ({**V1BETA1, "fairSharing": {"enable": False}, "waitForPodsReady": {"blockAdmission": True}}, False, False),
    ({**V1BETA1, "fairSharing": {"enable": True}, "waitForPodsReady": {"enable": True}}, True, True),
])
def test_a_log_that_recorded_a_v1beta1_document_folds_as_the_scheduler_loads_it(doc: dict, fair: bool,
                                                                                 ready: bool) -> None:
    state = ClusterState()
    state.apply(ev.Record(0, ev.ConfigRecorded(time=0, document=doc)))
    config = in_force(state)
    assert config is not None
    assert (config.fair_sharing_enabled, config.pods_ready.enable, config.blocks_admission) == (fair, ready, ready)
    assert state.waits_for_pods_ready is ready
    assert state.config is not None and fair_share.enabled(state.config.document) is fair


@pytest.mark.parametrize("value", ["true", 1])
def test_a_gate_set_to_no_bool_is_refused_naming_it_and_a_recorded_one_is_read_alike_by_fold_and_scheduler(
        value: object) -> None:
    doc = {**V1BETA2, "featureGates": {"FairSharingRefill": value}}
    with pytest.raises(InvalidInput, match=r"field `featureGates.FairSharingRefill`: Expected `bool`, got `(str|int)`"):
        load_config(doc)
    recorded = load_recorded(ev.ConfigRecorded(time=0, document=doc), 4)
    assert recorded.gate("FairSharingRefill") is True
    assert gates.enabled(gates.of_document(doc), "FairSharingRefill") is True


def test_a_whole_float_for_an_int_field_is_taken_as_kueues_yaml_step_takes_it() -> None:
    doc = {**V1BETA2, "waitForPodsReady": {"timeout": "5m", "requeuingStrategy": {
               "backoffLimitCount": 3.0, "backoffBaseSeconds": 60.0}},
           "multiKueue": {"dispatcherName": INCREMENTAL_DISPATCHER, "incrementalDispatcherConfig": {"stepSize": 2.0}}}
    cfg = load_config(doc)
    strategy = cfg.wait_for_pods_ready.requeuing_strategy if cfg.wait_for_pods_ready else None
    assert strategy is not None
    assert (strategy.backoff_limit_count, strategy.backoff_base_seconds) == (3, 60)
    assert type(strategy.backoff_limit_count) is int and type(strategy.backoff_base_seconds) is int
    step = cfg.multi_kueue.incremental_dispatcher_config
    assert step is not None and step.step_size == 2 and type(step.step_size) is int
    assert doc["waitForPodsReady"]["requeuingStrategy"]["backoffLimitCount"] == 3.0  # the caller's document kept


def test_a_float_field_keeps_its_float() -> None:
    doc = {**V1BETA2, "featureGates": {gates.ADMISSION_FAIR_SHARING: True},
           "admissionFairSharing": {"resourceWeights": {"cpu": 2.0}}}
    afs = load_config(doc).admission_fair_sharing
    assert afs is not None and type(afs.resource_weights["cpu"]) is float


@pytest.mark.parametrize(("stanza", "field", "got"), [
    ({"waitForPodsReady": {"timeout": "5m", "requeuingStrategy": {"backoffLimitCount": 3.5}}},
     "waitForPodsReady.requeuingStrategy.backoffLimitCount", "float"),
    ({"waitForPodsReady": {"timeout": "5m", "requeuingStrategy": {"backoffMaxSeconds": True}}},
     "waitForPodsReady.requeuingStrategy.backoffMaxSeconds", "bool"),
])
def test_a_fractional_float_or_a_bool_for_an_int_field_is_refused_naming_it(stanza: dict, field: str,
                                                                            got: str) -> None:
    with pytest.raises(InvalidInput, match=rf"field `{field}`: Expected `int( \| null)?`, got `{got}`"):
        load_config({**V1BETA2, **stanza})
