"""A Configuration file's unknown fields are refused (Kueue's strict decoding); one the log recorded before kueue-es
refused them is loaded as it was taken, so an old log still replays."""

from __future__ import annotations

import msgspec.inspect
import pytest

from events import schema as ev
from events.errors import InvalidInput
from kueue_es.scheduler import config_fields
from kueue_es.scheduler.config import SchedulerConfig, load_config
from kueue_es.scheduler.config_record import document_of, load_recorded

DOC = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
       "waitForPodsReady": {"timeout": "5m", "blockAdmision": True}, "fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}}


def test_a_file_s_unknown_field_is_refused_but_a_recorded_one_is_loaded_as_taken() -> None:
    with pytest.raises(InvalidInput, match='kueue.yaml: Configuration: strict decoding error: unknown field '
                                           '"waitForPodsReady.blockAdmision"$'):
        load_config(DOC, "kueue.yaml")
    recorded = load_recorded(ev.ConfigRecorded(time=0, document=DOC), 7)
    assert recorded.fair_sharing is not None and recorded.wait_for_pods_ready is not None


V1BETA1_DOC = {"apiVersion": "config.kueue.x-k8s.io/v1beta1", "kind": "Configuration",
               "waitForPodsReady": {"enable": True, "timeout": "5m"}, "fairSharing": {"enable": True},
               "metrics": {"customLabels": [{"name": "team"}]},
               "resources": {"deviceClassMappings": [{"name": "gpu", "deviceClassNames": ["gpu.example.com"]}]}}


def test_each_version_refuses_the_other_s_fields_but_a_recorded_one_is_loaded_as_taken() -> None:
    """v1beta2 dropped ``waitForPodsReady.enable`` (its stanza's presence switches it on); v1beta1 has no
    ``multiKueue.singleClusterPreemptionTimeout``. An old log recorded either before kueue-es refused them."""
    v1beta2 = {**DOC, "waitForPodsReady": {"enable": False, "timeout": "5m"}}
    with pytest.raises(InvalidInput, match='strict decoding error: unknown field "waitForPodsReady.enable"$'):
        load_config(v1beta2)
    assert not load_recorded(ev.ConfigRecorded(time=0, document=v1beta2), 3).pods_ready.enable
    v1beta1 = {**V1BETA1_DOC, "multiKueue": {"singleClusterPreemptionTimeout": "1m"}}
    with pytest.raises(InvalidInput, match='unknown field "multiKueue.singleClusterPreemptionTimeout"$'):
        load_config(v1beta1)
    recorded = load_recorded(ev.ConfigRecorded(time=0, document=v1beta1), 3)
    assert recorded.multi_kueue.single_cluster_preemption_timeout == "1m"
    assert load_config(V1BETA1_DOC).pods_ready.enable


def _paths(tree: object, at: str = "") -> set[str]:
    """Every field of a :data:`config_fields.Tree` as ``a.b``, ``a[].b`` below a list."""
    if isinstance(tree, list):
        return _paths(tree[0], at + "[]")
    if not isinstance(tree, dict):
        return set()
    out: set[str] = set()
    for name, below in tree.items():
        path = f"{at}.{name}" if at else name
        out |= {path, *_paths(below, path)}
    return out


def test_the_two_versions_differ_by_the_fields_only_one_of_them_has() -> None:
    """ONLY_IN (what a decoded configuration's document leaves out) says what the two schemas say: a misspelt
    path there would drop nothing, a field missing there would be written out in the wrong version."""
    v1beta1, v1beta2 = (_paths(config_fields.known_in(v)) for v in (config_fields.V1BETA1, config_fields.V1BETA2))
    for version, own, other in ((config_fields.V1BETA1, v1beta1, v1beta2), (config_fields.V1BETA2, v1beta2, v1beta1)):
        top = {p for p in own - other if p.rpartition(".")[0].removesuffix("[]") in other | {""}}
        assert top == set(config_fields.ONLY_IN[version]), version


def test_every_field_kueue_es_reads_is_one_kueue_s_schema_types() -> None:
    """SchedulerConfig decodes no field Kueue's Configuration (of one version or the other) has not."""
    read = _paths(config_fields.tree_of(msgspec.inspect.type_info(SchedulerConfig)))
    known = set().union(*(_paths(config_fields.known_in(v)) for v in (config_fields.V1BETA1,
                                                                     config_fields.V1BETA2)))
    assert read <= known, sorted(read - known)


@pytest.mark.parametrize("doc", [V1BETA1_DOC, {**DOC, "waitForPodsReady": {"timeout": "5m"}}])
def test_a_decoded_configuration_s_document_decodes_strictly_as_its_version(doc: dict) -> None:
    """What a scheduler holding only the decoded configuration records: every field written out but those of the
    other version it leaves unset, so that it reads back strictly as it was."""
    config = load_config(doc)
    assert load_config(document_of(config)) == config


def test_unknown_fields_are_named_in_the_order_kueue_s_decoder_meets_them() -> None:
    """Kueue's pkg/config/config_test.go TestLoad, case "invalid config": a file holding ``namespaces`` then
    ``invalidField`` is refused with ``unknown field "invalidField", unknown field "namespaces"``. Kueue
    turns the YAML into JSON through a map before it decodes it, so the decoder meets the keys of each
    object in sorted order (depth first), not in the file's; list items keep theirs."""
    doc = {**DOC, "namespaces": "kueue-system", "invalidField": "invalidValue",
           "waitForPodsReady": {"timeoutt": "6m", "blockAdmision": True},
           "resources": {"transformations": [{"input": "a.io/x", "outputz": {}},
                                             {"input": "b.io/y", "inputt": 1}]},
           "health": {"healthProbeBindAddress": ":8081"}, "fairShare": {}}
    with pytest.raises(InvalidInput) as refused:
        load_config(doc, "kueue.yaml")
    assert str(refused.value) == (
        'kueue.yaml: Configuration: strict decoding error: unknown field "fairShare", '
        'unknown field "invalidField", unknown field "namespaces", '
        'unknown field "resources.transformations[0].outputz", '
        'unknown field "resources.transformations[1].inputt", '
        'unknown field "waitForPodsReady.blockAdmision", unknown field "waitForPodsReady.timeoutt"')
