"""``gates.MODELLED`` (the feature gates kueue-es honours both ways; a user is warned about the others) stays true
to the code: a gate is in it exactly when some module outside ``projections/gates.py`` reads it, or it is locked
(a configuration can only hold its default, which the code implements without reading it), or it only switches
a cache or the style of a write in Kueue (either setting decides and writes alike, :mod:`test_cache_gates`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from projections import gates

ROOT = Path(__file__).resolve().parents[2]
CONSTANTS = {value: name for name, value in vars(gates).items() if name.isupper() and isinstance(value, str)}


def _sources() -> str:
    return "\n".join(p.read_text() for package in ("kueue_es", "projections", "connectors", "events")
                     for p in sorted((ROOT / package).rglob("*.py")) if p != ROOT / "projections" / "gates.py")


def _read(name: str, text: str) -> bool:
    pattern = rf'"{re.escape(name)}"'
    if name in CONSTANTS:
        pattern += rf"|\b{CONSTANTS[name]}\b"
    return re.search(pattern, text) is not None


def test_modelled_gates_are_the_ones_the_code_reads() -> None:
    text = _sources()
    read = {name for name in gates.GATES if _read(name, text)}
    assert read | gates.LOCKED | gates.INTERNAL_ONLY == set(gates.MODELLED) | gates.PARTLY
    assert not gates.MODELLED & gates.PARTLY
    assert not read & (gates.LOCKED | gates.INTERNAL_ONLY), "a locked gate is always on, an internal one changes nothing"


def test_only_gates_away_from_their_default_and_not_modelled_are_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    assert gates.ignored({"AllAlpha": True}) == sorted(
        name for name in set(gates.GATES) - gates.MODELLED - gates.PARTLY
        if gates.GATES[name][0] == gates.ALPHA), "every alpha gate not modelled, turned on"
    assert gates.ignored({"AllBeta": False}) == [], "every beta gate is modelled (v0.20's too)"
    assert gates.ignored({"MultiKueueRayInTreeAutoscaling": True}) == [], "modelled (v0.20)"
    assert gates.ignored({"ConfigurablePreemptions": True}) == [], "modelled (v0.20)"
    assert gates.ignored({"TASGroupedPodSetSlicing": False, "TASPartialSlices": False}) == [], "modelled (v0.20)"
    assert gates.ignored({"TASNodeFeasibilityForAllLevels": False}) == [], "modelled: TAS reads it"
    # a gate not modelled (none is left; one is taken out to show the rule)
    monkeypatch.setattr(gates, "MODELLED", gates.MODELLED - {"MultiKueueOrchestratedPreemption"})
    assert gates.ignored({}) == []
    assert gates.ignored({"PartialAdmission": False, "DynamicQuotaOrchestration": False}) == []
    assert gates.ignored({"WorkloadValidateResourcesAreNonNegative": False}) == []
    assert gates.ignored({"ElasticJobsViaWorkloadSlices": False}) == [], "modelled: the scheduler reads it"
    assert gates.ignored({"MultiKueueOrchestratedPreemption": False}) == ["MultiKueueOrchestratedPreemption"]
    assert gates.ignored({"SchedulerLibraryIntegration": True}) == [], "modelled: TAS placement reads it"
    assert gates.ignored({"ConcurrentAdmission": True}) == [], "in part: the webhook's checks read it"
    assert gates.ignored({"DynamicQuotaOrchestration": True}) == [], "modelled: the fold reads it"
    assert "MultiKueueOrchestratedPreemption" in gates.ignored({"AllBeta": False})
    # a gate not modelled whose modelled dependency is off too says nothing of its own
    monkeypatch.setattr(gates, "MODELLED", gates.MODELLED - {"AdmissionFairSharingAnchorAtQuotaReservation"})
    assert "AdmissionFairSharingAnchorAtQuotaReservation" not in gates.ignored({"AllBeta": False}), "moot"
    assert gates.ignored({"AdmissionFairSharingAnchorAtQuotaReservation": False}) == [
        "AdmissionFairSharingAnchorAtQuotaReservation"]
    assert gates.ignored_note({"MultiKueueOrchestratedPreemption": False}, "cfg.yaml") == (
        "cfg.yaml: featureGates: kueue-es models MultiKueueOrchestratedPreemption (default on) only at the default; "
        "the setting is accepted, as Kueue accepts it, and changes nothing here")


def test_gates_turned_off_with_a_modelled_gate_they_depend_on_are_not_ignored() -> None:
    """Turning TopologyAwareScheduling off needs every TAS gate that depends on it off too (Kueue refuses to start
    otherwise); those then have no effect in Kueue either, so the user is not warned about them."""
    tas_off = {"TopologyAwareScheduling": False, "TASFailedNodeReplacement": False,
               "TASFailedNodeReplacementFailFast": False, "TASReplaceNodeOnPodTermination": False,
               "TASHandleOverlappingFlavors": False, "TASMultiLayerTopology": False, "TASProfileMixed": False,
               "TASRecomputeAssignmentWithinSchedulingCycle": False, "TASReplaceNodeOnNodeTaints": False,
               "TASNodeFeasibilityForAllLevels": False}
    assert gates.errors(tas_off) == []
    assert gates.ignored(tas_off) == []
    assert gates.ignored({"TASRecomputeAssignmentWithinSchedulingCycle": False}) == [], "modelled: it counts"
    assert "TASProfileMixed is enabled, but depends on features that are disabled: [TopologyAwareScheduling]" in \
        gates.errors({"TopologyAwareScheduling": False})


def test_the_gate_list_counts_the_modelled_gates() -> None:
    """docs/scheduling.md's gate list says how many of Kueue's gates are modelled: the count stays that of ``MODELLED``."""
    found = re.search(r"(\d+) of Kueue's (\d+) gates are modelled", (ROOT / "docs" / "scheduling.md").read_text())
    assert found is not None
    assert (int(found[1]), int(found[2])) == (len(gates.MODELLED), len(gates.GATES))


def test_extended_resources_backed_by_dra_are_modelled() -> None:
    assert "KueueDRAIntegrationExtendedResource" in gates.MODELLED
    assert gates.ignored({"KueueDRAIntegrationExtendedResource": False}) == [], "modelled: the fold reads it"


def test_the_dra_counter_and_capacity_sources_gates_are_modelled() -> None:
    """The loader refuses a mapping's counter or capacity ``sources`` while their gate is off, as Kueue does, and the
    fold charges them from ResourceSlices as Kueue charges them: turning either away from its default warns of
    nothing."""
    assert gates.PARTLY == frozenset()
    assert {"KueueDRAIntegrationPartitionableDevices", "KueueDRAIntegrationConsumableCapacity"} <= gates.MODELLED
    assert gates.ignored({"KueueDRAIntegrationPartitionableDevices": False,
                          "KueueDRAIntegrationConsumableCapacity": True}) == []


def test_the_custom_jobs_adapters_gate_is_modelled() -> None:
    """MultiKueueAdaptersForCustomJobs gives the ``multiKueue.externalFrameworks`` kinds Kueue's generic adapter
    (pure decisions and the connector's copy): turned off, it warns of nothing."""
    assert "MultiKueueAdaptersForCustomJobs" in gates.MODELLED
    assert gates.ignored({"MultiKueueAdaptersForCustomJobs": False}) == []


def test_partial_scale_up_of_elastic_jobs_is_modelled() -> None:
    """The scheduler reads ElasticJobsViaWorkloadSlicesWithPartialReplicaScaleUp (a scaled-up slice admitted in part)
    and so do the webhooks' checks (an elastic Workload carrying ``minCount``): turning it on warns of nothing."""
    assert "ElasticJobsViaWorkloadSlicesWithPartialReplicaScaleUp" in gates.MODELLED
    assert gates.ignored({"ElasticJobsViaWorkloadSlicesWithPartialReplicaScaleUp": True}) == []
    assert "ElasticJobsViaWorkloadSlicesWithPartialReplicaScaleUp" not in gates.ignored({"AllAlpha": True})


def test_concurrent_admission_is_modelled_and_warned_of_no_more() -> None:
    """The gate's variants are made and pursued as Kueue does, their preemption gate opened one at a time: it is
    modelled, nothing is modelled in part, and turning it on warns of nothing."""
    assert "ConcurrentAdmission" in gates.MODELLED and not gates.PARTLY
    assert gates.ignored({"ConcurrentAdmission": True}) == []
    assert gates.partly_note({"AllAlpha": True}, "cfg.yaml") is None
    assert gates.partly_note({"ConcurrentAdmission": True}, "cfg.yaml") is None


def test_a_partly_modelled_gate_is_warned_of_only_when_on(monkeypatch) -> None:
    monkeypatch.setattr(gates, "PARTLY", frozenset({"ConcurrentAdmission"}))
    monkeypatch.setattr(gates, "PARTLY_NOTES", {"ConcurrentAdmission": "its X is not modelled"})
    assert gates.partly_note({}, "cfg.yaml") is None
    assert gates.partly_note({"ConcurrentAdmission": False}, "cfg.yaml") is None
    assert gates.partly_note({"AllAlpha": True}, "cfg.yaml") == ("cfg.yaml: featureGates: ConcurrentAdmission: "
                                                                  "its X is not modelled")


def test_v0_20_start_up_dependencies() -> None:
    """Kueue v0.20 refuses to start with a gate on whose dependency is off: the AFS anchor without AFS, node
    feasibility for all levels or the scheduler-library without TAS, the DRA device check without its three."""
    assert gates.errors({"AdmissionFairSharing": False}) == [
        "AdmissionFairSharingAnchorAtQuotaReservation is enabled, but depends on features that are disabled: "
        "[AdmissionFairSharing]"]
    assert gates.errors({"AdmissionFairSharing": False, "AdmissionFairSharingAnchorAtQuotaReservation": False}) == []
    assert "SchedulerLibraryIntegration is enabled, but depends on features that are disabled: " \
        "[TopologyAwareScheduling]" in gates.errors({"SchedulerLibraryIntegration": True, "TopologyAwareScheduling": False})
    assert gates.errors({"KueueDRADeviceFeasibility": True, "TASNodeFeasibilityForAllLevels": False}) == [
        "KueueDRADeviceFeasibility is enabled, but depends on features that are disabled: "
        "[TASNodeFeasibilityForAllLevels]"]
    assert gates.errors({"KueueDRAIntegrationDeviceTaints": True}) == [
        "KueueDRAIntegrationDeviceTaints is enabled, but depends on features that are disabled: "
        "[KueueDRADeviceFeasibility]"]
    assert gates.errors({"KueueDRAIntegrationDeviceTaints": True, "KueueDRADeviceFeasibility": True}) == []


@pytest.mark.parametrize(("gate", "stage", "default"), [
    ("TASNodeFeasibilityForAllLevels", gates.BETA, True), ("KueueDRADeviceFeasibility", gates.ALPHA, False),
    ("FairSharingRefill", gates.ALPHA, False), ("ConfigurablePreemptions", gates.ALPHA, False),
    ("AdmissionFairSharingAnchorAtQuotaReservation", gates.BETA, True),
    ("MultiKueueOrchestratedPreemption", gates.BETA, True), ("RejectUpdatesToCQWithInvalidOnFlavors", gates.BETA, True),
    ("MultiKueueKubeConfigPathValidation", gates.BETA, True),
    ("MultiKueueBatchJobClearingTTLSecondsAfterFinishedOnWorkerCluster", gates.ALPHA, False),
    ("TLSOptions", gates.GA, True),
])
def test_v0_20_stages_and_defaults(gate: str, stage: str, default: bool) -> None:
    """A v0.20 Configuration naming one of v0.20's gates is accepted, and the gate's stage and default are v0.20's."""
    assert gates.GATES[gate] == (stage, default)
    assert gates.errors({gate: default}) == []
