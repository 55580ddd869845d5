"""What a Workload as the apiserver stores it shows: Kueue's reconcilers act on the Workload they read, so the
connectors wait for it where the log's view may still await its status write (which may be refused)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from events import objects as o

if TYPE_CHECKING:
    from projections.cluster import ClusterState


def shows(obs: o.Workload, condition: str) -> bool:
    """Whether the stored Workload has ``condition`` True."""
    return any(c.type == condition and c.status == "True" for c in obs.status.conditions)


def eviction_unwritten(state: ClusterState, key: str, obs: o.Workload) -> bool:
    """Whether the log holds an eviction of workload ``key`` still awaiting its outcome
    (:meth:`projections.eviction_undo.KeptEvictions.awaits_outcome`) that the stored Workload ``obs`` does not
    show yet (not Evicted=True): its status write may still be refused, and the fold then takes it back. Once
    rejected and not taken back, none is kept: no write will show it, and the connectors act on the log's
    view."""
    return state.unconfirmed_evictions.awaits_outcome(key) and not shows(obs, "Evicted")
