"""``canonical_quantity`` writes quantities as Kueue's resource formatter does.

The expected strings were printed by k8s.io/apimachinery v0.36.4's ``resource.Quantity`` driven the way Kueue's
``ResourceFormatter.ResourceQuantity`` drives it: cpu through ``NewMilliQuantity(v, DecimalSI)``; memory,
ephemeral-storage and ``hugepages-*`` through ``NewQuantity(v, BinarySI)`` whose string is parsed back and
written again; anything else through ``NewQuantity(v, DecimalSI)``.
"""

from __future__ import annotations

import pytest

from events.quantity import (
    MAX_INT64,
    QuantityError,
    canonical_quantity,
    exact_quantity,
    format_quantity,
    quantity_string,
)

KUBERNETES = [
    ("cpu", 0, "0"), ("cpu", 1, "1m"), ("cpu", 500, "500m"), ("cpu", 1000, "1"), ("cpu", 1024, "1024m"),
    ("cpu", 1500, "1500m"), ("cpu", 2000, "2"), ("cpu", 20000, "20"), ("cpu", 1_500_000, "1500"),
    ("cpu", 1_000_000, "1k"), ("cpu", 500_000_000, "500k"), ("cpu", 7 * 10**18, "7P"),
    ("cpu", MAX_INT64, "9223372036854775807m"), ("cpu", -2000, "-2"),
    ("memory", 0, "0"), ("memory", 999, "999"), ("memory", 1000, "1k"), ("memory", 1023, "1023"),
    ("memory", 1024, "1Ki"), ("memory", 1025, "1025"), ("memory", 1536, "1536"), ("memory", 2000, "2k"),
    ("memory", 128_000, "125Ki"), ("memory", 1_500_000, "1500k"), ("memory", 2**20, "1Mi"),
    ("memory", 2**30, "1Gi"), ("memory", 10**9, "1G"), ("memory", 5 * 10**8, "500M"),
    ("memory", 2 * 10**9, "1953125Ki"), ("memory", 2**62, "4Ei"), ("memory", MAX_INT64, "9223372036854775807"),
    ("memory", -1000, "-1k"), ("memory", -2048, "-2Ki"),
    ("ephemeral-storage", 10**9, "1G"), ("ephemeral-storage", 3 * 2**30, "3Gi"),
    ("hugepages-2Mi", 1000, "1k"), ("hugepages-2Mi", 4 * 2**21, "8Mi"),
    ("nvidia.com/gpu", 1, "1"), ("nvidia.com/gpu", 1024, "1024"), ("nvidia.com/gpu", 2000, "2k"),
    ("nvidia.com/gpu", 128_000, "128k"), ("nvidia.com/gpu", 2**20, "1048576"), ("nvidia.com/gpu", 7 * 10**18, "7E"),
    ("pods", 60_000, "60k"), ("pods", 123_456_789, "123456789"),
]


@pytest.mark.parametrize(("resource", "value", "want"), KUBERNETES)
def test_writes_what_kueue_writes(resource: str, value: int, want: str) -> None:
    assert canonical_quantity(resource, value) == want


def test_values_past_int64_are_capped_as_kueue_caps_its_integers() -> None:
    assert canonical_quantity("memory", MAX_INT64 * 3) == canonical_quantity("memory", MAX_INT64)
    assert canonical_quantity("cpu", 10**30) == "9223372036854775807m"


def test_exact_quantity_names_an_amount_past_int64_as_it_is() -> None:
    """Kueue's quota messages name a pod set's exact total (the follow-up to #15026): within int64 as the
    formatter writes it, past it in the decimal SI a Quantity of that size takes (a byte count too: it has no
    whole int64 to write in binary units)."""
    for resource, value, want in KUBERNETES:
        assert exact_quantity(resource, value) == want
    assert exact_quantity("example.com/gpu", 7 * 1_400_000_000_000_000_000) == "9800P"
    assert exact_quantity("memory", 2 * MAX_INT64) == "18446744073709551614"
    assert exact_quantity("memory", 2**64) == "18446744073709551616"
    assert exact_quantity("cpu", MAX_INT64 + 1) == "9223372036854775808m"
    assert exact_quantity("cpu", 10**22) == "10E"
    assert exact_quantity("example.com/gpu", -(MAX_INT64 + 2)) == "-9223372036854775809"


def test_the_older_formatter_differs_only_where_documented() -> None:
    """``format_quantity`` stays as logs recorded before hold it: it agrees with Kueue except for byte counts that
    are not whole KiB but end in thousands, and for whole thousands of cores."""
    differ = {(r, v) for r, v, want in KUBERNETES if format_quantity(r, v) != want and v >= 0}
    assert differ == {("cpu", 1_000_000), ("cpu", 500_000_000), ("cpu", 7 * 10**18), ("memory", 1000),
                      ("memory", 2000), ("memory", 1_500_000), ("memory", 10**9), ("memory", 5 * 10**8),
                      ("ephemeral-storage", 10**9), ("hugepages-2Mi", 1000)}


PRINTED = [
    ("-1Ki", "-1Ki"), ("-2.0Mi", "-2Mi"), ("-1.5Ki", "-1536"), ("-0.5Ki", "-512"), ("-1000", "-1k"),
    ("-5e-1", "-500e-3"), ("-1E3", "-1E3"), ("1e-9", "1e-9"), ("5e-10", "1e-9"), ("1n", "1n"),
    ("0.0000000005", "1n"), ("+1Ki", "+1Ki"), ("1.500", "1.500"), ("-1", "-1"), ("1000E", "1"),
    ("-10Ei", "-9223372036854775807"), ("0.5", "500m"), ("-8Ki", "-8Ki"), ("1024Ki", "1Mi"), ("1E", "1E"),
    ("1.0001Ki", "1024102400u"), ("1e21", "1e21"), ("-0.0000000001", "-1n"), ("-7Ei", "-7Ei"),
    ("1.5e3", "1500"), ("-001.5", "-1500m"), ("1.", "1."), ("-1.5e-10", "-1e-9"),
    ("123456789012345678901", "123456789012345678901"), ("0.000000001234", "2n"), ("3Ti", "3Ti"),
    ("12345678901Ki", "12345678901Ki"), ("123456789012Ki", "123456789012Ki"), ("2Pi", "2Pi"),
    ("-2Gi", "-2Gi"), ("1e+3", "1e+3"), ("100m", "100m"), ("1000m", "1"), ("1500u", "1500u"),
    ("-0.001", "-1m"), ("7e2", "700"),
]
"""A quantity read and printed again (``resource.Quantity``'s ``UnmarshalJSON`` then ``String()``), as
k8s.io/apimachinery v0.36.4 printed each: the format of its suffix kept, canonical, rounded up to nano units,
binary capped at MaxInt64, and the text itself where the parser takes it for canonical (``+1Ki``, ``1.500``,
``-1E3``, ``1.``); past ``E`` no suffix at all (``1000E`` is ``1``)."""


@pytest.mark.parametrize(("text", "want"), PRINTED)
def test_quantity_string_prints_a_quantity_as_kubernetes_does(text: str, want: str) -> None:
    assert quantity_string(text) == want


def test_quantity_string_reads_a_number_as_python_writes_it() -> None:
    assert (quantity_string(-1), quantity_string(-0.5), quantity_string(1e-10)) == ("-1", "-500m", "1e-9")
    with pytest.raises(QuantityError):
        quantity_string("1Xi")
    assert quantity_string("1e-999999999") == "1e-9"  # rounded up to nano units, no huge power of ten built
    # past Python's 4300 digits for an integer's text (apimachinery v0.36.4 printed these two alike)
    assert quantity_string("-" + "1" * 5000) == "-" + "1" * 5000
    assert quantity_string("1." + "0" * 5000 + "1Ki") == "1024000000001n"
