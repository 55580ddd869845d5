"""Fair Sharing's dominant resource share (DRS) of a node of the quota tree: one implementation for the scheduler
(which orders entries and picks preemption targets by it: :mod:`kueue_es.scheduler.fairsharing`) and the metrics
(``kueue_cluster_queue_weighted_share``, ``kueue_cohort_weighted_share``: :mod:`projections.metrics`), which may
not import the scheduler.

The DRS of a node (ClusterQueue or Cohort) with a parent: per flavor-resource of its subtree quota, what it uses
beyond that quota (optionally counting a request on top) is summed per resource name; each sum is divided by what
the parent could lend of that resource (the parent's potential availability summed over every flavor of it in the
tree) and scaled by 1000. The largest ratio is the DRS (ties: the lower resource name); divided by the node's
``fairSharing.weight`` it is the weighted share. A node without a parent has DRS 0. A node of weight 0 that
borrows has an infinite share, also when it borrows only resources nothing in the tree lends (its ratio is
then 0): it compares above every other node, and two such nodes compare by their unweighted ratios.

Flavor weights (a ResourceFlavor's ``spec.resourceWeights``, Kueue's KEP-8902, :func:`flavor_weights`):
both sums weigh each flavor-resource's amount by its flavor's weight for that resource (1 when not given), as
Kueue's ``dominantResourceShare`` and ``calculateWeightedLendable`` do; the same weight on every flavor of a
resource cancels out. Without any weight the sums are the integers they always were; with some, floats summed
in the flavor-resources' sorted order, so that the result does not depend on the order a map was filled in.

Fair Sharing is on when the Kueue Configuration has a ``fairSharing`` stanza (:func:`enabled`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from events import objects as o
from events.quantity import QuantityError, parse_quantity
from projections import config_version
from projections.quota import QuotaNode

INF = float("inf")


class DRS:
    """A node's dominant resource share, comparable as Kueue compares them."""

    __slots__ = ("borrowed_frs", "borrowing", "dominant", "ratio", "weight")

    def __init__(self, weight: float, ratio: float = 0.0, dominant: str = "", borrowing: bool = False,
                 borrowed_frs: tuple[str, ...] = ()) -> None:
        self.weight = weight
        self.ratio = ratio
        """Unweighted: borrowed × 1000 / lendable of the dominant resource."""
        self.dominant = dominant
        self.borrowing = borrowing
        """Some flavor-resource is used beyond the subtree quota."""
        self.borrowed_frs = borrowed_frs

    @property
    def zero_weight_borrows(self) -> bool:
        return self.weight == 0 and self.borrowing

    @property
    def is_zero(self) -> bool:
        return self.ratio == 0

    @property
    def weighted(self) -> float:
        """The weighted share: +inf for a node of weight 0 that borrows (even only what nobody lends, where
        the ratio stays 0), else 0 without a ratio, else ratio ÷ weight (Kueue's precise weighted share, which
        its metrics and ClusterQueue status report)."""
        if self.zero_weight_borrows:
            return INF
        if self.ratio == 0:
            return 0.0
        return self.ratio / self.weight

    def key(self) -> tuple[int, float]:
        """Sort key: compares as Kueue's CompareDRS."""
        if self.zero_weight_borrows:
            return (1, self.ratio)
        return (0, self.weighted)

    def borrowing_on(self, requested: dict[str, int]) -> bool:
        return any(requested.get(fr, 0) > 0 for fr in self.borrowed_frs)

    def __repr__(self) -> str:
        return f"DRS({self.weighted:g}{', borrowing' if self.borrowing else ''})"


NEGATIVE = DRS(1.0, -1.0)
"""Below every real share: the starting point of a search for the highest."""


def compare(a: DRS, b: DRS) -> int:
    ka, kb = a.key(), b.key()
    return (ka > kb) - (ka < kb)


def _resource(fr: str) -> str:
    return fr.split("/", 1)[1]


FlavorWeights = Mapping[str, float]
"""Flavor-resource (``flavor/resource``) -> its weight in the dominant resource share; one not listed weighs
1."""


def flavor_weights(flavors: Mapping[str, o.ResourceFlavor]) -> dict[str, float]:
    """The weights ``flavors`` (name -> ResourceFlavor) give their flavor-resources: each ``resourceWeights``
    entry above 0, as a float. One not above 0, or that is no quantity (neither is admitted; a log may still
    hold one), is left out, so weighs 1, as Kueue's ``ComputeFlavorResourceWeights`` keeps only weights above
    0."""
    out: dict[str, float] = {}
    for name in sorted(flavors):
        weights = flavors[name].spec.resource_weights
        for r in sorted(weights):
            try:
                w = float(parse_quantity(weights[r]))
            except QuantityError:
                continue
            if w > 0:
                out[f"{name}/{r}"] = w
    return out


def state_flavor_weights(state: Any) -> dict[str, float]:
    """:func:`flavor_weights` of a ClusterState's flavors, memoised in its ``derived`` while its
    ``spec_generation`` (which every ResourceFlavor change moves) stays: the status of every ClusterQueue and
    Cohort and the weighted-share gauges read the same weights. Read only: the dict is shared."""
    memo = state.derived.get("flavor_weights")
    if memo is None or memo[0] != state.spec_generation:
        memo = state.derived["flavor_weights"] = (state.spec_generation, flavor_weights(state.flavors))
    return memo[1]


def lendable(parent: QuotaNode, memo: dict[str, dict[str, float]] | None = None,
             weights: FlavorWeights | None = None) -> dict[str, float]:
    """Per resource name: what ``parent`` could lend at most, over every flavor of the tree, each
    flavor-resource weighed by ``weights`` (ints when there are none). Quota only, so ``memo`` (parent name ->
    result) may keep it while the specs and the weights do not change (a scheduling cycle)."""
    found = memo.get(parent.name) if memo is not None else None
    if found is None:
        found = {}
        for fr in sorted(parent.root().subtree):
            r = _resource(fr)
            amount = parent.potential_available(fr)
            found[r] = found.get(r, 0) + (amount * weights.get(fr, 1.0) if weights else amount)
        if memo is not None:
            memo[parent.name] = found
    return found


def dominant_share(node: QuotaNode, extra: dict[str, int] | None = None,
                   memo: dict[str, dict[str, float]] | None = None,
                   weights: FlavorWeights | None = None) -> DRS:
    """The dominant resource share of ``node``, counting ``extra`` (flavor-resource -> amount) on top, each
    flavor-resource weighed by ``weights`` (:func:`flavor_weights`); ``memo`` is :func:`lendable`'s."""
    d = DRS(node.weight)
    if node.parent is None:
        return d
    borrowed: dict[str, float] = {}
    frs: list[str] = []
    usage = node.usage
    subtree = node.subtree
    for fr in sorted(subtree) if weights else subtree:  # a float sum in a fixed order; an int one in any
        amount = usage.get(fr, 0) + (extra.get(fr, 0) if extra else 0) - subtree[fr]
        if amount > 0:
            r = _resource(fr)
            borrowed[r] = borrowed.get(r, 0) + (amount * weights.get(fr, 1.0) if weights else amount)
            frs.append(fr)
    if not borrowed:
        return d
    d.borrowing = True
    d.borrowed_frs = tuple(frs)
    lend = lendable(node.parent, memo, weights)
    for r in sorted(borrowed):
        lr = lend.get(r, 0)
        if lr <= 0:
            continue
        ratio = borrowed[r] * 1000.0 / lr
        if ratio > d.ratio:
            d.ratio, d.dominant = ratio, r
    return d


def enabled(document: dict[str, Any] | None) -> bool:
    """Whether Fair Sharing is on under a recorded Configuration document (None: none recorded, Kueue's defaults:
    off): a ``fairSharing`` stanza, as ``SchedulerConfig.fair_sharing_enabled`` reads the decoded one; in a v1beta1
    document only one with ``enable: true`` (:mod:`projections.config_version`)."""
    document = config_version.as_hub(document)
    return bool(document) and document.get("fairSharing") is not None  # type: ignore[union-attr]
