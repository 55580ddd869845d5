"""Kubernetes' syntax for label keys, label values and annotation keys (qualified names) and for label selectors,
as the apiserver checks them and as Kueue's webhooks check its objects (a pod set template's metadata under
``WorkloadValidationForPodSetMetadata``, a flavor's node labels, a ClusterQueue's namespace selector, ...). Each
check returns what is wrong (the ``*_problems`` and ``*_errors`` ones every fault, in Kubernetes' words), or None."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from events.field_errors import go_quote, too_long

NAME_MAX = 63
PREFIX_MAX = 253
VALUE_MAX = 63
ANNOTATIONS_MAX_BYTES = 256 * 1024
"""What all of an object's annotations (keys and values) may add up to."""

NAME_FMT = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
"""A qualified name's name part, and a label value."""
DNS_LABEL_FMT = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
SUBDOMAIN_FMT = rf"{DNS_LABEL_FMT}(\.{DNS_LABEL_FMT})*"
NAME, DNS_LABEL, SUBDOMAIN = re.compile(NAME_FMT), re.compile(DNS_LABEL_FMT), re.compile(SUBDOMAIN_FMT)
_NAME_RULE = "alphanumeric characters, '-', '_' or '.', starting and ending with an alphanumeric character"


def is_dns_label(value: str) -> bool:
    """A DNS-1123 label: at most 63 lowercase alphanumeric characters or '-', alphanumeric at both ends."""
    return len(value) <= NAME_MAX and DNS_LABEL.fullmatch(value) is not None


def is_dns_subdomain(value: str) -> bool:
    """A DNS-1123 subdomain: at most 253 characters, DNS labels joined by '.'."""
    return len(value) <= PREFIX_MAX and SUBDOMAIN.fullmatch(value) is not None


def object_name_problem(value: str, *, label: bool = False) -> str | None:
    """An object's ``metadata.name`` as the apiserver takes it: a DNS subdomain, or with ``label`` (a Namespace's
    name, and the namespace a namespaced object gives) a DNS label."""
    limit, valid = (NAME_MAX, is_dns_label) if label else (PREFIX_MAX, is_dns_subdomain)
    if len(value) > limit:
        return f"must be no more than {limit} characters"
    if not valid(value):
        what, chars = ("label", " or '-'") if label else ("subdomain", ", '-' or '.'")
        return (f'Invalid value: "{value}": a lowercase RFC 1123 {what} must consist of lower case alphanumeric '
                f"characters{chars}, and must start and end with an alphanumeric character")
    return None


def regex_error(message: str, fmt: str, *examples: str) -> str:
    """Kubernetes' wording of a value its pattern ``fmt`` refuses (``RegexError``): ``message``, the examples and the
    pattern."""
    shown = "".join(f"{' or ' if i else ''}'{e}', " for i, e in enumerate(examples))
    return f"{message} (e.g. {shown}regex used for validation is '{fmt}')"


def subdomain_problems(value: str, unit: str = "characters") -> list[str]:
    """Why ``value`` is not a DNS-1123 subdomain, in Kubernetes' words (``IsDNS1123Subdomain``; empty: it is one).
    ``unit``: how the length limit is worded (Kubernetes says "bytes" where it checks a label key's prefix)."""
    problems = []
    if len(value.encode()) > PREFIX_MAX:
        problems.append(f"must be no more than {PREFIX_MAX} {unit}")
    if not SUBDOMAIN.fullmatch(value):
        problems.append(regex_error(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
            "start and end with an alphanumeric character", SUBDOMAIN_FMT, "example.com"))
    return problems


def qualified_name_problem(key: str) -> str | None:
    """A label or annotation key: a name of at most 63 characters, optionally after a DNS subdomain and '/'."""
    parts = key.split("/")
    if len(parts) > 2:
        return "a qualified name is a name with an optional DNS subdomain prefix and '/' (e.g. 'example.com/name')"
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            return "the prefix part must not be empty"
        if len(prefix) > PREFIX_MAX:
            return f"the prefix part must be at most {PREFIX_MAX} characters"
        if not SUBDOMAIN.fullmatch(prefix):
            return ("the prefix part must be a DNS subdomain: lowercase alphanumeric characters, '-' or '.', "
                    "starting and ending with an alphanumeric character")
    if not name:
        return "the name part must not be empty"
    if len(name) > NAME_MAX:
        return f"the name part must be at most {NAME_MAX} characters"
    if not NAME.fullmatch(name):
        return f"the name part must consist of {_NAME_RULE}"
    return None


def label_value_problem(value: str) -> str | None:
    """A label value: empty, or at most 63 characters of the name part's alphabet."""
    if len(value) > VALUE_MAX:
        return f"a label value must be at most {VALUE_MAX} characters"
    if value and not NAME.fullmatch(value):
        return f"a label value must be empty or consist of {_NAME_RULE}"
    return None


NAME_EXAMPLES = ("MyName", "my.name", "123-abc")
_KEY_NAME_MSG = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
                 "character")
_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
              "start and end with an alphanumeric character")
DNS_LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
                 "and end with an alphanumeric character")


def max_len_error(limit: int) -> str:
    """Kubernetes' words for a value longer than ``limit`` (``MaxLenError``)."""
    return f"must be no more than {limit} characters"


def label_value_problems(value: str) -> list[str]:
    """Why ``value`` is no label value, each in Kubernetes' words (``IsLabelValue``: the length, then the pattern
    with its examples); empty when it is one. Lengths in bytes, as Go counts them."""
    found = [max_len_error(VALUE_MAX)] if len(value.encode()) > VALUE_MAX else []
    if value and not NAME.fullmatch(value):
        found.append(regex_error(_VALUE_MSG, f"({NAME_FMT})?", "MyValue", "my_value", "12345"))
    return found


def label_key_problems(key: str) -> list[str]:
    """Why ``key`` is no label key (a qualified name), each in Kubernetes' words (``IsLabelKey``: the prefix's faults,
    then the name part's); empty when it is one."""
    prefix, slash, name = key.partition("/")
    if not slash:
        prefix, name = "", key
    elif "/" in name:
        return ["a valid label key " + regex_error(_KEY_NAME_MSG, NAME_FMT, *NAME_EXAMPLES)
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    found = []
    if slash and not prefix:
        found.append("prefix part must be non-empty")
    elif slash:
        found += [f"prefix part {m}" for m in subdomain_problems(prefix)]
    if not name:
        found.append("name part must be non-empty")
    elif len(name.encode()) > NAME_MAX:
        found.append(f"name part {max_len_error(NAME_MAX)}")
    if not NAME.fullmatch(name):
        found.append("name part " + regex_error(_KEY_NAME_MSG, NAME_FMT, *NAME_EXAMPLES))
    return found


def dns_label_problems(value: str) -> list[str]:
    """Why ``value`` is no DNS-1123 label, each in Kubernetes' words (``IsDNS1123Label``); empty when it is one."""
    found = [max_len_error(NAME_MAX)] if len(value.encode()) > NAME_MAX else []
    if not DNS_LABEL.fullmatch(value):
        found.append("must not contain dots" if SUBDOMAIN.fullmatch(value)
                     else regex_error(DNS_LABEL_MSG, DNS_LABEL_FMT, "my-name", "123-abc"))
    return found


def labels_problem(labels: Mapping[str, str]) -> str | None:
    """The first bad key or value of a label map, in key order."""
    for key in sorted(labels):
        problem = qualified_name_problem(key)
        if problem is not None:
            return f"key {key!r}: {problem}"
        problem = label_value_problem(labels[key])
        if problem is not None:
            return f"value {labels[key]!r} of key {key!r}: {problem}"
    return None


def label_map_errors(labels: Mapping[str, str]) -> list[str]:
    """Every fault of a label map as apimachinery's ``ValidateLabels`` reports them, as field error bodies (all at
    the map's own path): each key's faults, then its value's, ``Invalid value: "<key or value>": <why>``. Keys
    sorted, where Go ranges over the map in no set order."""
    found: list[str] = []
    for key in sorted(labels):
        found += [f"Invalid value: {go_quote(key)}: {m}" for m in label_key_problems(key)]
        found += [f"Invalid value: {go_quote(labels[key])}: {m}" for m in label_value_problems(labels[key])]
    return found


def annotation_map_errors(annotations: Mapping[str, str]) -> list[str]:
    """Every fault of an annotation map as apimachinery's ``ValidateAnnotations`` reports them, as field error
    bodies: each key (checked lowercased, shown as written) that is no qualified name, keys sorted, then a total
    size above 256 KiB."""
    found = [f"Invalid value: {go_quote(key)}: {m}" for key in sorted(annotations)
             for m in label_key_problems(key.lower())]
    if sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items()) > ANNOTATIONS_MAX_BYTES:
        found.append(too_long(ANNOTATIONS_MAX_BYTES))
    return found


SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def selector_field_errors(match_labels: Mapping[str, str], expressions: Sequence[tuple[str, str, Sequence[str]]],
                          at: str, *, syntax: bool = True) -> list[tuple[str, str]]:
    """Every fault of a label selector as apimachinery's ValidateLabelSelector (values checked) reports them: (field
    path, field error body), in its order: ``matchLabels`` (each key's faults, then its value's, all at
    ``<at>.matchLabels``; keys sorted, where Go ranges over its map in no set order), then each expression's
    operator and values rule, its key's faults, its values' faults. Without ``syntax``, the operator and values
    rules alone (no key's or value's spelling)."""
    found: list[tuple[str, str]] = []
    if syntax:
        found += [(f"{at}.matchLabels", body) for body in label_map_errors(match_labels)]
    for i, (key, operator, values) in enumerate(expressions):
        where = f"{at}.matchExpressions[{i}]"
        if operator in ("In", "NotIn"):
            if not values:
                found.append((f"{where}.values", "Required value: must be specified when `operator` is 'In' or "
                                                 "'NotIn'"))
        elif operator in ("Exists", "DoesNotExist"):
            if values:
                found.append((f"{where}.values", "Forbidden: may not be specified when `operator` is 'Exists' or "
                                                 "'DoesNotExist'"))
        else:
            found.append((f"{where}.operator", f"Invalid value: {go_quote(operator)}: not a valid selector operator"))
        if syntax:
            found += [(f"{where}.key", f"Invalid value: {go_quote(key)}: {m}") for m in label_key_problems(key)]
            for j, value in enumerate(values):
                found += [(f"{where}.values[{j}]", f"Invalid value: {go_quote(value)}: {m}")
                          for m in label_value_problems(value)]
    return found


def selector_problem(match_labels: Mapping[str, str], expressions: Sequence[tuple[str, str, Sequence[str]]]
                     ) -> tuple[str, str] | None:
    """The first fault of a label selector (its ``matchLabels``, and its ``matchExpressions`` as (key, operator,
    values)) as the apiserver's rules find it: (the field under the selector, what is wrong), or None."""
    problem = labels_problem(match_labels)
    if problem is not None:
        return "matchLabels", problem
    for i, (key, operator, values) in enumerate(expressions):
        at = f"matchExpressions[{i}]"
        if operator not in SELECTOR_OPERATORS:
            return f"{at}.operator", f"{operator!r} is not a valid selector operator"
        if operator in ("In", "NotIn") and not values:
            return f"{at}.values", "must be specified when `operator` is 'In' or 'NotIn'"
        if operator in ("Exists", "DoesNotExist") and values:
            return f"{at}.values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
        problem = qualified_name_problem(key)
        if problem is not None:
            return f"{at}.key", problem
        for j, value in enumerate(values):
            problem = label_value_problem(value)
            if problem is not None:
                return f"{at}.values[{j}]", problem
    return None
