"""CustomResourceDefinitions for the kueue.x-k8s.io kinds kueue-es reads and writes, generated from our own views.

The schema of each kind is derived from its msgspec view in :mod:`events.objects` (``msgspec.json`` schema →
OpenAPI v3, structural): references are inlined, ``X | None`` becomes ``nullable``, a Kubernetes quantity is
``x-kubernetes-int-or-string``, and free-form maps keep whatever they hold. Our views model only the fields that
matter to admission, so **every object node also carries** ``x-kubernetes-preserve-unknown-fields: true``: the
apiserver checks the types of the fields we know and keeps, unpruned, every field we do not model (a pod
template's image and command, ...). That is looser than Kueue's own CRDs, which reject unknown fields; CEL
validations and webhooks are not generated. Some of Kueue's markers are: the bounds shared with kueue-es's own
checks (pod sets, resource groups, topology request minimums) and the enums, lengths and required fields of
:mod:`events.crd_markers`.

Versions: ``v1beta2`` is served and stored; ``v1beta1`` is served with the same (permissive) schema under its
own names where the two versions name a field differently (a ClusterQueue's ``spec.cohort`` and
``spec.admissionChecks``, a Workload's ``spec.priorityClassName``/``priorityClassSource``,
``status.accumulatedPastExexcutionTimeSeconds`` and ``topologyAssignment {levels, domains}``). With a webhook
(:func:`webhook_conversion`: ``kueue-es manifests`` points it at the Service ``kueue-es-webhook``, the running
webhook server sets its ``caBundle``) the apiserver converts between them through kueue-es's conversion webhook
(:mod:`connectors.k8s.conversion`, rules in :mod:`events.conversion`): an object written as v1beta1 is stored
as v1beta2 and reads back either way. Without one the strategy is ``None``: the apiserver only rewrites
``apiVersion``, so an object written as v1beta1 is stored with its v1beta1 field names, which the connector
(it reads v1beta2) does not see — write v1beta2 then. Switching to the webhook does not rewrite what is already
stored.

Scopes, plurals, short names and the status subresources (Workload, ClusterQueue, LocalQueue, Cohort,
AdmissionCheck) and the printer columns follow Kueue's API (no categories, as Kueue's CRDs have none).

:func:`provisioning_request_crd` is the cluster autoscaler's ``autoscaling.x-k8s.io/v1`` ProvisioningRequest,
written out field by field from its API (with its validations: an immutable spec, 1–32 pod sets of at least one
pod, parameters of at most 255 characters). kueue-es never installs it in a cluster — the autoscaler does —
but a test cluster without an autoscaler needs it (:func:`install` takes any CRDs).
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import msgspec

from connectors.k8s.client import KubeClient
from connectors.k8s.errors import AlreadyExists, KubeError
from connectors.k8s.resources import (
    APPWRAPPERS,
    CLUSTER_TRAINING_RUNTIMES,
    JOBSETS,
    KUBEFLOW_JOBS,
    KUEUE_RESOURCES,
    LEADER_WORKER_SETS,
    MPIJOBS,
    PREEMPTION_CONFIGS,
    PROVISIONING_REQUESTS,
    RAYCLUSTERS,
    RAYJOBS,
    RAYSERVICES,
    SPARK_APPLICATIONS,
    TRAINING_RUNTIMES,
    TRAINJOBS,
    Resource,
)
from events import conversion, crd_markers, quota_rules
from events import objects as o
from events.manifests import TOPOLOGY_REQUEST_MINIMUMS
from events.object_rules import MAX_POD_SETS
from events.preemption_config_rules import MIN_ABOVE_MAX
from events.template_digest import DIGEST_FIELD

SERVED_VERSIONS = ("v1beta2", "v1beta1")
STORAGE_VERSION = "v1beta2"

_PRESERVE = "x-kubernetes-preserve-unknown-fields"
_EMPTY_OBJECT_DEFAULTS = {("ClusterQueueSpec", "preemption"), ("ClusterQueueSpec", "flavorFungibility"),
                          ("ClusterQueuePreemption", "borrowWithinCohort")}
"""Objects Kueue defaults to ``{}`` so that their own field defaults apply."""
_FIELD_DEFAULTS: dict[tuple[str, str], Any] = {("FairSharing", "weight"): 1,
                                               ("PodSetAssignment", "name"): "main"}
"""Defaults Kueue's CRDs give a field our views leave absent (None) or require: a ClusterQueue's, Cohort's or
LocalQueue's ``fairSharing.weight`` reads back 1 once ``fairSharing`` is written; a Workload's pod set
assignment without a name is the ``main`` pod set's."""


_AGE = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}


def _column(name: str, type_: str, path: str, description: str, priority: int = 0) -> dict[str, Any]:
    column = {"name": name, "type": type_, "jsonPath": path, "description": description}
    if priority:
        column["priority"] = priority
    return column


def _condition_column(name: str, condition: str, description: str) -> dict[str, Any]:
    return _column(name, "string", f".status.conditions[?(@.type=='{condition}')].status", description)


def _columns(kind: str, version: str = STORAGE_VERSION) -> list[dict[str, Any]]:
    """What ``kubectl get`` prints for ``kind`` in ``version``: Kueue's printer columns, word for word (the
    Age of a Workload and of a MultiKueueCluster says "workload", as Kueue's does). None for the kinds Kueue
    gives none (the apiserver then prints Age); no Age for queues and priority classes, as in Kueue."""
    age = {**_AGE, "description": "Time this workload was created"}
    pending = _column("Pending Workloads", "integer", ".status.pendingWorkloads",
                      "Number of pending workloads")
    unfinished = "Number of admitted workloads that haven't finished yet"
    match kind:
        case "Workload":
            return [
                _column("Queue", "string", ".spec.queueName",
                        "Name of the queue this workload was submitted to"),
                _column("Reserved in", "string", ".status.admission.clusterQueue",
                        "Name of the ClusterQueue where the workload is reserving quota"),
                _condition_column("Admitted", "Admitted", "Admission status"),
                _condition_column("Finished", "Finished", "Workload finished"),
                age,
            ]
        case "ClusterQueue":
            cohort = ".spec.cohort" if version == "v1beta1" else ".spec.cohortName"
            return [
                _column("Cohort", "string", cohort, "Cohort that this ClusterQueue belongs to"),
                _column("Strategy", "string", ".spec.queueingStrategy",
                        "The queueing strategy used to prioritize workloads", priority=1),
                pending,
                _column("Admitted Workloads", "integer", ".status.admittedWorkloads", unfinished, priority=1),
            ]
        case "LocalQueue":
            return [
                _column("ClusterQueue", "string", ".spec.clusterQueue", "Backing ClusterQueue"),
                pending,
                _column("Admitted Workloads", "integer", ".status.admittedWorkloads", f"{unfinished}."),
            ]
        case "WorkloadPriorityClass":
            return [_column("Value", "integer", ".value", "Value of workloadPriorityClass's Priority")]
        case "MultiKueueCluster":
            return [_condition_column("Connected", "Active", "MultiKueueCluster is connected"), age]
        case _:
            return []


# --- msgspec JSON Schema -> structural OpenAPI v3 ---------------------------------------------------------------


def _is_null(node: dict[str, Any]) -> bool:
    return node.get("type") == "null"


def _scalar_types(alts: list[dict[str, Any]]) -> set[str] | None:
    types = set()
    for a in alts:
        if set(a) - {"type"} or not isinstance(a.get("type"), str):
            return None
        types.add(a["type"])
    return types


def _convert(node: dict[str, Any], defs: dict[str, Any], depth: int = 0) -> dict[str, Any]:
    if depth > 64:
        raise ValueError("schema nests too deeply (a recursive view?)")
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        out = _convert(defs[name], defs, depth + 1)
        return out
    if "anyOf" in node:
        alts = [a for a in node["anyOf"] if not _is_null(a)]
        nullable = len(alts) != len(node["anyOf"])
        types = _scalar_types(alts)
        if types is not None and "string" in types and ("integer" in types or "number" in types):
            out: dict[str, Any] = {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}
        elif len(alts) == 1:
            out = _convert(alts[0], defs, depth + 1)
        else:
            raise ValueError(f"cannot express a union of {alts} in a structural schema")
        if nullable:
            out["nullable"] = True
        _copy_default(node, out)
        return out
    t = node.get("type")
    out = {}
    if t == "object":
        out["type"] = "object"
        if "properties" in node:
            out["properties"] = {}
            for k, v in node["properties"].items():
                prop = out["properties"][k] = _convert(v, defs, depth + 1)
                if (node.get("title"), k) in _EMPTY_OBJECT_DEFAULTS:
                    prop["default"] = {}
                elif (node.get("title"), k) in _FIELD_DEFAULTS:
                    prop["default"] = _FIELD_DEFAULTS[node.get("title"), k]
            if node.get("required"):
                out["required"] = list(node["required"])
            out[_PRESERVE] = True
        elif isinstance(node.get("additionalProperties"), dict) and node["additionalProperties"]:
            out["additionalProperties"] = _convert(node["additionalProperties"], defs, depth + 1)
        else:
            out[_PRESERVE] = True  # a free-form map (dict[str, Any])
    elif t == "array":
        out["type"] = "array"
        out["items"] = _convert(node.get("items") or {}, defs, depth + 1)
    elif t in ("string", "integer", "number", "boolean"):
        out["type"] = t
        for k in ("enum", "minimum", "maximum", "pattern", "minLength", "maxLength", "format"):
            if k in node:
                out[k] = node[k]
    elif not node:
        out[_PRESERVE] = True  # Any
    else:
        raise ValueError(f"unsupported schema node {node}")
    _copy_default(node, out)
    return out


def _copy_default(node: dict[str, Any], out: dict[str, Any]) -> None:
    """Keep defaults Kueue's API also applies (non-empty strings, non-zero numbers, booleans); drop empty
    containers, empty strings and nulls, which are our views' "absent"."""
    if "default" not in node:
        return
    d = node["default"]
    if isinstance(d, bool) or (isinstance(d, str) and d) or (isinstance(d, int) and d != 0):
        out["default"] = d


_V1BETA1_VIEWS: dict[str, type[msgspec.Struct]] = {"TopologyAssignment": o.TopologyAssignmentV1Beta1}
"""Views whose v1beta1 wire shape differs from v1beta2's: the v1beta1 schema uses the view given here."""


def _field_schema(view: type[msgspec.Struct], field: str, version: str = STORAGE_VERSION) -> dict[str, Any]:
    info = {f.name: f for f in msgspec.structs.fields(view)}[field]
    swaps = _V1BETA1_VIEWS if version == "v1beta1" else {}
    (schema, *_), defs = msgspec.json.schema_components([info.type, *swaps.values()],
                                                        ref_template="#/$defs/{name}")
    for name, other in swaps.items():
        if name in defs:
            defs[name] = defs[other.__name__]
    return _convert(schema, defs)


def object_schema(resource: Resource, version: str = STORAGE_VERSION) -> dict[str, Any]:
    """The openAPIV3Schema of one kind in one served version: apiVersion, kind, metadata, and the view's own
    top-level fields."""
    view = resource.view
    props: dict[str, Any] = {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
    }
    for f in msgspec.structs.fields(view):
        if f.name in ("api_version", "metadata"):
            continue
        props[f.encode_name] = _field_schema(view, f.name, version)
    if resource.kind == "Workload":  # Kueue's +kubebuilder:validation:Minimum=1 and MaxItems
        props["spec"]["properties"]["maximumExecutionTimeSeconds"]["minimum"] = 1
        props["spec"]["properties"]["podSets"]["maxItems"] = MAX_POD_SETS
        topology = props["spec"]["properties"]["podSets"]["items"]["properties"]["topologyRequest"]["properties"]
        for field, _, minimum in TOPOLOGY_REQUEST_MINIMUMS:  # the apiserver refuses them as Kueue's CRD does
            topology[field]["minimum"] = minimum
        # kueue-es's own record in the view and the log (events.template_digest), no field of the API
        props["spec"]["properties"]["podSets"]["items"]["properties"]["template"]["properties"].pop(DIGEST_FIELD)
        _preemption_gates(props)
    if resource.kind in ("ClusterQueue", "Cohort"):
        _resource_group_bounds(props["spec"]["properties"]["resourceGroups"])
    if not any(f.name == "status" for f in msgspec.structs.fields(view)) and resource.status_subresource:
        props["status"] = {"type": "object", _PRESERVE: True}
    if resource.kind in ("ClusterQueue", "LocalQueue", "Cohort"):
        # Kueue's queue status (usage, pending counts, conditions) is not part of our views: free-form.
        props["status"] = {"type": "object", _PRESERVE: True}
    schema: dict[str, Any] = {"type": "object", "properties": props}
    crd_markers.apply(resource.kind, schema)  # Kueue's enums, lengths and required fields
    if version == "v1beta1":
        _v1beta1_names(resource.kind, props)
    return schema


def _v1beta1_names(kind: str, props: dict[str, Any]) -> None:
    """The v1beta1 names of the fields the versions name differently (:mod:`events.conversion`)."""

    def rename(section: str, old: str, new: str) -> dict[str, Any]:
        fields = props[section]["properties"]
        fields[new] = fields.pop(old)
        return fields

    if kind == "ClusterQueue":
        spec = rename("spec", "cohortName", "cohort")
        spec["admissionChecks"] = {"type": "array", "items": {"type": "string"}}
    elif kind == "Workload":
        rename("status", "accumulatedPastExecutionTimeSeconds", "accumulatedPastExexcutionTimeSeconds")
        spec = props["spec"]["properties"]
        del spec["priorityClassRef"]
        spec["priorityClassName"] = {"type": "string"}
        spec["priorityClassSource"] = {"type": "string", "enum": [conversion.WORKLOAD_PRIORITY_CLASS_SOURCE,
                                                                   conversion.POD_PRIORITY_CLASS_SOURCE, ""]}


CONVERSION_PATH = "/convert"
"""Where the webhook server answers ConversionReviews (:mod:`connectors.k8s.conversion`)."""
NO_CONVERSION: dict[str, Any] = {"strategy": "None"}


def webhook_conversion(ca_pem: bytes = b"", *, url: str = "", service: tuple[str, str, int] | None = None
                       ) -> dict[str, Any]:
    """``spec.conversion`` calling kueue-es's conversion webhook at ``url`` or at ``service`` (name, namespace,
    port), trusting ``ca_pem`` (none: the apiserver's own roots — the running webhook sets it, see
    :func:`connectors.k8s.conversion.register`)."""
    client: dict[str, Any] = {}
    if url:
        client["url"] = url.rstrip("/") + CONVERSION_PATH
    elif service is not None:
        client["service"] = {"name": service[0], "namespace": service[1], "port": service[2],
                             "path": CONVERSION_PATH}
    else:
        raise ValueError("the conversion webhook needs a url or a service")
    if ca_pem:
        client["caBundle"] = base64.b64encode(ca_pem).decode()
    return {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": client}}


def _resource_group_bounds(groups: dict[str, Any]) -> None:
    """Kueue's ``maxItems`` on a queue's resource groups and the lists in them, and its ``minItems`` (1) on the lists
    in a group (:mod:`events.quota_rules`)."""
    groups["maxItems"] = quota_rules.MAX_GROUPS
    group = groups["items"]["properties"]
    for bounded in (group["coveredResources"], group["flavors"], group["flavors"]["items"]["properties"]["resources"]):
        bounded.update(minItems=1, maxItems=quota_rules.MAX_GROUP_ITEMS)


_SELECTABLE_FIELDS: dict[tuple[str, str], tuple[str, ...]] = {
    ("Workload", "v1beta2"): (".status.admission.clusterQueue",),
}
"""What ``--field-selector`` may name besides ``metadata.name`` and ``metadata.namespace``, per kind and version.
Kueue #11568 declares the Workload's on v1beta2 alone: the same list on every version is moved to the CRD's top
level (so its PR reports), where it must hold for each version's schema, and they differ."""


def crd(resource: Resource, conversion_: dict[str, Any] | None = None) -> dict[str, Any]:
    versions = []
    for v in SERVED_VERSIONS:
        version: dict[str, Any] = {
            "name": v,
            "served": True,
            "storage": v == STORAGE_VERSION,
            "schema": {"openAPIV3Schema": object_schema(resource, v)},
        }
        if columns := _columns(resource.kind, v):
            version["additionalPrinterColumns"] = columns
        if resource.status_subresource:
            version["subresources"] = {"status": {}}
        if selectable := _SELECTABLE_FIELDS.get((resource.kind, v)):
            version["selectableFields"] = [{"jsonPath": path} for path in selectable]
        versions.append(version)
    return _crd_document(resource, versions, conversion_)


def _crd_document(resource: Resource, versions: list[dict[str, Any]], conversion_: dict[str, Any] | None
                  ) -> dict[str, Any]:
    names: dict[str, Any] = {
        "kind": resource.kind,
        "listKind": f"{resource.kind}List",
        "plural": resource.plural,
        "singular": resource.kind.lower(),
    }
    if resource.short_names:
        names["shortNames"] = list(resource.short_names)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{resource.plural}.{resource.group}"},
        "spec": {
            "group": resource.group,
            "names": names,
            "scope": "Namespaced" if resource.namespaced else "Cluster",
            "versions": versions,
            "conversion": conversion_ or NO_CONVERSION,
        },
    }


def all_crds(conversion_: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """One CRD per kueue.x-k8s.io kind in :data:`connectors.k8s.resources.KUEUE_RESOURCES`; ``conversion_``:
    their ``spec.conversion`` (:func:`webhook_conversion`), strategy ``None`` when not given."""
    return [crd(r, conversion_) for r in KUEUE_RESOURCES]


assert all(r.kind in o.KINDS for r in KUEUE_RESOURCES)


# --- ConfigurablePreemptions' alpha PreemptionConfig --------------------------------------------------------------

_RULE_NAME = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


def preemption_config_crd() -> dict[str, Any]:
    """Kueue's alpha ``kueue.x-k8s.io/v1alpha1`` PreemptionConfig (cluster-scoped, short name ``preempcfg``), the
    only version served and stored: not among :func:`all_crds` (Kueue installs its alpha CRDs only when asked), with
    the CRD's own bounds — at most 64 rules keyed by a DNS-label name, the trigger, scope, comparison and priority
    mode enums, required fields, numeric-label bounds not negative and in order (the rest as :mod:`events.preemption_config_rules`
    checks it at import)."""
    schema = object_schema(PREEMPTION_CONFIGS, PREEMPTION_CONFIGS.version)
    spec = schema["properties"]["spec"]
    rules = spec["properties"]["rules"]
    rules.update({"maxItems": 64, "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]})
    rule = rules["items"]
    rule["required"] = ["name", "activationPolicy"]
    props = rule["properties"]
    props["name"].update({"minLength": 1, "maxLength": 63, "pattern": _RULE_NAME})
    policy = props["activationPolicy"]
    policy["required"] = ["trigger"]
    policy["properties"]["trigger"]["enum"] = list(o.PREEMPTION_TRIGGERS)
    selector = props["candidateSelectors"]["items"]
    selector["required"] = ["scope"]
    sel = selector["properties"]
    sel["scope"]["enum"] = list(o.PREEMPTION_SCOPES)
    numeric = sel["numericLabels"]
    numeric["x-kubernetes-list-type"] = "atomic"
    label = numeric["items"]
    label["required"] = ["key"]
    label["properties"]["key"]["maxLength"] = 316
    label["properties"]["comparison"]["enum"] = list(o.NUMERIC_COMPARISONS)
    for bound in ("minValue", "maxValue"):
        label["properties"][bound]["minimum"] = 0
    label["x-kubernetes-validations"] = [{
        "rule": "!(has(self.minValue) && has(self.maxValue)) || self.minValue <= self.maxValue",
        "message": MIN_ABOVE_MAX}]
    priority = sel["priority"]
    priority["required"] = ["mode", "comparison"]
    priority["properties"]["mode"]["enum"] = list(o.PRIORITY_MODES)
    priority["properties"]["comparison"]["enum"] = list(o.NUMERIC_COMPARISONS)
    version = {"name": PREEMPTION_CONFIGS.version, "served": True, "storage": True,
               "schema": {"openAPIV3Schema": schema}}
    return _crd_document(PREEMPTION_CONFIGS, [version], None)


# --- the autoscaler's ProvisioningRequest ------------------------------------------------------------------------

_DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
_IMMUTABLE = [{"rule": "self == oldSelf", "message": "Value is immutable"}]


def _preemption_gates(props: dict[str, Any]) -> None:
    """Kueue's bounds on a Workload's preemption gates: a name of 1 to 63 characters, once per list; a status
    entry's position ``Open`` or ``Closed`` and its time a date-time."""
    for part in ("spec", "status"):
        gates = props[part]["properties"]["preemptionGates"]
        gates["x-kubernetes-list-type"] = "map"
        gates["x-kubernetes-list-map-keys"] = ["name"]
        item = gates["items"]
        item["required"] = ["name"]
        item["properties"]["name"].update(minLength=1, maxLength=63)
        if part == "status":
            item["properties"]["position"]["enum"] = ["Open", "Closed"]
            item["properties"]["lastTransitionTime"]["format"] = "date-time"


def _condition_schema() -> dict[str, Any]:
    """metav1.Condition, as every API that uses it validates it."""
    return {"type": "object", "required": ["type", "status", "reason", "message", "lastTransitionTime"],
            "properties": {
                "type": {"type": "string", "maxLength": 316},
                "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                "reason": {"type": "string", "minLength": 1, "maxLength": 1024},
                "message": {"type": "string", "maxLength": 32768},
                "lastTransitionTime": {"type": "string", "format": "date-time"},
                "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0}}}


def provisioning_request_crd() -> dict[str, Any]:
    r = PROVISIONING_REQUESTS
    pod_set = {"type": "object", "required": ["count", "podTemplateRef"], "properties": {
        "count": {"type": "integer", "format": "int32", "minimum": 1},
        "podTemplateRef": {"type": "object", "required": ["name"], "properties": {
            "name": {"type": "string", "maxLength": 253, "pattern": _DNS_SUBDOMAIN}}}}}
    spec = {"type": "object", "required": ["podSets", "provisioningClassName"], "properties": {
        "provisioningClassName": {"type": "string", "maxLength": 253, "pattern": _DNS_SUBDOMAIN,
                                  "x-kubernetes-validations": _IMMUTABLE},
        "parameters": {"type": "object", "maxProperties": 100, "x-kubernetes-validations": _IMMUTABLE,
                       "additionalProperties": {"type": "string", "maxLength": 255}},
        "podSets": {"type": "array", "minItems": 1, "maxItems": 32, "items": pod_set,
                    "x-kubernetes-validations": _IMMUTABLE}}}
    status = {"type": "object", "properties": {
        "conditions": {"type": "array", "items": _condition_schema(), "x-kubernetes-list-type": "map",
                       "x-kubernetes-list-map-keys": ["type"]},
        "provisioningClassDetails": {"type": "object", "maxProperties": 64,
                                     "additionalProperties": {"type": "string", "maxLength": 32768}}}}
    schema = _object_schema(spec, status, spec_required=True)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{r.plural}.{r.group}"},
        "spec": {
            "group": r.group,
            "names": {"kind": r.kind, "listKind": f"{r.kind}List", "plural": r.plural,
                      "singular": r.kind.lower(), "shortNames": list(r.short_names)},
            "scope": "Namespaced",
            "versions": [{"name": r.version, "served": True, "storage": True,
                          "schema": {"openAPIV3Schema": schema}, "subresources": {"status": {}},
                          "additionalPrinterColumns": [_AGE]}],
        },
    }


def jobset_crd() -> dict[str, Any]:
    """A minimal structural CRD for jobset.x-k8s.io/v1alpha2 JobSets, for tests against an apiserver without the
    JobSet project installed: the fields the JobSet integration reads and writes are typed (``spec.suspend``, each
    replicated Job's ``name``, ``replicas`` and ``template``, the status's ``conditions`` and
    ``replicatedJobsStatus``), the rest of the spec and each Job template are kept as written. Not the JobSet
    project's CRD: none of its validation or defaulting."""
    r = JOBSETS
    replicated_job = {"type": "object", "required": ["name", "template"], "properties": {
        "name": {"type": "string", "maxLength": 63},
        "replicas": {"type": "integer", "format": "int32", "minimum": 0, "default": 1},
        "template": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}
    spec = {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {
        "suspend": {"type": "boolean"},
        "replicatedJobs": {"type": "array", "items": replicated_job}}}
    counts = {name: {"type": "integer", "format": "int32"} for name in ("ready", "succeeded", "failed", "active",
                                                                        "suspended")}
    status = {"type": "object", "properties": {
        "conditions": {"type": "array", "items": _condition_schema(), "x-kubernetes-list-type": "map",
                       "x-kubernetes-list-map-keys": ["type"]},
        "replicatedJobsStatus": {"type": "array", "items": {"type": "object", "required": ["name"], "properties": {
            "name": {"type": "string"}, **counts}}}}}
    schema = _object_schema(spec, status)
    return _foreign_crd(r, schema)


def mpijob_crd() -> dict[str, Any]:
    """A minimal structural CRD for kubeflow.org/v2beta1 MPIJobs, for tests against an apiserver without the MPI
    operator installed: the fields the MPIJob integration reads and writes are typed (``spec.runPolicy.suspend`` and
    ``schedulingPolicy.priorityClass``, each replica spec's ``replicas`` and ``template``, the status's
    ``conditions`` and ``replicaStatuses``), the rest is kept as written. Not the MPI operator's CRD: none of its
    validation or defaulting."""
    replica_spec = {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {
        "replicas": {"type": "integer", "format": "int32", "minimum": 0},
        "template": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}
    run_policy = {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {
        "suspend": {"type": "boolean"},
        "schedulingPolicy": {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {
            "priorityClass": {"type": "string"}}}}}
    spec = {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {
        "runPolicy": run_policy, "runLauncherAsWorker": {"type": "boolean"},
        "mpiReplicaSpecs": {"type": "object", "additionalProperties": replica_spec}}}
    counts = {name: {"type": "integer", "format": "int32"} for name in ("active", "succeeded", "failed")}
    condition = {"type": "object", "required": ["type", "status"], "properties": {
        "type": {"type": "string"}, "status": {"type": "string"}, "reason": {"type": "string"},
        "message": {"type": "string"}, "lastTransitionTime": {"type": "string", "format": "date-time"},
        "lastUpdateTime": {"type": "string", "format": "date-time"}}}
    status = {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {
        "conditions": {"type": "array", "items": condition},
        "replicaStatuses": {"type": "object", "additionalProperties": {
            "type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": counts}}}}
    schema = _object_schema(spec, status)
    return _foreign_crd(MPIJOBS, schema)


def _ray_cluster_spec() -> dict[str, Any]:
    """The schema of a Ray cluster spec (a RayCluster's, a RayJob's ``rayClusterSpec``): the fields the Ray
    integrations read and write typed, the rest kept as written."""
    template = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    integer = {"type": "integer", "format": "int32"}
    worker_group = {"type": "object", "required": ["groupName"], "x-kubernetes-preserve-unknown-fields": True,
                    "properties": {"groupName": {"type": "string"}, "replicas": integer, "minReplicas": integer,
                                   "maxReplicas": integer, "numOfHosts": integer, "template": template}}
    return {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {
        "suspend": {"type": "boolean"}, "enableInTreeAutoscaling": {"type": "boolean"},
        "headGroupSpec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                          "properties": {"template": template}},
        "workerGroupSpecs": {"type": "array", "items": worker_group}}}


def raycluster_crd() -> dict[str, Any]:
    """A minimal structural CRD for ray.io/v1 RayClusters, for tests against an apiserver without KubeRay
    installed: ``spec.suspend``, ``enableInTreeAutoscaling``, the head's and worker groups' templates and counts,
    the status's ``state`` and ``reason`` typed, the rest kept as written. Not KubeRay's CRD: none of its
    validation or defaulting."""
    status = {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {
        "state": {"type": "string"}, "reason": {"type": "string"}}}
    schema = _object_schema(_ray_cluster_spec(), status)
    return _foreign_crd(RAYCLUSTERS, schema)


def rayjob_crd() -> dict[str, Any]:
    """A minimal structural CRD for ray.io/v1 RayJobs, as :func:`raycluster_crd`: ``spec.suspend``,
    ``shutdownAfterJobFinishes``, ``clusterSelector``, ``submissionMode`` (defaulted ``K8sJobMode`` as KubeRay's CRD
    does), ``submitterPodTemplate`` and ``rayClusterSpec``; the status's deployment and job status, message and
    cluster state typed."""
    spec = {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {
        "suspend": {"type": "boolean"}, "shutdownAfterJobFinishes": {"type": "boolean"},
        "clusterSelector": {"type": "object", "additionalProperties": {"type": "string"}},
        "submissionMode": {"type": "string", "default": "K8sJobMode"},
        "submitterPodTemplate": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "rayClusterSpec": _ray_cluster_spec()}}
    status = {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {
        "jobDeploymentStatus": {"type": "string"}, "jobStatus": {"type": "string"}, "message": {"type": "string"},
        "rayClusterName": {"type": "string"},
        "rayClusterStatus": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                             "properties": {"state": {"type": "string"}}}}}
    schema = _object_schema(spec, status)
    return _foreign_crd(RAYJOBS, schema)


def rayservice_crd() -> dict[str, Any]:
    """A minimal structural CRD for ray.io/v1 RayServices, as :func:`raycluster_crd`: ``spec.rayClusterConfig`` (a
    Ray cluster spec) typed, the rest of the spec kept as written; the status's conditions and the active service's
    cluster name typed."""
    spec = {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {
        "rayClusterConfig": _ray_cluster_spec()}}
    condition = {"type": "object", "required": ["type", "status"], "x-kubernetes-preserve-unknown-fields": True,
                 "properties": {"type": {"type": "string"}, "status": {"type": "string"}}}
    status = {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {
        "conditions": {"type": "array", "items": condition},
        "activeServiceStatus": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                                "properties": {"rayClusterName": {"type": "string"}}}}}
    schema = _object_schema(spec, status)
    return _foreign_crd(RAYSERVICES, schema)



def sparkapplication_crd() -> dict[str, Any]:
    """A minimal structural CRD for sparkoperator.k8s.io/v1beta2 SparkApplications: ``spec.suspend``, the driver's
    and executor's specs (``executor.instances`` an integer) kept as written; the status's application state and
    executor states typed."""
    loose = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    spec = {**loose, "properties": {
        "suspend": {"type": "boolean"}, "mode": {"type": "string"}, "driver": loose,
        "executor": {**loose, "properties": {"instances": {"type": "integer", "format": "int32"}}}}}
    status = {**loose, "properties": {
        "applicationState": {**loose, "properties": {"state": {"type": "string"},
                                                     "errorMessage": {"type": "string"}}},
        "executorState": {"type": "object", "additionalProperties": {"type": "string"}}}}
    schema = _object_schema(spec, status)
    crd = _foreign_crd(SPARK_APPLICATIONS, schema)
    # a *.k8s.io group is protected: the apiserver wants its approval annotation (an unapproved one is served)
    crd["metadata"]["annotations"] = {"api-approved.kubernetes.io": "unapproved, a minimal structural CRD for tests"}
    return crd


def leaderworkerset_crd() -> dict[str, Any]:
    """A minimal structural CRD for leaderworkerset.x-k8s.io/v1 LeaderWorkerSets, for tests against an apiserver
    without the LWS project installed: the fields the LeaderWorkerSet integration reads are typed
    (``spec.replicas``, ``spec.startupPolicy``, ``leaderWorkerTemplate.size`` and its two templates,
    ``status.replicas`` and ``updatedReplicas``), the rest is kept as written. Not the LWS project's CRD: none of its
    validation or defaulting."""
    template = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    lwt = {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {
        "size": {"type": "integer", "format": "int32", "minimum": 1},
        "leaderTemplate": template, "workerTemplate": template}}
    spec = {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {
        "replicas": {"type": "integer", "format": "int32", "minimum": 0},
        "startupPolicy": {"type": "string"}, "leaderWorkerTemplate": lwt}}
    status = {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {
        "replicas": {"type": "integer", "format": "int32"}, "updatedReplicas": {"type": "integer", "format": "int32"}}}
    schema = _object_schema(spec, status)
    return _foreign_crd(LEADER_WORKER_SETS, schema)


def trainjob_crd() -> dict[str, Any]:
    """A minimal structural CRD for Kubeflow Trainer's trainer.kubeflow.org/v1alpha1 TrainJobs, for tests against an
    apiserver without the Trainer installed: ``spec.suspend``, ``runtimeRef``, ``trainer.numNodes``,
    ``podTemplateOverrides`` and ``labels``, the status's ``conditions`` and ``jobsStatus`` typed, the rest kept as
    written. Not the Trainer's CRD: none of its validation or defaulting."""
    kept = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    integer = {"type": "integer", "format": "int32"}
    spec = {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {
        "suspend": {"type": "boolean"},
        "runtimeRef": {"type": "object", "required": ["name"], "properties": {
            "apiGroup": {"type": "string"}, "kind": {"type": "string"}, "name": {"type": "string"}}},
        "trainer": {**kept, "properties": {"numNodes": integer}},
        "podTemplateOverrides": {"type": "array", "items": kept},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}}}}
    condition = {"type": "object", "required": ["type", "status"], "x-kubernetes-preserve-unknown-fields": True,
                 "properties": {"type": {"type": "string"}, "status": {"type": "string"},
                                "reason": {"type": "string"}, "message": {"type": "string"}}}
    job_status = {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {
        "name": {"type": "string"}, **{k: integer for k in ("ready", "succeeded", "failed", "active", "suspended")}}}
    status = {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {
        "conditions": {"type": "array", "items": condition}, "jobsStatus": {"type": "array", "items": job_status}}}
    schema = _object_schema(spec, status)
    return _foreign_crd(TRAINJOBS, schema)


def training_runtime_crd(cluster: bool = False) -> dict[str, Any]:
    """A minimal structural CRD for trainer.kubeflow.org/v1alpha1 TrainingRuntimes (``cluster``:
    ClusterTrainingRuntimes, cluster-scoped), as :func:`trainjob_crd`: the spec's ``mlPolicy`` and ``template`` (a
    JobSet template) kept as written."""
    kept = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    schema = _object_schema({**kept, "properties": {"mlPolicy": kept, "template": kept}})
    crd = _foreign_crd(CLUSTER_TRAINING_RUNTIMES if cluster else TRAINING_RUNTIMES, schema)
    if cluster:
        crd["spec"]["scope"] = "Cluster"
    return crd


def kubeflow_crd(kind: str, specs_field: str) -> dict[str, Any]:
    """A minimal structural CRD for the training operator's kubeflow.org/v1 ``kind`` (PyTorchJob, TFJob, ...), its
    replica specs at ``spec.<specs_field>``, for tests against an apiserver without the operator installed: the
    MPIJob's test CRD (:func:`mpijob_crd`; both keep a ``runPolicy`` and the same status) with the kind's replica
    specs field in place of ``mpiReplicaSpecs``. Not the operator's CRD: none of its validation or defaulting."""
    schema = mpijob_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    spec = schema["properties"]["spec"]["properties"]
    del spec["runLauncherAsWorker"]
    spec[specs_field] = spec.pop("mpiReplicaSpecs")
    return _foreign_crd(KUBEFLOW_JOBS[kind], schema)


def appwrapper_crd() -> dict[str, Any]:
    """A minimal structural CRD for workload.codeflare.dev/v1beta2 AppWrappers, for tests against an apiserver
    without the AppWrapper project installed: ``spec.suspend``, each component's ``podSets`` (``replicas``, ``path``,
    ``annotations``) and ``podSetInfos`` typed, its ``template`` an embedded object kept as written (the AppWrapper
    API's raw template); the status's ``phase``, conditions and ``componentStatus`` pod sets. Not the AppWrapper
    project's CRD: none of its validation or defaulting."""
    pod_set = {"type": "object", "required": ["path"], "properties": {
        "replicas": {"type": "integer", "format": "int32"}, "path": {"type": "string"},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}}}}
    component = {"type": "object", "required": ["template"], "properties": {
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
        "podSets": {"type": "array", "items": pod_set},
        "podSetInfos": {"type": "array", "items": {"type": "object", _PRESERVE: True}},
        "template": {"type": "object", _PRESERVE: True, "x-kubernetes-embedded-resource": True}}}
    spec = {"type": "object", "required": ["components"], "properties": {
        "suspend": {"type": "boolean"}, "managedBy": {"type": "string"},
        "components": {"type": "array", "items": component}}}
    status = {"type": "object", _PRESERVE: True, "properties": {
        "phase": {"type": "string"},
        "conditions": {"type": "array", "items": _condition_schema(), "x-kubernetes-list-type": "map",
                       "x-kubernetes-list-map-keys": ["type"]},
        "componentStatus": {"type": "array", "items": {"type": "object", _PRESERVE: True, "properties": {
            "podSets": {"type": "array", "items": pod_set}}}}}}
    schema = _object_schema(spec, status)
    return _foreign_crd(APPWRAPPERS, schema)


def _object_schema(spec: dict[str, Any], status: dict[str, Any] | None = None, *, spec_required: bool = False
                   ) -> dict[str, Any]:
    """The top of a kind's ``openAPIV3Schema``: an object with ``apiVersion``, ``kind``, ``metadata``, ``spec`` and
    (when given) ``status``, the ``spec`` required when ``spec_required``."""
    schema: dict[str, Any] = {"type": "object"}
    if spec_required:
        schema["required"] = ["spec"]
    properties = {"apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
                  "spec": spec}
    if status is not None:
        properties["status"] = status
    schema["properties"] = properties
    return schema


def _foreign_crd(r: Resource, schema: dict[str, Any]) -> dict[str, Any]:
    """The CRD serving another project's kind ``r`` (one version, a status subresource) with ``schema``."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{r.plural}.{r.group}"},
        "spec": {
            "group": r.group,
            "names": {"kind": r.kind, "listKind": f"{r.kind}List", "plural": r.plural, "singular": r.kind.lower()},
            "scope": "Namespaced",
            "versions": [{"name": r.version, "served": True, "storage": True,
                          "schema": {"openAPIV3Schema": schema}, "subresources": {"status": {}}}],
        },
    }


# --- installing ----------------------------------------------------------------------------------------------

CRD_RESOURCE = Resource("CustomResourceDefinition", "apiextensions.k8s.io", "v1", "customresourcedefinitions", False)


async def install(client: KubeClient, *, timeout_s: float = 60.0, docs: list[dict[str, Any]] | None = None
                  ) -> list[str]:
    """Create or update every CRD (``docs``, by default Kueue's) and wait until the apiserver serves them
    (``Established``); returns their names."""
    names = []
    for doc in all_crds() if docs is None else docs:
        name = doc["metadata"]["name"]
        names.append(name)
        try:
            await client.create(CRD_RESOURCE, doc)
        except AlreadyExists:
            current = msgspec.json.decode(await client.get(CRD_RESOURCE, name))
            doc = {**doc, "metadata": {**doc["metadata"],
                                       "resourceVersion": current["metadata"]["resourceVersion"]}}
            await client.replace(CRD_RESOURCE, name, doc)
    deadline = asyncio.get_running_loop().time() + timeout_s
    for name in names:
        while True:
            crd_now = msgspec.json.decode(await client.get(CRD_RESOURCE, name))
            conds = {c["type"]: c["status"] for c in (crd_now.get("status") or {}).get("conditions") or []}
            if conds.get("Established") == "True":
                break
            if asyncio.get_running_loop().time() > deadline:
                raise KubeError(f"CustomResourceDefinition {name} was not established within {timeout_s:.0f}s")
            await asyncio.sleep(0.1)
    return names
