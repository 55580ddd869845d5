"""Admission checks as Kueue reads them: which checks apply to a workload, and whether a check is active.

Pure functions of objects already in the projection; the projection, the scheduler and the connector (which
writes an AdmissionCheck's ``Active`` condition for the checks kueue-es controls) all ask the same questions
here, so they never disagree.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from events import objects as o

PROVISIONING_CONTROLLER = "kueue.x-k8s.io/provisioning-request"
KUEUE_GROUP = "kueue.x-k8s.io"
CONFIG_KIND = "ProvisioningRequestConfig"


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
    ref = ac.spec.parameters
    if ref is None:
        return None, "missing parameters reference"
    if not ref.name:
        return None, "empty name: bad parameters reference"
    if ref.api_group != KUEUE_GROUP:
        return None, f'wrong group "{ref.api_group}", expecting "{KUEUE_GROUP}": bad parameters reference'
    if ref.kind != CONFIG_KIND:
        return None, f'wrong kind "{ref.kind}", expecting "{CONFIG_KIND}": bad parameters reference'
    config = configs.get(ref.name)
    if config is None:
        return None, f'provisioningrequestconfigs.kueue.x-k8s.io "{ref.name}" not found'
    return config, ""


def check_active(ac: o.AdmissionCheck, configs: Mapping[str, o.ProvisioningRequestConfig]) -> tuple[bool, str, str]:
    """(active, reason, message) of an AdmissionCheck's ``Active`` condition.

    For the ProvisioningRequest controller, which kueue-es is, the condition is computed as Kueue's controller
    computes it: Active while the referenced config exists, else ``BadParametersRef`` with the error. For any
    other controller, it is whatever that controller last wrote in the check's status (absent means inactive).
    """
    if ac.spec.controller_name == PROVISIONING_CONTROLLER:
        config, error = config_for(ac, configs)
        if config is None:
            return False, "BadParametersRef", error
        return True, "Active", "The admission check is active"
    for c in ac.status.conditions:
        if c.type == "Active":
            return c.status == "True", c.reason, c.message
    return False, "", ""
