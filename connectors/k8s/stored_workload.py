"""What a Workload as the apiserver stores it shows: Kueue's reconcilers act on the Workload they read, so the
connectors wait for it where the log's view may still await its status write (which may be refused)."""

from __future__ import annotations

from events import objects as o


def shows(obs: o.Workload, condition: str) -> bool:
    """Whether the stored Workload has ``condition`` True."""
    return any(c.type == condition and c.status == "True" for c in obs.status.conditions)


def admitted_not_evicted(obs: o.Workload) -> bool:
    """Whether the stored Workload shows itself admitted and not evicted: an eviction the log holds is not
    written yet."""
    return shows(obs, "Admitted") and not shows(obs, "Evicted")
