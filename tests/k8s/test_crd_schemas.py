"""The generated CRD schemas are structural (what the apiserver demands) and say what Kueue's API says."""

from __future__ import annotations

from typing import Any

from connectors.k8s.crds import SERVED_VERSIONS, all_crds, object_schema
from connectors.k8s.resources import BY_KIND, KUEUE_RESOURCES


def _walk(node: dict[str, Any], path: str = "$"):
    yield path, node
    for k, v in node.get("properties", {}).items():
        yield from _walk(v, f"{path}.{k}")
    if isinstance(node.get("items"), dict):
        yield from _walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _walk(node["additionalProperties"], f"{path}{{}}")


def test_every_node_is_structural() -> None:
    for r, version in ((r, v) for r in KUEUE_RESOURCES for v in SERVED_VERSIONS):
        for path, node in _walk(object_schema(r, version)):
            assert "$ref" not in node and "title" not in node, path
            typed = "type" in node
            free = node.get("x-kubernetes-preserve-unknown-fields") or node.get("x-kubernetes-int-or-string")
            assert typed or free, f"{r.kind} {path}: no type"
            if node.get("type") == "object" and "properties" in node and path != "$":
                assert node.get("x-kubernetes-preserve-unknown-fields") is True, f"{r.kind} {path} would prune"


def test_names_scopes_and_subresources() -> None:
    by_kind = {d["spec"]["names"]["kind"]: d for d in all_crds()}
    assert set(by_kind) == {r.kind for r in KUEUE_RESOURCES}
    assert by_kind["LocalQueue"]["spec"]["scope"] == "Namespaced"
    assert by_kind["Workload"]["spec"]["scope"] == "Namespaced"
    assert all(by_kind[k]["spec"]["scope"] == "Cluster" for k in by_kind if k not in ("LocalQueue", "Workload"))
    assert by_kind["ClusterQueue"]["spec"]["names"]["shortNames"] == ["cq"]
    assert by_kind["ResourceFlavor"]["spec"]["names"]["shortNames"] == ["flavor", "flavors", "rf"]
    assert by_kind["LocalQueue"]["spec"]["names"]["shortNames"] == ["queue", "queues", "lq"]
    # Kueue #8379 and #8472: "kwl" and "kueueworkload", no longer "wl" (the in-tree Workload's)
    assert by_kind["Workload"]["spec"]["names"]["shortNames"] == ["kwl", "kueueworkload"]
    # Kueue #11540: the kinds that had none got one each
    for kind, short in (("AdmissionCheck", "ac"), ("Cohort", "co"), ("MultiKueueCluster", "mkc"),
                        ("MultiKueueConfig", "mkconf"), ("ProvisioningRequestConfig", "prc"), ("Topology", "topo"),
                        ("WorkloadPriorityClass", "wpc")):
        assert by_kind[kind]["spec"]["names"].get("shortNames") == [short], kind
    for kind in ("Workload", "ClusterQueue", "LocalQueue"):
        assert all(v["subresources"] == {"status": {}} for v in by_kind[kind]["spec"]["versions"]), kind
    assert all("subresources" not in v for v in by_kind["ResourceFlavor"]["spec"]["versions"])
    for d in by_kind.values():
        assert d["spec"]["conversion"] == {"strategy": "None"}
        assert [v["storage"] for v in d["spec"]["versions"]] == [True, False]


def test_quantities_are_int_or_string_and_kueue_defaults_apply() -> None:
    cq = object_schema(BY_KIND["ClusterQueue"])["properties"]["spec"]["properties"]
    quota = cq["resourceGroups"]["items"]["properties"]["flavors"]["items"]["properties"]["resources"]["items"]
    assert quota["properties"]["nominalQuota"]["x-kubernetes-int-or-string"] is True
    assert quota["properties"]["borrowingLimit"]["nullable"] is True
    assert quota["required"] == ["name"]
    assert cq["queueingStrategy"]["default"] == "BestEffortFIFO"
    assert cq["preemption"]["default"] == {}
    assert cq["preemption"]["properties"]["withinClusterQueue"]["default"] == "Never"
    # Kueue's +kubebuilder:default={} on borrowWithinCohort (so its policy reads back Never) and =1 on a weight
    borrow = cq["preemption"]["properties"]["borrowWithinCohort"]
    assert borrow["default"] == {} and borrow["properties"]["policy"]["default"] == "Never"
    for kind in ("ClusterQueue", "Cohort", "LocalQueue"):
        for version in SERVED_VERSIONS:
            spec = object_schema(BY_KIND[kind], version)["properties"]["spec"]["properties"]
            assert spec["fairSharing"]["properties"]["weight"]["default"] == 1, (kind, version)
            assert "default" not in spec["fairSharing"], (kind, version)  # fairSharing itself stays optional
    wl = object_schema(BY_KIND["Workload"])["properties"]["spec"]["properties"]
    assert wl["active"]["default"] is True
    assert wl["podSets"]["items"]["properties"]["count"]["default"] == 1
    assert "default" not in wl["queueName"]  # empty strings are "absent", not defaults
    for version in SERVED_VERSIONS:
        spec = object_schema(BY_KIND["Workload"], version)["properties"]["spec"]["properties"]
        assert spec["maximumExecutionTimeSeconds"] == {"type": "integer", "format": "int32", "nullable": True,
                                                     "minimum": 1}
        topology = spec["podSets"]["items"]["properties"]["topologyRequest"]["properties"]
        assert (topology["podSetSliceSize"]["minimum"], topology["subGroupCount"]["minimum"]) == (1, 0), version


def _assignment_schema(version: str) -> dict[str, Any]:
    status = object_schema(BY_KIND["Workload"], version)["properties"]["status"]["properties"]
    return status["admission"]["properties"]["podSetAssignments"]["items"]["properties"]


def test_workload_tas_status_fields_per_version() -> None:
    v2 = _assignment_schema("v1beta2")
    ta = v2["topologyAssignment"]["properties"]
    assert set(ta) == {"levels", "slices"}
    sl = ta["slices"]["items"]
    assert sl["required"] == ["domainCount", "valuesPerLevel", "podCounts"]
    assert sl["properties"]["domainCount"]["type"] == "integer"
    level = sl["properties"]["valuesPerLevel"]["items"]["properties"]
    assert level["universal"]["type"] == "string"
    assert set(level["individual"]["properties"]) == {"prefix", "suffix", "roots"}
    assert level["individual"]["properties"]["roots"] == {"type": "array", "items": {"type": "string"}}
    counts = sl["properties"]["podCounts"]["properties"]
    assert counts["universal"]["type"] == "integer"
    assert counts["individual"] == {"type": "array", "items": {"type": "integer", "format": "int32"}}
    assert v2["delayedTopologyRequest"]["type"] == "string"
    status = object_schema(BY_KIND["Workload"])["properties"]["status"]["properties"]
    assert status["unhealthyNodes"]["items"]["required"] == ["name"]

    # v1beta1 serves the domains form; elsewhere in the assignment the schemas are the same
    v1 = _assignment_schema("v1beta1")
    ta1 = v1["topologyAssignment"]["properties"]
    assert set(ta1) == {"levels", "domains"}
    assert ta1["domains"]["items"]["properties"] == {"values": {"type": "array", "items": {"type": "string"}},
                                                     "count": {"type": "integer", "format": "int32"}}
    assert v1["delayedTopologyRequest"] == v2["delayedTopologyRequest"]
    assert {k: v for k, v in v1.items() if k != "topologyAssignment"} == \
        {k: v for k, v in v2.items() if k != "topologyAssignment"}
    for r in KUEUE_RESOURCES:  # the renamed fields are in tests/k8s/test_conversion_review.py
        if r.kind not in ("Workload", "ClusterQueue"):
            assert object_schema(r, "v1beta1") == object_schema(r, "v1beta2"), r.kind


def test_the_template_digest_is_no_field_of_any_crd() -> None:
    """``kueueEsDigest`` is kueue-es's own record of a Workload pod template (:mod:`events.template_digest`), in
    the view and the log only: the CRDs declare no such field (the apiserver keeps it unpruned if written, and
    every producer ignores and replaces it)."""
    for crd in all_crds():
        assert "kueueEsDigest" not in repr(crd), crd["metadata"]["name"]


def test_a_preemption_config_numeric_label_keeps_its_bounds_in_order() -> None:
    """Kueue's CRD refuses a numeric label whose minValue is above its maxValue (a CEL rule with Kueue's message,
    webhook/core preemptionconfig_test); the rule is evaluated here as the apiserver would."""
    import celpy  # noqa: PLC0415 - CEL only for this test

    from connectors.k8s.crds import preemption_config_crd  # noqa: PLC0415

    schema = preemption_config_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    selector = schema["properties"]["spec"]["properties"]["rules"]["items"]["properties"]["candidateSelectors"]
    label = selector["items"]["properties"]["numericLabels"]["items"]
    rules = label.get("x-kubernetes-validations", [])
    assert [r["message"] for r in rules] == ["minValue must be less than or equal to maxValue"], rules
    env = celpy.Environment()
    program = env.program(env.compile(rules[0]["rule"]))
    cases = {(None, None): True, (5, None): True, (None, 5): True, (1, 10): True, (4, 4): True, (0, 0): True,
             (10, 1): False, (5, 4): False}
    for (low, high), allowed in cases.items():
        obj = {"key": "example.com/number-of-tpus"} | ({"minValue": low} if low is not None else {}) \
            | ({"maxValue": high} if high is not None else {})
        assert bool(program.evaluate({"self": celpy.json_to_cel(obj)})) is allowed, obj


def test_workloads_are_selectable_by_their_cluster_queue_in_v1beta2_only() -> None:
    """Kueue #11568: ``--field-selector status.admission.clusterQueue=NAME`` on Workloads, declared on v1beta2 alone
    as Kueue does; no other kind has a selectable field."""
    by_kind = {d["spec"]["names"]["kind"]: d for d in all_crds()}
    fields = {v["name"]: v.get("selectableFields") for v in by_kind["Workload"]["spec"]["versions"]}
    assert fields == {"v1beta2": [{"jsonPath": ".status.admission.clusterQueue"}], "v1beta1": None}
    assert "selectableFields" not in by_kind["Workload"]["spec"]
    assert all("selectableFields" not in v for k, d in by_kind.items() if k != "Workload" for v in d["spec"]["versions"])


def test_a_flavor_s_resource_weights_are_kept_by_the_apiserver_in_both_versions() -> None:
    """KEP-8902's ``spec.resourceWeights``: a map of quantities, at most 16 (Kueue's ``MaxProperties=16``),
    typed in the schema so that the apiserver checks each value and does not prune the field."""
    for version in SERVED_VERSIONS:
        spec = object_schema(BY_KIND["ResourceFlavor"], version)["properties"]["spec"]["properties"]
        weights = spec["resourceWeights"]
        assert weights["type"] == "object" and weights["maxProperties"] == 16, version
        assert weights["additionalProperties"]["x-kubernetes-int-or-string"] is True, version
