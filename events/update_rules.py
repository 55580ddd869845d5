"""What Kueue refuses in an update of one of its objects beyond what it refuses in any object: the fields that
may not change (Kueue's validating webhooks, ``pkg/webhooks/*_webhook.go``, and the CEL rules of its CRDs, which
kueue-es's generated CRDs do not carry).

The object itself is checked first, as on creation (:func:`events.manifests.validate_object`); these rules compare
the old and the new object, as the apiserver hands them to an admission webhook (plain data), so that fields
kueue-es does not model (a container's image) count too. Each names the object and the field.

* Workload, while the old one holds quota (``QuotaReserved=True``): ``spec.podSets`` do not change (quantities
  compared by value), but for a pod set's count going down (only under ``ElasticJobsViaWorkloadSlices``, on by
  default) and,
  for a workload slice, its ``minCount`` coming down to that new count (KEP-12100's scale-down: Kueue's webhook
  would refuse it, its job reconciler lowering the count alone, which the CRD's minCount rule refuses);
  ``priorityClassRef`` is neither set nor removed, keeps its group and kind, and a PriorityClass one keeps its
  name. While both hold quota:
  ``spec.queueName`` does not change, nor is it removed or added (a missing one reads as "", Kueue #12594),
  nor does a reclaimable pod count go down or disappear — but for a workload slice
  (``ElasticJobsViaWorkloadSlices``, an elastic-job Workload) whose pod set now counts fewer pods than its
  admission granted (Kueue #12958, #13044: a Job scaled down in place has its reclaimable count recomputed). Whatever it holds, a reclaimable
  count is at most its pod set's count, unless a workload slice leaves it unchanged. While both are
  admitted: ``maximumExecutionTimeSeconds`` does not change. While both have one: ``status.admission`` does not
  change, but for each pod set assignment's ``topologyAssignment`` and ``delayedTopologyRequest`` under
  ``TopologyAwareScheduling``. An admission check Ready before and after keeps its ``podSetUpdates``.
* ClusterQueue: with ``RejectUpdatesToCQWithInvalidOnFlavors`` off, an admission check whose ``onFlavors`` the
  update leaves as they were, in a ClusterQueue whose flavors it leaves as they were, is not checked (with the gate
  on every entry is, with the object).
* Workload: a missing ``status.admission`` while ``QuotaReserved`` is True is refused only when the old object had
  one or held no quota (Kueue refuses moving into that state; one stored so stays updatable, to be deleted).
* Workload, under ``AdmissionGatedBy``: its ``kueue.x-k8s.io/admission-gated-by`` gates are removed, never added
  (:func:`admission_gate_errors`; the Job webhook holds a Job to the same rule).
* LocalQueue: ``spec.clusterQueue`` does not change once given: its CRD's rule (``self == oldSelf``) is a
  transition rule, which the apiserver evaluates only where the old and the new object both have a value, so a
  LocalQueue without one may be given one, and one may lose it.
* ResourceFlavor: once it has a ``topologyName``, that ``topologyName`` stays (:func:`_tas_flavor`); the rest
  of its spec may change.
* Topology: ``spec.levels`` do not change, unless ``kubernetes.io/hostname`` is the lowest level before and after.
* AdmissionCheck: ``spec.controllerName`` does not change.

The Workload's transition rules above that are its CRD's (``queueName``, ``priorityClassRef``,
``maximumExecutionTimeSeconds``, the list maps) and the LocalQueue's, ResourceFlavor's, Topology's and
AdmissionCheck's are refused as :class:`~events.errors.SchemaRefused` (the apiserver's 422 ``Invalid``; a CEL
rule's error as the apiserver words it, ``Invalid value: "<the node's type>": <message>``); the rest are
Kueue's webhooks' (403).

* ClusterQueue: ``spec.concurrentAdmissionPolicy`` does not change (whatever ``ConcurrentAdmission`` says: Kueue's
  webhook holds it immutable with the gate off too).

* Workload: a ``status.clusterName`` the update sets names a worker of the old object's
  ``status.nominatedClusterNames``, whatever the dispatcher, but for a workload slice replacing another under
  ``ElasticJobsViaWorkloadSlices`` (:func:`_cluster_name`). Its CRD's two rules on it are refused as the CRD's
  (422): once set it is never changed, and it never stands beside nominations (:func:`_cluster_name_rules`).
"""

from __future__ import annotations

from typing import Any

from events import admission_gate, topology_spreading, unhealthy_threshold
from events import objects as o
from events.admission_gate import gate_names
from events.errors import SchemaRefused
from events.field_errors import go_quote
from events.manifests import on_flavors_errors, reclaimable_bound_errors
from events.object_rules import (
    ADMISSION_GATED_BY,
    ADMISSION_REQUIRED,
    ELASTIC_JOB,
    HOSTNAME,
    LIST_MAPS,
    WorkloadRefused,
    duplicate_list_map_errors,
    refuse_all,
)
from events.quantity import QuantityError, parse_quantity

IMMUTABLE = "field is immutable"
SLICE_REPLACEMENT_FOR = "kueue.x-k8s.io/workload-slice-replacement-for"
_PRIORITY_CLASS = ("scheduling.k8s.io", "PriorityClass")
_QUANTITY_MAPS = frozenset({"requests", "limits", "overhead"})


def validate_update(old_doc: dict[str, Any], new_doc: dict[str, Any], old: o.KObject | None, new: o.KObject,
                    where: str, *, on_flavors_gate: bool = True, tas: bool = True, gated_by: bool = True,
                    elastic: bool = True, own: WorkloadRefused | None = None, spreading: bool = False,
                    threshold: bool = False) -> None:
    """Refuse the update of ``old`` into ``new`` (views of ``old_doc`` and ``new_doc``; ``old`` None when it
    does not decode) if Kueue does; the new object was checked on its own already, but for its reclaimable
    counts' bound (``Checks.reclaimable_bounds`` off), its topology spreading (``spreading``) and unhealthy-nodes
    threshold (``threshold``), held against the old one here. ``on_flavors_gate``, ``tas``, ``gated_by``,
    ``elastic``: the gates ``RejectUpdatesToCQWithInvalidOnFlavors``, ``TopologyAwareScheduling``,
    ``AdmissionGatedBy`` and ``ElasticJobsViaWorkloadSlices``. ``own``: how a Workload's own check refused it
    (:class:`~events.object_rules.WorkloadRefused`), whose errors join the update's: the CRD's first, all of them,
    then all of the webhook's in Kueue's order (the new object's, then the update's). A Workload's list maps are
    held to naming each entry once (``Checks.unique_names`` off for the new object) only where the update changes
    them: the apiserver ratchets a value left as it was, and a Workload stored with a name twice (kueue-es's CRDs
    carry no list types) must stay updatable, to lose its finalizer."""
    match new:
        case o.Workload():
            is_slice = elastic and new.metadata.annotations.get(ELASTIC_JOB) == "true"
            before = _reclaimable_counts(old_doc)
            schema, webhook = workload_update_errors(old_doc, new_doc, tas=tas, is_slice=is_slice, gated_by=gated_by,
                                                     shrink=elastic)
            changed = [at for at in LIST_MAPS if _at(old_doc, at) != _at(new_doc, at)]
            refuse_all((own.schema if own is not None else []) + duplicate_list_map_errors(new, changed) + schema,
                       where, crd=True)
            old_wl = old if isinstance(old, o.Workload) else None
            held = _own_webhook_errors(own, old_doc)
            if spreading:
                held += topology_spreading.workload_errors(new.spec.pod_sets,
                                                           old_wl.spec.pod_sets if old_wl is not None else None)
            if threshold:
                held += unhealthy_threshold.threshold_errors(new.metadata.annotations,
                                                             old_wl.metadata.annotations if old_wl is not None else None)
            held += reclaimable_bound_errors(new, kept=lambda name, count: is_slice and before.get(name) == count)
            refuse_all(held + webhook, where)
        case o.ClusterQueue():
            # Kueue's order: the onFlavors kept by the update, then the immutable policy; refused together.
            errors = on_flavors_errors(new, kept_from=old) \
                if not on_flavors_gate and isinstance(old, o.ClusterQueue) else []
            if _get(_get(old_doc, "spec"), "concurrentAdmissionPolicy") != _get(_get(new_doc, "spec"),
                                                                             "concurrentAdmissionPolicy"):
                errors.append(f"field `spec.concurrentAdmissionPolicy`: {IMMUTABLE}")
            refuse_all(errors, where)
        case o.LocalQueue():
            before, after = (_get(old_doc, "spec").get("clusterQueue"),
                             _get(new_doc, "spec").get("clusterQueue"))
            if before is not None and after is not None and before != after:
                raise SchemaRefused(where,
                                    [f'field `spec.clusterQueue`: Invalid value: "string": {IMMUTABLE}'])
        case o.ResourceFlavor() if isinstance(old, o.ResourceFlavor):
            if old.spec.topology_name is not None:
                _tas_flavor(_get(old_doc, "spec"), _get(new_doc, "spec"), where)
        case o.Topology() if isinstance(old, o.Topology):
            _topology_levels(_get(old_doc, "spec").get("levels"), _get(new_doc, "spec").get("levels"), where)
        case o.AdmissionCheck() if isinstance(old, o.AdmissionCheck):
            if old.spec.controller_name != new.spec.controller_name:
                raise SchemaRefused(where,
                                    [f'field `spec.controllerName`: Invalid value: "string": {IMMUTABLE}'])
        case _:
            pass


def _at(doc: dict[str, Any], path: str) -> Any:
    """The value at a dotted ``path`` of ``doc`` (plain data), None where it is missing."""
    node: Any = doc
    for step in path.split("."):
        node = node.get(step) if isinstance(node, dict) else None
    return node


def _own_webhook_errors(own: WorkloadRefused | None, old_doc: dict[str, Any]) -> list[str]:
    """The new Workload's own webhook errors an update is refused for: all of them, but for a missing admission
    while QuotaReserved is True where the old object lacked it already. Kueue refuses only the update that moves a
    Workload into that state; one stored so (before Kueue checked it, or while no webhook answered) must stay
    updatable, else its finalizer could never be dropped and the object never deleted."""
    errors = list(own.webhook) if own is not None else []
    if _has_condition(old_doc, "QuotaReserved") and not isinstance(_get(old_doc, "status").get("admission"), dict):
        errors = [e for e in errors if e != ADMISSION_REQUIRED]
    return errors


GATE_PATH = admission_gate.PATH


def admission_gate_value(meta: Any) -> str:
    """The raw ``kueue.x-k8s.io/admission-gated-by`` value of an object (``meta``: its metadata, as plain data);
    ``""`` when it has none, as Kueue reads a missing annotation."""
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    value = annotations.get(ADMISSION_GATED_BY) if isinstance(annotations, dict) else None
    return value if isinstance(value, str) else ""


def admission_gate_errors(old_meta: Any, new_meta: Any) -> list[str]:
    """Why Kueue refuses the update's admission gates (``AdmissionGatedBy``), as its field errors' details. Kueue
    decides on the raw values: a non-empty new value (a blank one too) on an object whose value was missing or
    empty is an added gate; where both are non-empty, each gate the new one names
    (:func:`events.admission_gate.gate_names`) must be among the old one's (none for a blank old value)."""
    before, after = admission_gate_value(old_meta), admission_gate_value(new_meta)
    if not after:
        return []
    if not before:
        return ["Forbidden: cannot add admission gate after creation"]
    kept = gate_names(before)
    if any(gate not in kept for gate in gate_names(after)):
        return ["Forbidden: can only remove gates, not add new ones"]
    return []


def workload_update_errors(old: dict[str, Any], new: dict[str, Any], *, tas: bool, is_slice: bool,
                           gated_by: bool, shrink: bool = True) -> tuple[list[str], list[str]]:
    """What Kueue refuses in the update of Workload ``old`` into ``new`` (plain data), as field errors
    (``field `path`: problem``): those of its CRD's transition rules (while quota is reserved, the
    ``priorityClassRef`` and ``queueName``; while admitted, ``maximumExecutionTimeSeconds``; the
    ``clusterName`` changed or beside nominations), then those of its
    webhook in its order (while quota is reserved, the pod sets and the reclaimable counts; the admission; a Ready
    check's pod set updates; a ``clusterName`` set; under ``AdmissionGatedBy``, the gates). ``shrink``: ``ElasticJobsViaWorkloadSlices``,
    under which a pod set's count may come down while quota is reserved."""
    old_spec, new_spec = _get(old, "spec"), _get(new, "spec")
    old_reserved, new_reserved = _has_condition(old, "QuotaReserved"), _has_condition(new, "QuotaReserved")
    schema: list[str] = []
    webhook: list[str] = []
    if old_reserved:
        schema += _priority_class_ref(old_spec.get("priorityClassRef"), new_spec.get("priorityClassRef"))
        webhook += _pod_sets(old_spec.get("podSets") or [], new_spec.get("podSets") or [], is_slice, shrink)
    if old_reserved and new_reserved:
        if old_spec.get("queueName", "") != new_spec.get("queueName", ""):  # absent reads as "" (Kueue #12594)
            schema.append("field `spec.queueName`: queueName is immutable while workload quota reserved")
        webhook += _reclaimable_pods(_reclaimable_counts(old), _reclaimable_counts(new),
                                     _scaled_below(old, new) if is_slice else set())
    if _has_condition(old, "Admitted") and _has_condition(new, "Admitted") and (
            old_spec.get("maximumExecutionTimeSeconds", 0) != new_spec.get("maximumExecutionTimeSeconds", 0)):
        schema.append("field `spec.maximumExecutionTimeSeconds`: maximumExecutionTimeSeconds is immutable while "
                      "workload quota reserved")
    webhook += _admission(_get(old, "status").get("admission"), _get(new, "status").get("admission"), tas)
    webhook += _pod_set_updates(_get(old, "status").get("admissionChecks") or [],
                                _get(new, "status").get("admissionChecks") or [])
    schema += _cluster_name_rules(_get(old, "status"), _get(new, "status"))
    webhook += _cluster_name(old, new, slices=shrink)
    if gated_by:
        webhook += [f"field `{GATE_PATH}`: {problem}"
                    for problem in admission_gate_errors(_get(old, "metadata"), _get(new, "metadata"))]
    return schema, webhook


CLUSTER_NAME_IMMUTABLE = "clusterName is immutable once set"
CLUSTER_NAME_EXCLUSIVE = "clusterName and nominatedClusterNames are mutually exclusive"


def _cluster_name_rules(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The two CEL rules Kueue's CRD puts on a Workload's ``status`` (``old``, ``new``), as the apiserver
    words a rule broken on an object (``Invalid value: "object"``): a ``clusterName`` set is never changed
    (cleared, by an eviction, it may be), and no ``nominatedClusterNames`` (an empty list is none) stand
    beside one. The second has no ``oldSelf``, so the apiserver ratchets it: a status the update leaves as it
    was is not held to it (a Workload stored so, before kueue-es checked it, stays updatable)."""
    errors: list[str] = []
    before, after = old.get("clusterName"), new.get("clusterName")
    if before is not None and after is not None and before != after:
        errors.append(f'field `status`: Invalid value: "object": {CLUSTER_NAME_IMMUTABLE}')
    if after is not None and new.get("nominatedClusterNames") and new != old:
        errors.append(f'field `status`: Invalid value: "object": {CLUSTER_NAME_EXCLUSIVE}')
    return errors


def _cluster_name(old: dict[str, Any], new: dict[str, Any], *, slices: bool) -> list[str]:
    """A ``status.clusterName`` set by the update names a worker the old object nominated
    (``status.nominatedClusterNames``), whatever dispatcher nominated it (Kueue #7278 dropped the dispatcher from
    this rule: its all-at-once dispatcher nominates too). Exempt under ``slices`` (``ElasticJobsViaWorkloadSlices``):
    a workload slice replacing another (``kueue.x-k8s.io/workload-slice-replacement-for`` on the new object, any
    value) is placed straight on the worker of the slice it replaces, never nominated."""
    before, after = _get(old, "status").get("clusterName"), _get(new, "status").get("clusterName")
    if before is not None or not isinstance(after, str):
        return []
    if slices and SLICE_REPLACEMENT_FOR in (_get(_get(new, "metadata"), "annotations")):
        return []
    nominated = _get(old, "status").get("nominatedClusterNames")
    if isinstance(nominated, list) and after in nominated:
        return []
    return [f"field `status.clusterName`: Invalid value: {go_quote(after)}: when setting clusterName it must be one "
            "of the nominatedClusterNames"]


def _pod_sets(old: list[Any], new: list[Any], is_slice: bool, shrink: bool) -> list[str]:
    """Unchanged but for a smaller count where ``shrink`` (``ElasticJobsViaWorkloadSlices``: Kueue's webhook lets
    any Workload's count come down under the gate, none without it); a workload slice's ``minCount`` may also come
    down to its new count (the Job integration's scale-down below it, KEP-12100). A changed pod set is named
    as Kueue's webhook names it, ``spec.podSets.<i>`` (a child path, not an index: its test
    "workload.podSets[].count is immutable")."""
    if len(old) != len(new):
        return [f"field `spec.podSets`: {IMMUTABLE}"]
    errors: list[str] = []
    for i, (before, after) in enumerate(zip(old, new, strict=True)):
        if isinstance(before, dict) and isinstance(after, dict):
            count = before.get("count", 1)
            if is_slice and _min_count_follows(before, after):
                after = {**after, "minCount": before["minCount"]}
            before = {**before, "count": count}
            if shrink:  # a smaller count is allowed
                after = {**after, "count": max(after.get("count", 1), count)}
        if _by_value(before) != _by_value(after):
            errors.append(f"field `spec.podSets.{i}`: {IMMUTABLE}")
    return errors


def _min_count_follows(before: dict[str, Any], after: dict[str, Any]) -> bool:
    """A pod set's ``minCount`` lowered to its new, smaller count, and no further."""
    low, high, count = after.get("minCount"), before.get("minCount"), after.get("count", 1)
    return (isinstance(low, int) and isinstance(high, int) and low == count < high
            and count < before.get("count", 1))


def _by_value(doc: Any) -> Any:
    """``doc`` with the quantities of its requests, limits and overheads read as values: Kueue compares pod sets
    semantically, so ``"1"`` and ``"1000m"`` are one CPU (a quantity that does not parse stays as written)."""
    if isinstance(doc, list):
        return [_by_value(v) for v in doc]
    if not isinstance(doc, dict):
        return doc
    return {k: _values(v) if k in _QUANTITY_MAPS and isinstance(v, dict) else _by_value(v) for k, v in doc.items()}


def _values(quantities: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, q in quantities.items():
        try:
            out[name] = parse_quantity(q)
        except (QuantityError, TypeError):
            out[name] = q
    return out


def _priority_class_ref(old: Any, new: Any) -> list[str]:
    at = "field `spec.priorityClassRef"
    if (old is None) != (new is None):
        return [f"{at}`: priorityClassRef is immutable while workload quota reserved"]
    if not isinstance(old, dict) or not isinstance(new, dict):
        return []
    errors = [f"{at}.{part}`: priorityClassRef.{part} is immutable while workload quota reserved"
              for part in ("group", "kind") if old.get(part) != new.get(part)]
    if (new.get("group"), new.get("kind")) == _PRIORITY_CLASS and old.get("name") != new.get("name"):
        errors.append(f"{at}.name`: priorityClassRef.name is immutable for scheduling.k8s.io/priorityclass while "
                      "workload quota reserved")
    return errors


def _reclaimable_counts(doc: dict[str, Any]) -> dict[Any, Any]:
    """A Workload's ``status.reclaimablePods`` (plain data) by pod set name."""
    return {rp.get("name"): rp.get("count", 0) for rp in _get(doc, "status").get("reclaimablePods") or []
            if isinstance(rp, dict)}


def _scaled_below(old: dict[str, Any], new: dict[str, Any]) -> set[Any]:
    """The pod sets of a workload slice now counting fewer pods than its admission granted them (Kueue #13044,
    kueue#12958): their Job scaled down in place, so their reclaimable counts are recomputed (the pods removed
    taken off), not taken back. The admission's count tells it even where the pod set still counts more pods than
    it reclaimed (admitted 20, scaled to 10, reclaimable 9 to 0); a pod set with no granted count did not."""
    granted = _granted_counts(new) or _granted_counts(old)
    return {ps.get("name") for ps in _get(new, "spec").get("podSets") or [] if isinstance(ps, dict)
            and isinstance(granted.get(ps.get("name")), int) and ps.get("count", 1) < granted[ps.get("name")]}


def _granted_counts(doc: dict[str, Any]) -> dict[Any, Any]:
    """A Workload's admitted pod counts (``status.admission.podSetAssignments[].count``, plain data) by pod set."""
    admission = _get(doc, "status").get("admission")
    psas = admission.get("podSetAssignments") if isinstance(admission, dict) else None
    return {psa.get("name"): psa.get("count") for psa in psas or [] if isinstance(psa, dict)}


def _reclaimable_pods(before: dict[Any, Any], after: dict[Any, Any], lowered: set[Any]) -> list[str]:
    """While the workload holds quota, a reclaimable pod count only grows, and stays listed (but for the pod
    sets in ``lowered``: :func:`_scaled_below`), in Kueue's words (``pkg/webhooks/workload_webhook.go``, its
    "less then" included)."""
    errors = [f"field `status.reclaimablePods[{name}].count`: Invalid value: {after[name]}: cannot be less then "
              f"{before[name]}"  # sic: Kueue's words
              for name in sorted(after, key=str)
              if name in before and after[name] < before[name] and name not in lowered]
    errors += [f"field `status.reclaimablePods[{name}]`: Required value: cannot be removed"
               for name in sorted(before, key=str) if name not in after and name not in lowered]
    return errors


def _admission(old: Any, new: Any, tas: bool) -> list[str]:
    """An admission may be set or cleared, never changed; under TAS a pod set's placement may be (a delayed
    topology request being placed, a failed node replaced)."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return []
    if tas and len(old.get("podSetAssignments") or []) == len(new.get("podSetAssignments") or []):
        old, new = _without_placement(old), _without_placement(new)
    return [f"field `status.admission`: {IMMUTABLE}"] if old != new else []


def _without_placement(admission: dict[str, Any]) -> dict[str, Any]:
    psas = [{k: v for k, v in psa.items() if k not in ("topologyAssignment", "delayedTopologyRequest")}
            if isinstance(psa, dict) else psa for psa in admission.get("podSetAssignments") or []]
    return {**admission, "podSetAssignments": psas}


def _pod_set_updates(old: list[Any], new: list[Any]) -> list[str]:
    """An admission check Ready before and after keeps its ``podSetUpdates``."""
    after = {c.get("name"): c for c in new if isinstance(c, dict)}
    errors: list[str] = []
    for i, before in enumerate(old):
        if not isinstance(before, dict) or before.get("name") not in after:
            continue
        now = after[before.get("name")]
        if (before.get("state") == now.get("state") == "Ready"
                and (before.get("podSetUpdates") or []) != (now.get("podSetUpdates") or [])):
            errors.append(f"field `status.admissionChecks[{i}].podSetUpdates`: {IMMUTABLE}")
    return errors


TAS_FLAVOR_IMMUTABLE = 'field `spec`: Invalid value: "object": topologyName is immutable once set'
"""The refusal of a TAS flavor's new ``topologyName``, at the CEL rule's node (``spec``), in kueue-es's words
(Kueue #9427 gave each field its own rule and message; that message is not in the sources at hand)."""


def _tas_flavor(old: dict[str, Any], new: dict[str, Any], where: str) -> None:
    """A ResourceFlavor that had a ``topologyName`` (``old``, ``new``: the specs) keeps it, neither changed
    nor removed. Kueue's CRD held the whole spec so until #9427 narrowed the rule to the fields the topology
    tree is built from ("allowing nodeTaints and future spec fields", such as ``resourceWeights``, to change);
    #13622 then let ``tolerations`` change and #13738 ``nodeLabels`` (Kueue v0.20): admitted workloads keep
    their reservation and assignment, pending ones are retried against the new node set."""
    if old.get("topologyName") != new.get("topologyName"):
        raise SchemaRefused(where, [TAS_FLAVOR_IMMUTABLE])


def _topology_levels(old: Any, new: Any, where: str) -> None:
    """A Topology's ``levels`` do not change, unless the lowest level is ``kubernetes.io/hostname`` before and
    after (the reference's reading of Kueue's rule, §1.1 of kueue-tas-admissionchecks-lifecycle.md)."""
    if old == new or (_lowest_level(old) == HOSTNAME and _lowest_level(new) == HOSTNAME):
        return
    raise SchemaRefused(where, [f"field `spec.levels`: {IMMUTABLE}"])


def _lowest_level(levels: Any) -> Any:
    last = levels[-1] if isinstance(levels, list) and levels else None
    return last.get("nodeLabel") if isinstance(last, dict) else None


def _get(doc: dict[str, Any], key: str) -> dict[str, Any]:
    value = doc.get(key)
    return value if isinstance(value, dict) else {}


def _has_condition(doc: dict[str, Any], type_: str) -> bool:
    conditions = _get(doc, "status").get("conditions") or []
    return any(isinstance(c, dict) and c.get("type") == type_ and c.get("status") == "True" for c in conditions)
