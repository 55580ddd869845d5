"""Counter sources of ``deviceClassMappings`` (KueueDRAIntegrationPartitionableDevices): a claim of a class with a
counter source is charged the largest value of the counter among the devices of complete pools that match the
source's, the class's and the request's CEL selectors, times its count (Kueue's pkg/dra counters); the errors
Kueue leaves the workload inadmissible with; the fold charging pending workloads anew as slices change."""

from __future__ import annotations

import msgspec
from fixtures.dra_views import CLAIMS, claim_spec, claiming_workload, source_view
from fixtures.eventgen import cluster_queue, delete, local_queue, namespace, upsert

from events import objects as o
from events import schema as ev
from projections import snapshot
from projections.cluster import ClusterState
from projections.dra import COUNTERS, DraView, claim_charge, counter_charge_of, counters_of, workload_problem
from projections.dra_cel import compile_selector, device_activation, matches

DRIVER = "gpu.example.com"
SOURCE = {"counter": {"name": "memory", "driver": DRIVER,
                      "deviceSelector": {"cel": {"expression": f'device.driver == "{DRIVER}"'}}}}


def _document(selector: str = f'device.driver == "{DRIVER}"', gate: bool = True) -> dict:
    source = {"counter": {**SOURCE["counter"], "deviceSelector": {"cel": {"expression": selector}}}}
    return {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
            "featureGates": {"KueueDRAIntegrationPartitionableDevices": gate},
            "resources": {"deviceClassMappings": [
                {"name": "example.com/gpu-memory", "deviceClassNames": ["gpu-slice"], "sources": [source]},
                {"name": "example.com/gpus", "deviceClassNames": ["gpu"]}]}}


def _device(name: str, memory: str | None, model: str = "a100") -> dict:
    d: dict = {"name": name, "attributes": {"model": {"string": model}}}
    if memory is not None:
        d["consumesCounters"] = [{"counterSet": "gpu-0", "counters": {"memory": {"value": memory}}}]
    return d


def _slice(name: str, *devices: dict, pool: str = "node-a", count: int = 1, generation: int = 1,
           driver: str = DRIVER) -> o.ResourceSlice:
    return msgspec.convert({"metadata": {"name": name}, "spec": {
        "driver": driver, "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
        "devices": list(devices)}}, o.ResourceSlice)


def _template(count: int = 1, selectors: tuple[str, ...] = (), dc: str = "gpu-slice") -> o.ResourceClaimSpec:
    return claim_spec(dc, count, selectors=[{"cel": {"expression": s}} for s in selectors])


def _view(devices: tuple[dict, ...], template: o.ResourceClaimSpec | None = None,
          document: dict | None = None, class_selectors: tuple[str, ...] | None = ()) -> DraView:
    return source_view("gpu-slice", "example.com/gpu-memory", template or _template(), devices, DRIVER, class_selectors,
                       counters=counters_of(document or _document()))


def test_counter_sources_are_read_only_with_their_gate() -> None:
    (dc, sources), = counters_of(_document())
    assert dc == "gpu-slice" and [(s.resource, s.driver, s.counter) for s in sources] == [
        ("example.com/gpu-memory", DRIVER, "memory")]
    assert counters_of(_document(gate=False)) == ()


def test_a_class_with_a_counter_source_is_charged_its_counter_not_its_count() -> None:
    view = _view((_device("g0", "10Gi"), _device("g1", "20Gi")), _template(count=2))
    assert claim_charge("main", CLAIMS, view) == ((), "")
    assert counter_charge_of(CLAIMS, view) == ((("example.com/gpu-memory", 2 * 20 * 2**30),), "")


def test_the_selectors_of_the_source_class_and_request_choose_the_devices() -> None:
    devices = (_device("g0", "40Gi", model="h100"), _device("g1", "10Gi"), _device("g2", "5Gi"))
    request = _template(selectors=(f'device.attributes["{DRIVER}"].model == "a100"',))
    assert counter_charge_of(CLAIMS, _view(devices, request))[0] == (("example.com/gpu-memory", 10 * 2**30),)
    by_class = _view(devices, class_selectors=(f'device.attributes["{DRIVER}"].model == "h100"',))
    assert counter_charge_of(CLAIMS, by_class)[0] == (("example.com/gpu-memory", 40 * 2**30),)
    none = _view(devices, document=_document('device.driver == "other.example.com"'))
    assert counter_charge_of(CLAIMS, none) == ((), COUNTERS + (
        ".template.spec.resourceClaims[0].devices.requests[0]: Internal error: insufficient matching devices for "
        "counter driver: 0 device(s) match but 1 requested"))


def test_devices_not_consuming_the_counter_leave_the_workload_inadmissible() -> None:
    _, error = counter_charge_of(CLAIMS, _view((_device("g0", None),)))
    assert error == COUNTERS + (".template.spec.resourceClaims[0].devices.requests[0]: Internal error: matched "
                                'devices have no consumesCounters entry for counter "memory"')


def test_a_missing_class_and_an_evaluation_error_are_kueue_internal_errors() -> None:
    _, error = counter_charge_of(CLAIMS, _view((_device("g0", "1"),), class_selectors=None))
    assert error.endswith('requests[0]: Internal error: failed to get DeviceClass gpu-slice: '
                          'deviceclasses.resource.k8s.io "gpu-slice" not found')
    bad = _view((_device("g0", "1"),), document=_document('device.attributes["x.io"].model == "a"'))
    assert counter_charge_of(CLAIMS, bad)[1].startswith(
        COUNTERS + ".template.spec.resourceClaims[0].devices.requests[0]: Internal error: CEL evaluation error in "
        "deviceSelector for device g0: ")


def test_a_request_selector_that_does_not_compile_is_refused_for_any_class() -> None:
    view = _view((), _template(selectors=("device.driver ==",), dc="gpu"))
    _, error = claim_charge("main", CLAIMS, view)
    assert error.startswith(".template.spec.resourceClaims[0].devices.requests[0].exactly.selectors: Invalid value: "
                            "null: ResourceClaimTemplate t: devices.requests[0].exactly.selectors[0].cel.expression: "
                            'Invalid value: "device.driver ==": CEL compilation failed: ')


def test_cel_reads_attributes_by_domain_and_compares_quantities() -> None:
    device = msgspec.convert({"name": "g", "attributes": {"model": {"string": "a"}, "x.io/n": {"int": 3}},
                              "capacity": {"memory": {"value": "40Gi"}}}, o.Device)
    act = device_activation(DRIVER, device)

    def run(expr: str) -> tuple[bool, str]:
        return matches(compile_selector(expr).program, act)

    assert run(f'device.attributes["{DRIVER}"].model == "a" && device.attributes["x.io"].n > 2') == (True, "")
    assert run('"model" in device.attributes["y.io"]') == (False, "")
    assert run(f'device.capacity["{DRIVER}"].memory.isGreaterThan(quantity("10Gi"))') == (True, "")
    assert run('device.attributes["x.io"].n') == (False, "CEL result of type int could not be converted to bool: "
                                                         "unsupported type conversion from 'int' to bool")
    assert compile_selector("1 +").error


def test_a_counter_error_is_said_after_other_pod_sets_extended_resource_errors() -> None:
    class PS(msgspec.Struct):
        dra_error: str

    counter = COUNTERS + ".template.spec.resourceClaims[0].devices.requests[0]: Internal error: x"
    assert workload_problem((PS(counter), PS(".template.spec.containers[0]: y"))) == (
        "spec.podSets[1].template.spec.containers[0]: y")
    assert workload_problem((PS(""), PS(counter))) == (
        "spec.podSets[1].template.spec.resourceClaims[0].devices.requests[0]: Internal error: x")


def _fold(*events: ev.Event) -> ClusterState:
    state = ClusterState()
    tmpl = msgspec.convert({"metadata": {"name": "t", "namespace": "team"}, "spec": {"spec": {"devices": {
        "requests": [{"name": "r", "exactly": {"deviceClassName": "gpu-slice"}}]}}}}, o.ResourceClaimTemplate)
    dc = msgspec.convert({"metadata": {"name": "gpu-slice"}}, o.DeviceClass)
    base = [ev.ConfigRecorded(time=1, document=_document()), upsert(namespace("team"), 1),
            upsert(cluster_queue("cq"), 1), upsert(local_queue("team", "lq0", "cq"), 1), upsert(tmpl, 1),
            upsert(dc, 1)]
    for i, e in enumerate([*base, *events]):
        state.apply(ev.Record(i, e))
    return state


def _wl(state: ClusterState):
    return state.workloads["team/w"]


def test_the_fold_charges_a_pending_workload_anew_as_slices_come_change_and_go() -> None:
    state = _fold(upsert(claiming_workload(), 2))
    assert workload_problem(_wl(state).pod_sets) == (
        "spec.podSets[0].template.spec.resourceClaims[0].devices.requests[0]: Internal error: insufficient matching "
        "devices for counter driver: 0 device(s) match but 1 requested")
    state.apply(ev.Record(state.offset + 1, upsert(_slice("s0", _device("g0", "8Gi")), 3)))
    assert workload_problem(_wl(state).pod_sets) == ""
    assert _wl(state).pod_sets[0].dra_requests == (("example.com/gpu-memory", 8 * 2**30),)
    assert "team/w" in state.touched
    state.apply(ev.Record(state.offset + 1, upsert(_slice("s0", _device("g0", "16Gi")), 4)))
    assert _wl(state).pod_sets[0].dra_requests == (("example.com/gpu-memory", 16 * 2**30),)
    restored = snapshot.decode(snapshot.encode(state))
    assert restored.resource_slices.by_name == state.resource_slices.by_name
    assert snapshot.digest(restored) == snapshot.digest(state)
    restored.apply(ev.Record(state.offset + 1, delete("ResourceSlice", "s0", 5)))
    assert "insufficient matching devices" in workload_problem(_wl(restored).pod_sets)


def test_an_incomplete_pool_or_another_drivers_slice_charges_nothing() -> None:
    state = _fold(upsert(claiming_workload(), 2), upsert(_slice("s0", _device("g0", "8Gi"), count=2), 3),
                  upsert(_slice("o0", _device("g0", "8Gi"), driver="other.example.com"), 3))
    assert "0 device(s) match" in workload_problem(_wl(state).pod_sets)
    state.apply(ev.Record(state.offset + 1, upsert(_slice("s1", _device("g1", "4Gi"), count=2), 4)))
    assert _wl(state).pod_sets[0].dra_requests == (("example.com/gpu-memory", 8 * 2**30),)


def test_a_version_24_snapshot_restores_without_slices_until_they_are_observed_again() -> None:
    state = _fold(upsert(claiming_workload(), 2), upsert(_slice("s0", _device("g0", "8Gi")), 3))
    taken = snapshot.take(state)
    old = msgspec.structs.replace(taken, version=24, objects=[
        obj for obj in taken.objects if not isinstance(obj, o.ResourceSlice)])
    restored = snapshot.restore(old)
    assert restored.resource_slices.by_name == {}
    restored.apply(ev.Record(state.offset + 1, upsert(_slice("s0", _device("g0", "4Gi")), 4)))
    assert _wl(restored).pod_sets[0].dra_requests == (("example.com/gpu-memory", 4 * 2**30),)
    assert snapshot.take(state).version == snapshot.SNAPSHOT_VERSION


def test_compiling_a_selector_leaves_the_recursion_limit_as_it_was():
    """celpy raises the interpreter's recursion limit whenever it makes an environment; the first DRA charge must
    not change it mid-run (hypothesis fails a test in which it changes)."""
    import sys

    from projections import dra_cel

    dra_cel._environment.cache_clear()
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(before + 1)
    try:
        assert compile_selector.__wrapped__('device.driver == "x"').error == ""
        assert sys.getrecursionlimit() == before + 1
    finally:
        sys.setrecursionlimit(before)


def test_importing_and_running_cel_leave_the_process_recursion_limit_alone():
    """The limit CEL needs is raised only while it parses or evaluates: importing the module, compiling and matching
    in a fresh interpreter leave the process's limit as it was (the module first imported in the middle of a
    hypothesis test, by the first DRA charge or configuration check, changed it for good)."""
    import subprocess
    import sys

    child = (
        "import sys\n"
        "before = sys.getrecursionlimit()\n"
        "from projections import dra_cel\n"
        "program = dra_cel.compile_selector('1 + 1 == 2').program\n"
        "matched = dra_cel.matches(program, {})\n"
        "print(before, sys.getrecursionlimit(), matched)\n"
    )
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, check=True).stdout.split()
    assert out[0] == out[1], f"recursion limit {out[0]} left at {out[1]}"
    assert out[2:] == ["(True,", "'')"]


def test_a_selector_nested_too_deeply_to_evaluate_is_an_evaluation_error_not_a_crash():
    from projections import dra_cel

    deep = "(" * 150 + "true" + ")" * 150
    compiled = compile_selector(deep)
    assert compiled.error == ""
    assert dra_cel.matches(compiled.program, {}) == (False, dra_cel.TOO_DEEP)
    assert dra_cel.matches(compile_selector("(((true)))").program, {}) == (True, "")
