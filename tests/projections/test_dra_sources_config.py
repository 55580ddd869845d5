"""``resources.deviceClassMappings[].sources`` (counter sources of partitionable devices, capacity sources of
consumable-capacity devices): the Configuration checks Kueue's config validation makes, after the cases of its
validation tests, and what is refused while the gates are off."""

from __future__ import annotations

from typing import Any

import pytest

from events.errors import InvalidInput
from kueue_es.scheduler.config import load_config
from projections.dra import mapping_of

AT = "`resources.deviceClassMappings"
SELECTOR = {"cel": {"expression": "device.driver == 'gpu.example.com'"}}


def _counter(name: str = "memory", driver: str = "gpu.example.com", selector: Any = SELECTOR) -> dict:
    return {"counter": {"name": name, "driver": driver, "deviceSelector": selector}}


def _capacity(name: str = "gpu.example.com/memory", driver: str = "gpu.example.com", selector: Any = SELECTOR) -> dict:
    return {"capacity": {"name": name, "driver": driver, "deviceSelector": selector}}


def _load(mappings: list[dict], **gates: bool) -> Any:
    doc: dict[str, Any] = {"resources": {"deviceClassMappings": mappings}}
    if gates:
        doc["featureGates"] = gates
    return load_config(doc, "cfg.yaml")


def _refused(mappings: list[dict], error: str, **gates: bool) -> None:
    with pytest.raises(InvalidInput) as caught:
        _load(mappings, **gates)
    assert error in str(caught.value)


def test_counter_and_capacity_sources_are_taken_under_their_gates() -> None:
    cfg = _load([{"name": "gpu.memory", "deviceClassNames": ["mig.example.com"], "sources": [_counter()]},
                 {"name": "example.com/bw", "deviceClassNames": ["nic.example.com"], "sources": [_capacity()]}],
                KueueDRAIntegrationConsumableCapacity=True)
    counter, capacity = cfg.resources.device_class_mappings
    assert counter.sources[0].counter is not None and counter.sources[0].counter.name == "memory"
    assert counter.sources[0].counter.device_selector.cel is not None
    assert capacity.sources[0].capacity is not None and capacity.sources[0].capacity.driver == "gpu.example.com"


def test_a_counter_source_is_refused_with_partitionable_devices_off() -> None:
    mappings = [{"name": "gpu.memory", "deviceClassNames": ["mig"], "sources": [_counter()]}]
    _refused(mappings, f"{AT}[0].sources[0].counter`: counter sources require "
                       "KueueDRAIntegrationPartitionableDevices to be enabled",
             KueueDRAIntegrationPartitionableDevices=False)
    _load(mappings)  # beta, on by default


def test_a_capacity_source_is_refused_with_consumable_capacity_off() -> None:
    mappings = [{"name": "bw", "deviceClassNames": ["nic"], "sources": [_capacity()]}]
    _refused(mappings, f"{AT}[0].sources[0].capacity`: capacity sources require "
                       "KueueDRAIntegrationConsumableCapacity to be enabled")  # alpha, off by default
    _load(mappings, AllAlpha=True)


@pytest.mark.parametrize(("sources", "error"), [
    ([{}], "[0].sources[0]`: exactly one source type must be set per entry"),
    ([{**_counter(), **_capacity()}], "[0].sources[0]`: exactly one source type must be set per entry"),
    ([_counter(), _capacity()], "[0].sources`: cannot mix counter and capacity sources in the same mapping"),
    ([_counter(name="")], "[0].sources[0].counter.name` is required"),
    ([_counter(name="Memory")], "[0].sources[0].counter.name`: invalid value 'Memory': must be a DNS label"),
    ([_counter(name="gpu.memory")], "[0].sources[0].counter.name`: invalid value 'gpu.memory'"),
    ([_counter(driver="")], "[0].sources[0].counter.driver` is required"),
    ([_counter(driver="d" * 64)], "[0].sources[0].counter.driver`: invalid value '" + "d" * 64
     + "': must not exceed 63 characters"),
    ([_counter(driver="GPU.example.com")], "[0].sources[0].counter.driver`: invalid value 'GPU.example.com': "
     "must be a DNS subdomain"),
    ([_counter(selector={})], "[0].sources[0].counter.deviceSelector.cel.expression` is required"),
    ([_counter(selector={"cel": {"expression": ""}})],
     "[0].sources[0].counter.deviceSelector.cel.expression` is required"),
    ([_capacity(name="memory-size")], "[0].sources[0].capacity.name`: invalid value 'memory-size': the name must "
     "be a C identifier"),
    ([_capacity(name="/memory")], "[0].sources[0].capacity.name`: invalid value '/memory': the domain must not "
     "be empty"),
    ([_capacity(name="gpu.example.com/")], "[0].sources[0].capacity.name`: invalid value 'gpu.example.com/': "
     "the name must not be empty"),
    ([_capacity(name="gpu_example/memory")], "[0].sources[0].capacity.name`: invalid value 'gpu_example/memory': "
     "the domain must be a DNS subdomain"),
    ([_capacity(name="m" * 33)], "[0].sources[0].capacity.name`: invalid value '" + "m" * 33 + "': the name "
     "must have at most 32 characters"),
    ([_capacity(selector={})], "[0].sources[0].capacity.deviceSelector.cel.expression` is required"),
    ([_counter(selector={"cel": {"expression": "device.driver =="}})],
     "[0].sources[0].counter.deviceSelector.cel.expression`: invalid value 'device.driver ==': CEL compilation "
     "failed: syntax error"),
    ([_capacity(selector={"cel": {"expression": "device.attributes[\"x\"]. == 1"}})],
     "[0].sources[0].capacity.deviceSelector.cel.expression`: invalid value 'device.attributes[\"x\"]. == 1': "
     "CEL compilation failed: syntax error"),
    ([_counter(selector={"cel": {"expression": "1 + 2"}})],
     "[0].sources[0].counter.deviceSelector.cel.expression`: invalid value '1 + 2': CEL compilation failed: must "
     "evaluate to bool or the unknown type, not int"),
    ([_capacity(selector={"cel": {"expression": "device.driver"}})],
     "[0].sources[0].capacity.deviceSelector.cel.expression`: invalid value 'device.driver': CEL compilation "
     "failed: must evaluate to bool or the unknown type, not string"),
])
def test_bad_sources_are_refused_with_kueues_field(sources: list[dict], error: str) -> None:
    _refused([{"name": "res", "deviceClassNames": ["dc"], "sources": sources}], AT + error, AllAlpha=True)


def test_capacity_names_the_api_server_takes() -> None:
    for name in ("memory", "Memory_2", "GPU.Example.com/memory", "a/b/c"):
        _load([{"name": "res", "deviceClassNames": ["dc"], "sources": [_capacity(name=name)]}], AllAlpha=True)


def test_one_class_is_counted_by_mappings_of_different_counters() -> None:
    """A DeviceClass may be named by several mappings when each counts a counter of its own (GPU memory and
    multiprocessors, say); Kueue looks its resource up in the first."""
    cfg = _load([{"name": "gpu.memory", "deviceClassNames": ["mig"], "sources": [_counter("memory")]},
                 {"name": "gpu.sm", "deviceClassNames": ["mig"], "sources": [_counter("multiprocessors")]}])
    assert [m.name for m in cfg.resources.device_class_mappings] == ["gpu.memory", "gpu.sm"]
    doc = {"resources": {"deviceClassMappings": [
        {"name": "gpu.memory", "deviceClassNames": ["mig"], "sources": [_counter("memory")]},
        {"name": "gpu.sm", "deviceClassNames": ["mig"], "sources": [_counter("multiprocessors")]}]}}
    assert mapping_of(doc) == (("mig", "gpu.memory"),)


@pytest.mark.parametrize(("second", "error"), [
    ({"name": "gpu.more", "deviceClassNames": ["mig"], "sources": [_counter("memory")]},
     '[1].deviceClassNames[0]`: device class already has a counter source for counter "memory"'),
    ({"name": "gpus", "deviceClassNames": ["mig"]},
     "[1].deviceClassNames[0]`: device class already mapped to resource gpu.memory"),
    ({"name": "gpu.bw", "deviceClassNames": ["mig"], "sources": [_capacity()]},
     "[1].deviceClassNames[0]`: device class already mapped to resource gpu.memory"),
])
def test_a_class_counted_twice_or_without_a_counter_is_refused(second: dict, error: str) -> None:
    first = {"name": "gpu.memory", "deviceClassNames": ["mig"], "sources": [_counter("memory")]}
    _refused([first, second], AT + error, AllAlpha=True)


def test_a_class_first_mapped_without_a_counter_is_not_counted_again() -> None:
    _refused([{"name": "gpus", "deviceClassNames": ["mig"]},
              {"name": "gpu.memory", "deviceClassNames": ["mig"], "sources": [_counter()]}],
             AT + "[1].deviceClassNames[0]`: device class already mapped to resource gpus")


def test_a_mapping_named_pods_is_refused_under_the_reserved_name_gate() -> None:
    """Kueue v0.20 (#13989): with KueueDRAIntegration on, ``pods`` (the pod count's resource) is no mapping's
    name under ReservedResourceNameValidation; with either gate off the configuration loads."""
    mappings = [{"name": "pods", "deviceClassNames": ["gpu.example.com"]}]
    _refused(mappings, f"{AT}[0].name`: 'pods' is reserved for internal kueue use")
    _load(mappings, ReservedResourceNameValidation=False)
    _load(mappings, KueueDRAIntegration=False, KueueDRAIntegrationExtendedResource=False,
          KueueDRAIntegrationPartitionableDevices=False)
