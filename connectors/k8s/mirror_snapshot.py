"""The connector's part of a checkpoint: what :class:`connectors.k8s.mirror.Mirror` holds beyond the cluster state.

``kueue-es run --kube`` restarts from a checkpoint only if it can rebuild the whole mirror there: the inventory a
relist is compared with, the last observed Workload objects (their resourceVersions guard the status writes),
the decisions still owed an outcome, the Job ↔ Workload links and the Kubernetes Events ledger. Restored, the
mirror then folds the rest of the log and equals the mirror a fold of the whole log gives (the test folds both).

What is *not* kept is what the workers take as they go, the ``dirty_*`` sets, and what the Jobs alone give, the
index of the prebuilt Workloads they name (``named_by``, rebuilt from the restored state), and what the observed
Workloads give, the Workloads each Job controls (``owned_by``) and each controller uid controls (``controlled``),
rebuilt from them. A fold from the log's first event marks every key it meets; a restored mirror marks every key
it holds (:meth:`Mirror.mark_all_dirty`), so the workers look at each of them once, as they do after a full fold. Keys of objects long deleted, which a
full fold also marks, find nothing to do either way.
"""

from __future__ import annotations

import msgspec

from connectors.k8s.decision_events import EventLedger, LedgerSnapshot
from connectors.k8s.mirror import Mirror
from events import objects as o
from events import schema as ev
from events.errors import InvalidInput
from projections.cluster import ClusterState

VERSION = 1


class MirrorSnapshot(msgspec.Struct, array_like=True):
    version: int
    offset: int
    """The state's offset: the mirror goes with the cluster state of the same checkpoint."""
    inventory: list[tuple[str, list[tuple[str, str, str]]]]
    """Kind -> (key, uid, resourceVersion)."""
    workloads: list[o.Workload]
    pending: list[tuple[str, list[tuple[int, str]]]]
    request_decisions: list[tuple[int, ev.AnyEvent]]
    job_of: list[tuple[str, str]]
    workload_of: list[tuple[str, str]]
    ledger: LedgerSnapshot


_enc = msgspec.msgpack.Encoder()
_dec = msgspec.msgpack.Decoder(MirrorSnapshot)


def encode(mirror: Mirror) -> bytes:
    """The mirror beyond its state, each map in key order (the same mirror encodes to the same bytes)."""
    snap = MirrorSnapshot(
        version=VERSION, offset=mirror.offset,
        inventory=[(kind, [(key, *seen) for key, seen in sorted(keys.items())])
                   for kind, keys in sorted(mirror.inventory.items())],
        workloads=[mirror.workloads[k] for k in sorted(mirror.workloads)],
        pending=[(k, sorted(mirror.pending[k].items())) for k in sorted(mirror.pending)],
        request_decisions=sorted(mirror.request_decisions.items()),
        job_of=sorted(mirror.job_of.items()), workload_of=sorted(mirror.workload_of.items()),
        ledger=mirror.kube_events.snapshot())
    return _enc.encode(snap)


def restore(state: ClusterState, data: bytes) -> Mirror:
    """The mirror a checkpoint holds, around ``state`` (the checkpoint's cluster state); raises
    :class:`InvalidInput` for bytes that are not such a mirror, or one of another offset."""
    try:
        snap = _dec.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise InvalidInput(f"not a kueue-es connector checkpoint: {exc}") from exc
    if snap.version != VERSION:
        raise InvalidInput(f"connector checkpoint version {snap.version} is not one this version reads ({VERSION})")
    if snap.offset != state.offset:
        raise InvalidInput(f"the connector's part is of offset {snap.offset}, its cluster state of {state.offset}")
    m = Mirror(state)
    m.inventory = {kind: {key: (uid, rv) for key, uid, rv in keys} for kind, keys in snap.inventory}
    m.workloads = {w.key: w for w in snap.workloads}
    m.reindex_owned()
    m.pending = {k: dict(decisions) for k, decisions in snap.pending}
    for off, d in snap.request_decisions:
        if not isinstance(d, ev.ProvisioningRequestCreated | ev.ProvisioningRequestDeleted):
            raise InvalidInput(f"the decision at offset {off} owed an outcome is a {type(d).__name__}, "
                               "not a ProvisioningRequest decision")
        m.request_decisions[off] = d
    m.job_of, m.workload_of = dict(snap.job_of), dict(snap.workload_of)
    m.kube_events = EventLedger.restored(snap.ledger)
    m.mark_all_dirty()
    return m
