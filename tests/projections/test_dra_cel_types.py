"""The one type check Kubernetes' DRA CEL compiler makes, that a selector gives a bool (or a value of unknown
type, an attribute), made by ``projections.dra_cel`` where the expression's shape decides the type: a literal,
arithmetic or a ternary over such, ``device.driver``, ``size``, a conversion, ``quantity`` and ``compareTo``.
Other selectors not giving a bool are refused when evaluated on a device."""

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
])
def test_a_selector_whose_shape_gives_no_bool_does_not_compile(expression: str, kind: str) -> None:
    compiled = compile_selector(expression)
    assert compiled.program is None
    assert compiled.error == f"must evaluate to bool or the unknown type, not {kind}"


@pytest.mark.parametrize("expression", [
    'device.driver == "gpu.example.com"',
    'device.attributes["x.io"].n',  # of unknown type: decided on the device
    'device.attributes["x.io"].n + 1',
    'device.capacity["x.io"].memory',
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


def test_an_attribute_that_is_no_bool_is_refused_when_evaluated() -> None:
    device = msgspec.convert({"name": "g", "attributes": {"x.io/n": {"int": 3}}}, o.Device)
    program = compile_selector('device.attributes["x.io"].n').program
    assert matches(program, device_activation("gpu.example.com", device)) == (
        False, "CEL result of type IntType should have been a bool")


def test_a_claim_whose_selector_gives_no_bool_is_refused_as_kueue_refuses_it() -> None:
    spec = claim_spec("gpu", 1, selectors=[{"cel": {"expression": "device.driver"}}])
    view = DraView(reject=False, mapping=(("gpu", "example.com/gpus"),), templates=(("t", spec),))
    assert claim_charge("main", CLAIMS, view) == ((), (
        ".template.spec.resourceClaims[0].devices.requests[0].exactly.selectors: Invalid value: null: "
        "ResourceClaimTemplate t: devices.requests[0].exactly.selectors[0].cel.expression: Invalid value: "
        '"device.driver": CEL compilation failed: must evaluate to bool or the unknown type, not string'))
