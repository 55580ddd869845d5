"""The DRA quota charge (projections.dra), after the cases of Kueue's pkg/dra claims tests: what a pod set's
claims made from ResourceClaimTemplates cost per pod, and the errors Kueue gives instead."""

from __future__ import annotations

import msgspec
import pytest

from events import objects as o
from events.errors import InvalidInput
from events.manifests import load_text
from kueue_es.scheduler.config import load_config
from projections.dra import (
    CLAIMS_BY_NAME,
    REJECTED,
    DraView,
    claim_charge,
    mapping_of,
    mode_of,
    workload_problem,
)
from projections.workloads import pod_set_info

MAPPING = (("test-deviceclass-1", "res-1"), ("test-deviceclass-2", "res-2"))


def _spec(*requests: dict) -> o.ResourceClaimSpec:
    return msgspec.convert({"devices": {"requests": list(requests)}}, o.ResourceClaimSpec)


def _exactly(dc: str, count: int | None = None, **extra) -> dict:
    x = {"deviceClassName": dc, **extra}
    if count is not None:
        x["count"] = count
    return {"name": "r", "exactly": x}


TEMPLATES = (
    ("claim-tmpl-1", _spec(_exactly("test-deviceclass-1", 2, allocationMode="ExactCount"))),
    ("claim-tmpl-2", _spec(_exactly("test-deviceclass-2", 1))),
)


def _claims(*refs: tuple[str, str]) -> list[o.PodResourceClaim]:
    out = []
    for kind, name in refs:
        field = "resourceClaimTemplateName" if kind == "template" else "resourceClaimName"
        out.append(msgspec.convert({"name": f"rc-{name}", field: name}, o.PodResourceClaim))
    return out


def _view(mapping=MAPPING, templates=TEMPLATES, reject=False) -> DraView:
    return DraView(reject=reject, mapping=mapping, templates=templates)


def test_single_claim_template_with_two_devices() -> None:
    assert claim_charge("main", _claims(("template", "claim-tmpl-1")), _view()) == ((("res-1", 2),), "")


def test_two_claim_templates_charge_each_mapped_resource() -> None:
    got = claim_charge("main", _claims(("template", "claim-tmpl-1"), ("template", "claim-tmpl-2")), _view())
    assert got == ((("res-1", 2), ("res-2", 1)), "")


def test_count_defaults_to_one_and_requests_of_one_class_add_up() -> None:
    view = _view(templates=(("t", _spec(_exactly("test-deviceclass-1"), _exactly("test-deviceclass-1", 3))),))
    assert claim_charge("main", _claims(("template", "t")), view) == ((("res-1", 4),), "")


def test_two_classes_mapped_to_one_resource_add_up() -> None:
    view = _view(mapping=(("a", "gpu"), ("b", "gpu")), templates=(("t", _spec(_exactly("a", 1), _exactly("b", 2))),))
    assert claim_charge("main", _claims(("template", "t")), view) == ((("gpu", 3),), "")


def test_admin_access_costs_nothing() -> None:
    view = _view(templates=(("t", _spec(_exactly("test-deviceclass-1", 5, adminAccess=True))),))
    assert claim_charge("main", _claims(("template", "t")), view) == ((), "")


def test_unmapped_device_class_is_an_error() -> None:
    got = claim_charge("main", _claims(("template", "claim-tmpl-1")), _view(mapping=()))
    assert got == ((), '.template.spec.resourceClaims[0].resourceClaimTemplateName.deviceClassName: Not found: '
                       '"test-deviceclass-1"')


def test_missing_template_is_an_error() -> None:
    got = claim_charge("workers", _claims(("template", "claim-tmpl-1"), ("template", "nope")), _view())
    assert got == ((), '.template.spec.resourceClaims[1]: Internal error: failed to get claim spec for '
                       'ResourceClaimTemplate nope in podset workers: resourceclaimtemplates.resource.k8s.io "nope" '
                       'not found')


def test_allocation_mode_all_is_an_error() -> None:
    view = _view(templates=(("t", _spec(_exactly("test-deviceclass-1", allocationMode="All"))),))
    assert claim_charge("main", _claims(("template", "t")), view) == (
        (), '.template.spec.resourceClaims[0].devices.requests[0].exactly.allocationMode: Invalid value: "All": '
            "ResourceClaimTemplate t: AllocationMode 'All' is not supported")


def test_first_available_is_an_error() -> None:
    view = _view(templates=(("t", _spec({"name": "r", "firstAvailable": [{"name": "a", "deviceClassName": "x"}]})),))
    assert claim_charge("main", _claims(("template", "t")), view) == (
        (), ".template.spec.resourceClaims[0].devices.requests[0]: Invalid value: null: ResourceClaimTemplate t: "
            "FirstAvailable device selection is not supported")


def test_a_claim_by_name_makes_the_workload_inadmissible() -> None:
    got = claim_charge("main", _claims(("template", "claim-tmpl-1"), ("claim", "claim-2")), _view())
    assert got == ((), CLAIMS_BY_NAME)


def test_reject_mode_refuses_any_claim() -> None:
    assert claim_charge("main", _claims(("template", "claim-tmpl-1")), _view(reject=True)) == ((), REJECTED)
    assert claim_charge("main", [], _view(reject=True)) == ((), "")


def _ps(name: str, error: str) -> o.PodSet:
    return msgspec.structs.replace(pod_set_info(o.PodSet(name=name, count=1)), dra_error=error)


def test_workload_problem_prefixes_the_pod_set_and_prefers_claims_by_name() -> None:
    assert workload_problem((_ps("a", ""), _ps("b", ".template.spec.resourceClaims[0]: x"))) == (
        "spec.podSets[1].template.spec.resourceClaims[0]: x")
    assert workload_problem((_ps("a", ".template: x"), _ps("b", CLAIMS_BY_NAME))) == CLAIMS_BY_NAME
    assert workload_problem((_ps("a", ""),)) == ""


def test_pod_set_requests_gain_the_devices_after_the_rules_and_placement_leaves_them_out() -> None:
    ps = msgspec.convert({"name": "main", "count": 3, "template": {"spec": {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "res-1": "1"}}}],
        "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "claim-tmpl-1"}]}}}, o.PodSet)
    info = pod_set_info(ps, dra=_view())
    assert info.requests == (("cpu", 1000), ("res-1", 3))
    assert info.dra_requests == (("res-1", 2),)
    assert info.placement_requests == (("cpu", 1000), ("res-1", 1))
    assert pod_set_info(ps).requests == (("cpu", 1000), ("res-1", 1))  # claims ignored without a view


def test_mode_and_mapping_of_a_recorded_document() -> None:
    assert mode_of(None) == "charge"
    assert mode_of({"featureGates": {"KueueDRAIntegration": False}}) == "reject"
    assert mode_of({"featureGates": {"KueueDRAIntegration": False,
                                     "KueueDRARejectWorkloadsWhenDRADisabled": False}}) == ""
    doc = {"resources": {"deviceClassMappings": [{"name": "gpu", "deviceClassNames": ["b", "a"]},
                                                 {"name": "fpga", "deviceClassNames": ["f"]}]}}
    assert mapping_of(doc) == (("a", "gpu"), ("b", "gpu"), ("f", "fpga"))
    assert mapping_of({"resources": {"deviceClassMappings": "nonsense"}}) == ()


KEY_NAME = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
            "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
            "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
AT = "field `resources.deviceClassMappings"


@pytest.mark.parametrize(("mappings", "error"), [
    ([{"name": "", "deviceClassNames": ["a"]}], f"{AT}[0].name`: Invalid value: : name part must be non-empty; "
                                                f"{KEY_NAME}"),
    ([{"name": "a/b/c", "deviceClassNames": ["a"]}],
     f"{AT}[0].name`: Invalid value: a/b/c: a valid label key {KEY_NAME.removeprefix('name part ')} with an optional "
     "DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"),
    ([{"name": "Example.com/gpu", "deviceClassNames": ["a"]}],
     f"{AT}[0].name`: Invalid value: Example.com/gpu: prefix part a lowercase RFC 1123 subdomain must consist of "
     "lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. "
     r"'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"),
    ([{"name": "gpu", "deviceClassNames": ["a"]}, {"name": "gpu", "deviceClassNames": ["b"]}],
     f"{AT}[1].name`: Duplicate value: gpu"),
    ([{"name": "gpu"}], f"{AT}[0].deviceClassNames`: Required value: at least one device class name is required"),
    ([{"name": "gpu", "deviceClassNames": [f"c{i}" for i in range(9)]}],
     f"{AT}[0].deviceClassNames`: Too many: 9: must have at most 8 items"),
    ([{"name": f"r{i}", "deviceClassNames": [f"c{i}"]} for i in range(17)],
     "field `resources.deviceClassMappings`: Too many: 17: must have at most 16 items"),
    ([{"name": "gpu", "deviceClassNames": ["a", "a"]}], f"{AT}[0].deviceClassNames[1]`: Duplicate value: a"),
    ([{"name": "gpu", "deviceClassNames": ["a"]}, {"name": "fpga", "deviceClassNames": ["a"]}],
     f"{AT}[1].deviceClassNames[0]`: Invalid value: a: device class already mapped to resource gpu"),
    ([{"name": "gpu", "deviceClassNames": ["a", "x_"]}], f"{AT}[0].deviceClassNames[1]`: Invalid value: x_: {KEY_NAME}"),
    ([{"name": "", "deviceClassNames": ["a"]}, {"name": "", "deviceClassNames": ["b"]}],
     f"[{AT}[0].name`: Invalid value: : name part must be non-empty; {KEY_NAME}, {AT}[1].name`: Invalid value: : "
     f"name part must be non-empty; {KEY_NAME}, {AT}[1].name`: Duplicate value: ]"),
])
def test_configuration_refuses_bad_device_class_mappings(mappings: list, error: str) -> None:
    """Kueue's validateDeviceClassMappings, in its words: the names are ``corev1.ResourceName``s, which its field
    errors show by their ``String()``, unquoted; a label key's details joined by "; "; ``TooMany`` with the count."""
    with pytest.raises(InvalidInput) as err:
        load_config({"resources": {"deviceClassMappings": mappings}}, "cfg.yaml")
    assert str(err.value) == f"cfg.yaml: {error}"


def test_a_name_longer_than_253_characters_is_refused_unless_recorded() -> None:
    """Kueue also refuses a mapping's or DeviceClass's name longer than 253 characters (a label key may have 317);
    kueue-es does since session 34, so a recorded document is not held to it."""
    long = "a" * 249 + ".com/gpu"  # a 253-character prefix: a label key of 257
    doc = {"resources": {"deviceClassMappings": [{"name": long, "deviceClassNames": [long]}]}}
    with pytest.raises(InvalidInput) as err:
        load_config(doc, "cfg.yaml")
    assert str(err.value) == (f"cfg.yaml: [{AT}[0].name`: Invalid value: {long}: must not exceed 253 characters, "
                              f"{AT}[0].deviceClassNames[0]`: Invalid value: {long}: must not exceed 253 characters]")
    assert load_config(doc, strict=False).resources.device_class_mappings[0].name == long


def test_configuration_takes_good_device_class_mappings() -> None:
    cfg = load_config({"resources": {"deviceClassMappings": [{"name": "example.com/gpu",
                                                              "deviceClassNames": ["gpu.example.com"]}]}})
    assert cfg.resources.device_class_mappings[0].device_class_names == ["gpu.example.com"]


def _template_yaml(request: str) -> str:
    return ("apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata: {name: t, namespace: team}\n"
            f"spec:\n  spec:\n    devices:\n      requests:\n      - {request}\n")


@pytest.mark.parametrize(("request_", "error"), [
    ("{exactly: {deviceClassName: gpu}}", "`spec.spec.devices.requests[0].name` is required"),
    ("{name: r}", "`spec.spec.devices.requests[0]`: exactly one of `exactly` or `firstAvailable` is required"),
    ("{name: r, exactly: {count: 1}}", "`spec.spec.devices.requests[0].exactly.deviceClassName` is required"),
    ("{name: r, exactly: {deviceClassName: gpu, allocationMode: Some}}",
     "`spec.spec.devices.requests[0].exactly.allocationMode`: must be ExactCount or All, not 'Some'"),
    ("{name: r, exactly: {deviceClassName: gpu, count: 0}}",
     "`spec.spec.devices.requests[0].exactly.count`: must be greater than zero"),
    ("{name: r, exactly: {deviceClassName: gpu, capacity: {requests: {memory: 2XB}}}}",
     "`spec.spec.devices.requests[0].exactly.capacity.requests.memory`: "),
    ("{name: r, exactly: {deviceClassName: gpu, capacity: {requests: {memory: -1Gi}}}}",
     "`spec.spec.devices.requests[0].exactly.capacity.requests.memory`: must not be negative"),
])
def test_a_malformed_claim_template_is_refused_naming_the_field(request_: str, error: str) -> None:
    with pytest.raises(InvalidInput, match=error.replace("[", r"\[").replace("]", r"\]")):
        load_text(_template_yaml(request_), "t.yaml")


def test_a_claim_template_loads_as_its_view() -> None:
    (t,) = load_text(_template_yaml("{name: r, exactly: {deviceClassName: gpu, count: 2}}"), "t.yaml").objects
    assert isinstance(t, o.ResourceClaimTemplate)
    assert t.spec.spec.devices.requests[0].exactly == o.ExactDeviceRequest(device_class_name="gpu", count=2)
