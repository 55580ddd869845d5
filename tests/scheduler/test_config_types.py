"""Every value of a Configuration file is of the type Kueue's decoder gives its field, in the fields kueue-es does
not read as in those it does: Kueue refuses to start on one that is not, so kueue-es refuses the file, naming the
field and the type expected. A document the log recorded is loaded as it was taken."""

from __future__ import annotations

import re

import pytest

from events import schema as ev
from events.errors import InvalidInput
from kueue_es.scheduler.config import load_config
from kueue_es.scheduler.config_record import load_recorded

V1BETA2 = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"}
V1BETA1 = {"apiVersion": "config.kueue.x-k8s.io/v1beta1", "kind": "Configuration"}

WRONG_TYPED = [
    # (document, the field named, what the error says of it)
    ({"webhook": {"port": "9443"}}, "webhook.port", "Expected `int | null`, got `str`"),
    ({"webhook": {"port": 9443.5}}, "webhook.port", "Expected `int | null`, got `float`"),
    ({"webhook": {"host": 0}}, "webhook.host", "Expected `str | null`, got `int`"),
    ({"webhook": {"certDir": True}}, "webhook.certDir", "Expected `str | null`, got `bool`"),
    ({"webhook": "9443"}, "webhook", "Expected `object | null`, got `str`"),
    ({"leaderElection": {"leaderElect": "true"}}, "leaderElection.leaderElect", "Expected `bool | null`, got `str`"),
    ({"leaderElection": {"leaseDuration": "soon"}}, "leaderElection.leaseDuration", "invalid duration 'soon'"),
    ({"leaderElection": {"renewDeadline": "10"}}, "leaderElection.renewDeadline",
     "invalid duration '10' (missing unit)"),
    ({"leaderElection": {"retryPeriod": 2}}, "leaderElection.retryPeriod", "Expected `str`, got `int`"),
    ({"leaderElection": {"retryPeriod": None}}, "leaderElection.retryPeriod", "Expected `str`, got `null`"),
    ({"leaderElection": {"leaseDuration": ""}}, "leaderElection.leaseDuration", "invalid duration ''"),
    ({"leaderElection": {"resourceLock": 1}}, "leaderElection.resourceLock", "Expected `str | null`, got `int`"),
    ({"leaderElection": {"resourceName": []}}, "leaderElection.resourceName", "Expected `str | null`, got `array`"),
    ({"leaderElection": {"resourceNamespace": {}}}, "leaderElection.resourceNamespace",
     "Expected `str | null`, got `object`"),
    ({"metrics": {"bindAddress": 8443}}, "metrics.bindAddress", "Expected `str | null`, got `int`"),
    ({"health": {"healthProbeBindAddress": 8081}}, "health.healthProbeBindAddress",
     "Expected `str | null`, got `int`"),
    ({"health": {"readinessEndpointName": False}}, "health.readinessEndpointName",
     "Expected `str | null`, got `bool`"),
    ({"health": {"livenessEndpointName": 1.5}}, "health.livenessEndpointName",
     "Expected `str | null`, got `float`"),
    ({"pprofBindAddress": 6060}, "pprofBindAddress", "Expected `str | null`, got `int`"),
    ({"controller": {"groupKindConcurrency": {"Job.batch": 5, "Pod": "5"}}}, "controller.groupKindConcurrency.Pod",
     "Expected `int | null`, got `str`"),
    ({"controller": {"groupKindConcurrency": ["Job.batch"]}}, "controller.groupKindConcurrency",
     "Expected `object | null`, got `array`"),
    ({"controller": {"cacheSyncTimeout": "2m"}}, "controller.cacheSyncTimeout", "Expected `int | null`, got `str`"),
    ({"internalCertManagement": {"enable": "false"}}, "internalCertManagement.enable",
     "Expected `bool | null`, got `str`"),
    ({"internalCertManagement": {"webhookServiceName": 1}}, "internalCertManagement.webhookServiceName",
     "Expected `str | null`, got `int`"),
    ({"internalCertManagement": {"webhookSecretName": ["a"]}}, "internalCertManagement.webhookSecretName",
     "Expected `str | null`, got `array`"),
    ({"clientConnection": {"qps": "50"}}, "clientConnection.qps", "Expected `float | null`, got `str`"),
    ({"clientConnection": {"qps": 1e39}}, "clientConnection.qps", "Expected `float` <= 3.4028234663852886e"),
    ({"clientConnection": {"burst": 100.5}}, "clientConnection.burst", "Expected `int | null`, got `float`"),
    ({"clientConnection": {"burst": 2**31}}, "clientConnection.burst", "Expected `int` <= 2147483647"),
    ({"integrations": {"externalFrameworks": "Foo.v1.example.com"}}, "integrations.externalFrameworks",
     "Expected `array | null`, got `str`"),
    ({"integrations": {"externalFrameworks": [1]}}, "integrations.externalFrameworks[0]",
     "Expected `str | null`, got `int`"),
    ({**V1BETA1, "queueVisibility": {"updateIntervalSeconds": "5"}}, "queueVisibility.updateIntervalSeconds",
     "Expected `int | null`, got `str`"),
    ({**V1BETA1, "queueVisibility": {"clusterQueues": {"maxCount": 10.5}}}, "queueVisibility.clusterQueues.maxCount",
     "Expected `int | null`, got `float`"),
    ({**V1BETA1, "integrations": {"podOptions": {"namespaceSelector": {"matchLabels": {"a": 1}}}}},
     "integrations.podOptions.namespaceSelector.matchLabels.a", "Expected `str | null`, got `int`"),
    ({**V1BETA1, "integrations": {"podOptions": {"podSelector": {"matchExpressions": [
        {"key": "a", "operator": "In", "values": "b"}]}}}},
     "integrations.podOptions.podSelector.matchExpressions[0].values", "Expected `array | null`, got `str`"),
    ({**V1BETA1, "clientConnection": {"burst": "100"}}, "clientConnection.burst", "Expected `int | null`, got `str`"),
    # fields kueue-es reads, where its own reading was looser than Go's
    ({"waitForPodsReady": {"timeout": ""}}, "waitForPodsReady.timeout", "invalid duration ''"),
    ({"waitForPodsReady": {"timeout": " 5m"}}, "waitForPodsReady.timeout", "invalid duration ' 5m'"),
    ({"waitForPodsReady": {"requeuingStrategy": {"backoffLimitCount": 2**31}}},
     "waitForPodsReady.requeuingStrategy.backoffLimitCount", "Expected `int` <= 2147483647"),
]


@pytest.mark.parametrize(("doc", "field", "error"), WRONG_TYPED, ids=[f for _, f, _ in WRONG_TYPED])
def test_a_value_of_the_wrong_type_is_refused_naming_its_field_and_type(doc: dict, field: str, error: str) -> None:
    # taken literally: an unescaped `|` in an error ("array | null") would make the whole match an alternation
    with pytest.raises(InvalidInput, match=rf"^kueue\.yaml: (Configuration: )?field `{re.escape(field)}`: "
                                           rf"{re.escape(error)}"):
        load_config({**V1BETA2, **doc}, "kueue.yaml")


def test_a_recorded_document_is_loaded_as_it_was_taken() -> None:
    """A log that recorded a configuration before kueue-es refused such values replays as it did."""
    doc = {**V1BETA2, "clientConnection": {"burst": "100"}, "leaderElection": {"leaseDuration": "soon"}}
    assert load_recorded(ev.ConfigRecorded(time=0, document=doc), 3) == load_config(V1BETA2)


def test_a_type_error_is_said_before_unknown_fields() -> None:
    """Kueue's decoder returns a value's type error, and only without one its strict decoding error."""
    doc = {**V1BETA2, "webhok": {}, "clientConnection": {"qps": "50"}}
    with pytest.raises(InvalidInput, match="field `clientConnection.qps`: Expected"):
        load_config(doc)


FULL_V1BETA2 = {
    **V1BETA2, "namespace": "kueue-system",
    "health": {"healthProbeBindAddress": ":8081", "readinessEndpointName": "readyz", "livenessEndpointName": "healthz"},
    "metrics": {"bindAddress": ":8443", "enableClusterQueueResources": True},
    "webhook": {"port": 9443, "host": "", "certDir": "/tmp/k8s-webhook-server/serving-certs"},
    "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io", "leaseDuration": "15s",
                       "renewDeadline": "10s", "retryPeriod": "2s", "resourceLock": "leases",
                       "resourceNamespace": "kueue-system"},
    "controller": {"groupKindConcurrency": {"Job.batch": 5, "Pod": 5, "Workload.kueue.x-k8s.io": 5,
                                            "LocalQueue.kueue.x-k8s.io": 1, "ClusterQueue.kueue.x-k8s.io": 1},
                   "cacheSyncTimeout": 120_000_000_000},
    "pprofBindAddress": ":8083",
    "clientConnection": {"qps": 50, "burst": 100},
    "internalCertManagement": {"enable": True, "webhookServiceName": "kueue-webhook-service",
                               "webhookSecretName": "kueue-webhook-server-cert"},
    "integrations": {"frameworks": ["batch/job", "pod"], "externalFrameworks": ["Foo.v1.example.com"]},
    "waitForPodsReady": {"timeout": "10m", "recoveryTimeout": "3m", "blockAdmission": False,
                         "requeuingStrategy": {"timestamp": "Eviction", "backoffBaseSeconds": 60}},
}
FULL_V1BETA1 = {
    **{k: v for k, v in FULL_V1BETA2.items() if k != "waitForPodsReady"}, **V1BETA1,
    "waitForPodsReady": {"enable": True, "timeout": "10m"},
    "integrations": {"frameworks": ["batch/job", "pod"], "externalFrameworks": ["Foo.v1.example.com"],
                     "podOptions": {"namespaceSelector": {"matchExpressions": [
                         {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]}]},
                         "podSelector": {"matchLabels": {"team": "a"}}}},
    "queueVisibility": {"updateIntervalSeconds": 5, "clusterQueues": {"maxCount": 10}},
}
UNREAD = ("health", "metrics", "webhook", "leaderElection", "controller", "pprofBindAddress", "clientConnection",
          "internalCertManagement", "integrations", "queueVisibility")


@pytest.mark.parametrize("doc", [FULL_V1BETA2, FULL_V1BETA1], ids=["v1beta2", "v1beta1"])
def test_a_full_configuration_loads_as_it_did(doc: dict) -> None:
    """Every field of Kueue's example configuration set: what kueue-es reads of it is what it read before."""
    reads = {"metrics": {"enableClusterQueueResources": True},
             "integrations": {"frameworks": ["batch/job", "pod"],
                              "externalFrameworks": ["Foo.v1.example.com"]}}
    assert load_config(doc) == load_config({**{k: v for k, v in doc.items() if k not in UNREAD}, **reads})


NULLS = {"webhook": {"port": None, "host": None, "certDir": None}, "health": None, "pprofBindAddress": None,
         "leaderElection": {"leaderElect": None, "resourceName": None}, "controller": {"groupKindConcurrency": {
             "Job.batch": None}, "cacheSyncTimeout": None}, "clientConnection": {"qps": None, "burst": None},
         "internalCertManagement": None, "integrations": {"frameworks": None, "externalFrameworks": None},
         "waitForPodsReady": {"timeout": "5m", "recoveryTimeout": None}}


def test_null_is_taken_where_go_takes_it_and_whole_floats_are_integers() -> None:
    """Go's decoder leaves a field set to null unset (a duration that is no pointer aside: WRONG_TYPED), takes an
    integer for a float, and Kueue's YAML-to-JSON step writes a whole float as an integer."""
    load_config({**V1BETA2, **NULLS})
    load_config({**V1BETA1, "queueVisibility": {"clusterQueues": None, "updateIntervalSeconds": None},
                 "waitForPodsReady": {"enable": True}})
    load_config({**V1BETA2, "webhook": {"port": 9443.0}, "clientConnection": {"qps": 50, "burst": 100.0},
                 "controller": {"groupKindConcurrency": {"Job.batch": 5.0}, "cacheSyncTimeout": 1e9}})


def test_a_key_that_is_no_string_is_the_string_kueue_s_yaml_step_makes_of_it() -> None:
    """``1: x`` is the field ``"1"``: an unknown field of a Configuration, a key like any other in a map."""
    with pytest.raises(InvalidInput, match='strict decoding error: unknown field "1"$'):
        load_config({**V1BETA2, 1: "x"})
    with pytest.raises(InvalidInput, match='strict decoding error: unknown field "webhook.True"$'):
        load_config({**V1BETA2, "webhook": {True: 1}})
    load_config({**V1BETA2, "controller": {"groupKindConcurrency": {1: 5}}})


@pytest.mark.parametrize(("doc", "field"), [
    ({"webhook": {"port": "x"}, "clientConnection": {"qps": "y"}}, "clientConnection.qps"),
    ({"manageJobsWithoutQueueName": "yes", "fairSharing": {"preemptionStrategies": "x"}},
     "fairSharing.preemptionStrategies"),
    ({"webhook": {"port": "x", "host": 1}}, "webhook.host"),
])
def test_of_two_wrong_values_the_one_kueue_s_decoder_meets_first_is_named(doc: dict, field: str) -> None:
    """Kueue decodes its file as JSON written from a Go map (each object's keys sorted: its config_test.go
    TestLoad "invalid config" names ``invalidField`` before ``namespaces``), and Go's decoder returns the
    first type error it meets: so of two wrong values, the one whose key sorts first is named, not the
    file's first."""
    with pytest.raises(InvalidInput, match=f"^kueue.yaml: Configuration: field `{re.escape(field)}`"):
        load_config({**V1BETA2, **doc}, "kueue.yaml")
