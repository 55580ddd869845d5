"""Flavor assignment: for each pod set, pick a ResourceFlavor per resource group, as Kueue does.

Flavors are tried in the ClusterQueue's order. A flavor must exist, have its taints tolerated and match the
pod set's node selection on the flavor's own label keys. Each (flavor, resource) then gets a mode — Fit,
Preempt (via the preemption oracle) or NoFit — and flavorFungibility decides whether to stop at a flavor or
keep looking for a better one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING

from events import objects as o
from events.quantity import format_quantity
from projections.workloads import PodSetInfo, WorkloadInfo

if TYPE_CHECKING:
    from kueue_es.scheduler.cycle import CycleContext

NO_MATCHING_FLAVOR, EXCEEDS_MAX_QUOTA, WAITING_FOR_QUOTA = "NoMatchingFlavor", "ExceedsMaxQuota", "WaitingForQuota"
_SEVERITY = {NO_MATCHING_FLAVOR: 3, EXCEEDS_MAX_QUOTA: 2, WAITING_FOR_QUOTA: 1, "TopologyPlacementFailed": 0}


class Mode(IntEnum):
    """External assignment modes, worst first (Kueue's FlavorAssignmentMode)."""

    NO_FIT = 0
    PREEMPT = 1
    DEFERRED_FIT = 2
    FIT = 3


class Granular(IntEnum):
    """Internal per-flavor outcome, worst first."""

    NO_FIT = 0
    NO_CANDIDATES = 1
    PREEMPT = 2
    RECLAIM = 3
    FIT = 4

    @property
    def mode(self) -> Mode:
        if self is Granular.FIT:
            return Mode.FIT
        return Mode.PREEMPT if self >= Granular.NO_CANDIDATES else Mode.NO_FIT


@dataclass
class PodSetResult:
    name: str
    count: int
    flavors: dict[str, str] = field(default_factory=dict)
    """resource -> flavor."""
    requests: dict[str, int] = field(default_factory=dict)
    """resource -> total for the pod set."""
    mode: Granular = Granular.FIT
    borrow: int = 0
    reasons: list[str] = field(default_factory=list)
    no_fit_reason: str = ""
    tried: dict[str, list[str]] = field(default_factory=dict)
    """resource group (first resource) -> what each flavor tried said, for `explain`."""


@dataclass
class Assignment:
    pod_sets: list[PodSetResult]
    mode: Mode
    borrow: int
    usage: dict[str, int]
    """``flavor/resource`` -> total."""
    message: str
    reason: str

    def needs_preemption_frs(self) -> dict[str, int]:
        """The flavor-resources whose assignment needs preemption, with the amount requested."""
        out: dict[str, int] = {}
        for ps in self.pod_sets:
            if ps.mode < Granular.FIT:
                for r, f in ps.flavors.items():
                    fr = f"{f}/{r}"
                    out[fr] = self.usage.get(fr, 0)
        return out


def toleration_matches(t: o.Toleration, taint: o.Taint) -> bool:
    if t.effect and t.effect != taint.effect:
        return False
    if t.operator == "Exists":
        return not t.key or t.key == taint.key
    return t.key == taint.key and t.value == taint.value


def _affinity_matches(term: o.NodeSelectorTerm, labels: dict[str, str]) -> bool:
    for req in term.match_expressions:
        v = labels.get(req.key)
        match req.operator:
            case "In":
                if v is None or v not in req.values:
                    return False
            case "NotIn":
                if v is not None and v in req.values:
                    return False
            case "Exists":
                if v is None:
                    return False
            case "DoesNotExist":
                if v is not None:
                    return False
            case "Gt" | "Lt":
                try:
                    ok = v is not None and (int(v) > int(req.values[0]) if req.operator == "Gt" else int(v) < int(req.values[0]))
                except (ValueError, IndexError):
                    ok = False
                if not ok:
                    return False
    return True


def flavor_eligible(ps: PodSetInfo, flavor: o.ResourceFlavor | None, name: str) -> str | None:
    """Why ``flavor`` cannot serve ``ps``, or None when it can."""
    if flavor is None:
        return f"flavor {name} not found"
    spec = flavor.spec
    for taint in spec.node_taints:
        if taint.effect not in ("NoSchedule", "NoExecute"):
            continue
        if not any(toleration_matches(t, taint) for t in ps.tolerations) and not any(
            toleration_matches(t, taint) for t in spec.tolerations
        ):
            return f"untolerated taint {{{taint.key}={taint.value}:{taint.effect}}} in flavor {name}"
    keys = spec.node_labels
    for k, v in ps.node_selector:
        if k in keys and keys[k] != v:
            return f"flavor {name} doesn't match node affinity"
    if ps.affinity_terms:
        terms = []
        for term in ps.affinity_terms:
            exprs = [e for e in term.match_expressions if e.key in keys]
            if not exprs:
                terms = []
                break
            terms.append(o.NodeSelectorTerm(match_expressions=exprs))
        if terms and not any(_affinity_matches(t, keys) for t in terms):
            return f"flavor {name} doesn't match node affinity"
    return None


def _stop_here(mode: Granular, borrow: int, ff: o.FlavorFungibility) -> bool:
    if mode <= Granular.NO_CANDIDATES:
        return False
    if mode in (Granular.PREEMPT, Granular.RECLAIM) and ff.when_can_preempt == "TryNextFlavor":
        return False
    if borrow > 0 and ff.when_can_borrow == "TryNextFlavor":
        return False
    return True


def _better(mode: Granular, borrow: int, best_mode: Granular, best_borrow: int, ff: o.FlavorFungibility) -> bool:
    if mode == Granular.NO_FIT:
        return False
    if best_mode == Granular.NO_FIT:
        return True
    if ff.preference == "PreemptionOverBorrowing":
        return (borrow, -mode) < (best_borrow, -best_mode)
    return (-mode, borrow) < (-best_mode, best_borrow)


def assign_flavors(ctx: CycleContext, wl: WorkloadInfo, cq_name: str, counts: list[int] | None = None) -> Assignment:
    """Assign flavors to every pod set of ``wl`` in ClusterQueue ``cq_name`` (counts override for partial admission)."""
    spec = ctx.state.cluster_queues[cq_name].spec
    node = ctx.tree.cluster_queues[cq_name]
    groups = spec.resource_groups
    covers_pods = any("pods" in rg.covered_resources for rg in groups)
    ignore_undeclared = ctx.config.resources.quota_check_strategy == "IgnoreUndeclared"
    assumed: dict[str, int] = {}
    results: list[PodSetResult] = []
    for i, ps in enumerate(wl.pod_sets):
        count = counts[i] if counts is not None else ps.count
        requests = {r: v * count for r, v in ps.requests}
        if covers_pods:
            requests["pods"] = count
        res = PodSetResult(ps.name, count, requests=requests)
        results.append(res)
        if count == 0:
            continue
        for r in sorted(requests):
            if r in res.flavors:
                continue
            group = next((g for g in groups if r in g.covered_resources), None)
            if group is None:
                if requests[r] == 0 or ignore_undeclared:
                    continue
                res.mode = Granular.NO_FIT
                res.reasons.append(f"resource {r} unavailable in ClusterQueue")
                res.no_fit_reason = _worse(res.no_fit_reason, NO_MATCHING_FLAVOR)
                continue
            wanted = [x for x in group.covered_resources if x in requests]
            _assign_group(ctx, wl, node, spec, ps, group, wanted, requests, assumed, res)
        for r, f in res.flavors.items():
            fr = f"{f}/{r}"
            assumed[fr] = assumed.get(fr, 0) + requests[r]
    mode = min((r.mode.mode for r in results), default=Mode.FIT)
    borrow = max((r.borrow for r in results), default=0)
    messages = [f"couldn't assign flavors to pod set {r.name}: {', '.join(sorted(r.reasons))}"
                for r in results if r.mode != Granular.FIT and r.reasons]
    reason = ""
    for r in results:
        if r.mode == Granular.NO_FIT:
            reason = _worse(reason, r.no_fit_reason or NO_MATCHING_FLAVOR)
    return Assignment(results, mode, borrow, assumed, "; ".join(messages), reason or WAITING_FOR_QUOTA)


def _worse(a: str, b: str) -> str:
    return a if a and _SEVERITY.get(a, 0) >= _SEVERITY.get(b, 0) else b


def _assign_group(ctx, wl, node, spec, ps, group, wanted, requests, assumed, res: PodSetResult) -> None:
    ff = spec.flavor_fungibility
    best: tuple[Granular, int, str] | None = None
    group_reasons: list[str] = []
    group_no_fit = ""
    tried: list[str] = []
    for fq in group.flavors:
        name = fq.name
        why = flavor_eligible(ps, ctx.state.flavors.get(name), name)
        if why is not None:
            group_reasons.append(why)
            tried.append(f"{name}: {why}")
            group_no_fit = _least(group_no_fit, NO_MATCHING_FLAVOR)
            continue
        mode, borrow = Granular.FIT, 0
        flavor_reasons: list[str] = []
        flavor_no_fit = ""
        for r in wanted:
            fr = f"{name}/{r}"
            m, b, msg, nf = _fits(ctx, wl, node, spec, fr, r, assumed.get(fr, 0), requests[r])
            if m < mode:
                mode = m
            borrow = max(borrow, b)
            if msg:
                flavor_reasons.append(msg)
            if nf:
                flavor_no_fit = _worse(flavor_no_fit, nf)
        tried.append(f"{name}: {mode.name.lower()}" + (f" ({'; '.join(flavor_reasons)})" if flavor_reasons else "")
                     + (f", borrowing level {borrow}" if borrow else ""))
        group_reasons.extend(flavor_reasons)
        if mode == Granular.NO_FIT:
            group_no_fit = _least(group_no_fit, flavor_no_fit or WAITING_FOR_QUOTA)
        if best is None or _better(mode, borrow, best[0], best[1], ff):
            if mode != Granular.NO_FIT or best is None:
                best = (mode, borrow, name)
        if _stop_here(mode, borrow, ff):
            break
    res.tried[wanted[0]] = tried
    if best is None or best[0] == Granular.NO_FIT:
        res.mode = Granular.NO_FIT
        res.reasons.extend(group_reasons)
        res.no_fit_reason = _worse(res.no_fit_reason, group_no_fit or NO_MATCHING_FLAVOR)
        return
    mode, borrow, name = best
    for r in wanted:
        res.flavors[r] = name
    if mode < res.mode:
        res.mode = mode
    res.borrow = max(res.borrow, borrow)
    if mode != Granular.FIT:
        res.reasons.extend(group_reasons)


def _least(a: str, b: str) -> str:
    return a if a and _SEVERITY.get(a, 0) <= _SEVERITY.get(b, 0) else b


def _fits(ctx, wl, node, spec, fr: str, resource: str, assumed: int, request: int) -> tuple[Granular, int, str, str]:
    """Mode of one flavor-resource: (mode, borrow level, message, NoFit reason)."""
    val = assumed + request
    flavor = fr.split("/", 1)[0]
    max_capacity = node.potential_available(fr)
    if val > max_capacity:
        if assumed:
            msg = (f"insufficient quota for {resource} in flavor {flavor}, previously considered podsets requests "
                   f"({format_quantity(resource, assumed)}) + current podset request "
                   f"({format_quantity(resource, request)}) > maximum capacity ({format_quantity(resource, max_capacity)})")
        else:
            msg = (f"insufficient quota for {resource} in flavor {flavor}, request > maximum capacity "
                   f"({format_quantity(resource, val)} > {format_quantity(resource, max_capacity)})")
        return Granular.NO_FIT, 0, msg, EXCEEDS_MAX_QUOTA
    borrow, may_reclaim = node.lowest_fitting_height(fr, val)
    available = node.available(fr)
    if val <= available:
        return Granular.FIT, borrow, "", ""
    msg = f"insufficient unused quota for {resource} in flavor {flavor}, {format_quantity(resource, val - available)} more needed"
    p = spec.preemption
    can_borrow_preempt = (p.borrow_within_cohort is not None and p.borrow_within_cohort.policy != "Never") or (
        ctx.config.fair_sharing_enabled and p.reclaim_within_cohort != "Never"
    )
    if val <= node.nominal.get(fr, 0) or may_reclaim or can_borrow_preempt:
        mode, borrow_after = ctx.preemption_oracle(wl, node, fr, val)
        if mode == Granular.NO_FIT:
            return mode, borrow, msg, WAITING_FOR_QUOTA
        return mode, borrow_after, msg, ""
    return Granular.NO_FIT, borrow, msg, WAITING_FOR_QUOTA
