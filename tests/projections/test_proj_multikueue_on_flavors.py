"""A MultiKueue check is "applied per flavor" against the ClusterQueue's flavors in force: under
DynamicQuotaOrchestration those of ``status.effectiveQuotas`` (:mod:`projections.effective_quotas`), as every other
rule of the compiled ClusterQueue reads them."""

from __future__ import annotations

import msgspec
from fixtures.eventgen import cluster_queue, flavor, upsert

from events import objects as o
from events import schema as ev
from projections.admissionchecks import MULTIKUEUE_CONTROLLER
from projections.cluster import ClusterState

PER_FLAVOR = "MultiKueueAdmissionCheckAppliedPerFlavor"


def _queue(on_flavors: list[str], effective: list[str]) -> o.ClusterQueue:
    """ClusterQueue ``q`` with flavors ``a`` and ``b`` in its spec, ``effective`` in its ``status.effectiveQuotas``,
    and the MultiKueue check ``mk`` on ``on_flavors``."""
    cq = cluster_queue("q", quotas={"a": 4, "b": 4})
    groups = [{"coveredResources": ["cpu"], "flavors": [{"name": f, "resources": [{"name": "cpu", "nominalQuota": "4"}]}
                                                        for f in effective]}]
    strategy = o.AdmissionChecksStrategy(admission_checks=[o.AdmissionCheckStrategyRule(name="mk", on_flavors=on_flavors)])
    return msgspec.structs.replace(cq, spec=msgspec.structs.replace(cq.spec, admission_checks_strategy=strategy),
                                   status={"effectiveQuotas": {"resourceGroups": groups}})


def _reasons(gate: bool, on_flavors: list[str], effective: list[str]) -> list[str]:
    """The Active=False reasons of ``q`` (its check is inactive too, having no config: only the per-flavor rule
    is looked at here)."""
    state = ClusterState()
    check = o.AdmissionCheck(metadata=o.ObjectMeta(name="mk"), spec=o.AdmissionCheckSpec(
        controller_name=MULTIKUEUE_CONTROLLER))
    events = [ev.ConfigRecorded(time=1, document={"apiVersion": "config.kueue.x-k8s.io/v1beta2",
                                                  "kind": "Configuration",
                                                  "featureGates": {"DynamicQuotaOrchestration": gate}}),
              upsert(flavor("a"), 1), upsert(flavor("b"), 1), upsert(check, 1), upsert(_queue(on_flavors, effective), 1)]
    for i, e in enumerate(events):
        state.apply(ev.Record(i, e))
    info = state.cq_info("q")
    assert info is not None
    return [reason for reason, _ in info.inactive_reasons]


def test_on_flavors_naming_every_flavor_in_force_is_not_per_flavor() -> None:
    """Effective flavor ``a`` alone: a check on ``a`` covers every flavor in force under the gate; off, the spec's
    ``a`` and ``b`` are in force and it covers one of two."""
    assert PER_FLAVOR not in _reasons(True, ["a"], ["a"])
    assert PER_FLAVOR in _reasons(False, ["a"], ["a"])


def test_on_flavors_leaving_out_a_flavor_in_force_is_per_flavor() -> None:
    """Effective flavors ``a`` and ``b``: a check on ``a`` alone is per flavor; on both (or on none), it is not."""
    assert PER_FLAVOR in _reasons(True, ["a"], ["a", "b"])
    assert PER_FLAVOR not in _reasons(True, ["b", "a"], ["a", "b"])
    assert PER_FLAVOR not in _reasons(True, [], ["a", "b"])
