"""The form of the admission gate annotation (``kueue.x-k8s.io/admission-gated-by``, feature gate
``AdmissionGatedBy``), as Kueue's webhooks hold every object they check it on (a Workload, and the jobs, sets and
Pods its integrations manage; Kueue's ``pkg/util/webhook/validation_admissiongatedby.go``): a comma-separated list of
gates, the spaces around each dropped, no gate empty or named twice, each a domain-prefixed path (a DNS-1123
subdomain, ``/``, then URL path characters: Kubernetes' rule for a Job's ``spec.managedBy``) of at most 63 bytes.
An empty or blank annotation names no gate. Pure."""

from __future__ import annotations

import re
from collections.abc import Callable

from events.labels import subdomain_problems

ANNOTATION = "kueue.x-k8s.io/admission-gated-by"
PATH = f"metadata.annotations[{ANNOTATION}]"
"""The annotation's field path in Kueue's errors."""
MAX_GATE_NAME = 63
_HTTP_PATH = re.compile(r"[A-Za-z0-9/\-._~%!$&'()*+,;=:]+")


def gate_names(value: str) -> tuple[str, ...]:
    """The gates ``value`` names, each stripped of the spaces around it (an empty string where two commas meet);
    none for an empty or blank value."""
    if not value.strip():
        return ()
    return tuple(part.strip() for part in value.split(","))


def _plain(text: str) -> str:
    return f'"{text}"'


def format_problems(value: str, quote: Callable[[str], str] = _plain) -> list[str]:
    """Everything wrong with the annotation's ``value``, in Kueue's order, each as a field error's type and detail
    (``Invalid value: "<value>": <detail>``, ``Too long: ...``; ``quote`` shows a value): per gate, an empty one,
    a repeat, then what makes it no domain-prefixed path, then its length. Empty: the value is well formed."""
    problems: list[str] = []
    seen: set[str] = set()
    for gate in gate_names(value):
        if not gate:
            problems.append(f"Invalid value: {quote(value)}: cannot contain empty gate names")
            continue
        if gate in seen:
            problems.append(f"Invalid value: {quote(value)}: duplicate gate name: {gate}")
            continue
        seen.add(gate)
        problems += _domain_prefixed_path_problems(gate, quote)
        if len(gate.encode()) > MAX_GATE_NAME:
            problems.append(f"Too long: may not be more than {MAX_GATE_NAME} bytes")
    return problems


def _domain_prefixed_path_problems(text: str, quote: Callable[[str], str]) -> list[str]:
    """Kubernetes' domain-prefixed path (``acme.io/foo``): a DNS subdomain, ``/``, then HTTP path characters (both
    parts checked when there are two)."""
    host, slash, path = text.partition("/")
    if not slash or not host or not path:
        return [f'Invalid value: {quote(text)}: must be a domain-prefixed path (such as "acme.io/foo")']
    problems = [f"Invalid value: {quote(host)}: {problem}" for problem in subdomain_problems(host)]
    if not _HTTP_PATH.fullmatch(path):
        problems.append(f"Invalid value: {quote(path)}: Invalid path (regex used for validation is "
                        f"'{_HTTP_PATH.pattern}')")
    return problems
