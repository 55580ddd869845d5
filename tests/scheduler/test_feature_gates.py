"""featureGates in a Kueue Configuration: defaults, AllAlpha/AllBeta, and the refusals Kueue starts with."""

from __future__ import annotations

import pytest

from events.errors import InvalidInput
from kueue_es.scheduler.config import DEFAULT, load_config


def _doc(gates: dict) -> dict:
    return {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "featureGates": gates}


def test_defaults_are_kueues() -> None:
    assert DEFAULT.gate("TASBalancedPlacement") is False  # alpha
    assert DEFAULT.gate("TASMultiLayerTopology") is True  # beta
    assert DEFAULT.gate("TASProfileMixed") is True


def test_a_set_gate_wins_over_its_default_and_over_all_alpha_or_beta() -> None:
    assert load_config(_doc({"TASBalancedPlacement": True})).gate("TASBalancedPlacement") is True
    assert load_config(_doc({"TASMultiLayerTopology": False})).gate("TASMultiLayerTopology") is False
    assert load_config(_doc({"AllAlpha": True})).gate("TASBalancedPlacement") is True
    cfg = load_config(_doc({"AllBeta": False, "TopologyAwareScheduling": True, "TASProfileMixed": True}))
    assert cfg.gate("TASMultiLayerTopology") is False
    assert cfg.gate("TASProfileMixed") is True
    assert cfg.gate("TASBalancedPlacement") is False


@pytest.mark.parametrize(("gates", "message"), [
    ({"TASBalancedPlacment": True}, "unrecognized feature gate: TASBalancedPlacment"),
    ({"ManagedJobsNamespaceSelectorAlwaysRespected": False},
     "cannot set feature gate ManagedJobsNamespaceSelectorAlwaysRespected to false, feature is locked to true"),
    ({"ElasticJobsViaWorkloadSlices": False, "ElasticJobsViaWorkloadSlicesWithTAS": True},
     "ElasticJobsViaWorkloadSlicesWithTAS is enabled, but depends on features that are disabled: "
     "[ElasticJobsViaWorkloadSlices]"),
    ({"FlavorFungibility": False},  # its PreserveScanProgress gate is on by default
     "FlavorFungibilityPreserveScanProgress is enabled, but depends on features that are disabled: [FlavorFungibility]"),
    ({"AdmissionFairSharing": False},  # v0.20: its AnchorAtQuotaReservation gate is on by default
     "AdmissionFairSharingAnchorAtQuotaReservation is enabled, but depends on features that are disabled: "
     "[AdmissionFairSharing]"),
])
def test_kueue_refuses_to_start_with(gates: dict, message: str) -> None:
    """In Kueue's words: its LoadAndValidateFeatureGates hands the gate library's error to one ``field.Invalid``
    showing the map as Go's %#v prints it (keys sorted)."""
    with pytest.raises(InvalidInput) as err:
        load_config(_doc(gates), "kueue.yaml")
    shown = "map[string]bool{" + ", ".join(f'"{k}":{str(v).lower()}' for k, v in sorted(gates.items())) + "}"
    assert str(err.value) == f"kueue.yaml: field `featureGates`: Invalid value: {shown}: {message}"


@pytest.mark.parametrize(("gates", "message"), [
    ({"AAAUnknown": True, "ZZZUnknown": False}, "unrecognized feature gate: AAAUnknown"),
    ({"ManagedJobsNamespaceSelectorAlwaysRespected": False, "TLSOptions": False, "ZZZUnknown": True},
     "[cannot set feature gate ManagedJobsNamespaceSelectorAlwaysRespected to false, feature is locked to true, "
     "cannot set feature gate TLSOptions to false, feature is locked to true, unrecognized feature gate: ZZZUnknown]"),
    ({"AdmissionFairSharing": False, "ElasticJobsViaWorkloadSlices": False,
      "ElasticJobsViaWorkloadSlicesWithTAS": True},
     "[AdmissionFairSharingAnchorAtQuotaReservation is enabled, but depends on features that are disabled: "
     "[AdmissionFairSharing], ElasticJobsViaWorkloadSlicesWithTAS is enabled, but depends on features that are "
     "disabled: [ElasticJobsViaWorkloadSlices]]"),
])
def test_several_gate_errors_are_said_as_kueue_s_gate_library_aggregates_them(gates: dict, message: str) -> None:
    """The gate library returns its errors as an aggregate (``[a, b]``), stopping at the first unknown gate (Kueue
    meets them in Go's map order, kueue-es in name order); the dependencies are looked at only without those."""
    with pytest.raises(InvalidInput) as err:
        load_config(_doc(gates), "kueue.yaml")
    shown = "map[string]bool{" + ", ".join(f'"{k}":{str(v).lower()}' for k, v in sorted(gates.items())) + "}"
    assert str(err.value) == f"kueue.yaml: field `featureGates`: Invalid value: {shown}: {message}"


@pytest.mark.parametrize(("gates", "message"), [
    ({"AllBeta": False, "TASProfileMixed": True},
     "TASProfileMixed is enabled, but depends on features that are disabled: [TopologyAwareScheduling]"),
    ({"AllBeta": False, "TASHandleOverlappingFlavors": True},
     "TASHandleOverlappingFlavors is enabled, but depends on features that are disabled: [TopologyAwareScheduling]"),
    ({"AllBeta": False, "TopologyAwareScheduling": True, "TASReplaceNodeDueToNotReadyOverFixedTime": True},
     "TASReplaceNodeDueToNotReadyOverFixedTime is enabled, but depends on features that are disabled: "
     "[TASFailedNodeReplacement]"),
    ({"AllBeta": False, "TASFailedNodeReplacementFailFast": True},
     "TASFailedNodeReplacementFailFast is enabled, but depends on features that are disabled: "
     "[TASFailedNodeReplacement TopologyAwareScheduling]"),
    ({"UnadmittedWorkloadsObservability": False, "UnadmittedWorkloadsExplicitStatus": True},
     "UnadmittedWorkloadsExplicitStatus is enabled, but depends on features that are disabled: "
     "[UnadmittedWorkloadsObservability]"),
])
def test_a_dependency_kueue_once_checked_itself_is_said_in_v0_20_s_gate_library_words(gates: dict, message: str) -> None:
    """Kueue v0.16.x to v0.19 refused these after setting the gates in its own words ("cannot use a TAS profile
    with TAS disabled", "X requires Y to be enabled"); v0.20 declares the dependencies to its gate library, whose
    ``SetFromMap`` refuses first, so those words are never said: the library's are, its list of the disabled
    dependencies sorted."""
    with pytest.raises(InvalidInput) as err:
        load_config(_doc(gates), "kueue.yaml")
    assert str(err.value).endswith(f"}}: {message}")
    assert "requires" not in str(err.value) and "TAS profile" not in str(err.value)


def test_a_value_must_be_a_bool() -> None:
    with pytest.raises(InvalidInput, match=r"featureGates.*Expected `bool`"):
        load_config(_doc({"TASBalancedPlacement": "yes"}))


@pytest.mark.parametrize(("wait", "gates", "blocks", "reason"), [
    (None, {}, False, "WaitingForPodsReady"),
    ({"blockAdmission": False}, {}, False, "WaitingForPodsReady"),
    ({"blockAdmission": True}, {}, True, "WaitingForPodsReady"),
    ({"blockAdmission": True, "enable": False}, {}, False, "WaitingForPodsReady"),
    ({"blockAdmission": True}, {"DisableWaitForPodsReady": True}, False, "WaitingForPodsReady"),
    ({"blockAdmission": True}, {"AllAlpha": True}, False, "WaitingForPodsReady"),
    ({"blockAdmission": True}, {"UnadmittedWorkloadsObservability": False}, True, "Waiting"),
])
def test_block_admission_and_the_gates_it_reads(wait: dict | None, gates: dict, blocks: bool, reason: str) -> None:
    """waitForPodsReady.blockAdmission is in force only with waitForPodsReady on (DisableWaitForPodsReady, an alpha
    gate, turns it off); UnadmittedWorkloadsObservability off gives the legacy reason."""
    from kueue_es.scheduler import blockadmission

    doc = _doc(gates)
    if wait is not None:
        doc["waitForPodsReady"] = wait
    if wait is not None and "enable" in wait:
        doc["apiVersion"] = "config.kueue.x-k8s.io/v1beta1"  # v1beta2 has no waitForPodsReady.enable
    cfg = load_config(doc)
    assert cfg.blocks_admission is blocks
    assert blockadmission.reason(cfg) == reason


@pytest.mark.parametrize(("wait", "gates", "refused"), [
    ({"requeuingStrategy": {"timestamp": "Creation"}}, {}, False),
    ({"requeuingStrategy": {"timestamp": "Eviction"}}, {}, False),
    ({"requeuingStrategy": {"timestamp": "Admission"}}, {}, True),
    ({"enable": False, "requeuingStrategy": {"timestamp": "Admission"}}, {}, False),
    ({"requeuingStrategy": {"timestamp": "Admission"}}, {"DisableWaitForPodsReady": True}, False),
])
def test_the_requeuing_timestamp_is_checked_while_wait_for_pods_ready_is_on(wait: dict, gates: dict,
                                                                            refused: bool) -> None:
    doc = {**_doc(gates), "waitForPodsReady": wait}
    if "enable" in wait:
        doc["apiVersion"] = "config.kueue.x-k8s.io/v1beta1"  # v1beta2 has no waitForPodsReady.enable
    if not refused:
        load_config(doc)
        return
    with pytest.raises(InvalidInput) as err:
        load_config(doc, "kueue.yaml")
    assert str(err.value) == ("kueue.yaml: field `waitForPodsReady.requeuingStrategy.timestamp`: Unsupported value: "
                              '"Admission": supported values: "Creation", "Eviction"')
