"""A Configuration Kueue's validation refuses is refused with every field error found, as Kueue reports them: its
``validate()`` gathers a list and its start-up prints the list's aggregate (``ErrorList.ToAggregate()``: the one
message alone, or ``[a, b]`` in the order the checks ran, a repeated message once). What Kueue's strict decoder
refuses first (a type, an unknown field, a value JSON cannot hold) stays the only error, as Kueue never validates
such a file. Kueue's source followed: ``pkg/config/validation.go``, the newest stored (v1beta2-typed, with
validateTLS, validateVisibilityServer, validateCustomLabels and validateQuotaCheckStrategy)."""

from __future__ import annotations

import math

import pytest

from events import schema as ev
from events.errors import InvalidInput
from kueue_es.scheduler.config import load_config
from kueue_es.scheduler.config_record import load_recorded

V1BETA2 = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"}
NEGATIVE = "must be greater than or equal to 0"


def _refusal(doc: dict) -> str:
    with pytest.raises(InvalidInput) as err:
        load_config({**V1BETA2, **doc}, "kueue.yaml")
    return str(err.value).removeprefix("kueue.yaml: ")


def test_every_field_error_is_reported_together_in_the_order_kueue_checks_them() -> None:
    """The stanzas are written in the reverse of Kueue's order of checks: the errors come in Kueue's."""
    doc = {
        "visibilityServer": {"bindPort": 0},
        "objectRetentionPolicies": {"workloads": {"afterFinished": "-1s"}},
        "admissionFairSharing": {"usageHalfLifeTime": "-1h"},
        "fairSharing": {"preemptionStrategies": ["Never"]},
        "multiKueue": {"workerLostTimeout": "-1m", "gcInterval": "-1h"},
        "integrations": {"frameworks": ["batch/job", "batch/job"]},
        "waitForPodsReady": {"recoveryTimeout": "-2m", "timeout": "-1m"},
    }
    assert _refusal(doc) == "[" + ", ".join([
        f"field `waitForPodsReady.timeout`: Invalid value: -1m0s: {NEGATIVE}",
        f"field `waitForPodsReady.recoveryTimeout`: Invalid value: -2m0s: {NEGATIVE}",
        'field `integrations.frameworks[1]`: Duplicate value: "batch/job"',
        f"field `multiKueue.gcInterval`: Invalid value: -1h0m0s: {NEGATIVE}",
        f"field `multiKueue.workerLostTimeout`: Invalid value: -1m0s: {NEGATIVE}",
        'field `fairSharing.preemptionStrategies`: Unsupported value: []v1beta2.PreemptionStrategy{"Never"}: '
        'supported values: "LessThanOrEqualToFinalShare", "LessThanInitialShare", '
        '"LessThanOrEqualToFinalShare,LessThanInitialShare"',
        f"field `admissionFairSharing.usageHalfLifeTime`: Invalid value: -1h0m0s: {NEGATIVE}",
        f"field `objectRetentionPolicies.workloads.afterFinished`: Invalid value: -1s: {NEGATIVE}",
        "field `visibilityServer.bindPort`: Invalid value: 0: must be a valid port number (1-65535)",
    ]) + "]"


def test_one_field_error_is_its_message_alone() -> None:
    assert _refusal({"multiKueue": {"gcInterval": "-1h"}}) == (
        f"field `multiKueue.gcInterval`: Invalid value: -1h0m0s: {NEGATIVE}")


def test_every_error_of_one_check_is_reported_and_a_repeated_message_once() -> None:
    """Kueue checks each access provider whole; its paths name the list, not the entry, so two providers missing
    the same field give one message, which the aggregate prints once."""
    providers = [{"execConfig": {"command": "c"}}, {"execConfig": {"command": "c", "interactiveMode": "Sometimes"}}]
    at = "field `multiKueue.clusterProfile.accessProviders"
    assert _refusal({"multiKueue": {"clusterProfile": {"accessProviders": providers}}}) == "[" + ", ".join([
        f"{at}.name`: Required value: must be specified",
        f"{at}.execConfig.apiVersion`: Required value: must be specified",
        f"{at}.execConfig.interactiveMode`: Required value: must be specified",
        f'{at}.execConfig.interactiveMode`: Unsupported value: "Sometimes": supported values: "Never", '
        '"IfAvailable", "Always"',
    ]) + "]"


@pytest.mark.parametrize("pod", [True, False])
def test_the_namespace_selector_is_checked_with_the_integrations_while_the_pod_integration_is_on(pod: bool) -> None:
    """Kueue checks ``managedJobsNamespaceSelector`` with the pod integration's options, and again after the
    resources; the aggregate says a message once, so with ``pod`` listed the selector's errors come before
    multiKueue's, without it after."""
    selector = [f'field `managedJobsNamespaceSelector`: should not match the "{ns}" namespace'
                for ns in ("kube-system", "kueue-system")]
    gc = f"field `multiKueue.gcInterval`: Invalid value: -1h0m0s: {NEGATIVE}"
    doc = {"multiKueue": {"gcInterval": "-1h"}, "managedJobsNamespaceSelector": {},
           "integrations": {"frameworks": ["batch/job", "pod"] if pod else ["batch/job"]}}
    assert _refusal(doc) == "[" + ", ".join([*selector, gc] if pod else [gc, *selector]) + "]"


def test_a_decoding_error_is_the_only_one_reported_as_kueue_never_validates_such_a_file() -> None:
    bad = {"multiKueue": {"gcInterval": "-1h"}, "fairSharing": {"preemptionStrategies": ["Never"]}}
    assert _refusal({**bad, "metrics": {"enableClusterQueueResources": 3}}) == (
        "Configuration: field `metrics.enableClusterQueueResources`: Expected `bool`, got `int`")
    assert _refusal({**bad, "waitForPodsReady": {"timeout": "soon"}}).startswith(
        "field `waitForPodsReady.timeout`: invalid duration 'soon'")
    assert _refusal({**bad, "multiKueue": {"gcInterval": "-1h", "gcIntervall": "1m"}}) == (
        'Configuration: strict decoding error: unknown field "multiKueue.gcIntervall"')


def test_a_start_up_refusal_after_validation_is_reported_only_for_a_configuration_validation_takes() -> None:
    """Kueue refuses an alpha framework listed without its gate when it sets its integrations up, after its
    validation passed: with a validation error too, only the validation's are reported."""
    needs_gate = {"integrations": {"frameworks": ["batch/job", "sparkoperator.k8s.io/sparkapplication"]}}
    assert "integration is alpha feature" in _refusal(needs_gate)
    assert _refusal({**needs_gate, "multiKueue": {"gcInterval": "-1h"}}) == (
        f"field `multiKueue.gcInterval`: Invalid value: -1h0m0s: {NEGATIVE}")


AFS_ON = {"featureGates": {"AdmissionFairSharing": True}}


def test_a_negative_resource_weight_is_refused_in_kueue_s_path_and_words() -> None:
    """Kueue names the weight by its key (``resourceWeights[cpu]``) and shows the whole map as Go's ``%#v`` prints
    it (keys sorted, floats as ``%v``); one error per negative weight, in the resources' sorted order (Kueue
    ranges over the Go map, in no set order)."""
    weights = {"memory": -0.5, "gpu": 1e6, "cpu": -1, "tpu": 2.5}
    shown = 'map[v1.ResourceName]float64{"cpu":-1, "gpu":1e+06, "memory":-0.5, "tpu":2.5}'
    assert _refusal({**AFS_ON, "admissionFairSharing": {"resourceWeights": weights}}) == (
        f"[field `admissionFairSharing.resourceWeights[cpu]`: Invalid value: {shown}: {NEGATIVE}, "
        f"field `admissionFairSharing.resourceWeights[memory]`: Invalid value: {shown}: {NEGATIVE}]")


@pytest.mark.parametrize(("value", "shown"), [(math.nan, "NaN"), (math.inf, "+Inf"), (-math.inf, "-Inf")])
def test_a_weight_json_cannot_hold_is_refused_as_kueue_s_yaml_to_json_step_refuses_it(value: float,
                                                                                      shown: str) -> None:
    """Kueue's validation would take NaN (it refuses ``weight < 0``), but its decoding turns the YAML file into
    JSON first, which holds no NaN nor infinity: the file is refused before validation, whatever the field."""
    assert _refusal({**AFS_ON, "admissionFairSharing": {"resourceWeights": {"cpu": value}},
                     "multiKueue": {"gcInterval": "-1h"}}) == (
        f"Configuration: field `admissionFairSharing.resourceWeights.cpu`: json: unsupported value: {shown}")
    assert _refusal({"clientConnection": {"qps": value}}) == (
        f"Configuration: field `clientConnection.qps`: json: unsupported value: {shown}")


def test_a_negative_sampling_interval_is_refused_showing_its_own_value() -> None:
    """Kueue refuses it ("must be greater than 0") but shows the half-life's value in its message; kueue-es shows the
    value it refuses. Zero is Kueue's default (5 minutes), not refused."""
    assert _refusal({"admissionFairSharing": {"usageHalfLifeTime": "10m", "usageSamplingInterval": "-1m"}}) == (
        "field `admissionFairSharing.usageSamplingInterval`: Invalid value: -1m0s: must be greater than 0")
    assert load_config({**V1BETA2, "admissionFairSharing": {"usageSamplingInterval": "0s"}})


def test_a_negative_unscheduled_timeout_is_refused_as_kueue_es_s_own_rule() -> None:
    """Kueue's validation has no rule for it; kueue-es refuses it (its tracking reads any nonzero value as on, and
    the deadline would fall before the admission), in Kueue's form and saying whose rule it is."""
    assert _refusal({"waitForPodsReady": {"timeout": "5m", "unscheduledTimeout": "-1m"}}) == (
        f"field `waitForPodsReady.unscheduledTimeout`: Invalid value: -1m0s: {NEGATIVE} (kueue-es's rule: Kueue's "
        "validation has none)")


def test_a_recorded_document_is_loaded_as_leniently_as_before() -> None:
    """The rules taken up since session 33 are not applied to a recorded document, whatever else is wrong with a
    file holding the same: gathering the errors changed nothing of what a recorded one is held to."""
    document = {**V1BETA2, "multiKueue": {"origin": "not a label!"}, "visibilityServer": {"bindPort": 0},
                "integrations": {"frameworks": ["batch/job", "batch/job"]}}
    with pytest.raises(InvalidInput, match=r"^kueue.yaml: \[field `integrations.frameworks\[1\]`: Duplicate"):
        load_config(document, "kueue.yaml")
    assert load_recorded(ev.ConfigRecorded(time=0, document=document), 3).multi_kueue.origin == "not a label!"
