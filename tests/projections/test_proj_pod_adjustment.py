"""Pod templates counted as Kueue adjusts them: RuntimeClass overhead, LimitRange defaults, limits as requests;
the admissibility findings on the adjusted template; and the projection keeping pending workloads' requests in
step with the LimitRanges and RuntimeClasses in force, identically after a snapshot restore."""

from __future__ import annotations

import random

import msgspec
import pytest
from fixtures.eventgen import (
    T0,
    Op,
    adjusted_workload,
    cluster_queue,
    delete,
    fold,
    interpret,
    limit_range,
    local_queue,
    namespace,
    prelude,
    records,
    runtime_class,
    upsert,
    workload,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events import objects as o
from events import schema as ev
from events.quantity import parse_quantity
from projections import snapshot
from projections.cluster import ClusterState
from projections.dra import _pod_total
from projections.pod_adjustment import (
    _pod_level_defaulted,
    _with_pod_level_defaults,
    adjust,
    admissibility,
    api_defaults,
    default_pod_level,
    limit_findings,
    overhead_for,
    resource_findings,
    scheduling_fields_changed,
    summarize,
)
from projections.workloads import (
    PENDING,
    PodSetInfo,
    failed_attempt,
    pod_requests,
    pod_set_info,
    pod_set_infos,
    readjusted,
    status_of,
)


def res(requests: dict | None = None, limits: dict | None = None) -> o.ResourceRequirements:
    return o.ResourceRequirements(requests=requests or {}, limits=limits or {})


def item(kind: str = "Container", **lists: dict) -> o.LimitRangeItem:
    return o.LimitRangeItem(type=kind, **lists)


def lr(name: str, *items: o.LimitRangeItem, ns: str = "team") -> o.LimitRange:
    return o.LimitRange(metadata=o.ObjectMeta(name=name, namespace=ns), spec=o.LimitRangeSpec(limits=list(items)))


def requests_of(spec: o.PodSpec, limits=None, rcs=None) -> dict[str, int]:
    ps = pod_set_info(o.PodSet(name="main", template=o.PodTemplateSpec(spec=spec)), limits, rcs)
    return dict(ps.requests)


# --- the summary ---------------------------------------------------------------------------------------------------


def test_summary_keeps_the_tightest_bounds_and_the_first_defaults_in_name_order() -> None:
    a = lr("a", item(max={"cpu": "4"}, min={"cpu": "100m"}, default={"cpu": "2"}, default_request={"cpu": "1"},
                     max_limit_request_ratio={"cpu": "4"}))
    b = lr("b", item(max={"cpu": "3", "memory": "1Gi"}, min={"cpu": "200m", "memory": "1Mi"},
                     default={"cpu": "3", "memory": "512Mi"}, default_request={"cpu": "250m", "memory": "256Mi"},
                     max_limit_request_ratio={"cpu": "2"}),
           item("PersistentVolumeClaim", max={"storage": "1Gi"}))
    s = summarize([a, b])
    assert s is not None and s.pod is None
    c = s.container
    assert dict(c.max) == {"cpu": "3", "memory": "1Gi"}
    assert dict(c.min) == {"cpu": "200m", "memory": "1Mi"}
    assert dict(c.default) == {"cpu": "2", "memory": "512Mi"}  # a's cpu came first; memory only b gives
    assert dict(c.default_request) == {"cpu": "1", "memory": "256Mi"}
    assert dict(c.max_limit_request_ratio) == {"cpu": "2"}
    assert summarize([b, a]).container.default == (("cpu", "3"), ("memory", "512Mi"))  # order decides defaults


def test_summary_of_nothing_about_pods_is_none() -> None:
    assert summarize([]) is None
    assert summarize([lr("pvc", item("PersistentVolumeClaim", max={"storage": "1Gi"}))]) is None


def test_container_items_are_defaulted_as_the_api_server_stores_them() -> None:
    got = api_defaults(item(max={"cpu": "2", "memory": "1Gi"}, min={"cpu": "100m", "memory": "1Mi"},
                            default={"memory": "512Mi"}))
    assert got.default == {"cpu": "2", "memory": "512Mi"}  # a missing default is the max
    assert got.default_request == {"cpu": "2", "memory": "512Mi"}  # a missing defaultRequest is the default ...
    only_min = api_defaults(item(min={"cpu": "100m"}))
    assert only_min.default == {} and only_min.default_request == {"cpu": "100m"}  # ... else the min
    pod = item("Pod", max={"cpu": "2"})
    assert api_defaults(pod) is pod
    stored = item(default={"cpu": "1"}, default_request={"cpu": "1"})
    assert api_defaults(stored) is stored


# --- the adjustment ------------------------------------------------------------------------------------------------


RCS = {"kata": runtime_class("kata", {"cpu": "250m", "memory": "64Mi"}), "bare": runtime_class("bare")}


def test_runtime_class_overhead_only_when_the_template_sets_none() -> None:
    spec = o.PodSpec(runtime_class_name="kata", containers=[o.Container(resources=res({"cpu": "1"}))])
    assert requests_of(spec, rcs=RCS) == {"cpu": 1250, "memory": 64 * 2**20}
    own = msgspec.structs.replace(spec, overhead={"cpu": "100m"})
    assert requests_of(own, rcs=RCS) == {"cpu": 1100}
    for name in ("bare", "missing"):
        assert requests_of(msgspec.structs.replace(spec, runtime_class_name=name), rcs=RCS) == {"cpu": 1000}
    assert overhead_for(msgspec.structs.replace(spec, runtime_class_name=None), RCS) is None


def test_container_defaults_fill_init_and_regular_containers() -> None:
    limits = summarize([lr("d", item(default={"cpu": "2", "memory": "1Gi"}, default_request={"cpu": "500m"}))])
    spec = o.PodSpec(
        init_containers=[o.Container(name="init", resources=res())],
        containers=[o.Container(name="a", resources=res({"cpu": "1"})),
                    o.Container(name="b", resources=res(limits={"cpu": "3"}))])
    adjusted = adjust(spec, limits, None)
    a, b = adjusted.containers
    assert a.resources.requests == {"cpu": "1", "memory": "1Gi"} and a.resources.limits == {"cpu": "2", "memory": "1Gi"}
    # b's own limit is its request, not the defaultRequest (Kueue v0.20, #15023); its defaulted memory limit too
    assert b.resources.requests == {"cpu": "3", "memory": "1Gi"} and b.resources.limits["cpu"] == "3"
    assert adjusted.init_containers[0].resources.requests == {"cpu": "500m", "memory": "1Gi"}
    # containers a + b: cpu 1 + 3, memory 1Gi + 1Gi; the init container needs less of both
    assert requests_of(spec, limits) == {"cpu": 4000, "memory": 2 * 2**30}
    pod_level = o.PodSpec(resources=res(limits={"cpu": "6"}), containers=spec.containers)
    pod_limits = summarize([lr("p", item("Pod", default_request={"cpu": "5"}))])
    # the pod-level request is the containers' 1 + 3, before the Pod type's defaultRequest (Kueue's
    # DefaultPodLevelRequests), not the pod-level limit
    assert adjust(pod_level, pod_limits, None).resources.requests == {"cpu": "4"}
    assert spec.containers[0].resources.requests == {"cpu": "1"}  # the template itself is never written


def test_a_limit_without_request_is_the_request_without_any_limit_range() -> None:
    spec = o.PodSpec(containers=[o.Container(resources=res(limits={"cpu": "2", "nvidia.com/gpu": "1"}))])
    assert requests_of(spec) == {"cpu": 2000, "nvidia.com/gpu": 1}
    plain = o.PodSpec(containers=[o.Container(resources=res({"cpu": "1"}))])
    assert adjust(plain, None, None) is plain


def test_pod_type_defaults_fill_pod_level_resources_only() -> None:
    limits = summarize([lr("p", item("Pod", default={"cpu": "4"}, default_request={"cpu": "3"}))])
    with_pod_level = o.PodSpec(resources=res(limits={"memory": "1Gi"}),
                               containers=[o.Container(resources=res({"memory": "512Mi"}))])
    adjusted = adjust(with_pod_level, limits, None)
    # memory: the containers' aggregate, not the pod-level limit; cpu, which no container asks for: the Pod
    # type's
    assert adjusted.resources.requests == {"cpu": "3", "memory": str(512 * 2**20)}  # the aggregate, exactly
    assert adjusted.resources.limits == {"cpu": "4", "memory": "1Gi"}
    assert adjusted.containers == with_pod_level.containers  # Container defaults only come from Container items
    assert requests_of(with_pod_level, limits) == {"cpu": 3000, "memory": 2**29}
    without = o.PodSpec(containers=[o.Container(resources=res({"cpu": "1"}))])
    assert adjust(without, limits, None) is without


def test_pod_level_requests_count_for_at_least_the_containers_aggregate_plus_overhead() -> None:
    # Kueue v0.20 (#16047): pod-level requests below the containers' sum no longer shrink the charge
    spec = o.PodSpec(resources=res({"cpu": "1", "memory": "2Gi"}), overhead={"cpu": "250m", "memory": "1Mi"},
                     init_containers=[o.Container(resources=res({"cpu": "3"}))],
                     containers=[o.Container(resources=res({"cpu": "1", "memory": "512Mi"})),
                                 o.Container(resources=res({"cpu": "1", "nvidia.com/gpu": "1"}))])
    # cpu: max(pod 1, containers 2, init 3) + 250m; memory: max(pod 2Gi, 512Mi) + 1Mi; the gpu from a container
    assert requests_of(spec) == {"cpu": 3250, "memory": 2 * 2**30 + 2**20, "nvidia.com/gpu": 1}
    limits = summarize([lr("p", item("Pod", max={"cpu": "3"}))])
    assert limit_findings(adjust(spec, limits, None), limits) == (
        'template.spec: Invalid value: ["cpu"]: requests must not be above the limitRange max',)
    above = msgspec.structs.replace(spec, init_containers=[], resources=res({"cpu": "2500m"}))
    assert requests_of(above) == {"cpu": 2750, "memory": 512 * 2**20 + 2**20, "nvidia.com/gpu": 1}


def test_pod_level_resources_count_only_for_the_names_kubernetes_manages_at_the_pod_level() -> None:
    # Kueue's PodRequests reads the pod level through component-helpers, which takes cpu, memory and
    # hugepages-* there and no other name (podrequests_test.go's pod-level cases; the API server refuses
    # others on a Pod)
    spec = o.PodSpec(resources=res({"cpu": "2", "hugepages-2Mi": "4Mi", "nvidia.com/gpu": "4"},
                                   {"ephemeral-storage": "1Gi"}),
                     containers=[o.Container(resources=res({"cpu": "1", "nvidia.com/gpu": "1"}))])
    assert requests_of(spec) == {"cpu": 2000, "hugepages-2Mi": 4 * 2**20, "nvidia.com/gpu": 1}
    limits = summarize([lr("p", item("Pod", max={"nvidia.com/gpu": "1", "ephemeral-storage": "0"}))])
    assert limit_findings(adjust(spec, limits, None), limits) == ()
    above = summarize([lr("p", item("Pod", max={"cpu": "1500m"}))])
    assert limit_findings(adjust(spec, above, None), above) == (
        'template.spec: Invalid value: ["cpu"]: requests must not be above the limitRange max',)


@pytest.mark.parametrize(("spec", "want"), [
    # Kueue's podrequests_test.go TestPodRequests: a negative entry (taken under the
    # WorkloadValidateResourcesAreNonNegative gate off) never spends what another list asks for under its name
    (o.PodSpec(containers=[o.Container(resources=res({"cpu": "8"}))],
               init_containers=[o.Container(resources=res({"cpu": "-3"}), restart_policy="Always")]),
     {"cpu": 8000}),
    (o.PodSpec(containers=[o.Container(resources=res({"cpu": "8"}))],
               init_containers=[o.Container(resources=res({"cpu": "-3"}))]), {"cpu": 8000}),
    (o.PodSpec(containers=[o.Container(resources=res({"cpu": "8"}))], resources=res({"cpu": "-3"})),
     {"cpu": 8000}),
    (o.PodSpec(containers=[o.Container(resources=res({"cpu": "8"}))], overhead={"cpu": "-3"}), {"cpu": 8000}),
    (o.PodSpec(containers=[o.Container(resources=res({"cpu": "2"}))], overhead={"cpu": "1"}), {"cpu": 3000}),
    # a negative request on a name nothing else asks for is still named, at 0 (it picks a flavor)
    (o.PodSpec(containers=[o.Container(resources=res({"cpu": "1", "example.com/x": "-1"}))],
               resources=res({"memory": "-1Gi"})), {"cpu": 1000, "example.com/x": 0, "memory": 0}),
])
def test_a_negative_request_never_lowers_what_another_list_asks_for(spec, want) -> None:
    assert requests_of(spec) == want


def test_limit_range_findings_in_kueues_order_init_containers_containers_then_the_pod() -> None:
    # Kueue's limitrange_test.go TestValidatePodSpec "multiple" and "multiple valid", on a template as given
    spec = o.PodSpec(
        containers=[o.Container(resources=res({"cpu": "1", "memory": "2Gi",
                                               "example.com/mainContainerGpu": "2"})),
                    o.Container(resources=res({"cpu": "1.5", "example.com/gpu": "2"}))],
        init_containers=[o.Container(resources=res({"cpu": "4", "memory": "2Gi"})),
                         o.Container(resources=res({"cpu": "1.5", "example.com/gpu": "2",
                                                    "example.com/initContainerGpu": "2"}))],
        overhead={"cpu": "1", "memory": "1Gi", "example.com/gpu": "1"})
    limits = summarize([lr("a", item("Pod", max={"cpu": "4"})),
                        lr("b", item(min={"example.com/mainContainerGpu": "3"})),
                        lr("c", item(max={"example.com/initContainerGpu": "1"}))])
    assert limit_findings(spec, limits) == (
        'template.spec.initContainers[1]: Invalid value: ["example.com/initContainerGpu"]: '
        "requests must not be above the limitRange max",
        'template.spec.containers[0]: Invalid value: ["example.com/mainContainerGpu"]: '
        "requests must not be below the limitRange min",
        # max(init 4, containers 2.5) + overhead 1 = 5 cpu
        'template.spec: Invalid value: ["cpu"]: requests must not be above the limitRange max',
    )
    valid = summarize([lr("a", item("Pod", max={"cpu": "5"})),
                       lr("b", item(min={"example.com/mainContainerGpu": "1"})),
                       lr("c", item(max={"example.com/initContainerGpu": "2"}))])
    assert limit_findings(spec, valid) == ()


SIDECAR_LAYOUTS = [
    # (init containers as (sidecar, cpu), regular containers' cpu, the pod's cpu as Kubernetes totals it)
    ([(False, 4), (True, 1)], [1], 4),  # istio: setup, then the proxy: max(1 + 1, 4)
    ([(True, 1), (False, 3), (True, 2)], [1], 4),  # max(1 + 1 + 2, 3 + 1)
    ([(False, 10), (True, 1)], [1], 10),  # a later sidecar does not add to the init peak
    ([(True, 2), (False, 1)], [1], 3),  # the init peak with its sidecar is below the running sum
    ([(True, 1), (False, 5), (True, 1), (False, 5)], [], 7),  # each init container with the sidecars before it: 5 + 2
    ([(False, 2)], [], 2),
]


@pytest.mark.parametrize(("inits", "mains", "want"), SIDECAR_LAYOUTS)
def test_a_sidecar_declared_after_a_regular_init_container_is_not_added_to_its_peak(inits, mains, want) -> None:
    # Kubernetes' PodRequests (KEP-753), which Kueue's pkg/resources PodRequests calls; the same total for quota,
    # for the LimitRange Pod max and for a DRA extended resource
    spec = o.PodSpec(
        init_containers=[o.Container(resources=res({"cpu": str(q)}), restart_policy="Always" if sc else None)
                         for sc, q in inits],
        containers=[o.Container(resources=res({"cpu": str(q)})) for q in mains])
    assert requests_of(spec) == {"cpu": want * 1000}
    limits = summarize([lr("p", item("Pod", max={"cpu": str(want)}))])
    assert limit_findings(adjust(spec, limits, None), limits) == ()
    below = summarize([lr("p", item("Pod", max={"cpu": f"{want * 1000 - 1}m"}))])
    assert limit_findings(adjust(spec, below, None), below) == (
        'template.spec: Invalid value: ["cpu"]: requests must not be above the limitRange max',)
    asked = [("initContainers", sc, q) for sc, q in inits] + [("containers", False, q) for q in mains]
    assert _pod_total(asked) == want


def test_overhead_naming_pods_or_negative_is_not_charged() -> None:
    # newest Kueue's ChargeableOverhead: `pods` comes from the pod count, a negative quantity would cancel a request;
    # the same for quota and for the LimitRange Pod bounds
    spec = o.PodSpec(overhead={"pods": "1", "cpu": "-500m", "memory": "1Mi"},
                     containers=[o.Container(resources=res({"cpu": "1"}))])
    assert requests_of(spec) == {"cpu": 1000, "memory": 2**20}
    limits = summarize([lr("p", item("Pod", min={"cpu": "1"}, max={"pods": "0"}))])
    assert limit_findings(adjust(spec, limits, None), limits) == ()


# --- admissibility -------------------------------------------------------------------------------------------------


def test_requests_above_limits_name_every_container_and_resource_in_order() -> None:
    spec = o.PodSpec(
        init_containers=[o.Container(resources=res({"memory": "2Gi", "cpu": "2"}, {"cpu": "1", "memory": "1Gi"}))],
        containers=[o.Container(resources=res({"cpu": "1"}, {"cpu": "1"})),
                    o.Container(resources=res({"cpu": "1001m"}, {"cpu": "1"}))],
        resources=res({"cpu": "3"}, {"cpu": "2"}))
    assert resource_findings(spec) == (
        'template.spec.initContainers[0]: Invalid value: ["cpu","memory"]: '
        "requests must not exceed its limits",
        'template.spec.containers[1]: Invalid value: ["cpu"]: requests must not exceed its limits',
        'template.spec.resources: Invalid value: ["cpu"]: requests must not exceed its limits',
    )


def test_limit_range_bounds_on_containers_and_the_pod_total() -> None:
    limits = summarize([lr("b", item(max={"cpu": "2"}, min={"memory": "64Mi"}, max_limit_request_ratio={"cpu": "1"}),
                           item("Pod", max={"cpu": "3"}, min={"cpu": "1"}))])
    spec = o.PodSpec(
        overhead={"cpu": "500m"},
        containers=[o.Container(resources=res({"cpu": "1", "memory": "32Mi"}, {"cpu": "3"})),
                    o.Container(resources=res({"cpu": "1", "memory": "64Mi"}, {"cpu": "2"}))])
    assert limit_findings(adjust(spec, limits, None), limits) == (
        # the higher of request and limit against max, the lower against min; the ratio is not checked
        'template.spec.containers[0]: Invalid value: ["cpu"]: '
        "requests must not be above the limitRange max",
        'template.spec.containers[0]: Invalid value: ["memory"]: '
        "requests must not be below the limitRange min",
        # 1 + 1 cpu + 500m overhead is within the Pod max of 3
    )
    big = msgspec.structs.replace(spec, overhead={"cpu": "1500m"},
                                  containers=[spec.containers[1], spec.containers[1]])
    assert limit_findings(adjust(big, limits, None), limits) == (
        'template.spec: Invalid value: ["cpu"]: requests must not be above the limitRange max',)
    assert limit_findings(adjust(big, None, None), None) == ()


def test_admissibility_message_is_kueues_aggregate() -> None:
    def ps(invalid=(), outside=()) -> PodSetInfo:
        return PodSetInfo(name="p", count=1, min_count=None, requests=(), invalid_resources=invalid,
                          outside_limit_ranges=outside)

    assert admissibility([ps(), ps()]) == ""
    assert admissibility([ps(outside=("template.spec: x",)), ps(invalid=("template.spec.containers[0]: y",))]) == (
        "resources validation failed: spec.podSets[1].template.spec.containers[0]: y")
    assert admissibility([ps(outside=("template.spec: x",)), ps(outside=("template.spec: x", "template.spec: z"))]) \
        == ("resources didn't satisfy LimitRange constraints: [spec.podSets[0].template.spec: x, "
            "spec.podSets[1].template.spec: x, spec.podSets[1].template.spec: z]")


# --- the projection ------------------------------------------------------------------------------------------------


def _apply(state: ClusterState, *events: ev.AnyEvent) -> None:
    for e in events:
        state.apply(ev.Record(state.offset + 1, e))


def _cpu(state: ClusterState, key: str) -> int:
    return dict(state.workloads[key].pod_sets[0].requests).get("cpu", 0)


def _cluster() -> ClusterState:
    state = ClusterState()
    _apply(state, *(upsert(namespace(ns), T0) for ns in ("ns0", "ns1")),
           *(upsert(local_queue(ns, "lq0", "cq0"), T0) for ns in ("ns0", "ns1")))
    for ns in ("ns0", "ns1"):
        for i, runtime in enumerate((None, "rc0")):
            _apply(state, upsert(adjusted_workload(ns, f"w{i}", uid=f"{ns}-{i}", queue="lq0", runtime=runtime,
                                                   limit=None, created=T0), T0))
    return state


def test_a_limit_range_change_recounts_the_pending_workloads_of_its_namespace_only() -> None:
    state = _cluster()
    assert _cpu(state, "ns0/w0") == 0
    _apply(state, upsert(limit_range("ns0", "lr", default_request={"cpu": "2"}), T0 + 1))
    assert [_cpu(state, k) for k in ("ns0/w0", "ns0/w1", "ns1/w0")] == [2000, 2000, 0]
    assert {"ns0/w0", "ns0/w1"} <= set(state.touched)
    admission = o.Admission(cluster_queue="cq0", pod_set_assignments=[o.PodSetAssignment(
        name="main", flavors={"cpu": "f0"}, resource_usage={"cpu": "2"}, count=1)])
    _apply(state, ev.QuotaReserved(time=T0 + 2, key="ns0/w1", admission=admission, cycle=1, input=state.offset))
    _apply(state, upsert(limit_range("ns0", "lr", default_request={"cpu": "3"}), T0 + 3))
    assert _cpu(state, "ns0/w0") == 3000
    assert _cpu(state, "ns0/w1") == 2000 and state.usage["cq0"] == {"f0/cpu": 2000}  # admitted: as it was
    _apply(state, ev.WorkloadRequeued(time=T0 + 4, key="ns0/w1", status=True, reason="Preempted", release=True,
                                      cycle=2, input=state.offset))
    assert state.workloads["ns0/w1"].phase == PENDING and _cpu(state, "ns0/w1") == 3000  # pending again: recounted
    _apply(state, delete("LimitRange", "ns0/lr", T0 + 5))
    assert _cpu(state, "ns0/w0") == 0


def test_a_runtime_class_change_recounts_the_workloads_naming_it() -> None:
    state = _cluster()
    _apply(state, upsert(runtime_class("rc0", {"cpu": "100m"}), T0 + 1))
    assert [_cpu(state, k) for k in ("ns0/w0", "ns0/w1", "ns1/w1")] == [0, 100, 100]
    rcs = state.runtime_classes
    _apply(state, upsert(msgspec.structs.replace(runtime_class("rc0", {"cpu": "100m"}), handler="other"), T0 + 2))
    assert state.runtime_classes is rcs  # the overhead is unchanged: pod-set memos stay valid
    _apply(state, upsert(runtime_class("rc0", {"cpu": "1"}), T0 + 3))
    assert state.runtime_classes is not rcs and _cpu(state, "ns1/w1") == 1000
    _apply(state, delete("RuntimeClass", "rc0", T0 + 4))
    assert _cpu(state, "ns1/w1") == 0


def test_the_memo_of_a_shared_spec_follows_the_runtime_classes() -> None:
    spec = adjusted_workload("ns0", "w", uid="u", queue="lq0", runtime="rc0", limit=None, created=T0).spec
    before = {"rc0": runtime_class("rc0", {"cpu": "1"})}
    after = {"rc0": runtime_class("rc0", {"cpu": "2"})}
    assert dict(pod_set_infos(spec, None, before)[0].requests) == {"cpu": 1000}
    assert dict(pod_set_infos(spec, None, after)[0].requests) == {"cpu": 2000}
    limits = summarize([lr("l", item(default_request={"memory": "1Gi"}))])
    assert dict(pod_set_infos(spec, limits, after)[0].requests) == {"cpu": 2000, "memory": 2**30}


ADJUSTING_OPS = ("wl_adjusted", "wl_adjusted", "wl", "limit_range", "limit_range", "limit_range_delete",
                 "runtime_class", "runtime_class_delete", "reserve", "requeue", "deactivate", "pending", "tick")


def _adjusting_ops(max_size: int = 60) -> st.SearchStrategy[list[Op]]:
    small = st.integers(min_value=0, max_value=63)
    return st.lists(st.builds(Op, st.sampled_from(ADJUSTING_OPS), small, small, small), max_size=max_size)


def _pending_as_counted_now(state: ClusterState) -> None:
    """Every pending workload's pod sets are what its spec gives under the LimitRanges and RuntimeClasses in force."""
    for key in sorted(state.workloads):
        wl = state.workloads[key]
        if wl.phase == PENDING:
            now = readjusted(wl.pod_sets, state.pod_templates[key], state.limit_summary(wl.namespace),
                             state.runtime_classes)
            assert now == wl.pod_sets, f"{key}: counted as {wl.pod_sets}, the LimitRanges in force say {now}"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=_adjusting_ops(), data=st.data())
def test_limit_range_changes_recount_pending_workloads_identically_after_a_restore(ops, data) -> None:
    recs = records(interpret(ops))
    full = fold(recs)
    _pending_as_counted_now(full)
    cut = data.draw(st.integers(0, len(recs)), label="cut")
    restored = snapshot.decode(snapshot.encode(fold(recs[:cut])))
    resumed = fold(recs[cut:], restored)
    _pending_as_counted_now(resumed)
    assert {k: w.pod_sets for k, w in resumed.workloads.items()} == {k: w.pod_sets for k, w in full.workloads.items()}
    assert snapshot.digest(resumed) == snapshot.digest(full)


@pytest.mark.parametrize("seed", range(3))
def test_long_sequences_of_limit_range_changes_snapshot_anywhere(seed: int) -> None:
    rng = random.Random(seed)
    ops = [Op(rng.choice(ADJUSTING_OPS), rng.randrange(64), rng.randrange(64), rng.randrange(64))
           for _ in range(300)]
    recs = records(interpret(ops))
    expected = snapshot.digest(fold(recs))
    assert any(isinstance(r.event, ev.ObjectUpserted) and isinstance(r.event.obj, o.LimitRange) for r in recs)
    for cut in range(0, len(recs), 20):
        resumed = fold(recs[cut:], snapshot.decode(snapshot.encode(fold(recs[:cut]))))
        assert snapshot.digest(resumed) == expected, f"snapshot at {cut} diverged"


def test_status_resource_requests_of_a_workload_found_not_admissible_are_its_adjusted_totals() -> None:
    """The scheduler's Misconfigured for a template that is not admissible is a failed attempt: Kueue writes the
    pod sets' requests — as it counts them, LimitRange defaults included — with it."""
    state = _cluster()
    _apply(state, upsert(limit_range("ns0", "lr", default_request={"cpu": "2"}, max={"cpu": "1"}), T0 + 1))
    wl = state.workloads["ns0/w0"]
    message = admissibility(wl.pod_sets)
    assert message.startswith("resources validation failed: ")  # the defaultRequest is above the default limit
    decision = ev.WorkloadPending(time=T0 + 2, key="ns0/w0", reason="Misconfigured", message=message, parked=True,
                                  cycle=1, input=state.offset)
    assert failed_attempt(decision)
    _apply(state, decision)
    assert status_of(state.workloads["ns0/w0"])["resourceRequests"] == [{"name": "main", "resources": {"cpu": "2"}}]
    controller = ev.WorkloadPending(time=T0 + 3, key="ns0/w1", reason="Misconfigured",
                                    message="Workload namespace doesn't match ClusterQueue selector", cycle=2,
                                    input=state.offset)
    assert not failed_attempt(controller)


def test_a_version_71_snapshot_restores_its_pending_workloads_without_other_pod_level_names() -> None:
    """A snapshot written before version 72 holds a pending workload charged for a pod-level GPU request;
    restored, the workload is counted as a full fold counts it now, and the state is the full fold's."""
    state = _cluster()
    wl = adjusted_workload("ns0", "w9", uid="ns0-9", queue="lq0", runtime=None, limit=None, created=T0)
    spec = msgspec.structs.replace(wl.spec.pod_sets[0].template.spec,
                                   resources=res({"cpu": "1", "nvidia.com/gpu": "2"}))
    pod_set = msgspec.structs.replace(wl.spec.pod_sets[0], template=o.PodTemplateSpec(spec=spec))
    _apply(state, upsert(msgspec.structs.replace(
        wl, spec=msgspec.structs.replace(wl.spec, pod_sets=[pod_set])), T0 + 1))
    assert dict(state.workloads["ns0/w9"].pod_sets[0].requests) == {"cpu": 1000}
    fresh = snapshot.decode(snapshot.encode(state))
    held = state.workloads["ns0/w9"]
    held.pod_sets = tuple(msgspec.structs.replace(ps, requests=(("cpu", 1000), ("nvidia.com/gpu", 2)))
                          for ps in held.pod_sets)  # as version 71 counted it
    restored = snapshot.restore(msgspec.structs.replace(snapshot.take(state), version=71))
    assert dict(restored.workloads["ns0/w9"].pod_sets[0].requests) == {"cpu": 1000}
    assert snapshot.digest(restored) == snapshot.digest(fresh)


def test_a_version_72_snapshot_restores_its_pending_workloads_with_pod_level_requests_defaulted() -> None:
    """A snapshot written before version 73 holds a pending workload charged its pod-level cpu limit of 4
    where its container asks for 1; restored, the workload is counted as a full fold counts it now (1 cpu:
    the pod-level request defaults to the containers' aggregate), and the state is the full fold's."""
    state = _cluster()
    wl = adjusted_workload("ns0", "w9", uid="ns0-9", queue="lq0", runtime=None, limit="1", created=T0)
    spec = msgspec.structs.replace(wl.spec.pod_sets[0].template.spec, resources=res(limits={"cpu": "4"}))
    pod_set = msgspec.structs.replace(wl.spec.pod_sets[0], template=o.PodTemplateSpec(spec=spec))
    _apply(state, upsert(msgspec.structs.replace(
        wl, spec=msgspec.structs.replace(wl.spec, pod_sets=[pod_set])), T0 + 1))
    counted = dict(state.workloads["ns0/w9"].pod_sets[0].requests)
    assert counted == {"cpu": 1000}
    fresh = snapshot.decode(snapshot.encode(state))
    held = state.workloads["ns0/w9"]
    as_72 = tuple(sorted({**counted, "cpu": 4000}.items()))  # as version 72 counted it
    held.pod_sets = tuple(msgspec.structs.replace(ps, requests=as_72) for ps in held.pod_sets)
    untouched = snapshot.restore(msgspec.structs.replace(snapshot.take(state), version=73))
    assert dict(untouched.workloads["ns0/w9"].pod_sets[0].requests)["cpu"] == 4000  # what 73 wrote is kept
    restored = snapshot.restore(msgspec.structs.replace(snapshot.take(state), version=72))
    assert dict(restored.workloads["ns0/w9"].pod_sets[0].requests) == counted
    assert snapshot.digest(restored) == snapshot.digest(fresh)


# --- LimitRange changes retry parked workloads (Kueue's resourceUpdatesHandler) -----------------------------


def _parked_cluster() -> ClusterState:
    """prelude's cq0 and cq1 share cohort co0; cq3 (no cohort) holds ns1's lq3. Three workloads too big for
    any quota, each parked: ns0/big (cq0), ns1/near (cq1, same tree), ns1/far (cq3)."""
    state = fold(records([[*prelude(T0), upsert(cluster_queue("cq3"), T0),
                           upsert(local_queue("ns1", "lq3", "cq3"), T0),
                           upsert(workload("ns0", "big", queue="lq0", cpu="100"), T0),
                           upsert(workload("ns1", "near", queue="lq1", cpu="100"), T0),
                           upsert(workload("ns1", "far", queue="lq3", cpu="100"), T0)]]))
    _park(state, "ns0/big", "ns1/near", "ns1/far")
    return state


def _park(state: ClusterState, *keys: str) -> None:
    for key in keys:
        _apply(state, ev.WorkloadPending(time=T0, key=key, reason="Pending", message="does not fit",
                                         parked=True, cycle=1, input=state.offset))


def _parked(state: ClusterState) -> set[str]:
    return {k for q in state.queues.values() for k in q.inadmissible}


def test_a_limit_range_bound_change_retries_the_parked_workloads_of_its_namespaces_cohort_trees() -> None:
    """Kueue's workload_controller_limitrange_test.go TestLimitRangeSchedulingFieldsChanged ("max changed",
    "no change") and TestLimitRangeSchedulingFieldsChangedOnCreateOrDelete: a LimitRange created, deleted or
    changed in a field scheduling reads (retryInadmissibleForNamespace) requeues the inadmissible workloads of
    the cohort trees of the ClusterQueues its namespace's pending workloads queue in — even when no workload's
    requests change."""
    state = _parked_cluster()
    assert _parked(state) == {"ns0/big", "ns1/near", "ns1/far"}
    _apply(state, upsert(limit_range("ns0", "lr", max={"cpu": "200"}), T0 + 1))  # created: requests unchanged
    assert _parked(state) == {"ns1/far"}  # cq0's tree (cq0, cq1) retried; cq3 holds nothing of ns0
    _park(state, "ns0/big", "ns1/near")
    _apply(state, upsert(limit_range("ns0", "lr", max={"cpu": "200000m"}), T0 + 2))  # the same bound
    assert _parked(state) == {"ns0/big", "ns1/near", "ns1/far"}
    _apply(state, upsert(limit_range("ns0", "lr", max={"cpu": "300"}), T0 + 3))  # "max changed"
    assert _parked(state) == {"ns1/far"}
    _park(state, "ns0/big", "ns1/near")
    _apply(state, delete("LimitRange", "ns0/lr", T0 + 4))
    assert _parked(state) == {"ns1/far"}


def _base_lr() -> o.LimitRange:
    return lr("limits", item(max={"cpu": "2"}, min={"cpu": "1"}, default={"cpu": "2"},
                             default_request={"cpu": "1"}, max_limit_request_ratio={"cpu": "4"}))


def _mutated(**changes: object) -> o.LimitRange:
    base = _base_lr()
    first = msgspec.structs.replace(base.spec.limits[0], **changes)
    return msgspec.structs.replace(base, spec=o.LimitRangeSpec(limits=[first, *base.spec.limits[1:]]))


@pytest.mark.parametrize(("new", "want"), [
    pytest.param(_base_lr(), False, id="no change"),
    pytest.param(_mutated(max={"cpu": "8"}), True, id="max changed"),
    pytest.param(_mutated(min={"cpu": "500m"}), True, id="min changed"),
    pytest.param(_mutated(max_limit_request_ratio={"cpu": "2"}), True, id="maxLimitRequestRatio changed"),
    pytest.param(_mutated(default={"cpu": "3"}), True, id="default changed"),
    pytest.param(_mutated(default_request={"cpu": "2"}), True, id="defaultRequest changed"),
    pytest.param(_mutated(type="Pod"), True, id="item type changed"),
    pytest.param(lr("limits", *_base_lr().spec.limits, item("Pod")), True, id="item added"),
    # not in Kueue's table: quantities compare by value (equality.Semantic), items as the API server
    # stores them
    pytest.param(_mutated(max={"cpu": "2000m"}), False, id="same value, other notation"),
    pytest.param(_mutated(default={}), False, id="a dropped default the API server restores from max"),
])
def test_limit_range_scheduling_fields_changed(new: o.LimitRange, want: bool) -> None:
    # Kueue's workload_controller_limitrange_test.go TestLimitRangeSchedulingFieldsChanged
    assert scheduling_fields_changed(_base_lr(), new) is want


def test_limit_range_scheduling_fields_changed_on_create_or_delete() -> None:
    # Kueue's workload_controller_limitrange_test.go TestLimitRangeSchedulingFieldsChangedOnCreateOrDelete
    with_bounds = lr("limits", item(max={"cpu": "2"}))
    defaults_only = lr("limits", item(default_request={"cpu": "1"}))
    assert scheduling_fields_changed(None, with_bounds)
    assert scheduling_fields_changed(defaults_only, None)
    assert not scheduling_fields_changed(None, None)
    assert not scheduling_fields_changed(None, lr("empty"))  # no item: nothing scheduling reads


# --- Kueue's pkg/util/limitrange/limitrange_test.go ---------------------------------------------------------


def _validate_pod_spec() -> o.PodSpec:
    """TestValidatePodSpec's shared pod spec (requests only, so adjusting it changes nothing)."""
    return o.PodSpec(
        containers=[o.Container(resources=res({"cpu": "1", "memory": "2Gi",
                                               "example.com/mainContainerGpu": "2"})),
                    o.Container(resources=res({"cpu": "1.5", "example.com/gpu": "2"}))],
        init_containers=[o.Container(resources=res({"cpu": "4", "memory": "2Gi"})),
                         o.Container(resources=res({"cpu": "1.5", "example.com/gpu": "2",
                                                    "example.com/initContainerGpu": "2"}))],
        overhead={"cpu": "1", "memory": "1Gi", "example.com/gpu": "1"})


_ABOVE = "requests must not be above the limitRange max"
_BELOW = "requests must not be below the limitRange min"


@pytest.mark.parametrize(("limits", "spec", "want"), [
    pytest.param([], None, (), id="empty"),
    pytest.param([item(max={"example.com/initContainerGpu": "1"})], None,
                 (f'template.spec.initContainers[1]: Invalid value: ["example.com/initContainerGpu"]: '
                  f'{_ABOVE}',),
                 id="init container over"),
    pytest.param([item(min={"example.com/initContainerGpu": "3"})], None,
                 (f'template.spec.initContainers[1]: Invalid value: ["example.com/initContainerGpu"]: '
                  f'{_BELOW}',),
                 id="init container under"),
    pytest.param([item(max={"example.com/mainContainerGpu": "1"})], None,
                 (f'template.spec.containers[0]: Invalid value: ["example.com/mainContainerGpu"]: {_ABOVE}',),
                 id="container over"),
    pytest.param([item(min={"example.com/mainContainerGpu": "3"})], None,
                 (f'template.spec.containers[0]: Invalid value: ["example.com/mainContainerGpu"]: {_BELOW}',),
                 id="container under"),
    # the pod's cpu: max(init 4, containers 1 + 1.5) + overhead 1 = 5
    pytest.param([item("Pod", max={"cpu": "4"})], None, (f'template.spec: Invalid value: ["cpu"]: {_ABOVE}',),
                 id="pod over"),
    pytest.param([item("Pod", min={"cpu": "6"})], None, (f'template.spec: Invalid value: ["cpu"]: {_BELOW}',),
                 id="pod under"),
    pytest.param([item(min={"example.com/mainContainerGpu": "3"})],
                 o.PodSpec(containers=[o.Container(resources=res({"example.com/mainContainerGpu": "0"}))]),
                 (f'template.spec.containers[0]: Invalid value: ["example.com/mainContainerGpu"]: {_BELOW}',),
                 id="container under with explicit zero"),
    pytest.param([item("Pod", min={"cpu": "6"})],
                 o.PodSpec(containers=[o.Container(resources=res({"cpu": "0"}))]),
                 (f'template.spec: Invalid value: ["cpu"]: {_BELOW}',), id="pod under with explicit zero"),
    # not in Kueue's table: a bound on a resource a container (or the pod) does not name is not checked
    pytest.param([item(min={"example.com/other": "1"}), item("Pod", min={"example.com/other": "1"})], None,
                 (), id="bound on a resource nobody names"),
])
def test_validate_pod_spec(limits: list[o.LimitRangeItem], spec: o.PodSpec | None,
                           want: tuple[str, ...]) -> None:
    # Kueue's limitrange_test.go TestValidatePodSpec (the two "multiple" cases are in
    # test_limit_range_findings_in_kueues_order_init_containers_containers_then_the_pod)
    summary = summarize([lr("l", *limits)]) if limits else None
    assert limit_findings(spec or _validate_pod_spec(), summary) == want


def test_summarize_pod_defaults_keep_the_first_given() -> None:
    # Kueue's limitrange_test.go TestSummarize "podDefaults"
    s = summarize([lr("a", item("Pod", default={"cpu": "2"},
                                default_request={"cpu": "500m", "memory": "1Gi"})),
                   lr("b", item("Pod", default={"memory": "2Gi"}, default_request={"cpu": "1"}))])
    assert s is not None and s.container is None and s.pod is not None
    assert (s.pod.default, s.pod.default_request) == ((("cpu", "2"), ("memory", "2Gi")),
                                                      (("cpu", "500m"), ("memory", "1Gi")))


def test_summarize_limits_keep_the_tightest() -> None:
    # Kueue's limitrange_test.go TestSummarize "limits": the lowest max and ratio, the highest min
    s = summarize([lr("a", item("Pod", max={"cpu": "2"}, min={"cpu": "500m", "memory": "1Gi"},
                                max_limit_request_ratio={"cpu": "2"})),
                   lr("b", item("Pod", max={"memory": "2Gi"}, min={"cpu": "1"},
                                max_limit_request_ratio={"cpu": "500m"}))])
    assert s is not None and s.pod is not None
    assert s.pod.max == (("cpu", "2"), ("memory", "2Gi"))
    assert s.pod.min == (("cpu", "1"), ("memory", "1Gi"))
    assert s.pod.max_limit_request_ratio == (("cpu", "500m"),)
    assert summarize([]) is None  # "empty"


def test_a_head_decided_before_a_limit_range_default_change_goes_back_to_the_heap() -> None:
    """Kueue's workload_controller_limitrange_test.go
    TestLimitRangeUpdateRetriesWorkloadPoppedWithStaleDefaults: a LimitRange default changed while its
    namespace's workload is being scheduled (popped with the old defaults) sends that workload back to the
    heap, not to the inadmissible set, when its attempt fails."""
    state = fold(records([[*prelude(T0), upsert(limit_range("ns0", "lr", default_request={"cpu": "3"}), T0),
                           upsert(workload("ns0", "w", queue="lq0", cpu="100"), T0)]]))
    decided_on = state.offset  # the scheduler pops ns0/w here
    _apply(state, upsert(limit_range("ns0", "lr", default_request={"cpu": "1"}), T0 + 1))
    _apply(state, ev.WorkloadPending(time=T0 + 1, key="ns0/w", reason="Pending", message="does not fit",
                                     parked=True, cycle=1, input=decided_on))
    assert "ns0/w" not in state.queues["cq0"].inadmissible and "ns0/w" in state.queues["cq0"].entries


# --- pod-level resources (KEP-2837) as the API server defaults them ---------------------------------------
# Kueue's pkg/workload effective pod spec (applyAdjustmentsToPodSpec, ApplyLimitRangeAndPodLevelDefaults,
# DefaultHugePagePodLevelLimits, DefaultPodLevelRequests) in the mode it takes for an API server of 1.37 or
# newer and when the server version is not known: the pod-level requests are defaulted after the containers'
# LimitRange defaults, from the containers' aggregate requests (cpu, memory) and, for what no container asks
# for, from the pod-level limits; a Pod-type LimitRange's defaults come last.

KUEUE_LR = [lr("limits", item(default={"cpu": "4"}, default_request={"cpu": "2"}))]  # TestEffectivePodSpecs'
MODES = "TestEffectivePodSpecsPodLevelDefaultingModes"


def _default_request(cpu: str) -> list[o.LimitRange]:
    """The LimitRange of TestEffectivePodSpecsPodLevelDefaultingModes: a Container defaultRequest only."""
    return [lr("limits", item(default_request={"cpu": cpu}))]


def _pod(resources: o.ResourceRequirements, *containers: o.Container, init=()) -> o.PodSpec:
    return o.PodSpec(resources=resources, containers=list(containers or [o.Container()]),
                     init_containers=list(init))


HUGE = "hugepages-2Mi"
CPU4 = res(limits={"cpu": "4"})
POD_LEVEL_CASES = [
    # (LimitRanges, template, want pod-level requests, want pod-level limits, want charge)
    pytest.param(KUEUE_LR, _pod(CPU4, o.Container(resources=res({"cpu": "1"}))),
                 {"cpu": "1"}, {"cpu": "4"}, {"cpu": 1000},
                 id="TestEffectivePodSpecs/pod-level request aggregates the container requests"),
    pytest.param(KUEUE_LR, _pod(CPU4, o.Container(resources=res(limits={"cpu": "1"}))),
                 {"cpu": "1"}, {"cpu": "4"}, {"cpu": 1000},
                 id="TestEffectivePodSpecs/pod-level request aggregates the container limits"),
    pytest.param(KUEUE_LR, _pod(res(limits={"memory": "2Gi"})),
                 {"cpu": "2", "memory": "2Gi"}, {"memory": "2Gi"}, {"cpu": 2000, "memory": 2 * 2**30},
                 id="TestEffectivePodSpecs/pod-level limits"),
    pytest.param(_default_request("3"), _pod(CPU4), {"cpu": "3"}, {"cpu": "4"}, {"cpu": 3000},
                 id=f"{MODES}/no container requests, 1.37+ defaults from the LimitRange default"),
    pytest.param(_default_request("1"),
                 _pod(CPU4, o.Container(name="first", resources=res({"cpu": "1"})),
                      o.Container(name="second")),
                 {"cpu": "2"}, {"cpu": "4"}, {"cpu": 2000},
                 id=f"{MODES}/partially specified containers, 1.37+ aggregates the container defaults"),
    pytest.param(_default_request("1"), _pod(res({"memory": "1Gi"})),
                 {"cpu": "1", "memory": "1Gi"}, {}, {"cpu": 1000, "memory": 2**30},
                 id=f"{MODES}/pod-level requests without limits, 1.37+ fills missing requests"),
    pytest.param(_default_request("1"),
                 _pod(CPU4, o.Container(name="first", resources=res({"cpu": "1"}, {HUGE: "2Mi"}))),
                 {"cpu": "1", HUGE: "2Mi"}, {"cpu": "4", HUGE: "2Mi"}, {"cpu": 1000, HUGE: 2 * 2**20},
                 id=f"{MODES}/container hugepage limits, 1.37+ defaults the pod-level hugepage limit "
                    "and request"),
    pytest.param(_default_request("1"), _pod(CPU4), {"cpu": "1"}, {"cpu": "4"}, {"cpu": 1000},
                 id="TestUpdateFromClientServerVersionDefaulting/version not fetched"),
    # applyAdjustmentsToPodSpec's order, no Kueue case: a Pod-type default limit comes after the request
    # defaulting, so it becomes no request; its defaultRequest fills only what is still missing
    pytest.param([lr("p", item("Pod", default={"cpu": "4"}, default_request={"memory": "3Gi"}))],
                 _pod(res({"memory": "1Gi"}), o.Container(resources=res({"memory": "1Gi"}))),
                 {"memory": "1Gi"}, {"cpu": "4"}, {"memory": 2**30}, id="pod-type defaults come last"),
    pytest.param([lr("p", item("Pod", default_request={"cpu": "5"}))],
                 _pod(res(limits={"cpu": "6"}), o.Container(resources=res({"cpu": "1"})),
                      o.Container(resources=res(limits={"cpu": "3"}))),
                 {"cpu": "4"}, {"cpu": "6"}, {"cpu": 4000},
                 id="the aggregate before the pod-type defaultRequest"),
    # the aggregate is Kubernetes' (KEP-753): a regular init container alone, beside the sidecars before it
    pytest.param(None, _pod(res(limits={"cpu": "8", "memory": "4Gi"}),
                            o.Container(resources=res({"cpu": "1250m"})),
                            init=[o.Container(resources=res({"cpu": "500m"}), restart_policy="Always"),
                                  o.Container(resources=res({"cpu": "3", "memory": "1Gi"}))]),
                 {"cpu": "3.5", "memory": "1Gi"}, {"cpu": "8", "memory": "4Gi"},
                 {"cpu": 3500, "memory": 2**30},
                 id="the aggregate counts init containers and sidecars"),
]


def _values(quantities: dict) -> dict:
    return {r: parse_quantity(q) for r, q in quantities.items()}


@pytest.mark.parametrize(("ranges", "spec", "requests", "limits", "charge"), POD_LEVEL_CASES)
def test_pod_level_requests_default_as_kueue_mirrors_the_server(ranges, spec, requests, limits,
                                                                 charge) -> None:
    summary = summarize(ranges) if ranges else None
    adjusted = adjust(spec, summary, None)
    assert _values(adjusted.resources.requests) == _values(requests)
    assert _values(adjusted.resources.limits) == _values(limits)
    assert requests_of(spec, summary) == charge
    assert resource_findings(adjusted) == ()


def test_a_pod_level_limit_below_the_containers_aggregate_is_requests_above_limits() -> None:
    # the pod-level request defaults to the containers' 5 cpu, above the pod-level limit: Kueue's
    # ValidateResources on the effective spec refuses it (the API server would refuse such a Pod)
    spec = _pod(CPU4, o.Container(resources=res({"cpu": "5"})))
    assert resource_findings(adjust(spec, None, None)) == (
        'template.spec.resources: Invalid value: ["cpu"]: requests must not exceed its limits',)


def test_a_pods_own_pod_level_requests_are_defaulted_as_the_api_server_does() -> None:
    # a Pod read back from the API server already has them; one written without (from a file) is counted as
    # the server would have stored it, not charged its pod-level limit
    bare = _pod(res(limits={"cpu": "4", "memory": "1Gi"}), o.Container(resources=res({"cpu": "1"})))
    assert pod_requests(default_pod_level(bare)) == {"cpu": 1000, "memory": 2**30}
    stored = default_pod_level(bare)
    assert default_pod_level(stored) is stored


GPU = "example.com/gpu"
STORED_OR_NOT = [
    pytest.param(_pod(res()), True, id="an empty pod level"),
    pytest.param(_pod(res({"cpu": "2", "memory": "1Gi"}, {"cpu": "4", "memory": "2Gi"}),
                      o.Container(resources=res({"cpu": "1"}, {"memory": "1Gi"}))), True, id="stored"),
    pytest.param(_pod(res({"cpu": "2"}, {"cpu": "4", GPU: "1"}), o.Container(resources=res({GPU: "1"}))),
                 True, id="a name not managed at the pod level needs no pod-level request"),
    pytest.param(_pod(res(limits={"cpu": "4"}), o.Container(resources=res({"cpu": "1"}))), False,
                 id="a pod-level limit without its request"),
    pytest.param(_pod(res({"cpu": "2"}, {"cpu": "4", "memory": "1Gi"}),
                      o.Container(resources=res({"cpu": "1"}))), False,
                 id="a pod-level limit no container names, without its request"),
    pytest.param(_pod(res({"cpu": "2"}), o.Container(resources=res({"memory": "1Gi"}))), False,
                 id="a container request the pod level does not name"),
    pytest.param(_pod(res({"cpu": "2"}), o.Container(),
                      init=[o.Container(resources=res(limits={"memory": "1Gi"}))]),
                 False, id="an init container's limit the pod level does not name"),
    pytest.param(_pod(res({"cpu": "2"}, {"cpu": "4"}), o.Container(resources=res(limits={HUGE: "2Mi"}))),
                 False, id="a container hugepages limit the pod level does not name"),
    pytest.param(_pod(res({"cpu": "2", HUGE: "2Mi"}, {"cpu": "4", HUGE: "2Mi"}),
                      o.Container(resources=res({HUGE: "2Mi"}, {HUGE: "2Mi"}))), True, id="hugepages stored"),
]


@pytest.mark.parametrize(("spec", "stored"), STORED_OR_NOT)
def test_the_pod_level_fast_path_leaves_only_what_the_full_defaulting_leaves(spec: o.PodSpec,
                                                                             stored: bool) -> None:
    # ro-diff-d L6: a Pod read back from the API server is passed as it is, without the aggregates;
    # every other spec is worked out in full, and the two agree whichever way it goes
    assert _pod_level_defaulted(spec.resources, spec) is stored
    full = _with_pod_level_defaults(spec)
    assert default_pod_level(spec) == full
    if stored:
        assert full is spec and default_pod_level(spec) is spec
    else:
        assert _pod_level_defaulted(full.resources, full), "once defaulted, it is passed as it is"


def test_a_raw_pods_container_limits_are_its_requests_before_the_pod_level_defaulting() -> None:
    # Kubernetes' SetDefaults_Pod copies each (init) container's limits into its missing requests and only
    # then defaults the pod-level requests: the container's 1 cpu limit, not the pod-level 4, is the request
    sidecar = o.Container(resources=res(limits={"memory": "1Gi"}), restart_policy="Always")
    spec = o.PodSpec(containers=[o.Container(resources=res(limits={"cpu": "1"}))], init_containers=[sidecar],
                     resources=res(limits={"cpu": "4", "memory": "2Gi"}))
    stored = default_pod_level(spec)
    assert _values(stored.resources.requests) == _values({"cpu": "1", "memory": "1Gi"})
    assert pod_requests(stored) == {"cpu": 1000, "memory": 2**30}
    assert default_pod_level(stored) is stored
