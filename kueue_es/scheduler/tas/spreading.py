"""Topology spreading (Kueue's alpha gate ``TASTopologySpreading``, v0.20): a pod set's
``kueue.x-k8s.io/podset-topology-spreading`` annotation (:mod:`events.topology_spreading`) spreads the Workloads
it matches across the domains of its rules' levels.

Counting (:func:`occupancy`): among the other Workloads holding quota in the same ClusterQueue and namespace whose
labels match the selector, each one whose pod sets of the same group key (the pod-set group's name, else the pod
set's own name) have a topology assignment in the flavor counts once towards the total and once towards each
domain it occupies at a rule's level, and towards that domain's parent (the share's denominator: a domain's share
is of the Workloads under its parent, of the total at the top level). A Workload assigned above a rule's level
occupies no domain there.

Placement (:class:`LevelSpread`, only for a required topology request, as in Kueue v0.20, whose scheduler resolves
no rules for a preferred or unconstrained one; only for the rules whose level the flavor's topology has; a rule
below the requested level fails the placement): at the requested level a domain that is, or lies under, a domain
over a ``Required`` rule's share is not a candidate; the others keep Kueue's order but are ranked first by the
rules, coarsest level first: a domain this group already uses and under the share, then one it does not use, then
one over a ``Preferred`` rule's share (the least occupied first). BestFit's tightest pick stays among the domains
of the first one's rank; LeastFreeCapacity (a required request also marked unconstrained) takes the first ranked
domain that fits. Below the requested level the rules change nothing (the request stays in the chosen domain).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

import msgspec

from events import objects as o
from events import tas_assignment, topology_spreading
from events.errors import InvalidInput
from events.topology_spreading import JOB_UID_LABEL, Requirement, Rule, Spec
from projections.topology import TopologyTree

EXCLUDES_ALL = "topology spreading excludes all topology domains at level: {}"
BELOW_REQUESTED = "topology spreading level {} is below the podset topology {}"


class Occupancy(msgspec.Struct, frozen=True):
    """What one pod set's rules see in one flavor: the rules, the matching Workloads counted, and the domains they
    occupy as ((level, index), count), sorted."""

    rules: tuple[Rule, ...]
    total: int = 0
    counts: tuple[tuple[tuple[int, int], int], ...] = ()


def group_key(name: str, topology: o.PodSetTopologyRequest | None) -> tuple[str, str]:
    """Kueue's ``GroupKeyForPodSet``: the pod-set group's name, else the pod set's own (never equal to each other)."""
    group = topology.pod_set_group_name if topology is not None else None
    return ("group", group) if group is not None else ("podset", name)


def matches(selector: Sequence[Requirement] | None, labels: Mapping[str, str]) -> bool:
    return selector is not None and all(r.matches(labels) for r in selector)


class SpreadingMemo:
    """What topology spreading reads once per scheduling cycle however many placements ask: each annotation value
    parsed (:func:`events.topology_spreading.read`), and each other workload's topology assignment decoded and
    located in a flavor's tree. Assignments and trees are keyed by identity and kept here, so an id is never
    reused while the memo lives; what it answers never depends on those ids."""

    __slots__ = ("_located", "_specs")

    def __init__(self) -> None:
        self._specs: dict[str, Spec | None] = {}
        self._located: dict[tuple[int, int], tuple[object, TopologyTree, tuple[tuple[int, int], ...] | None]] = {}

    def spec(self, value: str | None) -> Spec | None:
        """The spec the annotation ``value`` reads as (None: absent, or refused by Kueue's parser)."""
        if value is None:
            return None
        if value not in self._specs:
            self._specs[value] = topology_spreading.read(value)
        return self._specs[value]

    def located(self, tree: TopologyTree, ta: o.TopologyAssignment) -> tuple[tuple[int, int], ...] | None:
        """:func:`locate`, remembered."""
        key = (id(ta), id(tree))
        hit = self._located.get(key)
        if hit is None:
            hit = self._located[key] = (ta, tree, locate(tree, ta))
        return hit[2]


def locate(tree: TopologyTree, ta: o.TopologyAssignment) -> tuple[tuple[int, int], ...] | None:
    """The (level, index) in ``tree`` of each domain of the assignment ``ta`` that the tree has; None when ``ta`` is
    malformed (it then occupies nothing)."""
    try:
        domains = tas_assignment.decode(ta)
    except InvalidInput:
        return None
    return tuple(at for d in domains if (at := tree.domain_index(d.values)) is not None)


def occupancy(tree: TopologyTree, flavor: str, spec: Spec, key: tuple[str, str], namespace: str,
              job_uid: str | None, others: Iterable, memo: SpreadingMemo | None = None) -> Occupancy:
    """The occupancy a pod set with ``spec`` and group ``key``, of a workload in ``namespace`` of job ``job_uid``,
    sees in ``flavor`` (``tree``) among ``others`` (the other workloads holding quota in its ClusterQueue);
    ``memo``: the cycle's :class:`SpreadingMemo` (none: every assignment is decoded afresh)."""
    selector = spec.selector(job_uid)
    levels = [tree.levels.index(r.topology_key) for r in spec.rules if r.topology_key in tree.levels]
    counts: dict[tuple[int, int], int] = {}
    total = 0
    if selector is None or not levels:
        return Occupancy(spec.rules)
    find = memo.located if memo is not None else locate
    for wl in others:
        if wl.namespace != namespace or wl.admission is None or not matches(selector, wl.labels):
            continue
        occupied = _occupied(tree, flavor, key, wl, levels, find)
        if occupied:
            total += 1
            for d in occupied:
                counts[d] = counts.get(d, 0) + 1
    return Occupancy(spec.rules, total, tuple(sorted(counts.items())))


def _occupied(tree: TopologyTree, flavor: str, key: tuple[str, str], wl, levels: Sequence[int],
              find: Callable[[TopologyTree, o.TopologyAssignment], tuple[tuple[int, int], ...] | None],
              ) -> set[tuple[int, int]]:
    keys = {ps.name: group_key(ps.name, ps.topology) for ps in wl.pod_sets}
    out: set[tuple[int, int]] = set()
    for psa in wl.admission.pod_set_assignments:
        ta = psa.topology_assignment
        if ta is None or keys.get(psa.name) != key or flavor not in psa.flavors.values():
            continue
        for lvl, i in find(tree, ta) or ():
            for rule_level in levels:
                if rule_level > lvl:
                    continue  # placed above the rule's level: it pins no domain there
                a = tree.ancestor(lvl, i, rule_level)
                out.add((rule_level, a))
                if rule_level > 0:
                    out.add((rule_level - 1, tree.parent[rule_level][a]))
    return out


class LevelSpread:
    """The rules of one placement resolved against the flavor's levels, with the counts they compare (each domain's
    rank worked out once)."""

    __slots__ = ("_ranks", "counts", "levels", "rules", "total", "tree")

    def __init__(self, tree: TopologyTree, occ: Occupancy) -> None:
        self.tree = tree
        self.rules = {tree.levels.index(r.topology_key): r for r in occ.rules if r.topology_key in tree.levels}
        self.levels = sorted(self.rules)
        """The rules' levels, coarsest first."""
        self.total = occ.total
        self.counts = dict(occ.counts)
        self._ranks: dict[tuple[int, int], tuple[int, ...]] = {}

    def _over(self, level: int, i: int) -> bool:
        count = self.counts.get((level, i), 0)
        parent = self.total if level == 0 else self.counts.get((level - 1, self.tree.parent[level][i]), 0)
        return self.rules[level].exceeds(count, parent)

    def banned(self, level: int, i: int) -> bool:
        """Domain ``i`` of ``level``, or a domain above it, is over a Required rule's share."""
        tree = self.tree
        for lvl in range(level, -1, -1):
            rule = self.rules.get(lvl)
            if rule is not None and rule.required and self._over(lvl, tree.ancestor(level, i, lvl)):
                return True
        return False

    def rank(self, level: int, i: int) -> tuple[int, ...]:
        """Kueue's spread priority of domain ``i`` of ``level``: at each rule level at or above it, coarsest first,
        its domain there used and under the share (0), unused (1) or over it (2, then by its count)."""
        found = self._ranks.get((level, i))
        if found is not None:
            return found
        out: list[int] = []
        for lvl in self.levels:
            if lvl > level:
                break
            d = self.tree.ancestor(level, i, lvl)
            count = self.counts.get((lvl, d), 0)
            if self._over(lvl, d):
                out += (2, count)
            else:
                out += (0 if count else 1, 0)
        found = self._ranks[(level, i)] = tuple(out)
        return found

    def arrange(self, level: int, ordered: Sequence[int]) -> list[int]:
        """``ordered`` (Kueue's order) without the banned domains, ranked by the rules (stable)."""
        kept = [i for i in ordered if not self.banned(level, i)]
        return sorted(kept, key=lambda i: self.rank(level, i))

    def tier(self, level: int, ordered: Sequence[int]) -> Sequence[int]:
        """Kueue's ``topSpreadTierDomains``: the leading run of ``ordered`` ranked as its first."""
        if not ordered:
            return ordered
        top = self.rank(level, ordered[0])
        for k, d in enumerate(ordered):
            if self.rank(level, d) != top:
                return ordered[:k]
        return ordered


def fit_spread(spread: LevelSpread, level: int, ordered: Sequence[int], *, fits: Callable[[int], bool],
               best: Callable[[Sequence[int]], int], lfc: bool,
               no_fit: Callable[[Sequence[int]], str]) -> tuple[int, list[int]] | str:
    """A required request's domain at ``level`` under topology spreading, for every search (a pod set, one with a
    partial slice, a pod-set group): ``ordered`` (the search's own order) without the banned domains, ranked by the
    rules; LeastFreeCapacity (``lfc``: a required request its Workload also marks unconstrained, which Kueue's
    Workload API allows) takes the first domain that ``fits``, BestFit its ``best`` among the domains of that one's
    rank onwards (:meth:`LevelSpread.tier`); the two differ where ``fits`` reads another capacity than the order
    (a partial slice). ``no_fit`` makes the failure from the arranged domains."""
    ordered = spread.arrange(level, ordered)
    if not ordered:
        return EXCLUDES_ALL.format(spread.tree.levels[level])
    k = next((k for k, d in enumerate(ordered) if fits(d)), None)
    if k is None:
        return no_fit(ordered)
    if lfc:
        return level, [ordered[k]]
    return level, [best(spread.tier(level, ordered[k:]))]


def resolve(tree: TopologyTree, occ: Occupancy | None, requested: int) -> LevelSpread | str | None:
    """The spread a required request at level ``requested`` places with (None: no rule of this topology's), or
    Kueue's failure when a rule's level is below the requested one."""
    if occ is None:
        return None
    spread = LevelSpread(tree, occ)
    for rule in occ.rules:
        if rule.topology_key in tree.levels and tree.levels.index(rule.topology_key) > requested:
            return BELOW_REQUESTED.format(rule.topology_key, tree.levels[requested])
    return spread if spread.rules else None


def job_uid(labels: Mapping[str, str]) -> str | None:
    return labels.get(JOB_UID_LABEL) or None
