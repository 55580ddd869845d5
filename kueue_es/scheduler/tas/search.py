"""Phase 2a: the level to place at and the domains there that hold the request (§2.5 rules 14–19).

Domain order (Kueue's for a pod set without a leader, where every "with leader" count equals the plain one;
a pod-set group's leader-aware search is :mod:`.group`'s): slice count
descending for BestFit, ascending for LeastFreeCapacity; then pod count ascending; then level values (the
domain's index). BestFit takes the tightest domain that holds every slice; LeastFreeCapacity the first one that
does in its order — both are the domain minimising (slices, pods, values) among those that hold the request, so
one scan finds it without sorting. Otherwise a required request fails, a preferred one climbs a level, and at the
top level (or for an unconstrained request, whichever profile it uses) domains are taken greedily in order.

Under TASRespectNodeAffinityPreferred, when some domain scores (``Counts.affinity``), the preferred-affinity score
comes first in every order, descending, and BestFit's tightest domain is sought only among the domains sharing
the score of the first one it would take (Kueue's affinity tier): affinity outranks capacity. So the first domain
in order decides: BestFit takes the tightest of its tier when it holds the request, LeastFreeCapacity the first
domain in order that does; when the first does not, a required request takes the tightest of the first tier
holding a domain that does, and a preferred one climbs a level even if a lower-scored domain would hold it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial

from kueue_es.scheduler.tas.counts import Counts
from kueue_es.scheduler.tas.spreading import LevelSpread, fit_spread

_SHIFT = 48
_MASK = (1 << _SHIFT) - 1


def order(counts: Counts, level: int, domains: Iterable[int], lfc: bool) -> list[int]:
    """``domains`` of ``level`` sorted in Kueue's plain order (the keys are packed into one int per domain, which
    sorts several times faster than tuples; counts stay far below 2^48), preferred-affinity score first when
    domains score."""
    sc, pc = counts.slices[level], counts.pods[level]
    if counts.affinity is not None:
        aff = counts.affinity[level]
        sign = 1 if lfc else -1
        return sorted(domains, key=lambda i: (-aff[i], sign * sc[i], pc[i], i))
    if lfc:
        keys = [(((sc[i] << _SHIFT) | pc[i]) << _SHIFT) | i for i in domains]
    else:
        keys = [((((_MASK - sc[i]) << _SHIFT) | pc[i]) << _SHIFT) | i for i in domains]
    keys.sort()
    return [k & _MASK for k in keys]


def tightest_fitting(sc: list[int], pc: list[int], need: int) -> int | None:
    """The domain minimising (slices, pods, index) among those with at least ``need`` slices, or None."""
    fitting = [x for x in sc if x >= need]
    if not fitting:
        return None
    m = min(fitting)
    i = sc.index(m)
    if sc is pc:
        return i
    best, best_p = i, pc[i]
    while True:
        try:
            i = sc.index(m, i + 1)
        except ValueError:
            return best
        if pc[i] < best_p:
            best, best_p = i, pc[i]


def tier(domains: Sequence[int], scores: Sequence[int] | None) -> Sequence[int]:
    """Kueue's ``topAffinityTierDomains``: the leading run of ``domains`` sharing the first one's score (all of
    them when nothing scores)."""
    if scores is None or not domains:
        return domains
    top = scores[domains[0]]
    for k, d in enumerate(domains):
        if scores[d] != top:
            return domains[:k]
    return domains


def tightest(domains: Sequence[int], needed: int, value: Sequence[int] | Mapping[int, int],
             scores: Sequence[int] | None = None, lead: Sequence[int] | None = None, leaders: int = 0) -> int:
    """Kueue's best-fit pick, the one tightest fitting domain of every TAS walk: scanning ``domains`` in order
    (only the first's affinity :func:`tier` when ``scores``; only those able to take ``leaders`` when ``lead`` is
    given), the first with the smallest ``value`` that is still at least ``needed``, starting from ``domains[0]``
    (which the caller knows qualifies)."""
    domains = tier(domains, scores)
    best = domains[0]
    best_v = value[best]
    for d in domains:
        v = value[d]
        if needed <= v < best_v and (lead is None or lead[d] >= leaders):
            best, best_v = d, v
    return best


NotFit = Callable[[int, int, int], str]
"""(slices that fit, slices requested, level searched) -> Kueue's not-fit message."""


class SliceFit:
    """How the search reads a level when the pod set makes whole slices only: a domain fits when it holds them all,
    best fit taking the tightest (:func:`tightest`). :mod:`.partial` reads it with a partial slice too (as
    :class:`~.group.WholeSlices` does for a pod-set group)."""

    __slots__ = ()
    extra = 0
    """Slices the failure messages count beyond the whole ones."""
    by_counts = True
    """Whether, where no domain scores, both profiles pick the domain minimising (slices, pods, index) among those
    that fit, so that one scan finds it without sorting (:func:`tightest_fitting`)."""

    def capacity(self, counts: Counts, level: int) -> Sequence[int]:
        """Each domain's slices, as a domain must hold them to fit."""
        return counts.slices[level]

    def best(self, counts: Counts, level: int, domains: Sequence[int], slices: int,
             scores: Sequence[int] | None) -> int:
        """Best fit's pick among ``domains`` (the first when none fits)."""
        return tightest(domains, slices, counts.slices[level], scores)

    def greedy(self, counts: Counts, level: int, slices: int, lfc: bool, not_fit: NotFit) -> tuple[int, list[int]] | str:
        """The top level's greedy run: domains taken in order until the slices are covered."""
        sc = counts.slices[level]
        # domains without a slice contribute nothing (LeastFreeCapacity would take them first, for 0 pods)
        ordered = order(counts, level, [i for i in range(len(sc)) if sc[i] > 0], lfc)
        chosen, remaining = take_in_order(ordered, slices, sc, counts.scores(level), lfc)
        if remaining > 0:
            return not_fit(slices - remaining, slices, level)
        return level, chosen


WHOLE_SLICES = SliceFit()


def find_fit_level(counts: Counts, level: int, *, slices: int, required: bool, unconstrained: bool, lfc: bool,
                   not_fit: NotFit, no_domains: Callable[[int], str], spread: LevelSpread | None = None,
                   fit: SliceFit = WHOLE_SLICES) -> tuple[int, list[int]] | str:
    """(fit level, domains chosen there in order) or the failure message. ``lfc``: the LeastFreeCapacity profile
    (else BestFit); ``unconstrained`` keeps the search at ``level`` even when BestFit is the profile. ``spread``:
    a required request's topology spreading (:mod:`.spreading`); ``fit``: how a domain's capacity reads (whole
    slices, or also a partial one: :class:`~.partial.TailFit`, whose BestFit pick decides for its level even when
    the first domain in order cannot hold the partial slice)."""
    while True:
        sc, pc = counts.slices[level], counts.pods[level]
        if not sc:
            return no_domains(level)
        if spread is not None:
            return _fit_spread(counts, level, slices, lfc, not_fit, spread, fit)
        if counts.affinity is None and fit.by_counts:
            found = _fit_by_counts(sc, pc, level, slices=slices, required=required, lfc=lfc, not_fit=not_fit)
        else:
            found = _fit_in_order(counts, level, fit, slices=slices, required=required, lfc=lfc, not_fit=not_fit)
        if found is not None:
            return found
        if level > 0 and not unconstrained:
            level -= 1
            continue
        return fit.greedy(counts, level, slices, lfc, not_fit)


def spread_not_fit(sc: Sequence[int], pc: Sequence[int], lfc: bool, not_fit: NotFit, requested: int, level: int,
                   ranked: Sequence[int]) -> str:
    """The failure when no domain spreading leaves (``ranked``) takes the request."""
    return not_fit(pc[ranked[-1]] if lfc else sc[ranked[0]], requested, level)


def _fit_spread(counts: Counts, level: int, slices: int, lfc: bool, not_fit: NotFit, spread: LevelSpread,
                fit: SliceFit) -> tuple[int, list[int]] | str:
    """A required request's domain under topology spreading (:func:`~.spreading.fit_spread`): the first one decides
    as under affinity (the module's last paragraph), BestFit keeping to its spreading rank, then its affinity
    tier."""
    sc, pc, cap = counts.slices[level], counts.pods[level], fit.capacity(counts, level)
    return fit_spread(spread, level, order(counts, level, range(len(sc)), lfc), fits=lambda d: cap[d] >= slices,
                      best=partial(fit.best, counts, level, slices=slices, scores=counts.scores(level)), lfc=lfc,
                      no_fit=partial(spread_not_fit, sc, pc, lfc, not_fit, slices + fit.extra, level))


def _fit_by_counts(sc: list[int], pc: list[int], level: int, *, slices: int, required: bool, lfc: bool,
                   not_fit: NotFit) -> tuple[int, list[int]] | str | None:
    """:func:`_fit_in_order` for whole slices where no domain scores, without sorting (:attr:`SliceFit.by_counts`):
    the domain minimising (slices, pods, index) among those that fit, the failure of a required request (read from
    the domain its profile's order would put first or last), or None when the search goes on."""
    single = tightest_fitting(sc, pc, slices)
    if single is not None:
        return level, [single]
    if not required:
        return None
    n = len(sc)
    if lfc:
        last = max(range(n), key=lambda i: (sc[i], pc[i], i))
        return not_fit(pc[last], slices, level)
    top = min(range(n), key=lambda i: (-sc[i], pc[i], i))
    return not_fit(sc[top], slices, level)


def _fit_in_order(counts: Counts, level: int, fit: SliceFit, *, slices: int, required: bool, lfc: bool,
                  not_fit: NotFit) -> tuple[int, list[int]] | str | None:
    """One domain of ``level`` holding the request as Kueue picks it in its order (the module's last paragraph),
    the failure of a required request, or None when the search goes on (up a level, or greedy)."""
    sc, pc, cap, aff = counts.slices[level], counts.pods[level], fit.capacity(counts, level), counts.scores(level)
    ordered = order(counts, level, range(len(sc)), lfc)
    requested = slices + fit.extra
    if lfc:
        first = next((d for d in ordered if cap[d] >= slices), None)
        if first is not None:
            return level, [first]
        return not_fit(pc[ordered[-1]], requested, level) if required else None
    best = fit.best(counts, level, ordered, slices, aff)
    if cap[best] >= slices:
        return level, [best]
    if not required:
        return None
    k = next((k for k, d in enumerate(ordered) if cap[d] >= slices), None)
    if k is None:
        return not_fit(sc[ordered[0]], requested, level)
    return level, [fit.best(counts, level, ordered[k:], slices, aff)]


def take_in_order(ordered: Sequence[int], need: int, sc: Sequence[int], aff: Sequence[int] | None,
                  lfc: bool) -> tuple[list[int], int]:
    """Domains taken in ``ordered`` until ``need`` slices are covered (BestFit swapping the one that would close
    the count for the tightest that does), and the slices still missing (0 or less when covered)."""
    chosen: list[int] = []
    remaining = need
    for k, d in enumerate(ordered):
        if remaining <= 0:
            break
        if not lfc and sc[d] >= remaining:
            d = tightest(ordered[k:], remaining, sc, aff)
        chosen.append(d)
        remaining -= sc[d]
    return chosen, remaining
