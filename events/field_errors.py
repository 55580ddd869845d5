"""Kubernetes field errors in the words Kueue prints them (``k8s.io/apimachinery``'s ``field.Error``), for refusals
that should read as Kueue's own: the body after the field's path, which kueue-es puts after ``field `<path>`: ``."""

from __future__ import annotations

from collections.abc import Sequence

_NAMED = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v",
          '"': '\\"', "\\": "\\\\"}


def go_quote(text: str) -> str:
    """``text`` as Go's ``%q`` writes it: printable characters as they are, the rest escaped."""
    out = []
    for ch in text:
        if ch in _NAMED:
            out.append(_NAMED[ch])
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) <= 0xFFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    return '"' + "".join(out) + '"'


def go_string_slice(type_name: str, values: Sequence[str]) -> str:
    """A slice of a named string type as Go's ``%#v`` writes it (``[]v1beta2.PreemptionStrategy{"A", "B"}``): how
    a field error shows a list it refuses."""
    return f"[]{type_name}{{{', '.join(go_quote(v) for v in values)}}}"


def not_supported(shown: str, supported: Sequence[str]) -> str:
    """``field.NotSupported``'s body: ``shown`` is the refused value as Go shows it (:func:`go_quote` for a
    string, :func:`go_string_slice` for a list); each supported value quoted, in the order Kueue lists them."""
    return f"Unsupported value: {shown}: supported values: {', '.join(go_quote(s) for s in supported)}"
