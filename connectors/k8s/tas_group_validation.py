"""Kueue's check of TAS pod-set groups across a job's pod sets (``ValidatePodSetGroupingTopology`` in
``pkg/controller/jobframework/tas_validation.go``; #7061, backported as #7263).

Pod sets whose templates name the same ``kueue.x-k8s.io/podset-group-name`` are placed in one joint TAS run,
as a leader and its workers (:mod:`kueue_es.scheduler.tas.workload`), so Kueue's JobSet, MPIJob,
LeaderWorkerSet, RayJob, RayCluster and RayService webhooks refuse, under ``TopologyAwareScheduling``, a group
that run cannot take: one not of exactly 2 pod sets; 2 pod sets neither of which has 1 pod; 2 asking for
different topology (the same required level, or the same preferred level); and, under
``TASTopologySpreading``, 2 carrying different ``kueue.x-k8s.io/podset-topology-spreading`` annotations
(spreading counts a group as one unit). A template's group name counts only beside a required or preferred
level, as Kueue keeps it in the pod set's topology request only then (without one the per-template check
refuses it already). Groups are taken in the order their first members come; each error names a member's
annotations. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

from connectors.k8s import field_errors
from connectors.k8s.job_validation import GROUP_NAME, PREFERRED, REQUIRED, SPREADING
from projections import gates

SIZE = "can only define groups of exactly 2 pod sets, got: {} pod set(s)"
NO_LEADER = ("can only define groups where at least one pod set has only 1 replica, got: {} replica(s) "
             "and {} replica(s) in the group")
SAME_LEVEL = f"must specify '{REQUIRED}' or '{PREFERRED}' topology consistent with '{{}}' in group '{{}}'"
SAME_SPREADING = (f"must specify the same '{SPREADING}' annotation as '{{}}' in group '{{}}', or neither pod "
                  "set may specify it")


class Member(NamedTuple):
    """One pod set as the check reads it: its pods (None: not a number, when Kueue cannot build the pod sets
    and so checks no group), its template's annotations and where they sit in the object."""

    count: int | None
    annotations: Mapping[str, str]
    path: str


def group_of(annotations: Mapping[str, str]) -> str | None:
    """The pod-set group a template's annotations put its pod set in: Kueue's topology request builder keeps
    the group name only beside a required or preferred level (``pkg/controller/jobframework/tas.go``)."""
    if GROUP_NAME in annotations and (REQUIRED in annotations or PREFERRED in annotations):
        return annotations[GROUP_NAME]
    return None


def _level(annotations: Mapping[str, str]) -> tuple[str | None, str | None]:
    """(required, preferred) as the pod set's topology request holds them: a required level wins."""
    if REQUIRED in annotations:
        return annotations[REQUIRED], None
    return None, annotations.get(PREFERRED)


def _both(one: Member, two: Member, detail: str, group: str) -> list[str]:
    """The error on each member's annotations, naming the other's."""
    return [field_errors.invalid(one.path, field_errors.OMIT, detail.format(two.path, group)),
            field_errors.invalid(two.path, field_errors.OMIT, detail.format(one.path, group))]


def errors(members: Sequence[Member], gate: Callable[[str], bool]) -> list[str]:
    """What Kueue refuses in the pod-set groups of ``members`` (the job's pod sets, in their order); ``gate``:
    a feature gate's name -> on. The caller checks ``TopologyAwareScheduling``."""
    if any(m.count is None for m in members):
        return []
    by_group: dict[str, list[Member]] = {}
    for member in members:
        name = group_of(member.annotations)
        if name is not None:
            by_group.setdefault(name, []).append(member)
    out: list[str] = []
    for name, group in by_group.items():  # in first-member order
        if len(group) != 2:
            out += [field_errors.invalid(f"{m.path}[{GROUP_NAME}]", name, SIZE.format(len(group)))
                    for m in group]
            continue
        one, two = group
        if one.count != 1 and two.count != 1:
            detail = NO_LEADER.format(one.count, two.count)
            out += [field_errors.invalid(f"{m.path}[{GROUP_NAME}]", name, detail) for m in group]
        if (gate(gates.TAS_TOPOLOGY_SPREADING)
                and one.annotations.get(SPREADING, "") != two.annotations.get(SPREADING, "")):
            out += _both(one, two, SAME_SPREADING, name)
        if _level(one.annotations) != _level(two.annotations):
            out += _both(one, two, SAME_LEVEL, name)
    return out
