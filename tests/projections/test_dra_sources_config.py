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
    """The one error said is ``error`` (a CEL compilation error goes on in cel-python's words)."""
    with pytest.raises(InvalidInput) as caught:
        _load(mappings, **gates)
    assert str(caught.value).startswith(f"cfg.yaml: field {error}")


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
    _refused(mappings, f"{AT}[0].sources[0].counter`: Invalid value: true: counter sources require "
                       "KueueDRAIntegrationPartitionableDevices to be enabled",
             KueueDRAIntegrationPartitionableDevices=False)
    _load(mappings)  # beta, on by default


def test_a_capacity_source_is_refused_with_consumable_capacity_off() -> None:
    mappings = [{"name": "bw", "deviceClassNames": ["nic"], "sources": [_capacity()]}]
    _refused(mappings, f"{AT}[0].sources[0].capacity`: Invalid value: true: capacity sources require "
                       "KueueDRAIntegrationConsumableCapacity to be enabled")  # alpha, off by default
    _load(mappings, AllAlpha=True)


DNS_LABEL = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
             "and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
             "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
SUBDOMAIN = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
             "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
             r"'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
C_IDENTIFIER = ("a valid C identifier must start with alphabetic character or '_', followed by a string of "
                "alphanumeric characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', regex used for "
                "validation is '[A-Za-z_][A-Za-z0-9_]*')")


@pytest.mark.parametrize(("sources", "error"), [
    ([{}], "[0].sources[0]`: Required value: exactly one source type must be set per entry"),
    ([{**_counter(), **_capacity()}],
     '[0].sources[0]`: Invalid value: "counter+capacity": exactly one source type must be set per entry'),
    ([_counter(), _capacity()], "[0].sources`: Invalid value: 2: cannot mix counter and capacity sources in the same "
                                "mapping"),
    ([_counter(name="")], "[0].sources[0].counter.name`: Required value"),
    ([_counter(name="Memory")], f'[0].sources[0].counter.name`: Invalid value: "Memory": {DNS_LABEL}'),
    ([_counter(name="gpu.memory")], '[0].sources[0].counter.name`: Invalid value: "gpu.memory": must not contain dots'),
    ([_counter(name="m" * 64)], f'[0].sources[0].counter.name`: Invalid value: "{"m" * 64}": must be no more than '
                                "63 characters"),
    ([_counter(driver="")], "[0].sources[0].counter.driver`: Required value"),
    ([_counter(driver="d" * 64)], '[0].sources[0].counter.driver`: Invalid value: "' + "d" * 64
     + '": must not exceed 63 characters'),
    ([_counter(driver="GPU.example.com")], f'[0].sources[0].counter.driver`: Invalid value: "GPU.example.com": '
                                           f"{SUBDOMAIN}"),
    ([_counter(selector={})], "[0].sources[0].counter.deviceSelector.cel.expression`: Required value"),
    ([_counter(selector={"cel": {"expression": ""}})],
     "[0].sources[0].counter.deviceSelector.cel.expression`: Required value"),
    ([_capacity(name="memory-size")], f'[0].sources[0].capacity.name`: Invalid value: "memory-size": {C_IDENTIFIER}'),
    ([_capacity(name="/memory")], '[0].sources[0].capacity.name`: Invalid value: "": the domain must not be empty'),
    ([_capacity(name="gpu.example.com/")], '[0].sources[0].capacity.name`: Invalid value: "": the name must not be '
                                           "empty"),
    ([_capacity(name="gpu_example/memory")], f'[0].sources[0].capacity.name`: Invalid value: "gpu_example": '
                                             f"{SUBDOMAIN}"),
    ([_capacity(name="m" * 33)], "[0].sources[0].capacity.name`: Too long: may not be more than 32 bytes"),
    ([_capacity(selector={})], "[0].sources[0].capacity.deviceSelector.cel.expression`: Required value"),
    ([_counter(selector={"cel": {"expression": "device.driver =="}})],
     '[0].sources[0].counter.deviceSelector.cel.expression`: Invalid value: "device.driver ==": CEL compilation '
     "failed: syntax error"),
    ([_capacity(selector={"cel": {"expression": "device.attributes[\"x\"]. == 1"}})],
     '[0].sources[0].capacity.deviceSelector.cel.expression`: Invalid value: "device.attributes[\\"x\\"]. == 1": '
     "CEL compilation failed: syntax error"),
    ([_counter(selector={"cel": {"expression": "1 + 2"}})],
     '[0].sources[0].counter.deviceSelector.cel.expression`: Invalid value: "1 + 2": CEL compilation failed: must '
     "evaluate to bool or the unknown type, not int"),
    ([_capacity(selector={"cel": {"expression": "device.driver"}})],
     '[0].sources[0].capacity.deviceSelector.cel.expression`: Invalid value: "device.driver": CEL compilation '
     "failed: must evaluate to bool or the unknown type, not string"),
])
def test_bad_sources_are_refused_with_kueues_field(sources: list[dict], error: str) -> None:
    """In Kueue's words (``field.Required``/``Invalid``/``TooLong``; apimachinery's details, joined by ","; a value
    as Go shows it: %q for a string, %v for a count or a bool)."""
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
     '[1].deviceClassNames[0]`: Invalid value: mig: device class already has a counter source for counter "memory"'),
    ({"name": "gpus", "deviceClassNames": ["mig"]},
     "[1].deviceClassNames[0]`: Invalid value: mig: device class already mapped to resource gpu.memory"),
    ({"name": "gpu.bw", "deviceClassNames": ["mig"], "sources": [_capacity()]},
     "[1].deviceClassNames[0]`: Invalid value: mig: device class already mapped to resource gpu.memory"),
])
def test_a_class_counted_twice_or_without_a_counter_is_refused(second: dict, error: str) -> None:
    first = {"name": "gpu.memory", "deviceClassNames": ["mig"], "sources": [_counter("memory")]}
    _refused([first, second], AT + error, AllAlpha=True)


def test_a_class_first_mapped_without_a_counter_is_not_counted_again() -> None:
    _refused([{"name": "gpus", "deviceClassNames": ["mig"]},
              {"name": "gpu.memory", "deviceClassNames": ["mig"], "sources": [_counter()]}],
             AT + "[1].deviceClassNames[0]`: Invalid value: mig: device class already mapped to resource gpus")


def test_a_mapping_named_pods_is_refused_under_the_reserved_name_gate() -> None:
    """Kueue v0.20 (#13989): with KueueDRAIntegration on, ``pods`` (the pod count's resource) is no mapping's
    name under ReservedResourceNameValidation; with either gate off the configuration loads."""
    mappings = [{"name": "pods", "deviceClassNames": ["gpu.example.com"]}]
    _refused(mappings, f"{AT}[0].name`: 'pods' is reserved for internal kueue use")
    _load(mappings, ReservedResourceNameValidation=False)
    _load(mappings, KueueDRAIntegration=False, KueueDRAIntegrationExtendedResource=False,
          KueueDRAIntegrationPartitionableDevices=False)
