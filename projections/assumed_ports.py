"""The host ports Kueue's scheduler library sees taken (SchedulerLibraryIntegration): bound pods and anticipated ones.

Kueue builds the library's cluster each cycle from the pods it tracks and, for every workload holding quota, the
pods it anticipates from its topology assignment: one virtual pod per assigned pod, of the pod set's template, on
the node its domain names — for the pod sets whose assignment ends at the hostname level. A workload with such
virtual pods is represented by them alone (its tracked pods are dropped, so a pod still unbound, not yet created
or bound elsewhere counts on the assigned node); any other workload, and a pod owned by none, by its bound pods.
So a workload admitted, or holding quota while its admission checks run, keeps its ports taken on its nodes
before its pods exist or are bound. Virtual pods belong to their workload: a preemption simulation releases them
with it, and they hold nothing when every workload is assumed gone (:func:`projections.host_ports.held_on`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from events import tas_assignment
from events.errors import InvalidInput
from events.object_rules import HOSTNAME
from projections.host_ports import Holder, HostPort, HostPorts
from projections.workloads import WorkloadInfo


def anticipated(wl: WorkloadInfo) -> list[tuple[str, tuple[HostPort, ...]]] | None:
    """(node, host ports) of each virtual pod Kueue makes for ``wl``'s hostname-level topology assignments (only
    those of pods holding a port), or None when it makes none (no such assignment): then its bound pods count."""
    adm = wl.admission
    if adm is None:
        return None
    out: list[tuple[str, tuple[HostPort, ...]]] | None = None
    ports_of = {ps.name: ps.host_ports for ps in wl.pod_sets}
    for psa in adm.pod_set_assignments:
        ta = psa.topology_assignment
        if ta is None or not ta.levels or ta.levels[-1] != HOSTNAME or psa.name not in ports_of:
            continue
        try:
            domains = tas_assignment.decode(ta)
        except InvalidInput:
            continue  # a malformed assignment in the log: no pods are anticipated from it
        if out is None:
            out = []
        ports = ports_of[psa.name]
        if ports:
            out.extend((d.values[-1], ports) for d in domains if d.count > 0 and d.values)
    return out


def holders_by_node(pods: HostPorts, workloads: Mapping[str, WorkloadInfo],
                    holding: Iterable[str]) -> dict[str, tuple[Holder, ...]]:
    """Node -> the holders of host ports on it: the virtual pods of the workloads ``holding`` quota (keys, with a
    TAS usage charged) that have some, and the bound pods of every other owner, in a stable order."""
    virtual: dict[str, list[tuple[str, tuple[HostPort, ...]]]] = {}
    for key in sorted(holding):
        wl = workloads.get(key)
        found = anticipated(wl) if wl is not None else None
        if found is not None:
            virtual[key] = found
    out: dict[str, list[Holder]] = {}
    for key in sorted(pods.pods):
        node, owner, ports = pods.pods[key]
        if owner not in virtual:
            out.setdefault(node, []).append((owner, ports))
    for key, placed in virtual.items():
        for node, ports in placed:
            out.setdefault(node, []).append((key, ports))
    return {n: tuple(h) for n, h in sorted(out.items())}
