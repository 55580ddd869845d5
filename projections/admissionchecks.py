"""Admission checks as Kueue reads them: which checks apply to a workload, and whether a check is active.

Pure functions of objects already in the projection; the projection, the scheduler and the connector (which
writes an AdmissionCheck's ``Active`` condition for the checks kueue-es controls) all ask the same questions
here, so they never disagree.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import NamedTuple

from events import objects as o

PROVISIONING_CONTROLLER = "kueue.x-k8s.io/provisioning-request"
MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
ALL_AT_ONCE_DISPATCHER = "kueue.x-k8s.io/multikueue-dispatcher-all-at-once"
INCREMENTAL_DISPATCHER = "kueue.x-k8s.io/multikueue-dispatcher-incremental"
BUILT_IN_DISPATCHERS = (ALL_AT_ONCE_DISPATCHER, INCREMENTAL_DISPATCHER)
"""Kueue's own MultiKueue dispatchers; under any other ``multiKueue.dispatcherName`` an external controller writes
the nominations (``status.nominatedClusterNames``) and Kueue runs none."""


def external_dispatcher(document: dict | None) -> bool:
    """Whether the Configuration ``document`` (None: Kueue's defaults) hands nominating to an external dispatcher."""
    section = (document or {}).get("multiKueue") or {}
    return section.get("dispatcherName", ALL_AT_ONCE_DISPATCHER) not in BUILT_IN_DISPATCHERS
KUEUE_GROUP = "kueue.x-k8s.io"
CONFIG_KIND = "ProvisioningRequestConfig"
MULTIKUEUE_CONFIG_KIND = "MultiKueueConfig"


class ClusterLink(NamedTuple):
    """What the MultiKueue connector last observed of a worker cluster (``MultiKueueClusterObserved``), or, once its
    MultiKueueCluster is deleted, that it is lost (:data:`CLUSTER_DELETED`)."""

    connected: bool
    reason: str
    message: str
    since: int
    """Log time (ms) of the observation that last changed ``connected`` (or of the deletion that did): a worker lost
    counts from there."""


CLUSTER_DELETED = "MultiKueueClusterDeleted"
"""The reason of the link the fold keeps for a deleted MultiKueueCluster: lost from its deletion on (Kueue stops
and removes its client, so a MultiKueueConfig still naming it lists it among its unavailable workers), and not
observed since. No Active condition is written from it: a namesake created again gets one once the connector has
reached it or failed to, and is not taken as connected before that."""


class MultiKueueWorld(NamedTuple):
    """What a MultiKueue check's activity is read from; None in place of one means the MultiKueue gate is off
    (Kueue then runs no MultiKueue controller: the check is as its status says, like any other controller's)."""

    configs: Mapping[str, o.MultiKueueConfig]
    clusters: Mapping[str, o.MultiKueueCluster]
    links: Mapping[str, ClusterLink]


def applicable_checks(spec: o.ClusterQueueSpec, admitted_flavors: Collection[str] | None) -> list[str]:
    """The checks a workload of this ClusterQueue lists, sorted (Kueue's ``AdmissionChecksForWorkload``).

    With an admission (``admitted_flavors``): every check whose flavors (``onFlavors``, empty meaning all of the
    queue's flavors) meet the admitted ones. Without one: only the checks that cover all of the queue's flavors,
    since nothing else can be known before flavors are assigned.
    """
    strategy = spec.admission_checks_strategy
    if strategy is None or not strategy.admission_checks:
        return []
    names = []
    if admitted_flavors is not None:
        admitted = set(admitted_flavors)
        for rule in strategy.admission_checks:
            if not rule.on_flavors or admitted.intersection(rule.on_flavors):
                names.append(rule.name)
    else:
        every = {fq.name for rg in spec.resource_groups for fq in rg.flavors}
        for rule in strategy.admission_checks:
            if not rule.on_flavors or every.issubset(rule.on_flavors):
                names.append(rule.name)
    return sorted(set(names))


def config_for(ac: o.AdmissionCheck, configs: Mapping[str, o.ProvisioningRequestConfig]
               ) -> tuple[o.ProvisioningRequestConfig | None, str]:
    """The ProvisioningRequestConfig a check's ``spec.parameters`` names, or None and Kueue's error text."""
    return _config_of(ac, configs, CONFIG_KIND)


def multikueue_config_for(ac: o.AdmissionCheck, configs: Mapping[str, o.MultiKueueConfig]
                          ) -> tuple[o.MultiKueueConfig | None, str]:
    """The MultiKueueConfig a MultiKueue check's ``spec.parameters`` names, or None and Kueue's error text."""
    return _config_of(ac, configs, MULTIKUEUE_CONFIG_KIND)


def _config_of(ac: o.AdmissionCheck, configs: Mapping, kind: str):  # noqa: ANN202 - either config kind
    """Kueue's parameters-reference helper, the same for both of its check controllers."""
    ref = ac.spec.parameters
    if ref is None:
        return None, "missing parameters reference"
    if not ref.name:
        return None, "empty name: bad parameters reference"
    if ref.api_group != KUEUE_GROUP:
        return None, f'wrong group "{ref.api_group}", expecting "{KUEUE_GROUP}": bad parameters reference'
    if ref.kind != kind:
        return None, f'wrong kind "{ref.kind}", expecting "{kind}": bad parameters reference'
    config = configs.get(ref.name)
    if config is None:
        return None, not_found(kind, ref.name)
    return config, ""


def not_found(kind: str, name: str) -> str:
    """Kueue's error for a Kueue object it reads through its manager's cache and does not find: controller-runtime's
    cache reader names the kind, not the resource (``MultiKueueConfig.kueue.x-k8s.io "x" not found``, Kueue's
    MultiKueue integration test; its unit tests' fake client writes the plural the apiserver would)."""
    return f'{kind}.{KUEUE_GROUP} "{name}" not found'


def runs_controller(ac: o.AdmissionCheck | None, multikueue: MultiKueueWorld | None) -> bool:
    """Whether kueue-es runs the check's controller: the ProvisioningRequest one, and the MultiKueue one while
    ``multikueue`` is given (the gate on). Any other check's states are set on Workloads by its own controller."""
    if ac is None:
        return False
    name = ac.spec.controller_name
    return name == PROVISIONING_CONTROLLER or (multikueue is not None and name == MULTIKUEUE_CONTROLLER)


def reset_message(previous: str) -> str:
    """The message of a check state eviction set back to Pending from ``previous`` (Kueue's wording)."""
    return f"Reset to Pending after eviction. Previously: {previous}"


def shows_word(shown: o.AdmissionCheckState, known: o.AdmissionCheckState) -> bool:
    """Whether a Workload shows the log's own state of a check (``known``) as kueue-es writes it: read after that
    write (the retry count and requeue time aside)."""
    return (shown.state == known.state and shown.message == known.message
            and shown.last_transition_time == known.last_transition_time)


Unshown = tuple[tuple[str, int, int], ...]
""":attr:`WorkloadInfo.unshown_checks <projections.workloads.WorkloadInfo.unshown_checks>`."""


def already_shown(shown: Iterable[o.AdmissionCheckState], states: Mapping[str, o.AdmissionCheckState],
                  names: Iterable[str]) -> set[str]:
    """Those of ``names`` whose state in ``states`` (the log's) the Workload last read already shows (``shown``):
    their word is on the Workload with no write of it (:attr:`WorkloadInfo.shown_checks
    <projections.workloads.WorkloadInfo.shown_checks>`)."""
    by_name = {c.name: c for c in shown}
    return {n for n in names if (s := by_name.get(n)) is not None and shows_word(s, states[n])}


def unshown_with(unshown: Unshown, added: Iterable[str], offset: int, listed: Collection[str] | None = None,
                 shown: Collection[str] = ()) -> Unshown:
    """``unshown`` with the checks whose state the log set itself at ``offset`` (``added``; written nowhere yet),
    less those no longer ``listed`` (None: all still are), and less those of ``added`` the Workload last read
    already shows so (``shown``, :func:`already_shown`): nothing is written for them, so no write would ever report
    where they are written, and what a later read shows is their controllers' later word; by name."""
    fresh = set(added)
    kept = {n: (n, off, rv) for n, off, rv in unshown if n not in fresh and (listed is None or n in listed)}
    kept.update((n, (n, offset, -1)) for n in fresh if n not in shown)
    return tuple(kept[n] for n in sorted(kept))


def unshown_written(unshown: Unshown, decision: int, rv: int) -> Unshown:
    """``unshown`` once the writer wrote the Workload's status at resourceVersion ``rv`` with every decision up to
    offset ``decision`` (its ``DecisionApplied``): the states the log set by then are written there."""
    return tuple((n, off, rv) if off <= decision and written < 0 else (n, off, written)
                 for n, off, written in unshown)


def check_active(ac: o.AdmissionCheck, configs: Mapping[str, o.ProvisioningRequestConfig],
                 multikueue: MultiKueueWorld | None = None) -> tuple[bool, str, str]:
    """(active, reason, message) of an AdmissionCheck's ``Active`` condition.

    For the ProvisioningRequest controller, which kueue-es is, the condition is computed as Kueue's controller
    computes it: Active while the referenced config exists, else ``BadParametersRef`` with the error. So for the
    MultiKueue controller while ``multikueue`` is given (the gate is on): :func:`multikueue_check_active`. For any
    other controller, it is whatever that controller last wrote in the check's status (absent means inactive).
    """
    if ac.spec.controller_name == PROVISIONING_CONTROLLER:
        config, error = config_for(ac, configs)
        if config is None:
            return False, "BadParametersRef", error
        return True, "Active", "The admission check is active"
    if multikueue is not None and ac.spec.controller_name == MULTIKUEUE_CONTROLLER:
        return multikueue_check_active(ac, multikueue)
    for c in ac.status.conditions:
        if c.type == "Active":
            return c.status == "True", c.reason, c.message
    return False, "", ""


def cluster_active(name: str, world: MultiKueueWorld) -> tuple[str, str, str] | None:
    """A MultiKueueCluster's ``Active`` condition (status, reason, message) as Kueue's cluster controller writes it,
    from what the connector last observed of it; None while nothing was observed (no condition yet)."""
    link = world.links.get(name)
    if link is None or (not link.connected and link.reason == CLUSTER_DELETED):
        return None
    if link.connected:
        return "True", "Active", "Connected"
    return "False", link.reason, link.message


def multikueue_check_active(ac: o.AdmissionCheck, world: MultiKueueWorld) -> tuple[bool, str, str]:
    """Kueue's MultiKueue check controller: ``BadConfig`` when its MultiKueueConfig cannot be read; else active
    unless some of its clusters are missing or not Active — ``SomeActiveClusters`` (still active) while others are,
    ``NoUsableClusters`` (inactive) when none is."""
    config, error = multikueue_config_for(ac, world.configs)
    if config is None:
        return False, "BadConfig", f"Cannot load the AdmissionChecks parameters: {error}"
    missing = [c for c in config.spec.clusters if c not in world.clusters]
    inactive = [c for c in config.spec.clusters
                if c in world.clusters and (cluster_active(c, world) or ("",))[0] != "True"]
    if not missing and not inactive:
        return True, "Active", "The admission check is active"
    parts = []
    if missing:
        parts.append(f"Missing clusters: [{' '.join(missing)}]")
    if inactive:
        parts.append(f"Inactive clusters: [{' '.join(inactive)}]")
    usable = len(missing) + len(inactive) < len(config.spec.clusters)
    return usable, "SomeActiveClusters" if usable else "NoUsableClusters", ", ".join(parts)
