"""Semantic versions in DRA's CEL selectors, as Kubernetes' ``kubernetes.Semver`` library has them: ``semver`` and
``isSemver`` (with and without normalizing), a version's ``major``/``minor``/``patch``, ``compareTo``,
``isGreaterThan``, ``isLessThan`` and ``==``; a device's ``version`` attribute reads as a version."""

from __future__ import annotations

import msgspec
import pytest
from fixtures.dra_views import claim_spec

from events import objects as o
from projections.dra import DraView, claim_charge
from projections.dra_cel import compile_selector, device_activation, matches
from projections.dra_semver import normalize, parse

DRIVER = "gpu.example.com"


def _eval(expression: str, device: o.Device | None = None) -> tuple[bool, str]:
    compiled = compile_selector(expression)
    assert compiled.error == ""
    activation = device_activation(DRIVER, device or msgspec.convert({"name": "d"}, o.Device))
    return matches(compiled.program, activation)


@pytest.mark.parametrize(("expression", "fit"), [
    ('semver("1.2.3").major() == 1', True),
    ('semver("1.2.3").minor() == 2', True),
    ('semver("1.2.3").patch() == 3', True),
    ('semver("1.2.3") == semver("1.2.3+build.7")', True),  # build metadata does not count
    ('semver("1.2.3") != semver("1.2.4")', True),
    ('semver("1.2.3").compareTo(semver("1.2.3")) == 0', True),
    ('semver("1.2.3").compareTo(semver("2.0.0")) == -1', True),
    ('semver("1.2.3").compareTo(semver("0.1.2")) == 1', True),
    ('semver("1.10.0").isGreaterThan(semver("1.9.0"))', True),  # by number, not text
    ('semver("1.0.0-rc.1").isLessThan(semver("1.0.0"))', True),  # a pre-release ranks below its release
    ('semver("1.0.0-alpha").isLessThan(semver("1.0.0-alpha.1"))', True),  # a prefix ranks lower
    ('semver("1.0.0-2").isLessThan(semver("1.0.0-10"))', True),  # numeric identifiers by value
    ('semver("1.0.0-999").isLessThan(semver("1.0.0-a"))', True),  # numeric below alphanumeric
    ('semver("1.0.0-beta").isGreaterThan(semver("1.0.0-Beta"))', True),  # alphanumeric by bytes
    ('semver("1.0.0").isGreaterThan(semver("1.0.0"))', False),
    ('isSemver("1.0.0-rc.1+b.2")', True),
    ('isSemver("1.0")', False),
    ('isSemver("v1.0.0")', False),
    ('isSemver("01.0.0")', False),
    ('isSemver("1.0.0-01")', False),
    ('isSemver("1.0.0+")', False),
    ('isSemver("1.0.0-a_b")', False),
    ('isSemver("18446744073709551616.0.0")', False),
    ('isSemver("v1.0", true)', True),
    ('isSemver("1.0-rc", true)', False),  # a short version may not carry a pre-release
    ('semver("v1", true) == semver("1.0.0")', True),
    ('semver("01.002.3", true) == semver("1.2.3")', True),
    ('semver("1.0.0", false) == semver("1.0.0")', True),
    ('semver("9223372036854775808.0.0").major() < 0', True),  # an int64 wraps, as Go converts it
])
def test_the_library_functions_as_kubernetes_defines_them(expression: str, fit: bool) -> None:
    assert _eval(expression) == (fit, "")


@pytest.mark.parametrize(("expression", "error"), [
    ('semver("1.0") == semver("1.0.0")', "No Major.Minor.Patch elements found"),
    ('semver("") == semver("1.0.0")', "Version string empty"),
    ('semver("01.0.0") == semver("1.0.0")', 'Major number must not contain leading zeroes "01"'),
    ('semver("1.x.0") == semver("1.0.0")', 'Invalid character(s) found in minor number "x"'),
    ('semver("1..0") == semver("1.0.0")', 'strconv.ParseUint: parsing "": invalid syntax'),
    ('semver("1.0.0-") == semver("1.0.0")', "Prerelease is empty"),
    ('semver("1.0.0-rc.01") == semver("1.0.0")', 'Numeric PreRelease version must not contain leading zeroes "01"'),
    ('semver("1.0.0+a..b") == semver("1.0.0")', "Build meta data is empty"),
    ('semver("1.0+b", true) == semver("1.0.0")', "short version cannot contain PreRelease/Build meta data"),
])
def test_a_string_that_is_no_version_fails_with_the_parsers_words(expression: str, error: str) -> None:
    assert _eval(expression) == (False, error)


@pytest.mark.parametrize("expression", [
    'semver("1.0.0") == "1.0.0"',  # a version equals only a version
    'semver("1.0.0") < semver("2.0.0")',  # versions are not ordered by operators
    'semver(1) == semver("1.0.0")',
    'semver("1.0.0").compareTo(quantity("1")) == 0',
    'semver(quantity("1")) == semver("1.0.0")',
])
def test_what_cel_go_has_no_overload_for_fails(expression: str) -> None:
    fit, error = _eval(expression)
    assert not fit and error


@pytest.mark.parametrize(("expression", "kind"), [
    ('semver("1.0.0")', "kubernetes.Semver"),
    ('semver("1.0", true)', "kubernetes.Semver"),
    ('semver("1.0.0").major()', "int"),
    ('semver("1.0.0").compareTo(semver("2.0.0"))', "int"),
])
def test_a_selector_giving_a_version_or_its_parts_does_not_compile(expression: str, kind: str) -> None:
    assert compile_selector(expression).error == f"must evaluate to bool or the unknown type, not {kind}"


def test_a_version_attribute_reads_as_a_version() -> None:
    device = msgspec.convert({"name": "d", "attributes": {"driverVersion": {"version": "1.10.0"},
                                                          "x.io/fw": {"version": "2.0.0-rc.1"}}}, o.Device)
    at = f'device.attributes["{DRIVER}"].driverVersion'
    assert _eval(f'{at}.isGreaterThan(semver("1.9.0"))', device) == (True, "")
    assert _eval(f'{at} == semver("1.10.0")', device) == (True, "")
    assert _eval('device.attributes["x.io"].fw.isLessThan(semver("2.0.0"))', device) == (True, "")
    assert _eval(f'{at}.major() == 1 && {at}.minor() == 10', device) == (True, "")
    fit, error = _eval(f'{at} == "1.10.0"', device)  # no longer its string
    assert not fit and error
    assert _eval(at, device) == (False, "CEL result of type kubernetes.Semver could not be converted to bool: "
                                        "type conversion error from 'Semver' to 'bool'")


def test_a_version_attribute_that_does_not_parse_fails_every_selector_on_the_device() -> None:
    device = msgspec.convert({"name": "d", "attributes": {"model": {"string": "a100"},
                                                          "driverVersion": {"version": "1.0"}}}, o.Device)
    assert _eval("true", device) == (
        False, "attribute driverVersion: parse semantic version: No Major.Minor.Patch elements found")


def test_a_claim_selects_devices_by_version() -> None:
    devices = tuple((DRIVER, msgspec.convert({"name": n, "attributes": {"driverVersion": {"version": v}}}, o.Device))
                    for n, v in (("old", "1.9.9"), ("new", "1.10.0"), ("rc", "1.10.0-rc.1")))
    newer = f'device.attributes["{DRIVER}"].driverVersion.compareTo(semver("v1.10", true)) >= 0'
    for count, error in ((1, ""), (2, ".template.spec.resourceClaims[0].devices.requests[0].exactly.selectors: "
                                      "Internal error: ResourceClaimTemplate t: insufficient matching devices for "
                                      "CEL selector in DeviceClass gpu: 1 device(s) match in the cluster but 2 "
                                      "requested")):
        spec = claim_spec("gpu", count, selectors=[{"cel": {"expression": newer}}])
        view = DraView(reject=False, mapping=(("gpu", "example.com/gpus"),), templates=(("t", spec),),
                       class_selectors=(("gpu", ()),), slice_devices=devices)
        claims = [msgspec.convert({"name": "rc", "resourceClaimTemplateName": "t"}, o.PodResourceClaim)]
        assert claim_charge("main", claims, view) == (((("example.com/gpus", 1),), "") if not error else ((), error))


def test_parse_and_normalize_round_trip() -> None:
    assert str(parse("1.2.3-rc.1+b.5")) == "1.2.3-rc.1+b.5"
    assert normalize("v01.2") == "1.2.0"
    assert normalize("1.00.0-x") == "1.0.0-x"
