"""A Configuration Kueue refuses is refused in the words Kueue's validation prints (``field.NotSupported``:
``Unsupported value: <value as Go shows it>: supported values: "a", "b"``), naming the field."""

from __future__ import annotations

import pytest

from events.errors import InvalidInput
from events.field_errors import go_quote, go_string_slice
from kueue_es.scheduler.config import load_config

V1BETA2 = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"}


@pytest.mark.parametrize(("doc", "error"), [
    ({"fairSharing": {"preemptionStrategies": ["LessThanInitialShare", "Never"]}},
     'field `fairSharing.preemptionStrategies`: Unsupported value: []v1beta2.PreemptionStrategy{"LessThanInitialShare",'
     ' "Never"}: supported values: "LessThanOrEqualToFinalShare", "LessThanInitialShare", '
     '"LessThanOrEqualToFinalShare,LessThanInitialShare"'),
    ({"featureGates": {"QuotaCheckStrategy": True}, "resources": {"quotaCheckStrategy": "Sometimes"}},
     'field `resources.quotaCheckStrategy`: Unsupported value: "Sometimes": supported values: '
     '"IgnoreUndeclared", "BlockUndeclared"'),
    ({"waitForPodsReady": {"requeuingStrategy": {"timestamp": "Admission"}}},
     'field `waitForPodsReady.requeuingStrategy.timestamp`: Unsupported value: "Admission": supported values: '
     '"Creation", "Eviction"'),
])
def test_an_unsupported_value_is_refused_in_kueue_s_words(doc: dict, error: str) -> None:
    with pytest.raises(InvalidInput) as err:
        load_config({**V1BETA2, **doc}, "kueue.yaml")
    assert str(err.value) == f"kueue.yaml: {error}"


def test_values_are_quoted_as_go_quotes_them() -> None:
    assert go_quote('a"b\\c\nd\x01é\u200b') == '"a\\"b\\\\c\\nd\\x01é\\u200b"'
    assert go_string_slice("v1beta2.PreemptionStrategy", ["A", "B"]) == '[]v1beta2.PreemptionStrategy{"A", "B"}'


V1BETA1 = {"apiVersion": "config.kueue.x-k8s.io/v1beta1", "kind": "Configuration"}


@pytest.mark.parametrize("timeout", ["0s", "0.5ns", "-0m"])
def test_an_enabled_v1beta1_wait_with_a_zero_timeout_is_refused_as_kueue_refuses_it(timeout: str) -> None:
    """v1beta1's defaulting fills only an unset ``timeout``, so a zero one reaches Kueue's validation, which requires
    one while waitForPodsReady is on (v1beta2 defaults a zero one to 30 minutes first); off, it is not looked at."""
    with pytest.raises(InvalidInput) as err:
        load_config({**V1BETA1, "waitForPodsReady": {"enable": True, "timeout": timeout}}, "kueue.yaml")
    assert str(err.value) == "kueue.yaml: field `waitForPodsReady.timeout`: Required value: must be specified"
    assert not load_config({**V1BETA1, "waitForPodsReady": {"enable": False, "timeout": timeout}}).pods_ready.enable
    assert load_config({**V2, "waitForPodsReady": {"timeout": timeout}}).pods_ready.timeout == "30m"


V2 = V1BETA2


LABEL_VALUE = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and "
               "must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex "
               "used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")


@pytest.mark.parametrize("version", [V1BETA1, V1BETA2])
@pytest.mark.parametrize(("origin", "detail"), [
    ("not a label!", LABEL_VALUE),
    ("o" * 64, "must be no more than 63 characters"),
    ("-" * 64, f"must be no more than 63 characters,{LABEL_VALUE}"),
])
def test_a_multikueue_origin_that_is_no_label_value_is_refused_in_kueue_s_words(version: dict, origin: str,
                                                                                 detail: str) -> None:
    """Kueue's validation refuses an ``origin`` that is no label value (it labels what the manager creates on
    workers), with apimachinery's IsLabelValue details joined by ","; an empty one is Kueue's default first. A
    recorded document is not held to it (kueue-es checks it since session 33)."""
    assert load_config({**version, "multiKueue": {"origin": ""}}).multi_kueue.origin == "multikueue"
    doc = {**version, "multiKueue": {"origin": origin}}
    with pytest.raises(InvalidInput) as err:
        load_config(doc, "kueue.yaml")
    assert str(err.value) == f'kueue.yaml: field `multiKueue.origin`: Invalid value: "{origin}": {detail}'
    assert load_config(doc, strict=False).multi_kueue.origin == origin


DNS1035 = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
           "character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for "
           "validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")


@pytest.mark.parametrize(("doc", "error"), [
    ({"visibilityServer": {"bindAddress": "localhost"}},
     'field `visibilityServer.bindAddress`: Invalid value: "localhost": must be a valid IP address'),
    ({"visibilityServer": {"bindAddress": "fe80::1%eth0"}},
     'field `visibilityServer.bindAddress`: Invalid value: "fe80::1%eth0": must be a valid IP address'),
    ({"visibilityServer": {"bindPort": 0}},
     "field `visibilityServer.bindPort`: Invalid value: 0: must be a valid port number (1-65535)"),
    ({"visibilityServer": {"bindPort": 65536}},
     "field `visibilityServer.bindPort`: Invalid value: 65536: must be a valid port number (1-65535)"),
    ({"internalCertManagement": {"webhookServiceName": "9-webhook"}},
     f'field `internalCertManagement.webhookServiceName`: Invalid value: "9-webhook": {DNS1035}'),
    ({"internalCertManagement": {"enable": True, "webhookSecretName": "Cert"}},
     'field `internalCertManagement.webhookSecretName`: Invalid value: "Cert": a lowercase RFC 1123 subdomain must '
     "consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric "
     "character (e.g. 'example.com', regex used for validation is "
     r"'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"),
    ({"managedJobsNamespaceSelector": {}},  # it selects both, and Kueue says both
     '[field `managedJobsNamespaceSelector`: should not match the "kube-system" namespace, '
     'field `managedJobsNamespaceSelector`: should not match the "kueue-system" namespace]'),
    ({"namespace": "kueue", "managedJobsNamespaceSelector": {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]}]}},
     'field `managedJobsNamespaceSelector`: should not match the "kueue" namespace'),
])
def test_a_server_or_selector_setting_kueue_refuses_is_refused(doc: dict, error: str) -> None:
    """Kueue's validateVisibilityServer, validateInternalCertManagement (while it is enabled, as by default) and
    validateManagedJobsNamespaceSelector (never Kueue's own namespace nor kube-system)."""
    with pytest.raises(InvalidInput) as err:
        load_config({**V1BETA2, **doc}, "kueue.yaml")
    assert str(err.value) == f"kueue.yaml: {error}"


def test_the_settings_kueue_takes_are_taken() -> None:
    load_config({**V1BETA2, "visibilityServer": {"bindAddress": "::", "bindPort": 65535},
                 "internalCertManagement": {"enable": False, "webhookServiceName": "9-x", "webhookSecretName": "X"},
                 "namespace": "", "managedJobsNamespaceSelector": {"matchLabels": {"team": "a"}}})
    load_config({**V1BETA2, "visibilityServer": {"bindAddress": "10.0.0.1"},
                 "internalCertManagement": {"webhookServiceName": "kueue-webhook-service"}})


@pytest.mark.parametrize("name", ["backoffLimitCount", "backoffBaseSeconds", "backoffMaxSeconds"])
def test_a_negative_requeuing_backoff_is_refused_while_wait_for_pods_ready_is_in_force(name: str) -> None:
    """Kueue's validateWaitForPodsReady, in its words (IsNegativeErrorMsg); off (DisableWaitForPodsReady) it is not
    looked at, and a recorded document is not held to it (kueue-es took one before)."""
    doc = {**V1BETA2, "waitForPodsReady": {"requeuingStrategy": {name: -1}}}
    with pytest.raises(InvalidInput) as err:
        load_config(doc, "kueue.yaml")
    assert str(err.value) == (f"kueue.yaml: field `waitForPodsReady.requeuingStrategy.{name}`: Invalid value: -1: "
                              "must be greater than or equal to 0")
    assert not load_config({**doc, "featureGates": {"DisableWaitForPodsReady": True}}).pods_ready.enable
    assert load_config(doc, strict=False).pods_ready.enable


@pytest.mark.parametrize(("names", "error"), [
    (["Foo.v1"], 'field `integrations.externalFrameworks[0]`: Invalid value: "Foo.v1": must be format, '
                 "'Kind.version.group.com'"),
    (["Foo.v1.example.com", "Bar.v1.example.com", "Foo.v1.example.com"],
     'field `integrations.externalFrameworks[2]`: Duplicate value: "Foo.v1.example.com"'),
])
def test_an_integration_external_framework_kueue_refuses_is_refused(names: list[str], error: str) -> None:
    """Kueue's validateIntegrations: each a ``Kind.version.group`` name, none twice; a recorded document is not held
    to it."""
    doc = {**V1BETA2, "integrations": {"externalFrameworks": names}}
    with pytest.raises(InvalidInput) as err:
        load_config(doc, "kueue.yaml")
    assert str(err.value) == f"kueue.yaml: {error}"
    load_config(doc, strict=False)


INCREMENTAL = "kueue.x-k8s.io/multikueue-dispatcher-incremental"


@pytest.mark.parametrize(("multikueue", "error"), [
    ({"dispatcherName": INCREMENTAL, "incrementalDispatcherConfig": {"stepSize": 0}},
     "field `multiKueue.incrementalDispatcherConfig.stepSize`: Invalid value: 0: must be greater than or equal to 1"),
    ({"dispatcherName": INCREMENTAL, "incrementalDispatcherConfig": {"stepSize": -2}},
     "field `multiKueue.incrementalDispatcherConfig.stepSize`: Invalid value: -2: must be greater than or equal to 1"),
    ({"incrementalDispatcherConfig": {"stepSize": 2}},
     "field `multiKueue.incrementalDispatcherConfig`: incrementalDispatcherConfig is only valid when dispatcherName "
     "is set to the incremental dispatcher"),
])
def test_an_incremental_dispatcher_setting_kueue_refuses_is_refused_in_its_words(multikueue: dict, error: str) -> None:
    """Kueue's validateMultiKueue: ``stepSize`` (an int32, shown as Go's %v shows it) at least 1, the stanza only
    beside the incremental dispatcher (Kueue's value part there dumps a Go pointer, so kueue-es says the detail)."""
    with pytest.raises(InvalidInput) as err:
        load_config({**V1BETA2, "multiKueue": multikueue}, "kueue.yaml")
    assert str(err.value) == f"kueue.yaml: {error}"
    with pytest.raises(InvalidInput):
        load_config({**V1BETA2, "multiKueue": multikueue}, strict=False)  # refused before, and still


KEY_NAME_RULE = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                 "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
                 "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
VALUE_RULE = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
              "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used "
              "for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
SEL = "managedJobsNamespaceSelector"


@pytest.mark.parametrize(("selector", "error"), [
    ({"matchExpressions": [{"key": "a", "operator": "Equals", "values": ["b"]}]},
     f'field `{SEL}.matchExpressions[0].operator`: Invalid value: "Equals": not a valid selector operator'),
    ({"matchExpressions": [{"key": "a", "operator": "NotIn"}]},
     f"field `{SEL}.matchExpressions[0].values`: Required value: must be specified when `operator` is 'In' or "
     "'NotIn'"),
    ({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["b"]}]},
     f"field `{SEL}.matchExpressions[0].values`: Forbidden: may not be specified when `operator` is 'Exists' or "
     "'DoesNotExist'"),
    ({"matchExpressions": [{"key": "-a", "operator": "Exists"}]},
     f'field `{SEL}.matchExpressions[0].key`: Invalid value: "-a": {KEY_NAME_RULE}'),
    ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["ok", "-b"]}]},
     f'field `{SEL}.matchExpressions[0].values[1]`: Invalid value: "-b": {VALUE_RULE}'),
    ({"matchLabels": {"team": "-x", "-k": "v"}},  # keys sorted where Go ranges over its map in no set order
     f'[field `{SEL}.matchLabels`: Invalid value: "-k": {KEY_NAME_RULE}, '
     f'field `{SEL}.matchLabels`: Invalid value: "-x": {VALUE_RULE}]'),
    ({"matchExpressions": [{"key": "-a", "operator": "Is"}, {"key": "b", "operator": "In"}]},  # every fault, in order
     f'[field `{SEL}.matchExpressions[0].operator`: Invalid value: "Is": not a valid selector operator, '
     f'field `{SEL}.matchExpressions[0].key`: Invalid value: "-a": {KEY_NAME_RULE}, '
     f"field `{SEL}.matchExpressions[1].values`: Required value: must be specified when `operator` is 'In' or "
     "'NotIn']"),
])
def test_an_invalid_managed_jobs_namespace_selector_is_refused_in_kueue_s_words(selector: dict, error: str) -> None:
    """apimachinery's ValidateLabelSelector, as Kueue's validateManagedJobsNamespaceSelector runs it (values checked);
    a selector with faults is not matched against kube-system (Kueue cannot make a selector of it), and with the pod
    integration, whose options check it too, each fault is said once."""
    for doc in ({SEL: selector}, {SEL: selector, "integrations": {"frameworks": ["batch/job", "pod"]}}):
        with pytest.raises(InvalidInput) as err:
            load_config({**V1BETA2, **doc}, "kueue.yaml")
        assert str(err.value) == f"kueue.yaml: {error}"
