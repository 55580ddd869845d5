"""ConfigurablePreemptions (alpha, Kueue v0.20): the candidates a ClusterQueue's PreemptionConfig adds.

A ClusterQueue names a PreemptionConfig in its ``kueue.x-k8s.io/preemption-config-name`` annotation (Kueue's alpha
reference: no spec field yet). With the gate on and that object present, its rules add preemption candidates to the
ones ``spec.preemption`` (classical or Fair Sharing) gives; gate off, annotation absent or naming no object, nothing
changes. A rule applies to a preemptor its ``preemptorSelector`` matches (none: every one) and contributes, per
candidate selector, the workloads holding quota of a flavor-resource the preemptor lacks that pass every filter of
the selector: its ``scope`` (the preemptor's LocalQueue, its ClusterQueue, the ClusterQueues of its direct cohort or
of its cohort tree — the preemptor's own ClusterQueue always included — or any), ``clusterQueueSelector`` (the
candidate's ClusterQueue labels), ``labelSelector`` (the candidate's labels), every ``numericLabels`` constraint (an
integer label, or its ``fallbackValue``; without either the candidate is out; bounds, then the comparison with the
preemptor's value, which must have one too) and ``priority`` (base or boosted, compared with the preemptor's).
Candidates are deduplicated over the rules and selectors and ordered as Kueue's classical victims are.

The rules' triggers are tiers: ``Always`` contributes unconditionally; ``InsufficientQuota`` only when the quota
would still not fit were every candidate so far preempted; ``QuotaFeasibleAndInsufficientTopology`` only when the
quota would then fit but the workload (its topology) would not. Under classical preemption, in each borrowing
attempt, the tiers are walked after the candidates ``spec.preemption`` offers that are valid in that attempt,
on the tree as that walk left it and with that attempt's borrowing setting, in the same greedy walk and
fill-back (a workload the classical walk took keeps its classical reason; one it skipped may still be chosen
here); under Fair Sharing they are preempted after its strategies fail, tier by tier. Their victims carry the
reason ``ConfigurablePreemption``. A ClusterQueue naming a PreemptionConfig may also preempt while it would
borrow (:func:`kueue_es.scheduler.flavors._fits`), as Kueue's flavor assigner allows it then.

A label selector the apiserver stored but Kueue cannot parse (an unknown operator, values where none may be, a bad
key or value: the CRD does not check them) is found when a tier is reached, as Kueue's evaluator finds it: a rule
of that trigger with such a ``preemptorSelector``, or one that applies to the preemptor with such a candidate
selector, makes the tier yield nothing and ends the walk — no later tier is tried (:func:`evaluable`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from events import objects as o
from events.labels import selector_problem
from kueue_es.scheduler import preemption as classical
from projections.clusterqueues import selector_matches
from projections.workloads import WorkloadInfo

if TYPE_CHECKING:
    from kueue_es.scheduler.cycle import CycleContext

TRIGGERS = o.PREEMPTION_TRIGGERS
ALWAYS, INSUFFICIENT_QUOTA, INSUFFICIENT_TOPOLOGY = TRIGGERS

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


class Selection(NamedTuple):
    """Why a PreemptionConfig chose a victim: the config and, per rule that selected it (in the config's order),
    the indexes of its candidate selectors that did: the config is the eviction's underlying cause, the rules are in
    its message (:func:`kueue_es.scheduler.preemption.configured_message`)."""

    config: str
    rules: tuple[tuple[str, tuple[int, ...]], ...]


class Selected(NamedTuple):
    workload: WorkloadInfo
    selection: Selection


def config_name(ctx: CycleContext, cq: str) -> str:
    """The PreemptionConfig ClusterQueue ``cq`` names under the gate ("" with the gate off or no annotation)."""
    if not ctx.configurable_preemptions:
        return ""
    obj = ctx.state.cluster_queues.get(cq)
    return obj.metadata.annotations.get(o.PREEMPTION_CONFIG_ANNOTATION, "") if obj is not None else ""


def config_for(ctx: CycleContext, cq: str) -> o.PreemptionConfig | None:
    """The PreemptionConfig ClusterQueue ``cq`` uses: None with the gate off, without the annotation, or when it
    names no object (Kueue then logs the failed read and preempts classically)."""
    name = config_name(ctx, cq)
    return ctx.state.preemption_configs.get(name) if name else None


def has_rules(config: o.PreemptionConfig | None, *triggers: str) -> bool:
    return config is not None and any(r.activation_policy.trigger in triggers for r in config.spec.rules)


def _compare(op: str, candidate: int, preemptor: int) -> bool:
    match op:
        case "LessThan":
            return candidate < preemptor
        case "GreaterThan":
            return candidate > preemptor
        case "LessThanOrEqual":
            return candidate <= preemptor
        case "GreaterThanOrEqual":
            return candidate >= preemptor
    return False


def _label_value(labels: dict[str, str], key: str, fallback: int | None) -> int | None:
    """An int32 label (as Go's ParseInt(_, 10, 32) reads it), else ``fallback``."""
    raw = labels.get(key)
    if raw is not None:
        text = raw[1:] if raw[:1] in "+-" else raw
        if text.isascii() and text.isdigit():
            value = int(raw)
            if _INT32_MIN <= value <= _INT32_MAX:
                return value
    return fallback


def _numeric_ok(nl: o.PreemptionConfigNumericLabel, preemptor: WorkloadInfo, w: WorkloadInfo) -> bool:
    value = _label_value(w.labels, nl.key, nl.fallback_value)
    if value is None:
        return False
    if nl.min_value is not None and value < nl.min_value:
        return False
    if nl.max_value is not None and value > nl.max_value:
        return False
    if nl.comparison is None:
        return True
    own = _label_value(preemptor.labels, nl.key, nl.fallback_value)
    return own is not None and _compare(nl.comparison, value, own)


def _priority_of(mode: str, w: WorkloadInfo) -> int:
    return w.priority if mode == "Boosted" else w.base_priority


def _in_scope(ctx: CycleContext, scope: str, preemptor: WorkloadInfo, cq: str) -> bool:
    own = preemptor.cluster_queue
    if scope in ("WithinLocalQueue", "WithinClusterQueue"):
        return cq == own
    if scope == "AnyClusterQueue":
        return True
    if cq == own:
        return True
    forest = ctx.state.forest
    mine, theirs = forest.cohort_path(own), forest.cohort_path(cq)
    if not mine or not theirs:
        return False
    if scope == "WithinParentCohort":
        return mine[0] == theirs[0]
    if scope == "WithinCohortTree":
        return mine[-1] == theirs[-1]
    return False


def _parses(sel: o.LabelSelector | None) -> bool:
    """Whether ``sel`` (None: no selector) is one apimachinery's LabelSelectorAsSelector accepts."""
    return sel is None or selector_problem(
        sel.match_labels, [(r.key, r.operator, r.values) for r in sel.match_expressions]) is None


def _builds(sel: o.PreemptionConfigCandidateSelector) -> bool:
    """Whether Kueue can build the filters of a candidate selector: its scope and priority enums (the CRD holds
    them to those) and its two label selectors parse."""
    prio = sel.priority
    return (sel.scope in o.PREEMPTION_SCOPES and _parses(sel.cluster_queue_selector) and _parses(sel.label_selector)
            and (prio is None or (prio.mode in o.PRIORITY_MODES and prio.comparison in o.NUMERIC_COMPARISONS)))


def evaluable(config: o.PreemptionConfig, trigger: str, preemptor: WorkloadInfo) -> bool:
    """Whether Kueue can evaluate the rules of ``trigger`` for ``preemptor``: not when one of them has a
    ``preemptorSelector`` that does not parse, nor when one that applies to the preemptor has a candidate selector
    that cannot be built (one whose preemptor selector does not match is never built). Kueue (evaluator.go's
    candidatesFor) collects every such error of the trigger and then returns none of its candidates."""
    for rule in config.spec.rules:
        if rule.activation_policy.trigger != trigger:
            continue
        if not _parses(rule.preemptor_selector):
            return False
        if rule.preemptor_selector is not None and not selector_matches(rule.preemptor_selector, preemptor.labels):
            continue
        if not all(_builds(sel) for sel in rule.candidate_selectors):
            return False
    return True


def _selector_candidates(ctx: CycleContext, sel: o.PreemptionConfigCandidateSelector, preemptor: WorkloadInfo,
                         needed: dict[str, int]) -> list[WorkloadInfo]:
    if sel.scope not in o.PREEMPTION_SCOPES:
        return []
    out: list[WorkloadInfo] = []
    prio = sel.priority
    own_priority = _priority_of(prio.mode, preemptor) if prio is not None else 0
    for cq in sorted(ctx.state.cluster_queues):
        if not _in_scope(ctx, sel.scope, preemptor, cq):
            continue
        if sel.cluster_queue_selector is not None and not selector_matches(
                sel.cluster_queue_selector, ctx.state.cluster_queues[cq].metadata.labels):
            continue
        for w in ctx.reserving_in(cq):
            if w.key == preemptor.key or not classical.uses_any(w, needed):
                continue
            if sel.scope == "WithinLocalQueue" and (w.namespace != preemptor.namespace
                                                    or w.queue_name != preemptor.queue_name):
                continue
            if sel.label_selector is not None and not selector_matches(sel.label_selector, w.labels):
                continue
            if not all(_numeric_ok(nl, preemptor, w) for nl in sel.numeric_labels):
                continue
            if prio is not None and not _compare(prio.comparison, _priority_of(prio.mode, w), own_priority):
                continue
            out.append(w)
    return out


def candidates(ctx: CycleContext, config: o.PreemptionConfig, trigger: str, preemptor: WorkloadInfo,
               needed: dict[str, int], skip: set[str]) -> list[Selected]:
    """The workloads the rules of ``trigger`` select for ``preemptor`` (none in ``skip``), deduplicated and in
    Kueue's victim order, each with the rules and selector indexes that chose it."""
    found: dict[str, tuple[WorkloadInfo, dict[str, list[int]]]] = {}
    for rule in config.spec.rules:
        if rule.activation_policy.trigger != trigger:
            continue
        if rule.preemptor_selector is not None and not selector_matches(rule.preemptor_selector, preemptor.labels):
            continue
        for index, sel in enumerate(rule.candidate_selectors):
            for w in _selector_candidates(ctx, sel, preemptor, needed):
                if w.key in skip:
                    continue
                entry = found.get(w.key)
                if entry is None:
                    entry = found[w.key] = (w, {})
                entry[1].setdefault(rule.name, []).append(index)
    name = config.metadata.name
    out = [Selected(w, Selection(name, tuple((r, tuple(ix)) for r, ix in rules.items())))
           for w, rules in found.values()]
    classical.sort_candidates(out, preemptor.cluster_queue, ctx.now, ctx.afs_usage, lambda s: s.workload)
    return out


def walk_tiers(config: o.PreemptionConfig, preemptor: WorkloadInfo, tier: Callable[[str], bool],
               quota_short: Callable[[], bool], topology_short: Callable[[], bool] | None = None) -> bool:
    """The trigger ladder both preemption algorithms walk. ``tier(trigger)`` acts on that trigger's candidates and
    says whether the preemptor fits then, which ends the walk (the return value). ``Always`` comes first; the
    conditional tiers only when the config has rules for them: ``InsufficientQuota`` while ``quota_short`` says the
    quota falls short — still short after it, the walk ends there, as the topology tier needs the quota feasible —
    then ``QuotaFeasibleAndInsufficientTopology`` while ``topology_short`` says the workload does not fit (None:
    the caller knows it does not: every tier before said so). A tier reached whose rules Kueue cannot evaluate
    (:func:`evaluable`) ends the walk there, with nothing from it (evaluator.go's FindCandidates stops on the
    error)."""

    def run(trigger: str) -> bool | None:
        """True: fits; False: go on; None: the tier could not be evaluated, stop."""
        return tier(trigger) if evaluable(config, trigger, preemptor) else None

    found = run(ALWAYS)
    if found is not False:
        return bool(found)
    if not has_rules(config, INSUFFICIENT_QUOTA, INSUFFICIENT_TOPOLOGY):
        return False
    if quota_short():
        found = run(INSUFFICIENT_QUOTA)
        if found is not False:
            return bool(found)
        if quota_short():
            return False
    if topology_short is not None and not topology_short():
        return False
    return bool(run(INSUFFICIENT_TOPOLOGY))


def preempt_tiers(ctx: CycleContext, config: o.PreemptionConfig, preemptor: WorkloadInfo, needed: dict[str, int],
                  taken: set[str], take: Callable[[WorkloadInfo, str, Selection | None], bool],
                  quota_fits: Callable[[], bool]) -> bool:
    """The fallback once the classical walk of an attempt or Fair Sharing's strategies fail (their victims
    still off, their keys in ``taken``): preempt each tier's candidates in order through ``take`` (True once
    the preemptor fits), the conditional tiers as ``quota_fits`` (the caller's borrowing setting) says. Any
    workload not yet taken may be picked, a candidate the caller's walk skipped too, as Kueue's evaluator
    offers every workload still admitted in its snapshot."""

    def tier(trigger: str) -> bool:
        for w, selection in candidates(ctx, config, trigger, preemptor, needed, taken):
            taken.add(w.key)
            if take(w, classical.CONFIGURABLE_PREEMPTION, selection):
                return True
        return False

    return walk_tiers(config, preemptor, tier, lambda: not quota_fits())
