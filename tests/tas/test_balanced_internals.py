"""The pieces of balanced placement, on Kueue's unit cases for them (``tas_balanced_placement_test.go``, the
leader-less ones). Domains are list positions, in level-value order; pods equal slices where Kueue's fixture has
slice size 1."""

from __future__ import annotations

import pytest

from kueue_es.scheduler.tas.balanced import by_capacity_and_entropy, optimal, spread

D = [9, 6, 4, 2]  # d1..d4


@pytest.mark.parametrize(("need", "want"), [
    (22, None),  # no fit: all four hold 21
    (5, [1]),  # best fit, single domain: d2 is the smallest holding 5
    (10, [1, 2]),  # two domains (what greedy needs), the least total capacity: d2 + d3 = 10
    (11, [0, 3]),  # d1 + d4 = 11
    (9, [0]),
])
def test_optimal_domain_set(need: int, want: list[int] | None) -> None:
    got = optimal(D, D, need, 1, sorted)
    assert (sorted(got) if got is not None else None) == want


def test_optimal_ties_break_on_level_values() -> None:
    # four identical leaves given in level-value order: the first wins, with or without the entropy order
    assert optimal([3, 3, 3, 3], [3, 3, 3, 3], 1, 1, sorted) == [0]
    assert optimal([3, 3, 3, 3], [3, 3, 3, 3], 1, 1,
                   lambda ds: by_capacity_and_entropy(ds, [3, 3, 3, 3], [], [0] * 4, [0] * 4, 0)) == [0]


def test_optimal_with_slices_counts_pods() -> None:
    # hosts of 20, 15 and 10 pods in slices of 5: two hosts are needed; the pair closest to 25 pods is 15 + 10
    assert optimal([20, 15, 10], [4, 3, 2], 5, 5, sorted) == [1, 2]


@pytest.mark.parametrize(("slices", "need", "threshold", "picked", "want"), [
    ([18, 18, 18], 20, 10, [0, 1], {0: 10, 1: 10}),
    ([18, 18, 18], 40, 13, [0, 1, 2], {0: 14, 1: 13, 2: 13}),
    ([18, 18, 18, 10, 2], 2, 2, [4], {4: 2}),
    ([18, 18, 18, 10, 2], 25, 10, [0, 3], {0: 15, 3: 10}),
    ([3, 3], 7, 3, [0, 1], None),  # the domains cannot take what is left over
    ([18, 18], 10, 6, [0, 1], None),  # fewer slices than the threshold for each
])
def test_spread(slices: list[int], need: int, threshold: int, picked: list[int], want: dict | None) -> None:
    assert spread(picked, slices, slices, need, threshold) == want


def test_spread_ties_break_on_level_values() -> None:
    assert spread([0], [3, 3], [3, 3], 1, 1) == {0: 1}


def test_capacity_overrides_entropy_and_entropy_overrides_level_values() -> None:
    # domains a..d: slices 100, 4, 5, 5; children's pods: a [50, 50], b [2, 2], c [4, 0], d [2, 2]
    children = [50, 50, 2, 2, 4, 0, 2, 2]
    starts, ends = [0, 2, 4, 6], [2, 4, 6, 8]
    order = by_capacity_and_entropy([0, 1, 2, 3], [100, 4, 5, 5], children, starts, ends, 0)
    assert order == [0, 3, 2, 1]  # most slices; then d (even children) before c; then b with fewer
    # equal capacity and equal entropy: level values decide
    assert by_capacity_and_entropy([2, 0, 1], [5, 5, 5], [2, 2, 2, 2, 2, 2], [0, 2, 4], [2, 4, 6], 0) == [0, 1, 2]
