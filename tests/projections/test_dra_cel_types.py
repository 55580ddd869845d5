"""The one type check Kubernetes' DRA CEL compiler makes, that a selector gives a bool (or a value of unknown
type, an attribute), made by ``projections.dra_cel`` where the expression's shape decides the type: a literal,
arithmetic or a ternary over such, ``device.driver``, a capacity, ``size``, a conversion, ``quantity`` and
``compareTo``. Other selectors not giving a bool are refused when evaluated on a device, with Kubernetes' error."""

from __future__ import annotations

import msgspec
import pytest
from fixtures.dra_views import CLAIMS, claim_spec

from events import objects as o
from projections.dra import DraView, claim_charge
from projections.dra_cel import compile_selector, device_activation, matches


@pytest.mark.parametrize(("expression", "kind"), [
    ("1 + 2", "int"),
    ("-(3)", "int"),
    ("(1 + 2) * 3 % 2", "int"),
    ("2u", "uint"),
    ("1.5 / 2.0", "double"),
    ('"a" + "b"', "string"),
    ('b"x"', "bytes"),
    ("null", "null_type"),
    ("device.driver", "string"),
    ('device.driver + "-x"', "string"),
    ("size(device.driver)", "int"),
    ("device.driver.size()", "int"),
    ('int("3")', "int"),
    ("string(1)", "string"),
    ("true ? 1 : 2", "int"),
    ('quantity("10Gi")', "kubernetes.Quantity"),
    ('quantity("1").compareTo(quantity("2"))', "int"),
    ('device.capacity["x.io"].memory', "kubernetes.Quantity"),
    ('device.capacity["x.io"].memory.compareTo(quantity("1Gi"))', "int"),
])
def test_a_selector_whose_shape_gives_no_bool_does_not_compile(expression: str, kind: str) -> None:
    compiled = compile_selector(expression)
    assert compiled.program is None
    assert compiled.error == f"must evaluate to bool or the unknown type, not {kind}"


@pytest.mark.parametrize("expression", [
    'device.driver == "gpu.example.com"',
    'device.attributes["x.io"].n',  # of unknown type: decided on the device
    'device.attributes["x.io"].n + 1',
    'device.capacity["x.io"]',
    "1 < 2",
    "!true",
    'has(device.attributes["x.io"].n)',
    'device.driver.startsWith("gpu")',
    'quantity("1").isLessThan(quantity("2"))',
    'true ? 1 : "a"',  # cel-go refuses it otherwise: not decided here
    "1 + 2.0",
    "[1, 2]",
    "dyn(1)",
])
def test_a_selector_of_bool_or_undecided_type_compiles(expression: str) -> None:
    compiled = compile_selector(expression)
    assert compiled.error == "" and compiled.program is not None


@pytest.mark.parametrize(("expression", "error"), [
    ('device.attributes["x.io"].n', "CEL result of type int could not be converted to bool: unsupported type "
                                    "conversion from 'int' to bool"),
    ('device.attributes["x.io"].s', "CEL result of type string could not be converted to bool: unsupported native "
                                    "conversion from string to 'bool'"),
    ('dyn(device.capacity["x.io"].memory)', "CEL result of type kubernetes.Quantity could not be converted to bool: "
                                            "type conversion error from 'Quantity' to 'bool'"),
    ('dyn(2.5)', "CEL result of type double could not be converted to bool: type conversion error from Double to "
                 "'bool'"),
])
def test_a_result_that_is_no_bool_is_refused_when_evaluated_as_kubernetes_refuses_it(expression: str,
                                                                                      error: str) -> None:
    device = msgspec.convert({"name": "g", "attributes": {"x.io/n": {"int": 3}, "x.io/s": {"string": "a"}},
                              "capacity": {"x.io/memory": {"value": "1Gi"}}}, o.Device)
    program = compile_selector(expression).program
    assert matches(program, device_activation("gpu.example.com", device)) == (False, error)


def test_a_claim_whose_selector_gives_no_bool_is_refused_as_kueue_refuses_it() -> None:
    spec = claim_spec("gpu", 1, selectors=[{"cel": {"expression": "device.driver"}}])
    view = DraView(reject=False, mapping=(("gpu", "example.com/gpus"),), templates=(("t", spec),))
    assert claim_charge("main", CLAIMS, view) == ((), (
        ".template.spec.resourceClaims[0].devices.requests[0].exactly.selectors: Invalid value: null: "
        "ResourceClaimTemplate t: devices.requests[0].exactly.selectors[0].cel.expression: Invalid value: "
        '"device.driver": CEL compilation failed: must evaluate to bool or the unknown type, not string'))


@pytest.mark.parametrize(("expression", "fit"), [
    ('cel.bind(dra, device.attributes["x.io"], dra.n > 2 && dra.s == "a")', True),
    ('cel.bind(dra, device.attributes["x.io"], dra.n > 5)', False),
    ("cel.bind(a, 1, cel.bind(b, a + 1, b == 2))", True),
    ("[1, 2].exists(x, cel.bind(y, x * 2, y == 4))", True),
])
def test_bindings_name_a_value_as_in_kubernetes_dra_environment(expression: str, fit: bool) -> None:
    device = msgspec.convert({"name": "g", "attributes": {"x.io/n": {"int": 3}, "x.io/s": {"string": "a"}}}, o.Device)
    compiled = compile_selector(expression)
    assert compiled.error == ""
    assert matches(compiled.program, device_activation("gpu.example.com", device)) == (fit, "")
