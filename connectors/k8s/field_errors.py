"""Kubernetes field errors as the apiserver's and Kueue's webhooks word them (``field.Invalid``, ``field.Forbidden``,
``field.Required``, ``field.Duplicate``): ``<path>: <type>: <value>: <detail>``, a string value Go-quoted. The job
webhooks (:mod:`connectors.k8s.job_validation` re-exports :func:`invalid`, :func:`forbidden` and :func:`shown`) and
the checks they share build their messages here. Pure."""

from __future__ import annotations

from typing import Any

from events.field_errors import go_quote  # also the webhooks' quoting, through this module

OMIT = object()
"""As ``value`` of :func:`invalid`: the error shows no value (``Invalid value: <detail>``)."""


def invalid(path: str, value: Any, detail: str) -> str:
    """A ``field.Invalid`` error."""
    shown_value = "Invalid value" if value is OMIT else f"Invalid value: {shown(value)}"
    return f"{path}: {shown_value}: {detail}"


def forbidden(path: str, detail: str) -> str:
    """A ``field.Forbidden`` error."""
    return f"{path}: Forbidden: {detail}"


def required(path: str, detail: str) -> str:
    """A ``field.Required`` error."""
    return f"{path}: Required value: {detail}"


def duplicate(path: str, value: str) -> str:
    """A ``field.Duplicate`` error."""
    return f"{path}: Duplicate value: {shown(value)}"


def shown(value: Any) -> str:
    """A field error's value: a string Go-quoted, a number as is, nothing as ``null``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return go_quote(value)
    return str(value)

