"""Kueue's ordered PodSetReducer (partial admission) as kueue-es runs it (:mod:`kueue_es.scheduler.cycle`).

The cases are Kueue's own: ``pkg/scheduler/flavorassigner/podset_reducer_test.go``
(``TestDistributeOrderBased``, ``TestOrderedReduce``, ``TestReduceTotalDeltaLarge``, ``TestGiveBack``), each
naming its case. Kueue's ``fits`` there is a plain predicate over the counts; here it is the ``attempt`` the
reducer is handed, which gives
something (the attempt's outcome) when the counts fit and None when they do not.

Kueue's reducer searches with Go's ``sort.Search`` — the shrink over ``0..totalDelta``, each give-back between
the count the shrink left and the full one — and stops at the index that search returns. Whether counts fit is
not monotone in general (a smaller pod set may land on another flavor, one that needs preemption and finds no
victims), so the same decision needs the same probes: the last tests hold both searches to Kueue's.
"""

from __future__ import annotations

import pytest

from kueue_es.scheduler.cycle import _cut, _grow_back, _shrink


def _probing(ok, probes: list[list[int]] | None = None):
    """An ``attempt`` over ``ok`` (a predicate on the counts), recording each probe in ``probes``."""

    def attempt(counts: list[int]):
        if probes is not None:
            probes.append(list(counts))
        return tuple(counts) if ok(counts) else None

    return attempt


def _reduce(full: list[int], floor: list[int], ok) -> list[int] | None:
    """Kueue's ``Reduce``: the ordered shrink, then (two or more pod sets cut) the give-back; None: not
    found."""
    attempt = _probing(ok)
    total = sum(full) - sum(floor)
    if total <= 0:
        return None
    counts, found = _shrink(full, floor, total, attempt)
    if found is None:
        return None
    if sum(c < f for c, f in zip(counts, full, strict=True)) >= 2:
        found = _grow_back(counts, full, attempt, found)
    assert found == tuple(counts), "what the attempt gave is for the counts returned"
    return counts


@pytest.mark.parametrize(("full", "deltas", "amount", "want"), [
    pytest.param([10, 10], [4, 2], 0, [10, 10], id="zero amount leaves everything at full count"),
    pytest.param([10, 10], [4, 2], 1, [10, 9], id="amount fully absorbed by the last podset"),
    pytest.param([10, 10], [4, 2], 3, [9, 8],
                 id="amount spills into the previous podset once the last is drained"),
    pytest.param([10, 10], [4, 2], 6, [6, 8],
                 id="amount equal to totalDelta drains every podset to its minimum"),
    pytest.param([10, 10, 10], [4, 0, 2], 6, [6, 10, 8],
                 id="podset with no room to shrink is skipped regardless of position"),
])
def test_distribute_order_based(full: list[int], deltas: list[int], amount: int, want: list[int]) -> None:
    """TestDistributeOrderBased: the budget comes off the last pod set first, each down to its minimum."""
    assert _cut(full, [f - d for f, d in zip(full, deltas, strict=True)], amount) == want


_KEP = ([1, 4, 20], [1, 2, 10])  # ps0 (no minCount), ps1 (4, minCount 2), ps2 (20, minCount 10)


@pytest.mark.parametrize(("full", "floor", "ok", "want"), [
    pytest.param([10, 10], [6, 8], lambda c: c[0] + c[1] <= 16, [8, 8],
                 id="last podset drains to its minimum before the previous one is touched"),
    pytest.param(*_KEP, lambda c: sum(c) <= 10, None,
                 id="KEP scenario C: podset with no minCount blocks the search once others are exhausted"),
    pytest.param(*_KEP, lambda c: sum(c) <= 19, [1, 4, 14],
                 id="KEP scenario A: only the last podset is cut, and only as far as needed"),
    pytest.param(*_KEP, lambda c: sum(c) <= 13, [1, 2, 10],
                 id="KEP scenario B: the cut spills into the previous podset, and cannot be given back"),
    pytest.param(*_KEP, lambda c: c[1] <= 2 and c[2] <= 20, [1, 2, 20],
                 id="KEP scenario D: a podset drained for another's sake is restored in full"),
    pytest.param(*_KEP, lambda c: c[1] <= 2 and c[2] <= 15, [1, 2, 15],
                 id="a podset whose own capacity is partly exhausted is given back only as far as it fits"),
    pytest.param([5], [5], lambda c: True, None, id="no podset has room to shrink"),
])
def test_ordered_reduce(full: list[int], floor: list[int], ok, want: list[int] | None) -> None:
    """TestOrderedReduce."""
    assert _reduce(full, floor, ok) == want


def test_reduce_total_delta_large() -> None:
    """TestReduceTotalDeltaLarge: a budget past int32 (two pod sets of MaxInt32, minCount 0) is searched
    whole."""
    big = 2**31 - 1
    assert _reduce([big, big, 1], [0, 0, 0], lambda c: sum(c) <= 1) == [1, 0, 0]


@pytest.mark.parametrize(("counts", "want", "want_probes"), [
    pytest.param([4, 15], [4, 15], 0, id="one reduced podset: the pass is skipped"),
    pytest.param([3, 15], [4, 20], 2, id="two reduced podsets: both are restored"),
])
def test_give_back(counts: list[int], want: list[int], want_probes: int) -> None:
    """TestGiveBack (ps1 4/minCount 2, ps2 20/minCount 10), a ``fits`` taking anything: the pass runs only
    when two or more pod sets were cut (as :func:`_try_partial` calls it), one probe per pod set restored
    whole."""
    full = [4, 20]
    probes: list[list[int]] = []
    attempt = _probing(lambda c: True, probes)
    got = tuple(counts)
    if sum(c < f for c, f in zip(counts, full, strict=True)) >= 2:
        got = _grow_back(counts, full, attempt, got)
    assert counts == want and got == tuple(want)
    assert len(probes) == want_probes


# --- the same probes as Go's sort.Search --------------------------------------------------------------------


def test_the_shrink_probes_as_kueues_sort_search_does() -> None:
    """One pod set of 5 (minCount 1): a budget of 4. Counts that fit only at 2 pods (a cut of 3) — not
    monotone. Go's ``sort.Search(5, ...)`` probes a cut of 2 (no), then 4 (no) and stops: nothing found, the
    workload is not admitted partially. An inclusive binary search over 1..4 probes 2, then 3, and admits
    2 pods."""
    probes: list[list[int]] = []
    counts, found = _shrink([5], [1], 4, _probing(lambda c: c == [2], probes))
    assert probes == [[3], [1]]
    assert found is None and counts == [5]


def test_the_give_back_probes_as_kueues_sort_search_does() -> None:
    """Pod set 0 cut to 2 of 7, pod set 1 cut too; counts fit for pod set 0 at 3 and 5, not at 4, 6 or 7.
    Kueue tries 7, then searches 3..6 with ``sort.Search`` (probes 5: yes, 6: no) and grows it to 5; an
    inclusive binary search probes 4, then 3, and settles on 3."""
    probes: list[list[int]] = []
    counts = [2, 8]
    attempt = _probing(lambda c: c[0] in (2, 3, 5) and c[1] <= 8, probes)
    found = _grow_back(counts, [7, 10], attempt, (2, 8))
    assert [p[0] for p in probes[:3]] == [7, 5, 6]
    assert counts == [5, 8] and found == (5, 8)


def test_sort_search_on_a_monotone_fit_finds_the_smallest_cut() -> None:
    """Monotone fits (the common case) give the smallest cut that fits, whatever the budget."""
    for total in range(1, 40):
        for need in range(1, total + 1):
            counts, found = _shrink([total], [0], total, _probing(lambda c, n=need, t=total: c[0] <= t - n))
            assert counts == [total - need] and found == (total - need,), (total, need)
