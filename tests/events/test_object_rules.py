"""What Kueue refuses in its own kinds whatever its settings (``events.object_rules``, run by
``events.manifests.decode_object``): its webhooks' ungated checks and its CRDs' CEL and schema rules. Each refusal
names the object and the field, with Kueue's message where it has one; what Kueue takes is taken."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from events.errors import InvalidInput
from events.field_errors import CEL_NOT_CHECKED
from events.manifests import decode_object

V1B2 = "kueue.x-k8s.io/v1beta2"
TIME = "2024-01-01T00:00:00Z"


def _check(doc: dict[str, Any]) -> None:
    meta = doc["metadata"]
    decode_object(doc, f"{doc['kind']} {meta.get('namespace', '') and meta['namespace'] + '/'}{meta['name']}")


def _refusal(doc: dict[str, Any]) -> str:
    with pytest.raises(InvalidInput) as refused:
        _check(doc)
    return str(refused.value)


def workload(reserved: bool = False, **spec: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"apiVersion": V1B2, "kind": "Workload", "metadata": {"name": "w", "namespace": "team"},
                           "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 2, "template": {"spec": {
                               "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}], **spec},
                           "status": {}}
    if reserved:
        doc["status"] = {
            "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                            "lastTransitionTime": TIME}],
            "admission": {"clusterQueue": "cq", "podSetAssignments": [
                {"name": "main", "flavors": {"cpu": "a"}, "resourceUsage": {"cpu": "2"}, "count": 2}]}}
    return doc


def flavor(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": V1B2, "kind": "ResourceFlavor", "metadata": {"name": "rf"}, "spec": spec}


def cluster_queue(cohort: str = "", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": V1B2, "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": {
        "cohortName": cohort, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
            {"name": "a", "resources": [{"name": "cpu", "nominalQuota": 4}]}]}], **spec}}


def _quota(doc: dict[str, Any], **limits: Any) -> dict[str, Any]:
    doc["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0].update(limits)
    return doc


# --- Workload ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("where", "part"), [
    ("containers", "requests"), ("containers", "limits"), ("initContainers", "requests"), ("initContainers", "limits"),
])
def test_no_container_may_name_the_pods_resource(where: str, part: str) -> None:
    doc = workload()
    pod = doc["spec"]["podSets"][0]["template"]["spec"]
    pod.setdefault(where, [{"name": "c"}])[0].setdefault("resources", {}).setdefault(part, {})["pods"] = "1"
    assert _refusal(doc) == (f"Workload team/w: field `spec.podSets[0].template.spec.{where}[0].resources.{part}[pods]`"
                             ': Invalid value: "pods": the key is reserved for internal kueue use')


def test_nor_the_pod_s_own_resources() -> None:
    doc = workload()
    doc["spec"]["podSets"][0]["template"]["spec"]["resources"] = {"limits": {"pods": "1"}}
    assert ('`spec.podSets[0].template.spec.resources.limits[pods]`: Invalid value: "pods": the key is reserved'
            in _refusal(doc))


def test_a_priority_class_ref_comes_with_a_priority_and_names_the_kind_of_its_group() -> None:
    ref = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"}
    _check(workload(priorityClassRef=ref, priority=1000))
    assert _refusal(workload(priorityClassRef=ref)) == (
        "Workload team/w: field `spec.priority`: priority should not be nil when priorityClassRef is set")
    assert _refusal(workload(priorityClassRef={**ref, "kind": "PriorityClass"}, priority=1)) == (
        "Workload team/w: field `spec.priorityClassRef.kind`: only the WorkloadPriorityClass kind is allowed for the "
        "kueue.x-k8s.io group")
    assert _refusal(workload(priorityClassRef={**ref, "group": "example.com"}, priority=1)) == (
        'Workload team/w: field `spec.priorityClassRef.group`: Unsupported value: "example.com": supported values: '
        '"kueue.x-k8s.io", "scheduling.k8s.io"')


def test_quota_reserved_needs_an_admission_of_every_pod_set() -> None:
    _check(workload(reserved=True))
    bare = workload(reserved=True)
    del bare["status"]["admission"]
    assert _refusal(bare) == (
        "Workload team/w: field `status.admission`: Required value: must be set while the QuotaReserved "
        "condition is True")
    released = copy.deepcopy(bare)
    released["status"]["conditions"][0]["status"] = "False"
    _check(released)
    short = workload(reserved=True)
    short["spec"]["podSets"].append({**short["spec"]["podSets"][0], "name": "second"})
    assert _refusal(short) == ("Workload team/w: field `status.admission.podSetAssignments`: podSetAssignments must "
                               "have the same number of podSets as the spec")
    stranger = workload(reserved=True)
    stranger["status"]["admission"]["podSetAssignments"][0]["name"] = "other"
    assert _refusal(stranger) == (
        'Workload team/w: field `status.admission.podSetAssignments[0].name`: Not found: "other"')


def test_an_assignment_without_a_name_is_the_main_pod_set_s() -> None:
    """Kueue's CRD defaults a pod set assignment's name to ``main`` (``PodSetAssignment.Name``,
    ``+kubebuilder:default=main``), as a pod set's: one left out assigns the pod set ``main``."""
    doc = workload(reserved=True)
    doc["spec"]["podSets"][0].pop("name")
    doc["status"]["admission"]["podSetAssignments"][0].pop("name")
    wl = decode_object(doc, "Workload team/w")
    assert wl.status.admission.pod_set_assignments[0].name == "main"
    assert "name" not in doc["status"]["admission"]["podSetAssignments"][0], "the caller's document is kept"
    named = workload(reserved=True)  # a pod set named otherwise is not the one assigned
    named["spec"]["podSets"][0]["name"] = "workers"
    named["status"]["admission"]["podSetAssignments"][0].pop("name")
    assert _refusal(named) == (
        'Workload team/w: field `status.admission.podSetAssignments[0].name`: Not found: "main"')


def test_an_assignment_charges_whole_units_per_admitted_pod() -> None:
    odd = workload(reserved=True)
    odd["status"]["admission"]["podSetAssignments"][0]["resourceUsage"] = {"cpu": "1001m"}
    assert _refusal(odd) == (
        'Workload team/w: field `status.admission.podSetAssignments[0].resourceUsage[cpu]`: Invalid value: "1001m": '
        "is not a multiple of 2")
    odd["status"]["admission"]["podSetAssignments"][0]["resourceUsage"] = {"cpu": "1002m", "memory": "2Gi"}
    _check(odd)


def test_pod_set_updates_name_pod_sets_and_are_well_formed() -> None:
    def updated(**update: Any) -> dict[str, Any]:
        doc = workload()
        doc["status"]["admissionChecks"] = [{"name": "ac", "state": "Ready", "lastTransitionTime": TIME,
                                             "podSetUpdates": [{"name": "main", **update}]}]
        return doc

    _check(updated(nodeSelector={"pool": "a"}, tolerations=[{"key": "spot", "operator": "Exists"}]))
    assert _refusal(updated(name="other")) == (
        'Workload team/w: field `status.admissionChecks[0].podSetUpdates[0].name`: Unsupported value: "other": '
        'supported values: "main"')
    assert '`status.admissionChecks[0].podSetUpdates[0].nodeSelector`: Invalid value: "a b": a valid label must' in (
        _refusal(updated(nodeSelector={"pool": "a b"})))
    assert '`status.admissionChecks[0].podSetUpdates[0].tolerations[0].key`: Invalid value: "-bad": name part' in (
        _refusal(updated(tolerations=[{"key": "-bad", "operator": "Exists"}])))


# --- ResourceFlavor ---------------------------------------------------------------------------------------------


def test_a_flavor_s_labels_taints_and_tolerations_are_well_formed() -> None:
    _check(flavor(nodeLabels={"pool": "a"}, nodeTaints=[{"key": "spot", "value": "true", "effect": "NoSchedule"}],
                  tolerations=[{"key": "spot", "operator": "Exists", "effect": "NoSchedule"},
                               {"key": "", "operator": "Equal", "value": "x"}]))  # an empty key: taken
    assert _refusal(flavor(nodeLabels={"pool": "a b"})).startswith(
        'ResourceFlavor rf: field `spec.nodeLabels`: Invalid value: "a b": a valid label must be an empty string')
    assert '`spec.nodeTaints[0].key`: Invalid value: "a/b/c": a valid label key' in _refusal(
        flavor(nodeTaints=[{"key": "a/b/c", "effect": "NoSchedule"}]))
    assert '`spec.nodeTaints[0].value`: Invalid value: "a b": a valid label must' in _refusal(
        flavor(nodeTaints=[{"key": "spot", "value": "a b", "effect": "NoSchedule"}]))
    assert _refusal(flavor(nodeTaints=[{"key": "spot", "effect": "Sometimes"}])) == (  # the list's CEL rule
        'ResourceFlavor rf: field `spec.nodeTaints`: Invalid value: "array": supported taint effect values: '
        "'NoSchedule', 'PreferNoSchedule', 'NoExecute'")
    twice = [{"key": "spot", "value": "a", "effect": "NoSchedule"}, {"key": "spot", "value": "b", "effect": "NoSchedule"}]
    assert _refusal(flavor(nodeTaints=twice)) == (
        "ResourceFlavor rf: field `spec.nodeTaints[1]`: taints must be unique by key and effect pair")
    _check(flavor(nodeTaints=[twice[0], {**twice[1], "effect": "NoExecute"}]))


@pytest.mark.parametrize(("toleration", "message"), [
    ({"key": "a", "operator": "Sometimes"}, '`spec.tolerations`: Invalid value: "array": supported '
                                            "toleration values: 'Equal'(default), 'Exists'"),
    ({"key": "a", "operator": "Exists", "value": "x"}, '`spec.tolerations`: Invalid value: "array": a value '
                                                       "must be empty when 'operator' is 'Exists'"),
    ({"key": "a", "effect": "Never"}, '`spec.tolerations`: Invalid value: "array": supported taint effect '
                                      "values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'"),
    ({"key": "a", "effect": "NoSchedule", "tolerationSeconds": 5},
     '`spec.tolerations`: Invalid value: "array": effect must be \'NoExecute\' when '
     '\'tolerationSeconds\' is set'),
    ({"key": "a b"}, '`spec.tolerations[0].key`: Invalid value: "a b": name part must consist of'),
])
def test_a_flavor_s_tolerations_follow_kueue_s_crd_rules(toleration: dict, message: str) -> None:
    assert message in _refusal(flavor(tolerations=[toleration]))


def test_a_tas_flavor_needs_node_labels_and_a_flavor_at_most_eight_of_each() -> None:
    _check(flavor(topologyName="default", nodeLabels={"pool": "a"}))
    assert _refusal(flavor(topologyName="default")) == (  # a rule on spec
        'ResourceFlavor rf: field `spec`: Invalid value: "object": at least one nodeLabel is required when '
        "topology is set")
    assert "field `spec.nodeLabels` must have at most 8 items, has 9" in _refusal(
        flavor(nodeLabels={f"l{i}": "v" for i in range(9)}))


def test_a_flavor_s_resource_weights_are_at_most_sixteen_quantities_above_zero() -> None:
    """KEP-8902: ``resourceWeights`` maps a resource to a multiplier above 0 (``MaxProperties=16``, a
    ``resource.Quantity`` each); the decoded flavor keeps them."""
    doc = flavor(resourceWeights={"nvidia.com/gpu": "8", "cpu": "0.5", "memory": 1})
    obj = decode_object(doc, "ResourceFlavor rf")
    weights = obj.spec.resource_weights  # type: ignore[attr-defined]
    assert weights == {"nvidia.com/gpu": "8", "cpu": "0.5", "memory": 1}
    assert _refusal(flavor(resourceWeights={"cpu": "0"})) == (
        'ResourceFlavor rf: field `spec.resourceWeights[cpu]`: Invalid value: "0": must be greater than 0')
    assert _refusal(flavor(resourceWeights={"nvidia.com/gpu": -2})) == (
        'ResourceFlavor rf: field `spec.resourceWeights[nvidia.com/gpu]`: Invalid value: "-2": '
        "must be greater than 0")
    assert _refusal(flavor(resourceWeights={"cpu": "heavy"})) == (
        'ResourceFlavor rf: field `spec.resourceWeights[cpu]`: Invalid value: "heavy": '
        "spec.resourceWeights[cpu] in body should match "
        "'^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|"
        "[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$'")
    _check(flavor(resourceWeights={f"example.com/r{i}": "1" for i in range(16)}))
    assert _refusal(flavor(resourceWeights={f"example.com/r{i}": "1" for i in range(17)})) == (
        "ResourceFlavor rf: [field `spec.resourceWeights`: Too many: 17: must have at most 16 items, "
        f"{CEL_NOT_CHECKED}]")


# --- ClusterQueue, Cohort ---------------------------------------------------------------------------------------


def test_limits_need_a_cohort_and_a_queue_lends_at_most_its_nominal_quota() -> None:
    at = "ClusterQueue cq: field `spec.resourceGroups[0].flavors[0].resources[0]"
    _check(_quota(cluster_queue("co"), borrowingLimit=2, lendingLimit=4))
    assert _refusal(_quota(cluster_queue(), borrowingLimit=2)) == (  # the CRD's CEL rule, before the webhook's
        'ClusterQueue cq: field `spec`: Invalid value: "object": borrowingLimit must be nil when cohort is empty')
    assert _refusal(_quota(cluster_queue(), lendingLimit=2)) == (  # Kueue's field.Invalid, with the limit
        f'{at}.lendingLimit`: Invalid value: "2": must be nil when cohort is empty')
    assert _refusal(_quota(cluster_queue("co"), lendingLimit=5)) == (
        f'{at}.lendingLimit`: Invalid value: "5": must be less than or equal to the nominalQuota')
    cohort = {"apiVersion": V1B2, "kind": "Cohort", "metadata": {"name": "co"},
              "spec": {"resourceGroups": cluster_queue()["spec"]["resourceGroups"]}}
    _quota(cohort, lendingLimit=9)
    assert _refusal(cohort) == (
        'Cohort co: field `spec.resourceGroups[0].flavors[0].resources[0].lendingLimit`: Invalid value: "9": must be '
        "nil when parent is empty")
    assert _refusal(_quota(copy.deepcopy(cohort), borrowingLimit=3)) == (
        'Cohort co: [field `spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit`: Invalid value: "3": must '
        'be nil when parent is empty, field `spec.resourceGroups[0].flavors[0].resources[0].lendingLimit`: Invalid '
        'value: "9": must be nil when parent is empty]')
    cohort["spec"]["parentName"] = "root"
    _check(cohort)  # a Cohort may lend more than its own quota


def test_a_resource_is_named_well_and_covered_by_one_group() -> None:
    doc = cluster_queue()
    doc["spec"]["resourceGroups"].append({"coveredResources": ["cpu"], "flavors": [
        {"name": "b", "resources": [{"name": "cpu", "nominalQuota": 1}]}]})
    assert _refusal(doc) == 'ClusterQueue cq: field `spec.resourceGroups[1].coveredResources[0]`: Duplicate value: "cpu"'
    bad = cluster_queue()
    bad["spec"]["resourceGroups"][0]["coveredResources"] = ["a b"]
    bad["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["name"] = "a b"
    assert ('`spec.resourceGroups[0].coveredResources[0]`: Invalid value: "a b": name part must consist of'
            in _refusal(bad))  # IsQualifiedName's words, as Kueue's validateResourceName reports them


def test_a_queue_s_policies_are_known_and_consistent() -> None:
    assert _refusal(cluster_queue(preemption={"reclaimWithinCohort": "Never",
                                              "borrowWithinCohort": {"policy": "LowerPriority"}})) == (
        'ClusterQueue cq: field `spec.preemption`: Invalid value: "object": reclaimWithinCohort=Never and '
        "borrowWithinCohort.Policy!=Never")  # the CRD's CEL rule, before the webhook's same rule
    _check(cluster_queue(preemption={"reclaimWithinCohort": "Any", "borrowWithinCohort": {"policy": "LowerPriority"}}))
    assert _refusal(cluster_queue(flavorFungibility={"preference": "PreemptionOverBorrowing"})) == (
        'ClusterQueue cq: field `spec.flavorFungibility`: Invalid value: "object": preference can only be '
        "set when both whenCanBorrow and whenCanPreempt are TryNextFlavor")
    _check(cluster_queue(flavorFungibility={"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor",
                                            "preference": "PreemptionOverBorrowing"}))
    assert '`spec.flavorFungibility.whenCanBorrow`: Unsupported value: "Borrow"' in _refusal(
        cluster_queue(flavorFungibility={"whenCanBorrow": "Borrow"}))
    assert _refusal(cluster_queue(fairSharing={"weight": "1n"})) == (
        'ClusterQueue cq: field `spec.fairSharing`: Invalid value: "1n": When not 0, weight must be > 10e-9')
    _check(cluster_queue(fairSharing={"weight": 0}))


def test_a_namespace_selector_is_well_formed() -> None:
    _check(cluster_queue(namespaceSelector={"matchExpressions": [{"key": "team", "operator": "In", "values": ["a"]}]}))
    assert _refusal(cluster_queue(namespaceSelector={"matchExpressions": [{"key": "team", "operator": "Exists",
                                                                            "values": ["a"]}]})) == (
        "ClusterQueue cq: field `spec.namespaceSelector.matchExpressions[0].values`: Forbidden: may not be specified "
        "when `operator` is 'Exists' or 'DoesNotExist'")
    assert ('`spec.namespaceSelector.matchExpressions[0].operator`: Invalid value: "Like": not a valid selector '
            "operator") in _refusal(cluster_queue(namespaceSelector={"matchExpressions": [{"key": "team",
                                                                                          "operator": "Like"}]}))
    assert '`spec.namespaceSelector.matchLabels`: Invalid value: "a b": name part must consist of' in _refusal(
        cluster_queue(namespaceSelector={"matchLabels": {"a b": "x"}}))


def test_every_webhook_rule_a_queue_breaks_is_refused_in_one_message_in_kueue_s_order() -> None:
    doc = _quota(cluster_queue(namespaceSelector={"matchExpressions": [{"key": "t", "operator": "Exists",
                                                                        "values": ["a"]}]},
                               fairSharing={"weight": "1n"}), lendingLimit=5)
    doc["spec"]["resourceGroups"].append({"coveredResources": ["cpu"], "flavors": [
        {"name": "b", "resources": [{"name": "cpu", "nominalQuota": 1}]}]})
    at = "field `spec.resourceGroups[0].flavors[0].resources[0]"
    assert _refusal(doc) == (
        f'ClusterQueue cq: [{at}.lendingLimit`: Invalid value: "5": must be nil when cohort is empty, '
        f'{at}.lendingLimit`: Invalid value: "5": must be less than or equal to the nominalQuota, '
        'field `spec.resourceGroups[1].coveredResources[0]`: Duplicate value: "cpu", '
        "field `spec.namespaceSelector.matchExpressions[0].values`: Forbidden: may not be specified when `operator` "
        "is 'Exists' or 'DoesNotExist', "
        'field `spec.fairSharing`: Invalid value: "1n": When not 0, weight must be > 10e-9]')


def test_a_resource_s_rules_are_all_refused_and_a_cohort_s_too() -> None:
    bad = cluster_queue()
    bad["spec"]["resourceGroups"][0]["coveredResources"] = ["a b"]
    bad["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["name"] = "a b"
    bad["spec"]["resourceGroups"].append({"coveredResources": ["a b"], "flavors": [
        {"name": "b", "resources": [{"name": "a b", "nominalQuota": 1}]}]})
    message = _refusal(bad)
    assert message.startswith('ClusterQueue cq: [field `spec.resourceGroups[0].coveredResources[0]`: '
                              'Invalid value: "a b": name part')
    assert message.count('coveredResources[0]`: Invalid value: "a b": name part') == 2
    assert message.endswith('field `spec.resourceGroups[1].coveredResources[0]`: Duplicate value: "a b"]')
    cohort = {"apiVersion": V1B2, "kind": "Cohort", "metadata": {"name": "co"},
              "spec": {"resourceGroups": cluster_queue()["spec"]["resourceGroups"], "fairSharing": {"weight": "1n"}}}
    # the weight first (validateCohort)
    assert _refusal(_quota(cohort, borrowingLimit=1, lendingLimit=9)) == (
        'Cohort co: [field `spec.fairSharing`: Invalid value: "1n": When not 0, weight must be > 10e-9, '
        'field `spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit`: Invalid value: "1": must '
        'be nil when parent is empty, field `spec.resourceGroups[0].flavors[0].resources[0].lendingLimit`: Invalid '
        'value: "9": must be nil when parent is empty]')


def test_a_crd_rule_broken_is_refused_alone_before_the_webhook_s() -> None:
    """The apiserver calls no webhook for an object its schema refuses: the CRD's errors (all of them, as its own
    list: ``test_queue_rules``), not with the webhook's."""
    doc = _quota(cluster_queue(fairSharing={"weight": "1n"}), lendingLimit=2)
    doc["spec"]["resourceGroups"][0]["coveredResources"] = ["a b"]
    doc["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["name"] = "a b"
    doc["spec"]["resourceGroups"][0]["flavors"][0]["name"] = "A"
    assert "coveredResources" not in _refusal(doc)
    assert _refusal(doc).startswith(
        "ClusterQueue cq: field `spec.resourceGroups[0].flavors[0].name`: Invalid value: "
        '"A": spec.resourceGroups[0].flavors[0].name in body should match')


# --- LocalQueue, Topology, AdmissionCheck -----------------------------------------------------------------------


def test_a_local_queue_s_stop_policy_is_known() -> None:
    lq = {"apiVersion": V1B2, "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": "team"},
          "spec": {"clusterQueue": "cq", "stopPolicy": "Pause"}}
    assert '`spec.stopPolicy`: Unsupported value: "Pause"' in _refusal(lq)


def test_a_topology_s_levels_are_unique_label_keys_hostname_lowest() -> None:
    def topology(*labels: str) -> dict[str, Any]:
        return {"apiVersion": V1B2, "kind": "Topology", "metadata": {"name": "t"},
                "spec": {"levels": [{"nodeLabel": label} for label in labels]}}

    _check(topology("cloud.com/block", "cloud.com/rack", "kubernetes.io/hostname"))
    _check(topology("cloud.com/" + "r" * 100))  # a name part longer than a label's: Kueue's pattern takes it
    assert _refusal(topology("rack", "rack")) == "Topology t: field `spec.levels`: must be unique"
    assert _refusal(topology("kubernetes.io/hostname", "rack")) == (
        "Topology t: field `spec.levels`: the kubernetes.io/hostname label can only be used at the lowest level of "
        "topology")
    # every CEL rule broken, together
    assert _refusal(topology("rack", "kubernetes.io/hostname", "rack")) == (
        "Topology t: [field `spec.levels`: must be unique, field `spec.levels`: the kubernetes.io/hostname "
        "label can only be used at the lowest level of topology]")
    assert _refusal(topology()) == "Topology t: field `spec.levels` must have 1 to 16 items, has 0"
    assert "`spec.levels[0].nodeLabel`: 'a b' is not a label key" in _refusal(topology("a b"))


def test_an_admission_check_names_its_controller_and_a_well_formed_parameters_reference() -> None:
    def check(controller: str = "kueue.x-k8s.io/provisioning-request", **parameters: str) -> dict[str, Any]:
        spec: dict[str, Any] = {"controllerName": controller}
        if parameters:
            spec["parameters"] = {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "prc",
                                  **parameters}
        return {"apiVersion": V1B2, "kind": "AdmissionCheck", "metadata": {"name": "ac"}, "spec": spec}

    _check(check("x" * 253, kind="ProvisioningRequestConfig"))
    assert _refusal(check("")) == "AdmissionCheck ac: field `spec.controllerName` must be 1 to 253 characters, has 0"
    assert '`spec.parameters.name`: Invalid value: "Not_A_Label"' in _refusal(check(name="Not_A_Label"))
    assert '`spec.parameters.apiGroup`: Invalid value: ""' in _refusal(check(apiGroup=""))


# --- Tolerations, conditions and names: the plain data's rules ---------------------------------------------------


@pytest.mark.parametrize(("toleration", "field"), [
    ({"operator": "Equal", "value": "x"}, "operator"),
    ({"effect": "NoSchedule"}, "operator"),
    ({"key": "a", "operator": "Exists", "value": ""}, "value"),
])
def test_a_keyless_toleration_matches_all_and_exists_takes_no_value(toleration: dict, field: str) -> None:
    _check(flavor(tolerations=[{"operator": "Exists"}, {"operator": "Exists", "effect": "NoExecute"},
                               {"key": "", "operator": "Equal", "value": "x"}, {"key": "a", "value": ""}]))
    message = {"operator": "operator must be Exists when 'key' is empty, which means 'match all values and all keys'",
               "value": "a value must be empty when 'operator' is 'Exists'"}[field]
    # the list's rule
    assert _refusal(flavor(tolerations=[{"key": "a", "operator": "Exists"}, toleration])) == (
        f'ResourceFlavor rf: field `spec.tolerations`: Invalid value: "array": {message}')
    doc = workload()
    doc["status"]["admissionChecks"] = [{"name": "ac", "state": "Ready", "lastTransitionTime": TIME,
                                         "podSetUpdates": [{"name": "main", "tolerations": [toleration]}]}]
    assert f"field `status.admissionChecks[0].podSetUpdates[0].tolerations[0].{field}`: {message}" in _refusal(doc)


def _conditioned(**condition: Any) -> dict[str, Any]:
    doc = workload()
    doc["status"]["conditions"] = [{"type": "Finished", "status": "True", "reason": "Succeeded", "message": "done",
                                    "lastTransitionTime": TIME, **condition}]
    return doc


@pytest.mark.parametrize(("condition", "message"), [
    # ValidateConditions names a type as ValidateLabelName names a label key (as a pod set update's label)
    ({"type": "a b"}, 'field `status.conditions[0].type`: Invalid value: "a b": name part must consist of'),
    ({"status": "Maybe"}, 'field `status.conditions[0].status`: Unsupported value: "Maybe": supported values: '
                          '"False", "True", "Unknown"'),
    ({"observedGeneration": -1}, "field `status.conditions[0].observedGeneration`: Invalid value: -1: must be greater "
                                 "than or equal to zero"),
    ({"lastTransitionTime": None}, "field `status.conditions[0].lastTransitionTime`: Required value"),
    ({"lastTransitionTime": "0001-01-01T00:00:00Z"},
     "field `status.conditions[0].lastTransitionTime`: Required value"),
    ({"reason": ""}, "field `status.conditions[0].reason`: Required value"),
    ({"reason": "Pods ready"}, 'field `status.conditions[0].reason`: Invalid value: "Pods ready": a condition reason '
                               "must start with alphabetic character"),
    ({"reason": "R" * 1025}, "field `status.conditions[0].reason`: Too long: may not be more than 1024 bytes"),
    ({"message": "é" * 16385}, "field `status.conditions[0].message`: Too long: may not be more than 32768 bytes"),
])
def test_workload_conditions_are_well_formed_metav1_conditions(condition: dict, message: str) -> None:
    doc = _conditioned(**condition)
    if condition.get("lastTransitionTime", "") is None:
        del doc["status"]["conditions"][0]["lastTransitionTime"]
    assert _refusal(doc).startswith(f"Workload team/w: {message}")


def test_a_condition_s_faults_are_worded_as_apimachinery_s_validate_condition() -> None:
    """``ValidateCondition`` (k8s.io/apimachinery v0.36): a missing reason or transition time is a bare
    ``Required value``; a reason out of syntax shows the pattern's examples and regex (``RegexError``)."""
    assert _refusal(_conditioned(reason="")) == (
        "Workload team/w: field `status.conditions[0].reason`: Required value")
    assert _refusal(_conditioned(lastTransitionTime="0001-01-01T00:00:00Z")) == (
        "Workload team/w: field `status.conditions[0].lastTransitionTime`: Required value")
    assert _refusal(_conditioned(reason="Pods ready")) == (
        'Workload team/w: field `status.conditions[0].reason`: Invalid value: "Pods ready": a condition '
        "reason must start with alphabetic character, optionally followed by a string of alphanumeric "
        "characters or '_,:', and must end with an alphanumeric character or '_' (e.g. 'my_name',  or "
        "'MY_NAME',  or 'MyName',  or 'ReasonA,ReasonB',  or 'ReasonA:ReasonB', regex used for validation "
        "is '[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?')")


def test_workload_conditions_of_kueue_s_syntax_are_taken_and_a_type_is_given_once() -> None:
    _check(_conditioned(reason="ReasonA,ReasonB:x_1", observedGeneration=3, type="example.com/Custom"))
    _check(_conditioned(reason="R" * 1024, message="m" * 32768))
    twice = _conditioned()
    twice["status"]["conditions"].append({**twice["status"]["conditions"][0], "status": "False"})
    assert _refusal(twice) == 'Workload team/w: field `status.conditions[1].type`: Duplicate value: "Finished"'


def _map_key(name: str) -> str:
    return 'Duplicate value: map[string]interface {}{"name":"' + name + '"}'


def test_a_workload_s_lists_keyed_by_name_name_each_entry_once() -> None:
    """The Workload CRD's list maps keyed by ``name`` (``spec.podSets``, ``status.admission.podSetAssignments``,
    ``status.admissionChecks``, ``status.resourceRequests``): the apiserver refuses an entry whose name an earlier
    one has, in its words, every such entry. Kueue's "Shouldn't set podSet name if multiple" (two pod sets whose
    names both default to ``main``) is refused so (``webhook/core/workload_test.go``)."""
    doc = workload()
    doc["spec"]["podSets"] *= 2
    assert _refusal(doc) == f"Workload team/w: field `spec.podSets[1]`: {_map_key('main')}"
    doc = workload(reserved=True)
    assignments = doc["status"]["admission"]["podSetAssignments"]
    assignments *= 2
    doc["spec"]["podSets"].append({**doc["spec"]["podSets"][0], "name": "other"})
    doc["status"]["admissionChecks"] = [{"name": "ac", "state": "Pending", "lastTransitionTime": TIME}] * 3
    doc["status"]["resourceRequests"] = [{"name": "main", "resources": {"cpu": "1"}}] * 2
    assert _refusal(doc) == (
        f"Workload team/w: [field `status.admission.podSetAssignments[1]`: {_map_key('main')}, "
        f"field `status.admissionChecks[1]`: {_map_key('ac')}, field `status.admissionChecks[2]`: {_map_key('ac')}, "
        f"field `status.resourceRequests[1]`: {_map_key('main')}]")
    doc["status"]["admission"]["podSetAssignments"][1] = {**assignments[0], "name": "other"}
    doc["status"]["admissionChecks"][1:] = [{"name": "ac2", "state": "Ready", "lastTransitionTime": TIME}]
    doc["status"]["resourceRequests"][1] = {"name": "other", "resources": {"cpu": "1"}}
    _check(doc)


SUBDOMAIN_PATTERN = r"'^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'"


def _pattern_error(at: str, value: str, pattern: str = SUBDOMAIN_PATTERN) -> str:
    """The apiserver's words for a value its CRD's pattern refuses (kube-openapi's FailedPattern)."""
    return f'field `{at}`: Invalid value: "{value}": {at} in body should match {pattern}'


def test_the_names_a_workload_gives_are_dns_names() -> None:
    _check(workload(reserved=True, queueName="team.queue-1",
                    priorityClassRef={"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high.x"},
                    priority=1))
    _check(workload(queueName=""))  # no queue: taken, as a queue name left out
    assert _refusal(workload(queueName="Team_Q")) == (
        f"Workload team/w: {_pattern_error('spec.queueName', 'Team_Q')}")
    assert _refusal(workload(queueName="q" * 254)) == (  # the length first, and alone (kube-openapi)
        "Workload team/w: field `spec.queueName`: Too long: may not be more than 253 bytes")
    assert _pattern_error("spec.priorityClassRef.name", "") in _refusal(workload(
        priorityClassRef={"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": ""}, priority=1))
    named = workload()
    named["spec"]["podSets"][0]["name"] = "Main"
    assert _pattern_error("spec.podSets[0].name", "Main",
                          "'^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'") in _refusal(named)
    for part, value, field in (("clusterQueue", "CQ", "clusterQueue"), ("flavors", {"cpu": "A"}, "flavors[cpu]")):
        admitted = workload(reserved=True)
        target = admitted["status"]["admission"]
        (target if part == "clusterQueue" else target["podSetAssignments"][0])[part] = value
        assert f"field `status.admission.{'podSetAssignments[0].' if part == 'flavors' else ''}{field}`: " in (
            _refusal(admitted))
    checked = workload()
    checked["status"]["admissionChecks"] = [{"name": "c" * 317, "state": "Pending", "lastTransitionTime": TIME}]
    assert _refusal(checked) == ("Workload team/w: field `status.admissionChecks[0].name` must be 1 to 316 characters, "
                                 "has 317")
    checked["status"]["admissionChecks"][0]["name"] = "Any_Check.name/316"
    _check(checked)  # an admission check's name has no pattern


def test_the_names_queues_cohorts_and_flavors_give_are_dns_subdomains() -> None:
    _check(cluster_queue("co.a", admissionChecksStrategy={"admissionChecks": [{"name": "Prov_1", "onFlavors": ["a"]}]}))
    assert _refusal(cluster_queue("Co")) == f"ClusterQueue cq: {_pattern_error('spec.cohortName', 'Co')}"
    bad_flavor = cluster_queue()
    bad_flavor["spec"]["resourceGroups"][0]["flavors"][0]["name"] = "A"
    assert _pattern_error("spec.resourceGroups[0].flavors[0].name", "A") in _refusal(bad_flavor)
    strategy = {"admissionChecks": [{"name": "ac", "onFlavors": ["a_b"]}]}
    assert _pattern_error("spec.admissionChecksStrategy.admissionChecks[0].onFlavors[0]", "a_b") in _refusal(
        cluster_queue(admissionChecksStrategy=strategy))
    assert "field `spec.admissionChecksStrategy.admissionChecks[0].name` must be 1 to 316 characters, has 0" in (
        _refusal(cluster_queue(admissionChecksStrategy={"admissionChecks": [{"name": ""}]})))
    cohort = {"apiVersion": V1B2, "kind": "Cohort", "metadata": {"name": "co"}, "spec": {"parentName": "Root"}}
    assert _refusal(cohort) == f"Cohort co: {_pattern_error('spec.parentName', 'Root')}"
    lq = {"apiVersion": V1B2, "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": "team"},
          "spec": {"clusterQueue": "cq_1"}}
    assert _refusal(lq) == f"LocalQueue team/lq: {_pattern_error('spec.clusterQueue', 'cq_1')}"
    assert _refusal(flavor(topologyName="Default", nodeLabels={"pool": "a"})) == (
        f"ResourceFlavor rf: {_pattern_error('spec.topologyName', 'Default')}")
    assert _pattern_error("spec.topologyName", "") in _refusal(
        flavor(topologyName="", nodeLabels={"pool": "a"}))
