"""What Kueue refuses in one of its own objects, beyond the shapes :func:`events.manifests.validate_object`
holds every kind to (it runs these last): the checks of Kueue's validating webhooks
(``pkg/webhooks/*_webhook.go``) and the CEL and schema rules of its CRDs (``apis/kueue/v1beta2/*_types.go``),
which kueue-es's generated CRDs do not carry (but for a few enums and bounds, declared once for both in
:mod:`events.crd_markers`). Messages are Kueue's where its source shows them. ``kueue-es import``, a
STATE.yaml and the validating webhooks refuse an object that fails one; the watch does not
(:func:`events.manifests.check_foldable`): Kueue's controllers act on whatever is stored. Where the view
cannot tell what Kueue would see (an empty field from an absent one), :func:`check_document` reads the plain
data, or the check errs on taking the object. None of this runs in the fold.

Whatever the gates (:func:`check`, :func:`check_document`):

* Workload: no ``pods`` resource in the requests or limits of a container, an init container or the pod; a
  ``priorityClassRef`` names a PriorityClass of ``scheduling.k8s.io`` or a WorkloadPriorityClass of
  ``kueue.x-k8s.io`` and comes with a ``priority``; while ``QuotaReserved`` is True there is an admission (an update
  leaving a Workload without one, as it was, is let through: :mod:`events.update_rules`), with one
  assignment per pod set, each naming a pod set, its usage a multiple of its count; conditions as
  ``metav1.Condition`` holds them (unique types that are qualified names, a known status, a reason, a
  ``lastTransitionTime``, bounded reason and message, ``observedGeneration`` not negative); an admission check's
  ``podSetUpdates`` name pod sets and carry well-formed labels, annotations, node selector and tolerations; the
  entries of its lists keyed by name (pod sets, pod set assignments, admission checks, resource requests) each
  named once (the CRD's list maps).
* ResourceFlavor: well-formed node labels, taints (unique by key and effect) and tolerations, at most 8 of each;
  a ``topologyName`` needs node labels; at most 16 ``resourceWeights``, each a quantity above 0 (KEP-8902).
  Its CRD's rules broken are refused together, then its webhook's (labels, taints, tolerations' keys, weights
  above 0), together, as Kubernetes words them (``Invalid value: "<bad>": <why>``). Its CEL rules (on
  ``spec``, ``nodeTaints`` and ``tolerations``) are read from the plain data and reported as the apiserver
  reports a CEL rule's error: at the node the rule sits on, once per rule, ``Invalid value: "object"`` or
  ``"array"``; an empty ``operator`` or ``effect`` given is none of the allowed ones.
* ClusterQueue and Cohort: resource names well formed and each in one group; borrowing and lending limits only
  with a cohort (a ClusterQueue's lending limit at most its nominal quota) or a parent; a fair sharing weight 0 or
  above 1e-9, not negative (refused at ``spec.fairSharing``, as Kueue reports it). A ClusterQueue's namespace
  selector is well formed, its preemption and flavor fungibility policies known and consistent, at most 256
  flavors and 256 resources in all and 512 flavor-resource quotas in a group (:mod:`events.quota_rules`); the
  CRD's CEL rules hold the policies to the same consistency as Kueue's webhook does, and refuse first. Its
  admission checks strategy names 1–64 checks, each once, each on at most 64 flavors, each once (the CRD's
  markers, :mod:`events.crd_markers`). The CRD's rules broken are refused together, first and without the
  webhook's; then those of Kueue's webhook, together, in Kueue's order (:func:`check_cluster_queue`,
  :func:`check_cohort`).
* LocalQueue: a known ``stopPolicy``; a ``clusterQueue``, when given (even empty), a DNS subdomain. Topology:
  1–16 unique levels, each a label key, ``kubernetes.io/hostname`` only the lowest. AdmissionCheck: a
  ``controllerName`` of 1–253 characters, its parameters' reference well formed.
* Tolerations (a flavor's, a pod set update's): one without a key has operator ``Exists``, and one with operator
  ``Exists`` no value, not even an empty one (the CRDs' CEL rules, which tell a field left out from one given
  empty).
* The names one object gives of another, as the CRDs' types hold them: a queue, ClusterQueue, cohort, flavor,
  topology or priority class name is a DNS subdomain of at most 253 characters, a pod set name a DNS label, an
  admission check name 1–316 characters.

Under a feature gate (for :func:`events.manifests.validate_gated`, while the gate is on): no negative request or
limit in a pod set's containers, init containers or pod-level resources
(``WorkloadValidateResourcesAreNonNegative``; Kueue's webhook does not look at the overhead); a well-formed
``kueue.x-k8s.io/admission-gated-by`` annotation (``AdmissionGatedBy``); ``minCount`` at most its pod set's count,
in one pod set only, and not on an elastic job (``PartialAdmission``: off, Kueue's defaulting webhook drops
``minCount`` before any check) unless ``ElasticJobsViaWorkloadSlicesWithPartialReplicaScaleUp`` is on, when an
elastic job's Workload may carry it in several pod sets.

Left out: the MultiKueue ``clusterName`` rules and the admission gate's update rules, held on update
(:mod:`events.update_rules`: the apiserver drops the status a Workload is created with, so none of the
``clusterName`` rules bites on creation).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

import msgspec

from events import admission_gate, crd_markers, quota_rules
from events import objects as o
from events.errors import InvalidInput, SchemaRefused, aggregate
from events.field_errors import CEL_NOT_CHECKED, go_quote, too_long, with_cel_rules
from events.labels import (
    DNS_LABEL,
    NAME_FMT,
    SUBDOMAIN,
    SUBDOMAIN_FMT,
    annotation_map_errors,
    label_key_problems,
    label_map_errors,
    label_value_problems,
    regex_error,
    selector_field_errors,
)
from events.quantity import parse_quantity, quantity_string, to_int
from events.timefmt import parse_time

RESERVED_RESOURCE = "pods"
HOSTNAME = "kubernetes.io/hostname"
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
PRIORITY_CLASS_KINDS = {"kueue.x-k8s.io": "WorkloadPriorityClass", "scheduling.k8s.io": "PriorityClass"}
"""The group of a ``priorityClassRef`` and the one kind it may name."""
MAX_FLAVOR_ENTRIES = 8
MAX_TOPOLOGY_LEVELS = 16
MIN_WEIGHT = Decimal("1e-9")
NAME_REFERENCE = (SUBDOMAIN, 253)
"""A queue's, ClusterQueue's, cohort's, flavor's, topology's or priority class's name where another object gives
it (Kueue's ``*Reference`` types): a DNS subdomain."""
POD_SET_REFERENCE = (DNS_LABEL, 63)
MAX_CHECK_NAME = 316
CONDITION_STATUSES = ("False", "True", "Unknown")
MAX_REASON_BYTES, MAX_MESSAGE_BYTES = 1024, 32 * 1024
GO_ZERO_TIME_MS = parse_time("0001-01-01T00:00:00Z")
"""Go's zero time, which a ``metav1.Time`` reads as unset."""
_REASON_FMT = "[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?"
_REASON = re.compile(_REASON_FMT)
_REASON_RULE = regex_error("a condition reason must start with alphabetic character, optionally followed by "
                           "a string of alphanumeric characters or '_,:', and must end with an alphanumeric "
                           "character or '_'",
                           _REASON_FMT, "my_name", "MY_NAME", "MyName", "ReasonA,ReasonB", "ReasonA:ReasonB")
"""apimachinery's ``isValidConditionReason`` words (v0.36)."""
ADMISSION_GATED_BY = admission_gate.ANNOTATION
ELASTIC_JOB = "kueue.x-k8s.io/elastic-job"
ADMISSION_REQUIRED = ("field `status.admission`: Required value: must be set while the QuotaReserved "
                      "condition is True")
"""Kueue's webhook error for a Workload holding quota with no admission (a ``field.Required``, its test "quota
reserved without an admission is refused, not a panic"; the words after the type are kueue-es's); an update
refuses it only where the old object was not in that state already (:mod:`events.update_rules`)."""

_KIND = re.compile(r"[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?")
_LEVEL_LABEL = re.compile(rf"({SUBDOMAIN_FMT}/)?({NAME_FMT})")
"""A Topology level's ``nodeLabel``, as Kueue's CRD's pattern: a label key, its parts of any length."""


def check(obj: o.KObject, where: str, *, ratcheted: frozenset[str] = frozenset(),
          doc: Mapping[str, Any] | None = None) -> None:
    """Refuse ``obj`` (``where`` names it) if Kueue refuses it whatever its settings; see the module
    docstring. ``ratcheted``: the CRD markers' errors an update keeps
    (:func:`events.crd_markers.ratcheted`); ``doc``: the plain data ``obj`` was read from, which tells a field
    left out from one given empty (without it, the view's empty fields read as left out)."""
    match obj:
        case o.Workload():
            _workload(obj, where)
        case o.ResourceFlavor():
            spec = _mapping(doc.get("spec")) if doc is not None else msgspec.to_builtins(obj.spec)
            _resource_flavor(obj.spec, where, ratcheted, spec)
        case o.ClusterQueue():
            check_cluster_queue(obj, where)
        case o.Cohort():
            check_cohort(obj, where)
        case o.LocalQueue():  # an empty clusterQueue only the document shows given: the pattern refuses it
            given = doc is not None and "clusterQueue" in _mapping(doc.get("spec"))
            refuse_all(_name_reference_errors(obj.spec.cluster_queue, "spec.clusterQueue", optional=not given)
                       + _one_of_errors(obj.spec.stop_policy, ("None", "Hold", "HoldAndDrain"), "spec.stopPolicy"),
                       where, crd=True)
        case o.Topology():
            _topology(obj.spec, where)
        case o.AdmissionCheck():
            _admission_check(obj.spec, where)
        case o.WorkloadPriorityClass():  # a value left out only the document shows (document_errors)
            markers = crd_markers.errors("WorkloadPriorityClass", msgspec.to_builtins(obj), required=False,
                                         ratcheted=ratcheted)
            refuse_all(markers, where, crd=True)
        case _:  # a ProvisioningRequestConfig's markers; an integer out of its format's range
            kind = type(obj).__struct_config__.tag
            markers = crd_markers.errors(kind, msgspec.to_builtins(obj), required=False, ratcheted=ratcheted)
            refuse_all(markers, where, crd=True)


# --- Workload ---------------------------------------------------------------------------------------------------


MAX_POD_SETS = 18
"""The Workload CRD's ``maxItems`` on ``spec.podSets`` (Kueue v0.19.0 raised it from 10, #12819): an admission
rule; the watch folds a stored Workload with more, which a CRD without the bound kept."""


class WorkloadRefused(InvalidInput):
    """A Workload refused for the rules of its CRD (``schema``) or, those kept, of Kueue's webhook (``webhook``):
    the field errors, so that an update's own can join them (:mod:`connectors.k8s.validating`), and the
    ``workload`` refused when known."""

    def __init__(self, where: str, schema: list[str], webhook: list[str], workload: o.Workload | None = None) -> None:
        self.where, self.schema, self.webhook, self.workload = where, schema, webhook, workload
        super().__init__(f"{where}: {aggregate(schema or webhook)}")


def _workload(wl: o.Workload, where: str) -> None:
    """Every rule of the CRD's broken is refused together, first and without the webhook's; then every one of
    Kueue's Workload webhook, together, in its order (:func:`workload_errors`)."""
    schema, webhook = workload_errors(wl)
    if schema or webhook:
        raise WorkloadRefused(where, schema, webhook)


def workload_errors(wl: o.Workload, *, unique_names: bool = True,
                    ratcheted: frozenset[str] = frozenset()) -> tuple[list[str], list[str]]:
    """The Workload's field errors (``field `path`: problem``): those of the rules its CRD holds (the names it
    gives, the pod sets' count, the priority class reference, the assignments' count, the conditions, the
    tolerations' CEL rules, the list maps' names given once), then those of Kueue's webhook in its order
    (``ValidateWorkload``: the pod sets' reserved resource, the admission while QuotaReserved is True, the admission
    checks' pod set updates). ``unique_names``: whether the list maps' names given once are checked
    (:func:`duplicate_list_map_errors`); ``ratcheted``: the CRD markers' errors an update keeps
    (:func:`events.crd_markers.ratcheted`)."""
    schema = _name_reference_errors(wl.spec.queue_name, "spec.queueName", optional=True)
    if len(wl.spec.pod_sets) > MAX_POD_SETS:
        schema.append(f"field `spec.podSets`: Too many: {len(wl.spec.pod_sets)}: must have at most {MAX_POD_SETS} "
                      "items")
    for i, ps in enumerate(wl.spec.pod_sets):
        schema += _name_reference_errors(ps.name, f"spec.podSets[{i}].name", kind=POD_SET_REFERENCE)
    schema += _priority_class_ref_errors(wl.spec)
    schema += _admission_name_errors(wl.status)
    schema += crd_markers.errors("Workload", msgspec.to_builtins(wl), required=False, ratcheted=ratcheted)
    if unique_names:
        schema += duplicate_list_map_errors(wl)
    reserved = any(c.type == "QuotaReserved" and c.status == "True" for c in wl.status.conditions)
    admission = wl.status.admission
    if reserved and admission is not None and len(admission.pod_set_assignments) != len(wl.spec.pod_sets):
        schema.append("field `status.admission.podSetAssignments`: podSetAssignments must have the same number of "
                      "podSets as the spec")
    schema += condition_errors(wl.status.conditions, "status.conditions")
    for i, state in enumerate(wl.status.admission_checks):
        for j, update in enumerate(state.pod_set_updates):
            schema += _toleration_rule_errors(update.tolerations, f"status.admissionChecks[{i}].podSetUpdates[{j}]"
                                                                  ".tolerations")
    if schema:
        return schema, []
    webhook: list[str] = []
    for i, ps in enumerate(wl.spec.pod_sets):
        webhook += _reserved_resource_errors(ps.template.spec, f"spec.podSets[{i}].template.spec")
    if reserved:
        webhook += _reserved_admission_errors(wl)
    webhook += _pod_set_update_errors(wl)
    return schema, webhook


def _field(problem: str | None, path: str) -> list[str]:
    return [f"field `{path}`: {problem}"] if problem is not None else []


def _fields(bodies: Sequence[str], path: str) -> list[str]:
    """Field error bodies (:mod:`events.field_errors`' forms) all at ``path``."""
    return [f"field `{path}`: {body}" for body in bodies]


def _reserved_resource_errors(pod: o.PodSpec, at: str) -> list[str]:
    """Kueue counts a pod set's pods as the resource ``pods``: no container, init container or pod may name it."""
    owners = [(f"{at}.{field}[{i}].resources", c.resources)
              for field, containers in (("initContainers", pod.init_containers), ("containers", pod.containers))
              for i, c in enumerate(containers)]
    if pod.resources is not None:
        owners.append((f"{at}.resources", pod.resources))
    return [f'field `{path}.{part}[{RESERVED_RESOURCE}]`: Invalid value: "{RESERVED_RESOURCE}": the key is reserved '
            "for internal kueue use"
            for path, resources in owners
            for part, values in (("requests", resources.requests), ("limits", resources.limits))
            if RESERVED_RESOURCE in values]


def _priority_class_ref_errors(spec: o.WorkloadSpec) -> list[str]:
    ref = spec.priority_class_ref
    if ref is None:
        return []
    at = "spec.priorityClassRef"
    errors = _one_of_errors(ref.group, tuple(PRIORITY_CLASS_KINDS), f"{at}.group")
    errors += _one_of_errors(ref.kind, tuple(PRIORITY_CLASS_KINDS.values()), f"{at}.kind")
    if not errors and ref.kind != PRIORITY_CLASS_KINDS[ref.group]:
        errors.append(f"field `{at}.kind`: only the {PRIORITY_CLASS_KINDS[ref.group]} kind is allowed for the "
                      f"{ref.group} group")
    errors += _name_reference_errors(ref.name, f"{at}.name")
    if spec.priority is None:
        errors.append("field `spec.priority`: priority should not be nil when priorityClassRef is set")
    return errors


def _admission_name_errors(status: o.WorkloadStatus) -> list[str]:
    """The names the status gives of other objects: the admitting ClusterQueue, pod sets, flavors, checks."""
    errors: list[str] = []
    admission = status.admission
    if admission is not None:
        errors += _name_reference_errors(admission.cluster_queue, "status.admission.clusterQueue")
        for i, psa in enumerate(admission.pod_set_assignments):
            at = f"status.admission.podSetAssignments[{i}]"
            errors += _name_reference_errors(psa.name, f"{at}.name", kind=POD_SET_REFERENCE)
            for r in sorted(psa.flavors):
                errors += _name_reference_errors(psa.flavors[r], f"{at}.flavors[{r}]")
    for i, state in enumerate(status.admission_checks):
        if not 1 <= len(state.name) <= MAX_CHECK_NAME:
            errors.append(_check_name_problem(state.name, f"status.admissionChecks[{i}].name"))
    for i, req in enumerate(status.resource_requests):
        errors += _name_reference_errors(req.name, f"status.resourceRequests[{i}].name", kind=POD_SET_REFERENCE)
    return errors


LIST_MAPS = ("spec.podSets", "status.admission.podSetAssignments", "status.admissionChecks",
             "status.resourceRequests")
"""A Workload's lists keyed by ``name`` (the CRD's ``+listType=map``, ``+listMapKey=name``)."""


def duplicate_list_map_errors(wl: o.Workload, lists: Sequence[str] = LIST_MAPS) -> list[str]:
    """Every entry of the Workload's list maps (those of ``lists``) whose name an earlier entry has, as the
    apiserver refuses it."""
    admission = wl.status.admission
    names = {"spec.podSets": [ps.name for ps in wl.spec.pod_sets],
             "status.admission.podSetAssignments": [psa.name for psa in admission.pod_set_assignments]
             if admission is not None else [],
             "status.admissionChecks": [state.name for state in wl.status.admission_checks],
             "status.resourceRequests": [req.name for req in wl.status.resource_requests]}
    errors: list[str] = []
    for at in lists:
        seen: set[str] = set()
        for i, name in enumerate(names[at]):
            if name in seen:
                errors.append(f"field `{at}[{i}]`: Duplicate value: {quota_rules.go_map(name)}")
            seen.add(name)
    return errors


def check_conditions(conditions: Sequence[o.Condition], where: str, at: str) -> None:
    """Refuse every one of :func:`condition_errors`, together."""
    refuse_all(condition_errors(conditions, at), where)


def condition_errors(conditions: Sequence[o.Condition], at: str) -> list[str]:
    """``metav1.Condition`` as the apiserver's rules hold it, which Kueue's Workload webhook applies: types unique
    and qualified names, a known status, a reason of Kubernetes' syntax, a transition time, lengths bounded."""
    errors: list[str] = []
    seen: set[str] = set()
    for i, c in enumerate(conditions):
        path = f"{at}[{i}]"
        if c.type in seen:
            errors.append(f'field `{path}.type`: Duplicate value: "{c.type}"')
        seen.add(c.type)
        # ValidateLabelName's words, as for a label key (every fault, each an Invalid value)
        errors += [f"field `{path}.type`: Invalid value: {go_quote(c.type)}: {m}"
                   for m in label_key_problems(c.type)]
        errors += _one_of_errors(c.status, CONDITION_STATUSES, f"{path}.status")
        if c.observed_generation < 0:
            errors.append(f"field `{path}.observedGeneration`: Invalid value: {c.observed_generation}: must be "
                          "greater than or equal to zero")
        if c.last_transition_time is None or parse_time(c.last_transition_time) == GO_ZERO_TIME_MS:
            # no detail (apimachinery v0.36)
            errors.append(f"field `{path}.lastTransitionTime`: Required value")
        errors += _field(_reason_problem(c.reason), f"{path}.reason")
        if len(c.message.encode()) > MAX_MESSAGE_BYTES:
            errors.append(f"field `{path}.message`: Too long: may not be more than {MAX_MESSAGE_BYTES} bytes")
    return errors


def _reason_problem(reason: str) -> str | None:
    if not reason:
        return "Required value"
    if not _REASON.fullmatch(reason):
        return f'Invalid value: "{reason}": {_REASON_RULE}'
    if len(reason) > MAX_REASON_BYTES:
        return f"Too long: may not be more than {MAX_REASON_BYTES} bytes"
    return None


def _reserved_admission_errors(wl: o.Workload) -> list[str]:
    """While QuotaReserved is True: an admission, each assignment a pod set's, charging a whole number of Kueue's
    units per admitted pod (the assignments' count is the CRD's rule: :func:`workload_errors`)."""
    admission = wl.status.admission
    if admission is None:
        return [ADMISSION_REQUIRED]
    errors: list[str] = []
    names = {ps.name for ps in wl.spec.pod_sets}
    for i, psa in enumerate(admission.pod_set_assignments):
        at = f"status.admission.podSetAssignments[{i}]"
        if psa.name not in names:
            errors.append(f'field `{at}.name`: Not found: "{psa.name}"')
        count = psa.count or 0
        for r in sorted(psa.resource_usage) if count > 0 else ():
            if to_int(r, psa.resource_usage[r]) % count:
                usage = go_quote(str(psa.resource_usage[r]))
                errors.append(f"field `{at}.resourceUsage[{r}]`: Invalid value: {usage}: is not a multiple of {count}")
    return errors


def _pod_set_update_errors(wl: o.Workload) -> list[str]:
    names = sorted(ps.name for ps in wl.spec.pod_sets)
    errors: list[str] = []
    for i, state in enumerate(wl.status.admission_checks):
        for j, update in enumerate(state.pod_set_updates):
            at = f"status.admissionChecks[{i}].podSetUpdates[{j}]"
            errors += _one_of_errors(update.name, names, f"{at}.name")
            errors += toleration_key_errors(update.tolerations, f"{at}.tolerations")
            errors += _fields(annotation_map_errors(update.annotations), f"{at}.annotations")
            errors += _fields(label_map_errors(update.node_selector), f"{at}.nodeSelector")
            errors += _fields(label_map_errors(update.labels), f"{at}.labels")
    return errors


# --- ResourceFlavor ---------------------------------------------------------------------------------------------


def _resource_flavor(spec: o.ResourceFlavorSpec, where: str, ratcheted: frozenset[str] = frozenset(),
                     doc: Mapping[str, Any] | None = None) -> None:
    """The CRD's rules first, every broken one refused together (the apiserver calls no webhook for an object its
    schema refuses; ``ratcheted``: the markers' errors an update keeps): its schema's, then, unless one of
    those stops them (too many entries, a name too long: the apiserver's
    :data:`~events.field_errors.CEL_NOT_CHECKED` instead), its CEL rules (:func:`flavor_rule_errors`, read
    from ``doc``, the spec as plain data); then every rule of Kueue's ResourceFlavor webhook, together, in its
    order: the node labels, the taints, the tolerations' keys, then the weights."""
    blocking = [f"field `spec.{field}` must have at most {MAX_FLAVOR_ENTRIES} items, has {len(entries)}"
                for field, entries in (("nodeLabels", spec.node_labels), ("nodeTaints", spec.node_taints),
                                       ("tolerations", spec.tolerations))
                if len(entries) > MAX_FLAVOR_ENTRIES]
    schema = _name_reference_errors(spec.topology_name, "spec.topologyName") \
        if spec.topology_name is not None else []
    blocking += crd_markers.errors("ResourceFlavor", {"spec": msgspec.to_builtins(spec)}, required=False,
                                   ratcheted=ratcheted)
    blocking += [e for e in schema if "Too long" in e]
    schema = blocking + [e for e in schema if e not in blocking]
    schema += [error for error in quota_rules.resource_weight_quantity_errors(spec.resource_weights)
               if error not in ratcheted]
    # the apiserver's hasBlockingErr: a TooMany or TooLong error stops the CEL rules, and it says so last
    schema += [CEL_NOT_CHECKED] if blocking else flavor_rule_errors(doc if doc is not None
                                                                    else msgspec.to_builtins(spec))
    refuse_all(schema, where, crd=True)
    refuse_all(_fields(label_map_errors(spec.node_labels), "spec.nodeLabels")
               + _node_taint_errors(spec.node_taints, "spec.nodeTaints")
               + toleration_key_errors(spec.tolerations, "spec.tolerations")
               + _resource_weight_errors(spec.resource_weights), where)


TOLERATION_RULES: tuple[tuple[str, Any], ...] = (
    ("operator must be Exists when 'key' is empty, which means 'match all values and all keys'",
     lambda t: "key" not in t and t.get("operator") != "Exists"),
    ("effect must be 'NoExecute' when 'tolerationSeconds' is set",
     lambda t: "tolerationSeconds" in t and t.get("effect") != "NoExecute"),
    ("supported toleration values: 'Equal'(default), 'Exists'",
     lambda t: "operator" in t and t["operator"] not in ("Equal", "Exists")),
    ("a value must be empty when 'operator' is 'Exists'",
     lambda t: t.get("operator") == "Exists" and "value" in t),
    ("supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'",
     lambda t: "effect" in t and t["effect"] not in TAINT_EFFECTS),
)
"""The CEL rules of a toleration list (a flavor's, a pod set update's), in the CRD's order: each message and
whether a toleration (plain data: a field left out is not one given empty) breaks it."""
TAINT_EFFECT_RULE = "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'"


def flavor_rule_errors(spec: Mapping[str, Any]) -> list[str]:
    """The ResourceFlavor CRD's CEL rules ``spec`` (plain data) breaks, as the apiserver reports them: at the
    node the rule sits on, ``Invalid value: "<its type>": <message>``, one error per rule however many entries
    break it. The spec's own rule first (a ``topologyName`` needs node labels), then the taints' (a known
    effect, an empty one too being none) and the tolerations' (:data:`TOLERATION_RULES`). (Kueue's apiserver
    walks the spec's fields in no fixed order; kueue-es keeps this one.)"""
    errors = []
    if "topologyName" in spec and not _mapping(spec.get("nodeLabels")):
        errors.append('field `spec`: Invalid value: "object": at least one nodeLabel is required when '
                      "topology is set")
    if any(_mapping(t).get("effect") not in TAINT_EFFECTS for t in _sequence(spec.get("nodeTaints"))):
        errors.append(f'field `spec.nodeTaints`: Invalid value: "array": {TAINT_EFFECT_RULE}')
    tolerations = [_mapping(t) for t in _sequence(spec.get("tolerations"))]
    errors += [f'field `spec.tolerations`: Invalid value: "array": {message}'
               for message, broken in TOLERATION_RULES if any(broken(t) for t in tolerations)]
    return errors


def _resource_weight_errors(weights: Mapping[str, o.Quantity]) -> list[str]:
    """KEP-8902's rule on a flavor's ``resourceWeights``: each above 0, by resource name. (Where Kueue checks
    it, webhook or CEL rule, is not in the sources at hand; Kueue's ``ComputeFlavorResourceWeights`` weighs a
    stored weight not above 0 as 1, and so does the fold.) One that is no quantity is the CRD's to refuse, or
    to keep on an update that leaves it as it was."""
    return [f"field `spec.resourceWeights[{r}]`: Invalid value: {go_quote(str(weights[r]))}: "
            "must be greater than 0" for r in sorted(weights)
            if quota_rules.quantity_problem(weights[r], negative=True) is None
            and parse_quantity(weights[r]) <= 0]


def _node_taint_errors(taints: Sequence[o.Taint], at: str) -> list[str]:
    """Kueue's webhook on a flavor's taints: each key a label key (an error per fault), each value a label value (its
    faults joined with ``;``, as Kueue joins them), no key and effect pair twice."""
    errors: list[str] = []
    seen: set[tuple[str, str]] = set()
    for i, taint in enumerate(taints):
        path = f"{at}[{i}]"
        errors += [f"field `{path}.key`: Invalid value: {go_quote(taint.key)}: {m}"
                   for m in label_key_problems(taint.key)]
        problems = label_value_problems(taint.value)
        if problems:
            errors.append(f"field `{path}.value`: Invalid value: {go_quote(taint.value)}: {';'.join(problems)}")
        if (taint.key, taint.effect) in seen:
            errors.append(f"field `{path}`: taints must be unique by key and effect pair")
            continue
        seen.add((taint.key, taint.effect))
    return errors


def toleration_key_errors(tolerations: Sequence[o.Toleration], at: str) -> list[str]:
    """Kueue's webhook on tolerations (a flavor's, a pod set update's): a key, when given, is a label key, an
    error per fault."""
    return [f"field `{at}[{i}].key`: Invalid value: {go_quote(t.key)}: {m}"
            for i, t in enumerate(tolerations) if t.key for m in label_key_problems(t.key)]


def _toleration_rule_errors(tolerations: Sequence[o.Toleration], at: str, *, first: int = 0) -> list[str]:
    """The CRD's rules on a toleration's operator, value, effect and ``tolerationSeconds`` (an empty field read as
    an absent one); ``first``: the index of ``tolerations[0]``."""
    errors: list[str] = []
    for i, t in enumerate(tolerations, start=first):
        path = f"{at}[{i}]"
        if t.operator and t.operator not in ("Equal", "Exists"):
            errors.append(f"field `{path}.operator`: supported toleration values: 'Equal'(default), 'Exists'")
        if t.operator == "Exists" and t.value:
            errors.append(f"field `{path}.value`: a value must be empty when 'operator' is 'Exists'")
        if t.effect and t.effect not in TAINT_EFFECTS:
            errors.append(f"field `{path}.effect`: supported taint effect values: 'NoSchedule', 'PreferNoSchedule', "
                          "'NoExecute'")
        if t.toleration_seconds is not None and t.effect != "NoExecute":
            errors.append(f"field `{path}.effect`: effect must be 'NoExecute' when 'tolerationSeconds' is set")
    return errors


# --- ClusterQueue, Cohort ---------------------------------------------------------------------------------------


def check_cluster_queue(cq: o.ClusterQueue, where: str, *, schema: Sequence[str] = (),
                        cel: Sequence[str] = (), also: Sequence[str] = (),
                        ratcheted: frozenset[str] = frozenset(),
                        doc: Mapping[str, Any] | None = None) -> None:
    """The CRD's rules first, every broken one refused together, as the apiserver lists them, calling no
    webhook for an object its CRD refuses: its schema's (``schema`` first: those the projections need,
    :func:`events.manifests.queue_schema_errors`), then its CEL rules (``cel``, on the quotas:
    :func:`events.manifests.queue_cel_errors`; then those on the policies: :func:`cluster_queue_cel_errors`),
    which a schema error of a type that stops them replaces with the apiserver's line saying so
    (:func:`events.field_errors.with_cel_rules`); then every rule of Kueue's webhook the object breaks
    (:func:`cluster_queue_errors`, then ``also``: the gated ones, which come after), in one message.
    ``ratcheted``: the CRD markers' errors an update keeps (:func:`events.crd_markers.ratcheted`); ``doc``:
    the plain data ``cq`` was read from, for the markers that tell a list given empty from one left out."""
    crd = [*schema, *cluster_queue_schema_errors(cq.spec, ratcheted, doc=doc)]
    refuse_all(with_cel_rules(crd, [*cel, *cluster_queue_cel_errors(cq.spec)]), where, crd=True)
    refuse_all([*cluster_queue_errors(cq.spec), *also], where)


def check_cohort(cohort: o.Cohort, where: str, *, schema: Sequence[str] = (),
                 cel: Sequence[str] = ()) -> None:
    """As :func:`check_cluster_queue`, for a Cohort: its CRD's rules (``cel``, its CEL rules, after its
    schema's unless one of those stops them), then its webhook's in Kueue's order (``validateCohort``: the
    fair sharing weight, then the resource groups; a ClusterQueue's webhook checks the weight after its
    groups)."""
    spec = cohort.spec
    crd = [*schema, *_name_reference_errors(spec.parent_name, "spec.parentName", optional=True),
           *_flavor_name_errors(spec.resource_groups)]
    refuse_all(with_cel_rules(crd, cel), where, crd=True)
    refuse_all(_fair_sharing_errors(spec.fair_sharing)
               + quota_rules.webhook_errors(spec.resource_groups, parent=spec.parent_name, cohort=True),
               where)


def refuse_all(errors: Sequence[str], where: str, *, crd: bool = False) -> None:
    """Refuse the object ``where`` names for every one of ``errors`` (field errors, ``field `path`: problem``)
    together, as Kubernetes aggregates them; one alone reads as it does by itself. ``crd``: the rules broken are
    its CRD's (:class:`~events.errors.SchemaRefused`), else a webhook's."""
    if errors and crd:
        raise SchemaRefused(where, list(errors))
    if errors:
        raise InvalidInput(f"{where}: {aggregate(errors)}")


def refuse_first(errors: Sequence[str], where: str) -> None:
    """Refuse the object ``where`` names for the first of ``errors``: a kind whose refusal names one field."""
    if errors:
        raise InvalidInput(f"{where}: {errors[0]}")


def cluster_queue_schema_errors(spec: o.ClusterQueueSpec, ratcheted: frozenset[str] = frozenset(), *,
                                doc: Mapping[str, Any] | None = None) -> list[str]:
    """What the ClusterQueue CRD's schema holds beyond what the projections need: the names it gives of other
    objects, known policy values, its markers (read from ``doc``, the plain data, when given: the view leaves
    out an empty list). Every one broken."""
    errors = _name_reference_errors(spec.cohort_name, "spec.cohortName", optional=True)
    errors += _flavor_name_errors(spec.resource_groups)
    errors += _strategy_name_errors(spec.admission_checks_strategy)
    data = doc if doc is not None else {"spec": msgspec.to_builtins(spec)}
    errors += crd_markers.errors("ClusterQueue", data, ratcheted=ratcheted)
    borrow = spec.preemption.borrow_within_cohort
    if borrow is not None:
        errors += _one_of_errors(borrow.policy, ("Never", "LowerPriority"), "spec.preemption.borrowWithinCohort.policy")
    ff, at = spec.flavor_fungibility, "spec.flavorFungibility"
    errors += _one_of_errors(ff.when_can_borrow, ("MayStopSearch", "TryNextFlavor"), f"{at}.whenCanBorrow")
    errors += _one_of_errors(ff.when_can_preempt, ("MayStopSearch", "TryNextFlavor"), f"{at}.whenCanPreempt")
    if ff.preference is not None:
        errors += _one_of_errors(ff.preference, ("BorrowingOverPreemption", "PreemptionOverBorrowing"),
                                 f"{at}.preference")
    policy = spec.concurrent_admission_policy
    if policy is not None:
        errors += _one_of_errors(policy.migration.mode, o.CONCURRENT_ADMISSION_MODES,
                                 "spec.concurrentAdmissionPolicy.migration.mode")
        last = policy.migration.constraints.last_acceptable_flavor_name if policy.migration.constraints else None
        if last is not None:
            errors += _name_reference_errors(
                last, "spec.concurrentAdmissionPolicy.migration.constraints.lastAcceptableFlavorName")
    return errors


def cluster_queue_cel_errors(spec: o.ClusterQueueSpec) -> list[str]:
    """The CEL rules of the ClusterQueue CRD on its policies (``apis/kueue/v1beta2/clusterqueue_types.go``): a
    ``preemption`` that reclaims ``Never`` does not preempt while borrowing, and a ``flavorFungibility`` with
    a ``preference`` tries the next flavor both when it can borrow and when it can preempt. Kueue's webhook
    holds the same two rules (:func:`cluster_queue_errors`), but the apiserver refuses first, in the CEL
    rules' words, at the object the rule is on."""
    errors = []
    p = spec.preemption
    if p.reclaim_within_cohort == "Never" and p.borrow_within_cohort is not None \
            and p.borrow_within_cohort.policy != "Never":
        errors.append('field `spec.preemption`: Invalid value: "object": reclaimWithinCohort=Never and '
                      "borrowWithinCohort.Policy!=Never")
    ff = spec.flavor_fungibility
    if ff.preference is not None \
            and (ff.when_can_borrow != "TryNextFlavor" or ff.when_can_preempt != "TryNextFlavor"):
        errors.append('field `spec.flavorFungibility`: Invalid value: "object": preference can only be '
                      "set when both whenCanBorrow and whenCanPreempt are TryNextFlavor")
    return errors


def cluster_queue_errors(spec: o.ClusterQueueSpec) -> list[str]:
    """Every rule of Kueue's ClusterQueue webhook (whatever the gates) ``spec`` breaks, in the webhook's order:
    resource groups, namespace selector, preemption, flavor fungibility, fair sharing, then its size limits."""
    groups = spec.resource_groups
    errors = quota_rules.webhook_errors(groups, parent=spec.cohort_name, cohort=False)
    if spec.namespace_selector is not None:
        s = spec.namespace_selector
        errors += [f"field `{path}`: {body}" for path, body in selector_field_errors(
            s.match_labels, [(r.key, r.operator, r.values) for r in s.match_expressions], "spec.namespaceSelector")]
    p = spec.preemption
    if p.borrow_within_cohort is not None and p.reclaim_within_cohort == "Never" \
            and p.borrow_within_cohort.policy != "Never":
        errors.append("field `spec.preemption`: reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never")
    ff = spec.flavor_fungibility
    if ff.preference is not None and (ff.when_can_borrow != "TryNextFlavor" or ff.when_can_preempt != "TryNextFlavor"):
        errors.append(f'field `spec.flavorFungibility.preference`: Invalid value: "{ff.preference}": preference '
                      f'"{ff.preference}" requires both whenCanBorrow and whenCanPreempt to be TryNextFlavor')
    errors += _fair_sharing_errors(spec.fair_sharing)
    errors += quota_rules.total_errors(groups)
    return errors


MAX_CONCURRENT_ADMISSION_FLAVORS = 32
"""Kueue v0.20.0 raised it from 16 (#15949)."""


def check_concurrent_admission(cq: o.ClusterQueue, where: str) -> None:
    """Kueue's ClusterQueue webhook under ``ConcurrentAdmission`` (alpha, off): a ClusterQueue with a
    ``concurrentAdmissionPolicy`` has exactly one resource group, of at most 32 flavors, and is not StrictFIFO;
    every rule it breaks is refused in one message, as Kubernetes aggregates field errors. (Gate off the webhook
    does not look at the policy. Neither the webhook nor the CRD asks ``lastAcceptableFlavorName`` to name one of
    the ClusterQueue's flavors.)"""
    refuse_all(concurrent_admission_errors(cq), where)


def concurrent_admission_errors(cq: o.ClusterQueue) -> list[str]:
    """The rules :func:`check_concurrent_admission` holds ``cq`` to that it breaks, in Kueue's order."""
    spec = cq.spec
    if spec.concurrent_admission_policy is None:
        return []
    defined = "when ConcurrentAdmissionPolicy is defined"
    groups = spec.resource_groups
    errors = []
    if len(groups) != 1:
        errors.append(f"field `spec.resourceGroups`: Invalid value: {len(groups)}: must have exactly one "
                      f"ResourceGroup {defined}")
    elif len(groups[0].flavors) > MAX_CONCURRENT_ADMISSION_FLAVORS:
        errors.append(f"field `spec.resourceGroups[0].flavors`: Invalid value: {len(groups[0].flavors)}: cannot "
                      f"have more than {MAX_CONCURRENT_ADMISSION_FLAVORS} resource flavors in the ResourceGroup "
                      f"{defined}")
    if spec.queueing_strategy == "StrictFIFO":
        errors.append(f'field `spec.queueingStrategy`: Invalid value: "StrictFIFO": StrictFIFO queueing strategy '
                      f"cannot be used {defined}")
    return errors


def _flavor_name_errors(groups: Sequence[o.ResourceGroup]) -> list[str]:
    return [error for g, rg in enumerate(groups) for f, fq in enumerate(rg.flavors)
            for error in _name_reference_errors(fq.name, f"spec.resourceGroups[{g}].flavors[{f}].name")]


def _strategy_name_errors(strategy: o.AdmissionChecksStrategy | None) -> list[str]:
    errors = []
    for i, rule in enumerate(strategy.admission_checks if strategy is not None else ()):
        at = f"spec.admissionChecksStrategy.admissionChecks[{i}]"
        if not 1 <= len(rule.name) <= MAX_CHECK_NAME:
            errors.append(_check_name_problem(rule.name, f"{at}.name"))
        for j, flavor in enumerate(rule.on_flavors):
            errors += _name_reference_errors(flavor, f"{at}.onFlavors[{j}]")
    return errors


def _fair_sharing_errors(fs: o.FairSharing | None) -> list[str]:
    """A weight of 0 or above 1e-9 (a smaller one would collapse to 0 in Kueue's arithmetic), not negative:
    the checks of Kueue's webhooks (``validateFairSharing``, shared by the ClusterQueue's and the Cohort's),
    which report them at ``spec.fairSharing`` itself with ``Weight.String()``: the weight as Kubernetes
    prints it once read, in the format it was written in (:func:`events.quantity.quantity_string`: ``-1Ki``
    stays ``-1Ki``, ``5e-10`` is ``1e-9``). No rule of the CRDs bounds the weight: a negative one reaches the
    webhook."""
    if fs is None or fs.weight is None:
        return []
    weight = parse_quantity(fs.weight)
    why = ("must be greater than or equal to 0" if weight < 0
           else "When not 0, weight must be > 10e-9" if 0 < weight <= MIN_WEIGHT else None)
    shown = go_quote(quantity_string(fs.weight))
    return [] if why is None else [f"field `spec.fairSharing`: Invalid value: {shown}: {why}"]


# --- Topology, AdmissionCheck -----------------------------------------------------------------------------------


def _topology(spec: o.TopologySpec, where: str) -> None:
    """The Topology CRD's rules (Kueue has no Topology webhook): its schema's, the first one broken; then its
    CEL rules on ``levels``, every one broken, as the apiserver lists them."""
    levels = [level.node_label for level in spec.levels]
    if not 1 <= len(levels) <= MAX_TOPOLOGY_LEVELS:
        raise SchemaRefused(where, [f"field `spec.levels` must have 1 to {MAX_TOPOLOGY_LEVELS} items, "
                                    f"has {len(levels)}"])
    for i, label in enumerate(levels):
        if len(label) > 316 or not _LEVEL_LABEL.fullmatch(label):
            raise SchemaRefused(where, [f"field `spec.levels[{i}].nodeLabel`: {label!r} is not a label key of at "
                                        "most 316 characters"])
    broken = []
    if len(set(levels)) != len(levels):
        broken.append("must be unique")
    if HOSTNAME in levels and levels[-1] != HOSTNAME:
        broken.append(f"the {HOSTNAME} label can only be used at the lowest level of topology")
    refuse_all([f"field `spec.levels`: {rule}" for rule in broken], where, crd=True)


def _admission_check(spec: o.AdmissionCheckSpec, where: str) -> None:
    """The AdmissionCheck CRD's rules (Kueue v0.20 registers no AdmissionCheck webhook), the first one broken."""
    if not 1 <= len(spec.controller_name) <= 253:
        raise SchemaRefused(where, [f"field `spec.controllerName` must be 1 to 253 characters, "
                                    f"has {len(spec.controller_name)}"])
    ref = spec.parameters
    if ref is None:
        return
    for field, value, kind in (("apiGroup", ref.api_group, (SUBDOMAIN, 253)), ("kind", ref.kind, (_KIND, 63)),
                               ("name", ref.name, (DNS_LABEL, 63))):
        refuse_all(_name_reference_errors(value, f"spec.parameters.{field}", kind=kind), where, crd=True)


def _name_reference_errors(value: str, at: str, *, kind: tuple[re.Pattern[str], int] = NAME_REFERENCE,
                           optional: bool = False) -> list[str]:
    """``value`` matches ``kind`` (a pattern and a length limit), as the CRD's schema holds the field, refused
    in the apiserver's words; ``optional``: an empty one is taken (the view cannot tell it from an absent one,
    which Kueue takes)."""
    pattern, limit = kind
    if not value and optional:
        return []
    if len(value) > limit:  # kube-openapi checks the length first, and stops at its first fault
        return [f"field `{at}`: {too_long(limit)}"]
    if not pattern.fullmatch(value):
        return [f"field `{at}`: Invalid value: {go_quote(value)}: "
                f"{at} in body should match '^{pattern.pattern}$'"]
    return []


def _check_name_problem(value: str, at: str) -> str:
    return f"field `{at}` must be 1 to {MAX_CHECK_NAME} characters, has {len(value)}"


def _one_of_errors(value: str, allowed: Sequence[str], at: str) -> list[str]:
    if value in allowed:
        return []
    supported = ", ".join(f'"{a}"' for a in allowed)
    return [f'field `{at}`: Unsupported value: "{value}": supported values: {supported}']


# --- The plain data: what the view cannot tell -----------------------------------------------------------------


def check_document(doc: Mapping[str, Any], where: str, *, ratcheted: frozenset[str] = frozenset()) -> None:
    """Refuse ``doc`` for the first rule :func:`document_errors` finds broken (a kind other than a Workload, whose
    refusal names one field): the CRDs' CEL rules."""
    errors = document_errors(doc, ratcheted=ratcheted)
    if errors:
        raise SchemaRefused(where, errors[:1])


def document_errors(doc: Mapping[str, Any], *, ratcheted: frozenset[str] = frozenset()) -> list[str]:
    """The field errors of ``doc`` (an object that decoded as its view) for the rules that tell a field left out
    from one given empty, which the view reads alike: the CRDs' CEL rules on a pod set update's tolerations,
    and a WorkloadPriorityClass's or ProvisioningRequestConfig's markers (a ResourceFlavor's CEL rules are
    read from its document with its other CRD rules, :func:`check`). Every one broken, in order."""
    kind, status = doc.get("kind"), _mapping(doc.get("status"))
    if kind in ("WorkloadPriorityClass", "ProvisioningRequestConfig"):
        return crd_markers.errors(kind, doc, ratcheted=ratcheted)
    errors: list[str] = []
    if kind == "Workload":
        for i, state in enumerate(_sequence(status.get("admissionChecks"))):
            for j, update in enumerate(_sequence(_mapping(state).get("podSetUpdates"))):
                errors += _toleration_field_errors(_mapping(update).get("tolerations"),
                                                   f"status.admissionChecks[{i}].podSetUpdates[{j}].tolerations")
    return errors


def _toleration_field_errors(tolerations: Any, at: str) -> list[str]:
    """Without a ``key`` (an empty one is a key) the operator is ``Exists``, given; with ``Exists``, no
    ``value``."""
    errors: list[str] = []
    for i, toleration in enumerate(_sequence(tolerations)):
        t = _mapping(toleration)
        if "key" not in t and t.get("operator") != "Exists":
            errors.append(f"field `{at}[{i}].operator`: operator must be Exists when 'key' is empty, "
                          "which means 'match all values and all keys'")
        if t.get("operator") == "Exists" and "value" in t:
            errors.append(f"field `{at}[{i}].value`: a value must be empty when 'operator' is 'Exists'")
    return errors


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _sequence(value: Any) -> Sequence[Any]:
    return value if isinstance(value, list) else ()


# --- Under a feature gate (events.manifests.validate_gated) -----------------------------------------------------


def non_negative_errors(pod: o.PodSpec, at: str) -> list[str]:
    """``WorkloadValidateResourcesAreNonNegative``: every negative request or limit in a pod set's init
    containers, containers or pod-level resources, in Kueue's order (its webhook does not look at the overhead)."""
    lists = [(f"{at}.{field}[{i}].resources.{part}", values)
             for field, containers in (("initContainers", pod.init_containers), ("containers", pod.containers))
             for i, c in enumerate(containers)
             for part, values in (("requests", c.resources.requests), ("limits", c.resources.limits))]
    if pod.resources is not None:
        lists += [(f"{at}.resources.requests", pod.resources.requests),
                  (f"{at}.resources.limits", pod.resources.limits)]
    return [f'field `{path}[{r}]`: Invalid value: "{values[r]}": must be greater than or equal to 0'
            for path, values in lists for r in sorted(values) if parse_quantity(values[r]) < 0]


def admission_gate_errors(annotations: Mapping[str, str]) -> list[str]:
    """``AdmissionGatedBy``: every problem of the ``kueue.x-k8s.io/admission-gated-by`` annotation, when it names
    any gate, as field errors (:func:`events.admission_gate.format_problems`: a comma-separated list of distinct
    domain-prefixed paths), as Kueue's Workload webhook lists them."""
    return [f"field `{admission_gate.PATH}`: {problem}"
            for problem in admission_gate.format_problems(annotations.get(ADMISSION_GATED_BY, ""))]


def min_count_rule_errors(wl: o.Workload) -> list[str]:
    """The Workload CRD's rule on ``minCount`` (at most its pod set's count), every pod set that breaks it. The
    apiserver checks it before any validating webhook runs, so a Workload that breaks it gets these errors alone."""
    return [f"field `spec.podSets[{i}]`: minCount should be positive and less or equal to count"
            for i, ps in enumerate(wl.spec.pod_sets) if ps.min_count is not None and ps.min_count > ps.count]


def min_count_errors(wl: o.Workload, *, scale_up: bool = False) -> list[str]:
    """``PartialAdmission``: a ``minCount`` at most its pod set's count (the CRD's rule, :func:`min_count_rule_errors`:
    when broken, its errors alone, as Kueue's webhook never sees such a Workload), then, in one pod set only and not
    on an elastic job (Kueue's webhook): every one broken, in that order. Off, Kueue's defaulting webhook has
    dropped every ``minCount``. ``scale_up`` (``ElasticJobsViaWorkloadSlicesWithPartialReplicaScaleUp``): an
    elastic job's Workload may carry ``minCount`` in any of its pod sets (a scaled-up slice's floor is the old
    slice's granted counts)."""
    errors = min_count_rule_errors(wl)
    elastic = wl.metadata.annotations.get(ELASTIC_JOB) == "true"
    if errors or (scale_up and elastic):
        return errors
    variable = sum(1 for ps in wl.spec.pod_sets if ps.min_count is not None)
    if variable > 1:
        errors.append(f"field `spec.podSets`: Invalid value: {variable}: at most one podSet can use minCount")
    if variable and elastic:
        errors.append(f"field `spec.podSets`: Invalid value: {variable}: partial admission and elastic job "
                      "cannot be used together")
    return errors
