"""A Configuration recorded by an older kueue-es, which a rule added since refuses, still loads from the log: it was
in force when the decisions after it were taken, so replay, explain and audit must read it as they did."""

from __future__ import annotations

import pytest

from events import schema as ev
from events.errors import InvalidInput
from kueue_es.scheduler.config import load_config
from kueue_es.scheduler.config_record import load_recorded

V1BETA1 = {"apiVersion": "config.kueue.x-k8s.io/v1beta1", "kind": "Configuration"}
V1BETA2 = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"}

OLDER_KUEUE_ES_TOOK = [  # (document, what the older kueue-es read from it)
    ({**V1BETA1, "waitForPodsReady": {"enable": True, "timeout": "0s"}}, lambda c: c.pods_ready.timeout == "0s"),
    ({**V1BETA2, "multiKueue": {"origin": "not a label!"}}, lambda c: c.multi_kueue.origin == "not a label!"),
]


@pytest.mark.parametrize(("document", "read"), OLDER_KUEUE_ES_TOOK)
def test_a_recorded_document_a_newer_rule_refuses_loads_as_it_was_taken(document: dict, read) -> None:
    with pytest.raises(InvalidInput):
        load_config(document, "kueue.yaml")  # a file with it is refused now, as Kueue refuses it
    assert read(load_recorded(ev.ConfigRecorded(time=0, document=document), 3))


def test_a_recorded_document_with_a_selector_matching_kube_system_loads() -> None:
    document = {**V1BETA2, "managedJobsNamespaceSelector": {}, "visibilityServer": {"bindPort": 0},
                "internalCertManagement": {"webhookServiceName": "9-webhook"}}
    with pytest.raises(InvalidInput):
        load_config(document)
    assert load_recorded(ev.ConfigRecorded(time=0, document=document), 3).managed_jobs_namespace_selector is not None


def test_a_recorded_selector_with_a_key_or_value_kueue_refuses_loads() -> None:
    """Session 34 holds managedJobsNamespaceSelector's keys and values to apimachinery's spelling; a document the log
    recorded before is not (its operator and values rules it was held to already)."""
    selector = {"matchLabels": {"-k": "v"}, "matchExpressions": [{"key": "a", "operator": "In", "values": ["-b"]}]}
    document = {**V1BETA2, "managedJobsNamespaceSelector": selector}
    with pytest.raises(InvalidInput):
        load_config(document)
    cfg = load_recorded(ev.ConfigRecorded(time=0, document=document), 3)
    assert cfg.managed_jobs_namespace_selector.match_labels == {"-k": "v"}
    bad_operator = {**V1BETA2, "managedJobsNamespaceSelector": {"matchExpressions": [{"key": "a", "operator": "Is"}]}}
    with pytest.raises(InvalidInput, match="not a valid selector operator"):
        load_recorded(ev.ConfigRecorded(time=0, document=bad_operator), 3)
