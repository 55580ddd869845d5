"""Field paths into a decoded YAML or JSON document, as kueue-es's errors name a field (``spec.podSets[0].count``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def leaves(node: Any, at: str = "") -> Iterator[tuple[str, Any]]:
    """Every value of ``node`` that is neither a mapping nor a list, with its path, depth first in the document's
    order: a check over a whole document names the first field it refuses."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from leaves(value, f"{at}.{key}" if at else str(key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from leaves(value, f"{at}[{i}]")
    else:
        yield at, node
