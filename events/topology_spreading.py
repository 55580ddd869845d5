"""Kueue's ``kueue.x-k8s.io/podset-topology-spreading`` pod-set annotation (alpha gate ``TASTopologySpreading``,
Kueue v0.20, #14820): how it reads and what its webhook refuses.

The value is a JSON object: ``workloadLabelSelectors`` (optional; label selector requirements choosing, among the
Workloads of the namespace, those counted: one ``In`` requirement in the alpha; omitted, the Workloads of the same
job, ``kueue.x-k8s.io/job-uid`` ``In`` the workload's own job UID, none when it has none) and ``rules`` (one or two:
``topologyKey``, a topology level; ``maxShareAllowingPlacement``, a quantity strictly between 0 and 1, the share a
domain may already hold of the matching Workloads placed under its parent for the next group to go there;
``enforcementMode``, ``Required`` (the default: a domain over the share is not used) or ``Preferred`` (it is
used last)). Pure: the scheduler (:mod:`kueue_es.scheduler.tas.spreading`) and the webhooks
(:func:`spreading_errors`) read it alike.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from decimal import ROUND_CEILING, Decimal
from typing import Any

import msgspec

from events.labels import label_value_problem, qualified_name_problem
from events.quantity import QuantityError, decimal_string, parse_quantity

SPREADING_ANNOTATION = "kueue.x-k8s.io/podset-topology-spreading"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
REQUIRED = "Required"
PREFERRED = "Preferred"
MODES = (REQUIRED, PREFERRED)
MAX_RULES = 2
MAX_SELECTORS = 1
"""The alpha's limits: one or two rules, at most one selector requirement."""

RULE_COUNT = "topology spreading rules must contain between 1 and 2 entries"
SELECTOR_INVALID = "topology spreading workloadLabelSelectors is not a valid label selector"


class Requirement(msgspec.Struct, frozen=True):
    """One label selector requirement (``key``, ``operator``, ``values``)."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        if self.operator == "In":
            return value is not None and value in self.values
        if self.operator == "NotIn":
            return value is None or value not in self.values
        if self.operator == "Exists":
            return value is not None
        return value is None  # DoesNotExist


class Rule(msgspec.Struct, frozen=True):
    topology_key: str
    share: Decimal
    """``maxShareAllowingPlacement`` as written (exact)."""
    mode: str = REQUIRED

    @property
    def required(self) -> bool:
        return self.mode == REQUIRED

    @property
    def share_milli(self) -> int:
        """The share in thousandths, rounded up (Kueue's ``ScaledValue(Milli)``)."""
        return int((self.share * 1000).to_integral_value(rounding=ROUND_CEILING))

    def exceeds(self, count: int, total: int) -> bool:
        """A domain already holding ``count`` of ``total`` is over the share (never when ``total`` is 0)."""
        return count * 1000 > self.share_milli * total


class Spec(msgspec.Struct, frozen=True):
    selectors: tuple[Requirement, ...] | None
    """None: omitted (the workload's own job)."""
    rules: tuple[Rule, ...]

    def selector(self, job_uid: str | None) -> tuple[Requirement, ...] | None:
        """The requirements Workloads are matched by; None matches none (omitted, and no job UID)."""
        if self.selectors:
            return self.selectors
        return (Requirement(JOB_UID_LABEL, "In", (job_uid,)),) if job_uid else None


class SpreadingError(ValueError):
    """The annotation cannot be read: ``field`` is where (relative to the annotation, "" for itself)."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field


def parse(value: str) -> Spec:
    """The annotation's value read as Kueue's parser reads it (JSON, the rule count, selectors that compile; the
    rest is the webhook's: :func:`spreading_errors`); raises :class:`SpreadingError`."""
    try:
        doc = json.loads(value)
    except ValueError as e:
        raise SpreadingError(f"must be a valid JSON object: failed to parse topology spreading annotation: {e}") \
            from None
    if not isinstance(doc, dict):
        raise SpreadingError("must be a valid JSON object: failed to parse topology spreading annotation: "
                             f"cannot unmarshal {type(doc).__name__} into a spreading spec")
    rules = _rules(doc.get("rules"))
    if not 1 <= len(rules) <= MAX_RULES:
        raise SpreadingError(f"{RULE_COUNT}: got {len(rules)}")
    selectors = _selectors(doc.get("workloadLabelSelectors"))
    return Spec(selectors, rules)


def _bad_json(what: str) -> SpreadingError:
    return SpreadingError(f"must be a valid JSON object: failed to parse topology spreading annotation: {what}")


def _objects(raw: Any, field: str) -> list[dict[str, Any]]:
    """The JSON array ``field`` of objects (none when absent)."""
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(r, dict) for r in raw):
        raise _bad_json(f"{field} must be an array of objects")
    return raw


def _rules(raw: Any) -> tuple[Rule, ...]:
    out = []
    for r in _objects(raw, "rules"):
        key = r.get("topologyKey", "")
        mode = r.get("enforcementMode") or REQUIRED
        if not isinstance(key, str) or not isinstance(mode, str):
            raise _bad_json("topologyKey and enforcementMode must be strings")
        out.append(Rule(key, _share(r.get("maxShareAllowingPlacement")), mode))
    return tuple(out)


def _share(raw: Any) -> Decimal:
    if raw is None:
        return Decimal(0)
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        raise _bad_json("maxShareAllowingPlacement must be a quantity")
    try:
        return parse_quantity(raw)
    except QuantityError as e:
        raise _bad_json(f"quantities must match the regular expression: {e}") from None


def _selectors(raw: Any) -> tuple[Requirement, ...] | None:
    out = []
    for r in _objects(raw, "workloadLabelSelectors"):
        key, op, values = r.get("key", ""), r.get("operator", ""), r.get("values") or []
        if not isinstance(key, str) or not isinstance(op, str) or not isinstance(values, list) \
                or not all(isinstance(v, str) for v in values):
            raise _bad_json("a selector requirement's key, operator and values must be strings")
        problem = _requirement_problem(key, op, values)
        if problem is not None:
            raise SpreadingError(f"{SELECTOR_INVALID}: {problem}", "workloadLabelSelectors")
        out.append(Requirement(key, op, tuple(values)))
    return tuple(out) or None


def _requirement_problem(key: str, op: str, values: Sequence[str]) -> str | None:
    """Why a requirement does not compile into a label selector (Kubernetes' ``LabelSelectorAsSelector``)."""
    problem = qualified_name_problem(key)
    if problem is not None:
        return f"key: Invalid value: {json.dumps(key)}: {problem}"
    if op in ("In", "NotIn"):
        if not values:
            return "values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty"
    elif op in ("Exists", "DoesNotExist"):
        if values:
            return "values: Invalid value: values set must be empty for exists and does not exist"
    else:
        return f"{json.dumps(op)} is not a valid label selector operator"
    for v in values:
        problem = label_value_problem(v)
        if problem is not None:
            return f"values[0]: Invalid value: {json.dumps(v)}: {problem}"
    return None


def read(value: str | None) -> Spec | None:
    """The spec the scheduler uses: None for no annotation, or one Kueue's parser refuses (no spreading)."""
    if value is None:
        return None
    try:
        return parse(value)
    except SpreadingError:
        return None


# --- the webhook --------------------------------------------------------------------------------------------------


def annotation_errors(value: str, at: str) -> list[str]:
    """What Kueue's webhook finds wrong with the annotation ``value`` at path ``at`` (``field `path`: problem``)."""
    return [f"field `{path}`: {problem}" for path, problem in annotation_problems(value, at)]


def annotation_problems(value: str, at: str) -> list[tuple[str, str]]:
    """(path, problem) of what Kueue's webhooks find wrong with the annotation ``value`` at path ``at``."""
    try:
        spec = parse(value)
    except SpreadingError as e:
        path = f"{at}.{e.field}" if e.field else at
        return [(path, f"Invalid value: {json.dumps(value)}: {e}")]
    errors: list[tuple[str, str]] = []
    sel_at = f"{at}.workloadLabelSelectors"
    selectors = spec.selectors or ()
    if len(selectors) > MAX_SELECTORS:
        errors.append((sel_at, f"Too many: {len(selectors)}: must have at most {MAX_SELECTORS} items"))
    for i, req in enumerate(selectors):
        if req.operator != "In":
            errors.append((f"{sel_at}[{i}].operator",
                           f'Unsupported value: {json.dumps(req.operator)}: supported values: "In"'))
    seen: dict[str, int] = {}
    for i, rule in enumerate(spec.rules):
        rat = f"{at}.rules[{i}]"
        problem = qualified_name_problem(rule.topology_key)
        if problem is not None:
            errors.append((f"{rat}.topologyKey", f"Invalid value: {json.dumps(rule.topology_key)}: {problem}"))
        if not 0 < rule.share < 1:
            errors.append((f"{rat}.maxShareAllowingPlacement", f"Invalid value: {json.dumps(decimal_string(rule.share))}"
                           ": must be greater than 0 and less than 1"))
        if rule.mode not in MODES:
            errors.append((f"{rat}.enforcementMode", f"Unsupported value: {json.dumps(rule.mode)}: "
                           'supported values: "Required", "Preferred"'))
        if rule.topology_key in seen:
            errors.append((f"{rat}.topologyKey",
                           f'Duplicate value: "{rule.topology_key} (also at index {seen[rule.topology_key]})"'))
        else:
            seen[rule.topology_key] = i
    return errors


def agree(a: str, b: str) -> bool:
    """Two annotation values that say the same: equal, or read alike (:func:`parse`, defaults applied: an
    ``enforcementMode`` of ``Required`` given or left out, ``workloadLabelSelectors`` empty or left out;
    Kueue's "valid: group members have equivalent parsed spreading annotations")."""
    if a == b:
        return True
    try:
        return parse(a) == parse(b)
    except SpreadingError:
        return False


def workload_errors(pod_sets: Sequence[Any], old: Sequence[Any] | None = None) -> list[str]:
    """Kueue's Workload webhook under the gate: each pod set carrying the annotation asks for a required topology
    (its ``topologyRequest.required``: a ``podset-required-topology`` annotation beside it does not count,
    Kueue's "companion required-topology annotation without structured required request") and carries a valid
    value; the members of a pod-set group carry the same value, or none does. (``pod_sets``: the Workload's
    ``spec.podSets``.) On an update (``old``: the stored pod sets) only a pod set, or a group, whose annotation or
    required topology changed is held to them, so one staged while the gate was off stays writable."""
    errors: list[str] = []
    before = {ps.name: _inputs(ps) for ps in old} if old is not None else {}
    for i, ps in enumerate(pod_sets):
        value = ps.template.metadata.annotations.get(SPREADING_ANNOTATION)
        if value is None or before.get(ps.name) == _inputs(ps):
            continue
        at = _annotation_path(i)
        if not _required(ps):
            errors.append(f"field `{at}`: Forbidden: may only be set together with "
                          f"spec.podSets[{i}].topologyRequest.required")
            continue
        errors.extend(annotation_errors(value, at))
    members = _groups(pod_sets)
    old_members = _groups(old) if old is not None else {}
    for name, idxs in members.items():
        if name in old_members and _group_inputs(old, old_members[name]) == _group_inputs(pod_sets, idxs):  # type: ignore[arg-type]
            continue
        ref = next((i for i in idxs if SPREADING_ANNOTATION in pod_sets[i].template.metadata.annotations), None)
        if ref is None:
            continue
        ref_value = pod_sets[ref].template.metadata.annotations[SPREADING_ANNOTATION]
        for i in idxs:
            value = pod_sets[i].template.metadata.annotations.get(SPREADING_ANNOTATION)
            if value is not None and agree(value, ref_value):
                continue
            errors.append(f"field `{_annotation_path(i)}`: Invalid value: must specify the same "
                          f"'{SPREADING_ANNOTATION}' annotation as '{_annotation_path(ref)}' in group '{name}', "
                          "or omit the annotation from all members of the group")
    return errors


def _inputs(ps: Any) -> tuple[str | None, bool, str | None]:
    """What the webhook's per-pod-set check reads: the annotation and the required topology."""
    tr = ps.topology_request
    required = tr.required if tr is not None else None
    value = ps.template.metadata.annotations.get(SPREADING_ANNOTATION)
    return value, value is not None, required


def _groups(pod_sets: Sequence[Any]) -> dict[str, list[int]]:
    members: dict[str, list[int]] = {}
    for i, ps in enumerate(pod_sets):
        name = ps.topology_request.pod_set_group_name if ps.topology_request is not None else None
        if name is not None:
            members.setdefault(name, []).append(i)
    return members


def _group_inputs(pod_sets: Sequence[Any], idxs: Sequence[int]) -> dict[str, str | None]:
    return {pod_sets[i].name: pod_sets[i].template.metadata.annotations.get(SPREADING_ANNOTATION) for i in idxs}


def _annotation_path(i: int) -> str:
    return f"spec.podSets[{i}].template.metadata.annotations[{SPREADING_ANNOTATION}]"


def _required(ps: Any) -> bool:
    tr = ps.topology_request
    return tr is not None and tr.required is not None
