"""Kueue's MultiKueueManagerQuotaAutomation gate (alpha, KEP 9988): a MultiKueue manager's ClusterQueue takes as its
quota the sum of the nominal quotas of the worker ClusterQueues it dispatches to.

Pure: what the projection holds goes in (the manager's ClusterQueue, AdmissionChecks, MultiKueueConfigs and
LocalQueues; what the MultiKueue connector last observed of each worker, its link and its queues:
``WorkerQueuesObserved``), the outcome comes out. The connector writes it: the condition with the ClusterQueue's
status (:func:`projections.queue_status.cluster_queue_status`), the quotas into its ``spec.resourceGroups``, as
Kueue's alpha does; the scheduler takes them once the watch brings the ClusterQueue back, as Kueue's cache does.

A ClusterQueue is a manager's when one of its admission checks (``admissionChecksStrategy``, the first by name) is
controlled by ``kueue.x-k8s.io/multikueue``. Then the condition ``MultiKueueManagerQuotaAutomation`` says:

* False ``UnsupportedConfiguration`` when the check's MultiKueueConfig does not exist, or when the ClusterQueue
  has other than one resource group with one flavor, or when its ``coveredResources`` miss a resource some related
  worker ClusterQueue has quota for (the missing ones named, sorted);
* False ``NotRequested`` when the config's ``quotaManagement`` is not ``Automated`` (unset is ``Manual``);
* True ``QuotaAutomated`` otherwise, and the flavor's resources become its covered resources, in their order, each
  with the summed nominal quota (0 for one no worker has; borrowing and lending limits dropped, as Kueue writes
  only the nominal quota).

The related worker ClusterQueues: on each worker of the config that is connected and whose queues were listed, the
ClusterQueues that the worker's LocalQueues of the same namespace and name as the manager's LocalQueues of this
ClusterQueue point to, each counted once; every flavor of every resource group of each is summed per resource.
A worker not connected counts for nothing; while a connected one's queues are not known yet, nothing changes. Not a manager's ClusterQueue: the condition is removed. A check whose
parameters do not name a MultiKueueConfig at all (wrong kind or group) leaves everything as it was (Kueue's
reconcile errors out and retries). With the gate or MultiKueue off, no controller runs: nothing changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import msgspec

from events import objects as o
from events import schema as ev
from events.quantity import canonical_quantity, to_int
from projections import gates
from projections.admissionchecks import MULTIKUEUE_CONTROLLER, ClusterLink, multikueue_config_for

CONDITION = "MultiKueueManagerQuotaAutomation"
AUTOMATED = "Automated"
MANUAL = "Manual"
QUOTA_AUTOMATED = ("True", "QuotaAutomated", "ClusterQueue quota is automatically managed based on MultiKueue workers.")
NOT_REQUESTED = ("False", "NotRequested", "MultiKueue manager quota automation has not been requested.")
CONFIG_NOT_FOUND = ("False", "UnsupportedConfiguration", "The referenced MultiKueueConfig was not found.")
NOT_ONE_FLAVOR = ("False", "UnsupportedConfiguration",
                  "Quota automation requires that the manager-side ClusterQueue has exactly one ResourceFlavor")
MISSING_PREFIX = "manager-side coveredResources is missing resources configured on workers: "


class Outcome(NamedTuple):
    """What Kueue's MultiKueue ClusterQueue controller leaves on a ClusterQueue."""

    condition: tuple[str, str, str] | None
    """(status, reason, message) of the condition; None: the condition is removed."""
    resources: list[o.ResourceQuota] | None = None
    """The single flavor's resources, when the quota is automated; None: the spec is left alone."""


class World(NamedTuple):
    """The projection's objects this reads (:func:`world_of` takes them from a ClusterState)."""

    admission_checks: Mapping[str, o.AdmissionCheck]
    configs: Mapping[str, o.MultiKueueConfig]
    local_queues: Mapping[str, o.LocalQueue]
    links: Mapping[str, ClusterLink]
    workers: Mapping[str, ev.WorkerQueuesObserved]


def world_of(state) -> World:  # noqa: ANN001 - a projections.cluster.ClusterState (not imported: it imports us)
    return World(state.admission_checks, state.multikueue_configs, state.local_queues, state.cluster_links,
                 state.worker_queues)


def enabled(state) -> bool:  # noqa: ANN001 - a ClusterState
    """Whether Kueue runs this controller: MultiKueue and MultiKueueManagerQuotaAutomation both on."""
    return state.gate(gates.MULTIKUEUE) and state.gate(gates.MULTIKUEUE_MANAGER_QUOTA_AUTOMATION)


def multikueue_check(cq: o.ClusterQueue, checks: Mapping[str, o.AdmissionCheck]) -> o.AdmissionCheck | None:
    """The MultiKueue check of ``cq`` (the first by name, of those it lists that exist), or None."""
    strategy = cq.spec.admission_checks_strategy
    if strategy is None:
        return None
    for name in sorted({rule.name for rule in strategy.admission_checks}):
        ac = checks.get(name)
        if ac is not None and ac.spec.controller_name == MULTIKUEUE_CONTROLLER:
            return ac
    return None


def outcome(cq: o.ClusterQueue, world: World) -> Outcome | None:
    """What the controller leaves on ``cq`` (see the module docstring); None: nothing changes."""
    ac = multikueue_check(cq, world.admission_checks)
    if ac is None:
        return Outcome(None)
    config, error = multikueue_config_for(ac, world.configs)
    if config is None:
        return Outcome(CONFIG_NOT_FOUND) if error.endswith("not found") else None
    if (config.spec.quota_management or MANUAL) != AUTOMATED:
        return Outcome(NOT_REQUESTED)
    groups = cq.spec.resource_groups
    if len(groups) != 1 or len(groups[0].flavors) != 1:
        return Outcome(NOT_ONE_FLAVOR)
    totals = worker_totals(cq.metadata.name, config, world)
    if totals is None:
        return None
    covered = groups[0].covered_resources
    missing = sorted(set(totals) - set(covered))
    if missing:
        return Outcome(("False", "UnsupportedConfiguration", f"{MISSING_PREFIX}[{' '.join(missing)}]"))
    return Outcome(QUOTA_AUTOMATED, [o.ResourceQuota(name=r, nominal_quota=canonical_quantity(r, totals.get(r, 0)))
                                     for r in covered])


def worker_totals(cq_name: str, config: o.MultiKueueConfig, world: World) -> dict[str, int] | None:
    """Resource -> the summed nominal quota of the worker ClusterQueues related to manager ClusterQueue
    ``cq_name`` on the connected workers of ``config`` (canonical integer units: :func:`events.quantity.to_int`);
    None while a connected worker's queues were not listed yet (Kueue lists them as it reconciles, and a list that
    fails changes nothing)."""
    lq_keys = {key for key, lq in world.local_queues.items() if lq.spec.cluster_queue == cq_name}
    totals: dict[str, int] = {}
    for worker in config.spec.clusters:
        link, seen = world.links.get(worker), world.workers.get(worker)
        if link is None or not link.connected:
            continue
        if seen is None:
            return None
        related = sorted({cq for key, cq in seen.local_queues.items() if key in lq_keys})
        for name in related:
            for rg in seen.cluster_queues.get(name, ()):
                for fq in rg.flavors:
                    for rq in fq.resources:
                        totals[rq.name] = totals.get(rq.name, 0) + to_int(rq.name, rq.nominal_quota)
    return totals


def automated_spec(cq: o.ClusterQueue, result: Outcome | None) -> o.ClusterQueueSpec | None:
    """``cq``'s spec with the automated quotas of ``result``, or None when it already has them (or has none to
    take)."""
    if result is None or result.resources is None:
        return None
    group = cq.spec.resource_groups[0]
    flavor = group.flavors[0]
    if _same(flavor.resources, result.resources):
        return None
    flavor = msgspec.structs.replace(flavor, resources=result.resources)
    group = msgspec.structs.replace(group, flavors=[flavor])
    return msgspec.structs.replace(cq.spec, resource_groups=[group])


def _same(have: list[o.ResourceQuota], want: list[o.ResourceQuota]) -> bool:
    """Kueue compares semantically: equal quantities in other spellings, and no limits, are the same."""
    return len(have) == len(want) and all(
        h.name == w.name and h.borrowing_limit is None and h.lending_limit is None
        and to_int(h.name, h.nominal_quota) == to_int(w.name, w.nominal_quota) for h, w in zip(have, want, strict=True))
