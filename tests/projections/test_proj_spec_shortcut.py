"""Status-only Workload upserts reuse what the fold computed from the same spec — and only while nothing it
depends on changed.

A lazily decoded spec is one object per distinct encoding, so a workload's status upserts carry the spec its
last upsert carried; the fold then reuses that spec's priority and pod sets
(``ClusterState._from_spec``) instead of computing them again. Each input they depend on — a PriorityClass or
WorkloadPriorityClass (changed or deleted), the namespace's LimitRanges, a RuntimeClass's overhead, the recorded
configuration's request rules — and the spec itself must make the next upsert compute them anew: the lazy fold
must end in the state (digest and derived indexes) a full decode gives, where every upsert computes everything.
"""

from __future__ import annotations

from unittest import mock

import msgspec
import pytest
from fixtures.eventgen import (
    RESOURCE_CONFIGS,
    T0,
    adjusted_workload,
    admission,
    delete,
    fold,
    limit_range,
    meta,
    prelude,
    priority_class,
    runtime_class,
    upsert,
    workload,
)

from events import objects as o
from events import schema as ev
from projections.cluster import ClusterState
from projections.snapshot import digest
from tests.projections.test_proj_lazy_decode import assert_same, cond, decoded


def k8s_priority_class(name: str, value: int) -> o.PriorityClass:
    return o.PriorityClass(api_version="scheduling.k8s.io/v1", metadata=meta(name), value=value)


def workloads() -> list[o.Workload]:
    """Pending ones naming each kind of input, and one admitted (its pod sets follow its spec's inputs only when
    it is upserted again)."""
    by_wpc = workload("ns0", "by-wpc", priority_class="high", cpu="1")
    by_pc = workload("ns0", "by-pc", cpu="2", priority=1)
    by_pc = msgspec.structs.replace(by_pc, spec=msgspec.structs.replace(by_pc.spec, priority_class_ref=o.PriorityClassRef(
        group="scheduling.k8s.io", kind="PriorityClass", name="batch")))
    runtime = adjusted_workload("ns0", "runtime", uid="uid-runtime", queue="lq0", runtime="rc", limit=None,
                                created=T0)
    limited = adjusted_workload("ns1", "limited", uid="uid-limited", queue="lq0", runtime=None, limit="3",
                                created=T0)
    bare = adjusted_workload("ns0", "bare", uid="uid-bare", queue="lq0", runtime=None, limit=None, created=T0)
    running = workload("ns1", "running", cpu="1", priority_class="high")
    return [by_wpc, by_pc, runtime, limited, bare, running]


def with_status(w: o.Workload, n: int) -> o.Workload:
    """``w`` as the watcher shows it after status change ``n``: same spec, another status and resourceVersion."""
    status = o.WorkloadStatus(conditions=[cond("QuotaReserved", "False", "Pending", T0 + n)])
    if w.metadata.name == "running":
        status = o.WorkloadStatus(admission=admission("cq0", "f0", 1000), conditions=[
            cond("QuotaReserved", "True", "QuotaReserved", T0 + 1), cond("Admitted", "True", "Admitted", T0 + 1)])
    return msgspec.structs.replace(w, metadata=msgspec.structs.replace(w.metadata, resource_version=str(n)),
                                   status=status)


def lifecycle(change: list[ev.AnyEvent], after: list[o.Workload] | None = None) -> list[list[ev.AnyEvent]]:
    """Inputs, the workloads (the admitted one reserved and admitted), a round of status upserts, ``change``, then
    another round of status upserts (of ``after``'s specs when given)."""
    t = T0
    inputs: list[ev.AnyEvent] = [upsert(priority_class("high", 10), t), upsert(k8s_priority_class("batch", 5), t),
                                 upsert(runtime_class("rc", {"cpu": "100m"}), t)]
    wls = workloads()
    adm = admission("cq0", "f0", 1000)
    batches: list[list[ev.AnyEvent]] = [prelude(t), inputs, [upsert(w, t) for w in wls],
                                        [ev.QuotaReserved(time=t, key="ns1/running", admission=adm, cycle=1, input=0),
                                         ev.WorkloadAdmitted(time=t, key="ns1/running", cycle=1, input=0)],
                                        [upsert(with_status(w, 1), t + 1) for w in wls]]
    if change:
        batches.append(change)
    batches.append([upsert(with_status(w, 2), t + 2) for w in (after if after is not None else wls)])
    return batches


def folded(batches: list[list[ev.AnyEvent]]) -> tuple[ClusterState, ClusterState, int]:
    """The lazy and the full fold of ``batches``, and how often the lazy one computed from a spec after the
    first round of upserts (the workloads' creation)."""
    lazy_recs = decoded(batches, lazy=True)
    first_round = sum(len(b) for b in batches[:3])
    lazy = fold(lazy_recs[:first_round])
    computed = []
    anew = ClusterState._from_spec_anew

    def counted(state: ClusterState, spec: o.WorkloadSpec, limits: object, namespace: str) -> object:
        computed.append(limits)
        return anew(state, spec, limits, namespace)  # type: ignore[arg-type]

    with mock.patch.object(ClusterState, "_from_spec_anew", counted):  # a slotted instance takes no attribute
        fold(lazy_recs[first_round:], lazy)
    return lazy, fold(decoded(batches, lazy=False)), len(computed)


def test_status_upserts_of_an_unchanged_spec_reuse_what_it_gave() -> None:
    lazy, full, computed = folded(lifecycle([]))
    assert_same(lazy, full)
    assert computed == 0, "two rounds of status upserts, nothing changed: every spec's values are reused"
    assert lazy.workloads["ns0/by-wpc"].priority == 10 and lazy.workloads["ns0/by-pc"].priority == 5


CHANGES: dict[str, list[ev.AnyEvent]] = {
    "WorkloadPriorityClass changed": [upsert(priority_class("high", 20), T0 + 1)],
    "WorkloadPriorityClass deleted": [delete("WorkloadPriorityClass", "high", T0 + 1)],
    "PriorityClass changed": [upsert(k8s_priority_class("batch", 7), T0 + 1)],
    "PriorityClass deleted": [delete("PriorityClass", "batch", T0 + 1)],
    "LimitRange added": [upsert(limit_range("ns1", "lr", default_request={"cpu": "250m"}), T0 + 1),
                         upsert(limit_range("ns0", "lr", default_request={"cpu": "500m"}), T0 + 1)],
    "RuntimeClass overhead changed": [upsert(runtime_class("rc", {"cpu": "700m"}), T0 + 1)],
    "RuntimeClass deleted": [delete("RuntimeClass", "rc", T0 + 1)],
    "other request rules": [ev.ConfigRecorded(time=T0 + 1, document=RESOURCE_CONFIGS[2])],
}


@pytest.mark.parametrize("change", list(CHANGES), ids=list(CHANGES))
def test_a_changed_input_recomputes_what_the_spec_gives(change: str) -> None:
    lazy, full, computed = folded(lifecycle(CHANGES[change]))
    assert_same(lazy, full)
    assert computed >= 1


def test_the_changes_do_change_the_workloads() -> None:
    """The cases above are not vacuous: each change gives another state than no change at all."""
    unchanged = fold(decoded(lifecycle([]), lazy=False))
    digests = {name: digest(fold(decoded(lifecycle(events), lazy=False))) for name, events in CHANGES.items()}
    assert digest(unchanged) not in digests.values()
    assert len(set(digests.values())) == len(digests)


def test_a_spec_change_with_the_same_status_recomputes() -> None:
    before = workloads()
    after = [msgspec.structs.replace(w, spec=msgspec.structs.replace(
        w.spec, pod_sets=[msgspec.structs.replace(w.spec.pod_sets[0], count=2)]),
        metadata=msgspec.structs.replace(w.metadata, generation=2)) for w in before]
    lazy, full, computed = folded(lifecycle([], after=after))
    assert_same(lazy, full)
    assert computed == len(after) - 1, "by-wpc and running have one spec (and no LimitRanges): computed once"
    assert all(wl.spec_sets[0].count == 2 for wl in lazy.workloads.values())


def test_equal_specs_in_other_namespaces_do_not_share_pod_sets() -> None:
    """One spec (equal bytes) in two namespaces, one with a LimitRange: each workload gets its namespace's."""
    t = T0
    a = adjusted_workload("ns0", "same", uid="u0", queue="lq0", runtime=None, limit=None, created=t)
    b = adjusted_workload("ns1", "same", uid="u1", queue="lq0", runtime=None, limit=None, created=t)
    batches = [prelude(t), [upsert(limit_range("ns1", "lr", default_request={"cpu": "250m"}), t)],
               [upsert(a, t), upsert(b, t)],
               [upsert(with_status(w, n), t + n) for n in (1, 2) for w in (a, b)]]
    lazy, full, _ = folded(batches)
    assert_same(lazy, full)
    assert lazy.workloads["ns0/same"].pod_sets != lazy.workloads["ns1/same"].pod_sets
    assert dict(lazy.workloads["ns1/same"].pod_sets[0].requests) == {"cpu": 250}


def _claiming(ns: str) -> o.Workload:
    """A workload whose pod claims devices from ResourceClaimTemplate ``gpus`` of its namespace."""
    w = workload(ns, "claims", uid=f"uid-claims-{ns}", created=T0)
    ps = w.spec.pod_sets[0]
    spec = msgspec.structs.replace(ps.template.spec, resource_claims=[
        o.PodResourceClaim(name="g", resource_claim_template_name="gpus")])
    ps = msgspec.structs.replace(ps, template=msgspec.structs.replace(ps.template, spec=spec))
    return msgspec.structs.replace(w, spec=msgspec.structs.replace(w.spec, pod_sets=[ps]))


def _gpus(ns: str, count: int) -> o.ResourceClaimTemplate:
    return msgspec.convert({"kind": "ResourceClaimTemplate", "metadata": {"name": "gpus", "namespace": ns},
                            "spec": {"spec": {"devices": {"requests": [{"name": "g", "exactly": {
                                "deviceClassName": "gpu.example.com", "count": count}}]}}}}, o.ResourceClaimTemplate)


_MAPPED = {"resources": {"deviceClassMappings": [{"name": "example.com/gpu", "deviceClassNames": ["gpu.example.com"]}]}}


def test_equal_specs_with_claims_in_other_namespaces_are_charged_by_their_own_templates() -> None:
    """One spec with a claim in two namespaces, only one of which has the template; then the template changes.
    Each workload is charged by its namespace's template (or refused without one), lazily as in full."""
    t = T0
    a, b = _claiming("ns0"), _claiming("ns1")
    batches = [prelude(t), [ev.ConfigRecorded(time=t, document=_MAPPED), upsert(_gpus("ns1", 2), t)],
               [upsert(a, t), upsert(b, t)],
               [upsert(with_status(w, 1), t + 1) for w in (a, b)],
               [upsert(_gpus("ns1", 3), t + 1)],
               [upsert(with_status(w, 2), t + 2) for w in (a, b)]]
    lazy, full, computed = folded(batches)
    assert_same(lazy, full)
    assert computed >= 1
    refused, charged = lazy.workloads["ns0/claims"].pod_sets[0], lazy.workloads["ns1/claims"].pod_sets[0]
    assert 'resourceclaimtemplates.resource.k8s.io "gpus" not found' in refused.dra_error
    assert dict(charged.requests) == {"cpu": 1000, "example.com/gpu": 3} and not charged.dra_error
