"""What an admission charges on the TAS flavor (§2.8 rule 30): only the net usage of its assignment."""

from __future__ import annotations

from kueue_es.scheduler.tas.request import Placement


def net_domains(new: Placement, held: Placement | None) -> tuple[tuple[tuple[str, ...], int], ...]:
    """Per domain, the pods ``new`` assigns beyond what ``held`` (the current admission's assignment) has."""
    if held is None:
        return new.domains
    before = dict(held.domains)
    return tuple((v, c - before.get(v, 0)) for v, c in new.domains if c > before.get(v, 0))
