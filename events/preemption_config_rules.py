"""The bounds Kueue's v1alpha1 CRD puts on a PreemptionConfig (ConfigurablePreemptions, Kueue v0.20).

Every fault is returned as ``field `PATH`: what is wrong``, the field written as the CRD spells it, in the order the
rules and their selectors come; the caller refuses the object with the first (or all, as it reports).

The label selectors (``preemptorSelector``, ``clusterQueueSelector``, ``labelSelector``) are not checked: the CRD
leaves their operators, keys and values free strings and Kueue serves no webhook for the kind, so the apiserver
stores a selector Kueue cannot parse. Kueue finds out when it evaluates the rule, and so does kueue-es
(:func:`kueue_es.scheduler.preemption_config.evaluable`).
"""

from __future__ import annotations

from events import objects as o
from events.labels import is_dns_label

MAX_RULES = 64
RULE_NAME_MAX = 63
NUMERIC_LABEL_KEY_MAX = 316
INT32_MAX = 2**31 - 1
INT32_MIN = -(2**31)
MIN_ABOVE_MAX = "minValue must be less than or equal to maxValue"
"""Kueue's CRD message (a CEL rule on the numeric label) for bounds no label value could meet."""


def _enum(value: str | None, allowed: tuple[str, ...], at: str, errors: list[str], required: bool = True) -> None:
    if value is None or value == "":
        if required:
            errors.append(f"field `{at}` is required")
        return
    if value not in allowed:
        errors.append(f"field `{at}`: Unsupported value: {value!r}: supported values: "
                      + ", ".join(f'"{v}"' for v in allowed))


def _int32(value: int | None, at: str, errors: list[str], minimum: int = INT32_MIN) -> None:
    if value is None:
        return
    if value < minimum:
        errors.append(f"field `{at}`: should be greater than or equal to {minimum}")
    elif value > INT32_MAX:
        errors.append(f"field `{at}`: must be at most {INT32_MAX} (an int32)")


def _numeric_label(nl: o.PreemptionConfigNumericLabel, at: str, errors: list[str]) -> None:
    if not nl.key:
        errors.append(f"field `{at}.key` is required")
    elif len(nl.key) > NUMERIC_LABEL_KEY_MAX:
        errors.append(f"field `{at}.key`: may not be more than {NUMERIC_LABEL_KEY_MAX} characters")
    _int32(nl.fallback_value, f"{at}.fallbackValue", errors)
    _enum(nl.comparison, o.NUMERIC_COMPARISONS, f"{at}.comparison", errors, required=False)
    _int32(nl.min_value, f"{at}.minValue", errors, minimum=0)
    _int32(nl.max_value, f"{at}.maxValue", errors, minimum=0)
    if nl.min_value is not None and nl.max_value is not None and nl.min_value > nl.max_value:
        errors.append(f"field `{at}`: {MIN_ABOVE_MAX}")


def _candidate_selector(cs: o.PreemptionConfigCandidateSelector, at: str, errors: list[str]) -> None:
    _enum(cs.scope, o.PREEMPTION_SCOPES, f"{at}.scope", errors)
    for k, nl in enumerate(cs.numeric_labels):
        _numeric_label(nl, f"{at}.numericLabels[{k}]", errors)
    if cs.priority is not None:
        _enum(cs.priority.mode, o.PRIORITY_MODES, f"{at}.priority.mode", errors)
        _enum(cs.priority.comparison, o.NUMERIC_COMPARISONS, f"{at}.priority.comparison", errors)


def preemption_config_errors(spec: o.PreemptionConfigSpec) -> list[str]:
    """Every CRD rule ``spec`` breaks: at most 64 rules of distinct names (a DNS label each), a trigger of the
    three Kueue knows, each candidate selector's scope one of the five, comparisons and priority modes from
    their enums, numeric-label bounds not negative and a minValue at most the maxValue. Label selectors are taken as written (see the module doc)."""
    errors: list[str] = []
    if len(spec.rules) > MAX_RULES:
        errors.append(f"field `spec.rules`: must have at most {MAX_RULES} items, has {len(spec.rules)}")
    seen: set[str] = set()
    for i, rule in enumerate(spec.rules):
        at = f"spec.rules[{i}]"
        if not rule.name:
            errors.append(f"field `{at}.name` is required")
        elif len(rule.name) > RULE_NAME_MAX or not is_dns_label(rule.name):
            errors.append(f"field `{at}.name`: {rule.name!r} must be at most {RULE_NAME_MAX} lowercase "
                          "alphanumerics or '-', starting and ending with an alphanumeric")
        elif rule.name in seen:
            errors.append(f"field `{at}`: Duplicate value: {{\"name\":\"{rule.name}\"}}")
        seen.add(rule.name)
        _enum(rule.activation_policy.trigger, o.PREEMPTION_TRIGGERS, f"{at}.activationPolicy.trigger", errors)
        for j, cs in enumerate(rule.candidate_selectors):
            _candidate_selector(cs, f"{at}.candidateSelectors[{j}]", errors)
    return errors
