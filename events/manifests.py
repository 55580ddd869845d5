"""Multi-document YAML of Kubernetes/Kueue objects -> typed objects, as ``kubectl apply`` would take them.

v1beta1 Kueue objects are converted to v1beta2 first. Every error names the file, the document (1-based) and
the field, and nothing is returned unless every document is valid, so a bad file never half-imports.
Kueue's own ``Configuration`` documents are handed back separately, undecoded, for the caller's config loader.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec
import yaml

from events import conversion, object_rules, quota_rules, topology_spreading, unhealthy_threshold
from events import objects as o
from events import tas_assignment as tas
from events.bounded_input import read_bounded
from events.doc_paths import leaves
from events.errors import InvalidInput, SchemaRefused, aggregate, refuse_field
from events.field_errors import go_quote, not_supported, with_cel_rules
from events.labels import annotation_map_errors, is_dns_label, label_map_errors, object_name_problem
from events.preemption_config_rules import preemption_config_errors
from events.priority_boost import ANNOTATION as PRIORITY_BOOST_ANNOTATION
from events.priority_boost import error as priority_boost_error
from events.quantity import parse_quantity
from events.template_digest import stamped_from_document
from events.timefmt import ZONELESS, parse_rfc3339

try:
    _BaseLoader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - PyYAML without libyaml
    _BaseLoader = yaml.SafeLoader


class _Loader(_BaseLoader):  # type: ignore[misc,valid-type]
    """Safe loading that keeps unquoted timestamps as text, as Kubernetes reads them (not as datetimes)."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in _BaseLoader.yaml_implicit_resolvers.items()
}

CONFIG_API_VERSIONS = ("config.kueue.x-k8s.io/v1beta2", "config.kueue.x-k8s.io/v1beta1")


@dataclass(frozen=True)
class Checks:
    """The checks Kueue's webhooks make only while a feature gate is on, each at its gate's default here
    (:meth:`under` reads them from a Configuration's gates). Off, an object Kueue would then accept is taken,
    whoever reads it: the watch, ``kueue-es import``, a STATE.yaml."""

    priority_boost: bool = False
    """``PriorityBoost`` (alpha, off): a Workload's ``kueue.x-k8s.io/priority-boost`` is an int32."""
    slice_size: bool = True
    """``TASValidateWorkloadSliceSize`` (beta, on): ``podSetSliceSize`` above 0, and given with the slice topology."""
    pod_set_metadata: bool = True
    """``WorkloadValidationForPodSetMetadata`` (beta, on): pod set template labels and annotations well formed."""
    on_flavors: bool = True
    """``RejectUpdatesToCQWithInvalidOnFlavors`` (beta, on): an admission check's ``onFlavors`` are the
    ClusterQueue's flavors. (Kueue's webhook checks a new ClusterQueue whatever the gate; off, it lets an update
    keep an invalid entry unchanged, which is how an existing one is taken: :mod:`events.update_rules`.)"""
    non_negative: bool = True
    """``WorkloadValidateResourcesAreNonNegative`` (beta, on): no negative request or limit in a pod set's
    containers, init containers or pod-level resources."""
    admission_gate: bool = True
    """``AdmissionGatedBy`` (beta, on): a Workload's ``kueue.x-k8s.io/admission-gated-by`` annotation well
    formed."""
    min_count: bool = True
    """``PartialAdmission`` (beta, on): ``minCount`` at most its pod set's count, in one pod set, not on an elastic
    job (unless :attr:`elastic_min_count`). (Off, Kueue's defaulting webhook drops ``minCount`` before any check; kueue-es, which does not rewrite
    objects, takes it and does not use it.)"""
    elastic_min_count: bool = False
    """``ElasticJobsViaWorkloadSlicesWithPartialReplicaScaleUp`` (alpha, off; with ``ElasticJobsViaWorkloadSlices``):
    the ``minCount`` check lets an elastic job's Workload carry ``minCount``, in any number of pod sets."""
    concurrent_admission: bool = False
    """``ConcurrentAdmission`` (alpha, off): a ClusterQueue with a ``concurrentAdmissionPolicy`` has one resource
    group of at most 32 flavors and is not StrictFIFO (:func:`events.object_rules.check_concurrent_admission`)."""
    topology_spreading: bool = False
    """``TASTopologySpreading`` (alpha, off): a pod set's ``kueue.x-k8s.io/podset-topology-spreading`` annotation
    comes with a required topology, is valid, and agrees across its pod-set group
    (:func:`events.topology_spreading.workload_errors`). Off, it is not looked at (nor used)."""
    unhealthy_threshold: bool = False
    """``TASReplaceMultipleFailedNodes`` (alpha, off): a Workload's ``kueue.x-k8s.io/tas-unhealthy-nodes-eviction-threshold``
    annotation is a whole number from 1 to 8 (:func:`events.unhealthy_threshold.threshold_errors`; an update holds
    it against the old object instead)."""
    reclaimable_bounds: bool = True
    """Not a gate's: a reclaimable count at most its pod set's count (:func:`reclaimable_bound_errors`). An
    update turns it off here and holds it against the old object instead (:mod:`events.update_rules`:
    ``ElasticJobsViaWorkloadSlices`` lets a workload slice keep an unchanged count above a lowered pod set)."""
    unique_names: bool = True
    """Not a gate's: a Workload's lists keyed by name (the CRD's list maps) name each entry once. An update turns
    it off here and holds to it only the lists it changes (:mod:`events.update_rules`): a Workload stored with an
    entry named twice, which kueue-es's CRDs (no list types) let through, stays updatable, to lose its finalizer."""

    ratcheted: frozenset[str] = frozenset()
    """Not a gate's: the CRD markers' field errors an update keeps from the old object, unchanged, which are
    not refused (:func:`events.crd_markers.ratcheted`, the apiserver's ratcheting)."""

    @classmethod
    def under(cls, gate: Callable[[str], bool]) -> Checks:
        """The checks as ``gate`` (a gate's name -> on) sets them: ``ClusterState.gate`` for the watch, the log's
        recorded Configuration's for ``kueue-es import``, the loaded one's for a STATE.yaml or the validating
        webhook."""
        return cls(priority_boost=gate("PriorityBoost"), slice_size=gate("TASValidateWorkloadSliceSize"),
                   pod_set_metadata=gate("WorkloadValidationForPodSetMetadata"),
                   on_flavors=gate("RejectUpdatesToCQWithInvalidOnFlavors"),
                   non_negative=gate("WorkloadValidateResourcesAreNonNegative"),
                   admission_gate=gate("AdmissionGatedBy"), min_count=gate("PartialAdmission"),
                   elastic_min_count=gate("ElasticJobsViaWorkloadSlices")
                   and gate("ElasticJobsViaWorkloadSlicesWithPartialReplicaScaleUp"),
                   concurrent_admission=gate("ConcurrentAdmission"),
                   topology_spreading=gate("TASTopologySpreading"),
                   unhealthy_threshold=gate("TASReplaceMultipleFailedNodes"))


UNGATED = Checks(priority_boost=False, slice_size=False, pod_set_metadata=False, on_flavors=False,
                 non_negative=False, admission_gate=False, min_count=False)
"""None of the gated checks: for reading objects before the Configuration that decides them is known."""


@dataclass
class Manifest:
    objects: list[o.KObject] = field(default_factory=list)
    configs: list[dict[str, Any]] = field(default_factory=list)
    """``kind: Configuration`` documents, as plain data."""
    wheres: list[str] = field(default_factory=list)
    """Where each of :attr:`objects` came from (file, document, kind and name), for a check made later: the
    gated ones once the Configuration that decides them is known (:func:`validate_gated`)."""

    def validate_gated(self, checks: Checks) -> None:
        """Hold every object to the gated checks ``checks`` turns on (it was read under :data:`UNGATED`)."""
        for obj, where in zip(self.objects, self.wheres, strict=True):
            validate_gated(obj, where, checks)


MAX_DEPTH = 1000
"""Collections nested deeper than this are refused before the YAML is composed: libyaml's composer recurses on the
C stack, and some tens of thousands of levels (a few dozen kilobytes of ``[``) crash the process. The libyaml
PyYAML 6.0.4 bundles refuses more than 1,000 levels itself (:func:`_check_depth` words its refusal as its own),
so the limit is that one, whichever PyYAML is installed. Shallower ones the checks' own recursion may still
refuse (no Kubernetes object comes near either)."""
_LIBYAML_TOO_DEEP = "exceeded maximum nesting depth"


_DOCUMENT_MARKER = re.compile(r"\n(?:---|\.\.\.)(?=\s|$)")
"""Where a document starts or ends: no scalar may hold such a line, so it always is one. (``\n``, not ``^`` with
MULTILINE: several times faster.)"""
_DEEP_INDENT = re.compile(rf"\n {{{MAX_DEPTH // 2}}}")


def _check_depth(text: str, source: str) -> None:
    """Refuse a document nested deeper than :data:`MAX_DEPTH`. Each level opens with ``[``, ``{``, ``-`` or ``?``,
    or is a block mapping indented further than its parent: when, in every document, those cannot add up to the
    limit (C-speed counts), no walk over the YAML's events is needed."""
    bounds = [0, *(m.start() for m in _DOCUMENT_MARKER.finditer(text)), len(text)]
    if all(sum(text.count(c, a, b) for c in "[{-?") <= MAX_DEPTH // 2 for a, b in zip(bounds, bounds[1:], strict=False)
           ) and _DEEP_INDENT.search("\n" + text[: MAX_DEPTH // 2]) is None and _DEEP_INDENT.search(text) is None:
        return
    depth, index = 0, 0

    def too_deep(line: int) -> InvalidInput:
        return InvalidInput(f"{source}: document {index}: line {line + 1}: nested more than {MAX_DEPTH} levels deep")

    try:
        for event in yaml.parse(text, Loader=_Loader):
            kind = type(event)
            if kind is yaml.MappingStartEvent or kind is yaml.SequenceStartEvent:
                depth += 1
                if depth > MAX_DEPTH:
                    raise too_deep(event.start_mark.line)
            elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
                depth -= 1
            elif kind is yaml.DocumentStartEvent:
                index += 1
    except yaml.MarkedYAMLError as exc:
        if exc.problem != _LIBYAML_TOO_DEEP or exc.problem_mark is None:
            raise
        raise too_deep(exc.problem_mark.line) from None


def load_text(text: str, source: str = "<input>", *, checks: Checks = Checks()) -> Manifest:
    docs: list[Any] = []
    try:
        _check_depth(text, source)
        for doc in yaml.load_all(text, Loader=_Loader):
            docs.append(doc)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InvalidInput(f"{source}: document {len(docs) + 1}:{where}: malformed YAML: {problem}") from None
    out = Manifest()
    for index, doc in enumerate(docs, start=1):
        if doc is None:
            continue
        try:
            for item in _expand_list(doc, source, index):
                _decode_document(item, source, index, out, checks)
        except RecursionError:
            raise InvalidInput(f"{source}: document {index}: nested too deeply (or an alias holds itself)") from None
    return out


def load_file(path: str, *, checks: Checks = Checks()) -> Manifest:
    return load_text(read_text(path), path, checks=checks)


def read_text(path: str | os.PathLike[str], source: str | None = None) -> str:
    """A file people wrote (YAML), as text: one that cannot be read, or is not UTF-8, is bad input naming
    ``source`` (default the path), and so is an endless or huge one (:func:`events.bounded_input.read_bounded`)."""
    source = str(path) if source is None else source
    try:
        with open(path, "rb") as f:
            data = read_bounded(f, source)
    except OSError as exc:
        raise InvalidInput(f"{source}: cannot read: {exc.strerror or exc}") from None
    return decode_text(data, source)


def decode_text(data: bytes, source: str) -> str:
    """``data`` as UTF-8 text; anything else is bad input naming ``source``, the line and the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InvalidInput(f"{source}: line {line}: not UTF-8 text (byte 0x{data[exc.start]:02x} at byte "
                           f"{exc.start})") from None


def _expand_list(doc: Any, source: str, index: int) -> list[dict[str, Any]]:
    if not isinstance(doc, dict):
        raise InvalidInput(f"{source}: document {index}: expected a mapping with apiVersion and kind")
    kind = doc.get("kind")
    if kind == "List" or (isinstance(kind, str) and kind.endswith("List") and "items" in doc):
        items = doc.get("items") or []
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise InvalidInput(f"{source}: document {index}: field `items`: expected a list of objects")
        return items
    return [doc]


def _decode_document(doc: dict[str, Any], source: str, index: int, out: Manifest, checks: Checks) -> None:
    kind = doc.get("kind")
    api_version = doc.get("apiVersion")
    name = (doc.get("metadata") or {}).get("name") if isinstance(doc.get("metadata"), dict) else None
    where = f"{source}: document {index}" + (f" ({kind} {name})" if kind and name else f" ({kind})" if kind else "")
    if not kind or not isinstance(kind, str):
        raise InvalidInput(f"{where}: field `kind` is required")
    if not api_version or not isinstance(api_version, str):
        raise InvalidInput(f"{where}: field `apiVersion` is required")
    if kind == "Configuration":
        if api_version not in CONFIG_API_VERSIONS:
            raise InvalidInput(f"{where}: field `apiVersion`: Configuration must be one of {', '.join(CONFIG_API_VERSIONS)}")
        out.configs.append(doc)
        return
    cls = o.KINDS.get(kind)
    if cls is None:
        raise InvalidInput(f"{where}: field `kind`: unknown kind {kind!r} (known: {', '.join(sorted(o.KINDS))})")
    accepted = o.accepted_api_versions(kind)
    if api_version not in accepted:
        raise InvalidInput(f"{where}: field `apiVersion`: {kind} must be {' or '.join(accepted)}, not {api_version!r}")
    if not isinstance(doc.get("metadata"), dict):
        raise InvalidInput(f"{where}: field `metadata` is required")
    if not name:
        raise InvalidInput(f"{where}: field `metadata.name` is required")
    namespaced = kind not in o.CLUSTER_SCOPED
    if namespaced and not doc["metadata"].get("namespace"):
        doc = {**doc, "metadata": {**doc["metadata"], "namespace": "default"}}
    _check_names(doc["metadata"], where, kind=kind, namespaced=namespaced)
    _check_kind_names(doc, where, kind)
    if api_version.endswith("/v1beta1") and api_version.startswith("kueue.x-k8s.io"):
        doc = convert_v1beta1(doc, where)
    elif kind == "Workload":
        _reject_v1beta1_domains(doc, where, api_version)
    out.objects.append(decode_object(doc, where, checks=checks))
    out.wheres.append(where)


def _check_names(metadata: dict[str, Any], where: str, *, kind: str, namespaced: bool) -> None:
    """The name (and namespace) the apiserver would refuse to store (one of another type is the decoder's to
    name)."""
    name, namespace = metadata.get("name"), metadata.get("namespace")
    if isinstance(name, str):
        refuse_field(object_name_problem(name, label=kind == "Namespace"), where, "metadata.name")
    if namespaced and isinstance(namespace, str):
        refuse_field(object_name_problem(namespace, label=True), where, "metadata.namespace")


JOB_NAME_MAX = 63
"""A Job's name is copied into its pod template's ``batch.kubernetes.io/job-name`` and ``job-name`` labels (unless
it chooses its selector by hand), so it is held to a label value's length."""
SYSTEM_PRIORITY_PREFIX = "system-"
SYSTEM_PRIORITY_CLASSES = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}
"""The only PriorityClasses named with the reserved prefix, by their fixed values (neither a global default)."""
HIGHEST_USER_PRIORITY = 1000000000


def _check_kind_names(doc: dict[str, Any], where: str, kind: str) -> None:
    """The apiserver's stricter rules for some kinds' names (and a PriorityClass's value): a Job's name is a label
    value in its pod template, and an Indexed Job's last pod's hostname (``<name>-<completions - 1>``) a DNS label;
    a PriorityClass named ``system-...`` is one of Kubernetes' own, others are at most 1,000,000,000."""
    name = doc["metadata"].get("name")
    if not isinstance(name, str):
        return
    spec = doc.get("spec") if isinstance(doc.get("spec"), dict) else {}
    if kind == "Job":
        if spec.get("manualSelector") is not True and len(name) > JOB_NAME_MAX:
            refuse_field(f'Invalid value: "{name}": must be no more than {JOB_NAME_MAX} characters', where,
                         "spec.template.labels")
        completions = spec.get("completions")
        if spec.get("completionMode") == "Indexed" and type(completions) is int and completions > 0:
            hostname = f"{name}-{completions - 1}"
            if not is_dns_label(hostname):
                refuse_field(f'Invalid value: "{name}": will not able to create pod with invalid DNS label: '
                             f"{hostname}", where, "metadata.name")
    elif kind == "PriorityClass":
        value, default = doc.get("value", 0), doc.get("globalDefault", False)
        if name.startswith(SYSTEM_PRIORITY_PREFIX):
            refuse_field(_system_priority_problem(name, value, default), where, "metadata.name")
        elif type(value) is int and value > HIGHEST_USER_PRIORITY:
            refuse_field(f"Forbidden: maximum allowed value of a user defined priority is {HIGHEST_USER_PRIORITY}",
                         where, "value")


def _system_priority_problem(name: str, value: Any, default: Any) -> str | None:
    if name not in SYSTEM_PRIORITY_CLASSES:
        error = f"{name} is not a known system priority class"
    elif value != SYSTEM_PRIORITY_CLASSES[name]:
        error = f"value of {name} PriorityClass must be {SYSTEM_PRIORITY_CLASSES[name]}"
    elif default is not False:
        error = f"globalDefault of {name} PriorityClass must be false"
    else:
        return None
    return (f"Forbidden: priority class names with '{SYSTEM_PRIORITY_PREFIX}' prefix are reserved for system use "
            f"only. error: {error}")


def decode_object(doc: dict[str, Any], where: str, *, checks: Checks = Checks()) -> o.KObject:
    """A v1beta2 object (plain data, with its ``kind``) as its view, once it passes :func:`validate_object`."""
    _check_integers(doc, where)
    doc = _default_assignment_names(doc)
    try:
        obj = msgspec.convert(doc, o.KueueObject, strict=False)
    except msgspec.ValidationError as exc:
        errors = _type_errors(doc, str(exc))
        if _is_crd(doc):  # the apiserver's schema validation of a custom resource
            raise SchemaRefused(where, errors) from None
        raise InvalidInput(f"{where}: {aggregate(errors)}") from None
    obj = stamped_from_document(obj, doc)  # a Workload's whole templates, as digests
    try:  # a number written as a string is converted to an integer of any size: the log could not take it
        _WIRE.encode(obj)
    except OverflowError:
        _check_integers(msgspec.to_builtins(obj), where)
        raise
    validate_object(obj, where, checks=checks, doc=doc)
    return obj


_WIRE = msgspec.msgpack.Encoder()
DEFAULT_POD_SET = "main"


def _default_assignment_names(doc: dict[str, Any]) -> dict[str, Any]:
    """A Workload's pod set assignments without a name named ``main``, as Kueue's CRD defaults them
    (``PodSetAssignment.Name``: ``+kubebuilder:default=main``) before anything checks them: the apiserver does
    so for a stored object, this for one imported. ``doc`` itself is left as it is."""
    status = doc.get("status") if doc.get("kind") == "Workload" else None
    admission = status.get("admission") if isinstance(status, dict) else None
    assignments = admission.get("podSetAssignments") if isinstance(admission, dict) else None
    if not isinstance(assignments, list) or all(not isinstance(a, dict) or "name" in a for a in assignments):
        return doc
    named = [{"name": DEFAULT_POD_SET, **a} if isinstance(a, dict) else a for a in assignments]
    return {**doc, "status": {**status, "admission": {**admission, "podSetAssignments": named}}}


def _reject_v1beta1_domains(doc: dict[str, Any], where: str, api_version: str) -> None:
    """``domains`` is only v1beta1's form: in a v1beta2 object it would be ignored and the assignment read as empty."""
    adm = (doc.get("status") or {}).get("admission") if isinstance(doc.get("status"), dict) else None
    psas = adm.get("podSetAssignments") if isinstance(adm, dict) else None
    for i, psa in enumerate(psas if isinstance(psas, list) else ()):
        ta = psa.get("topologyAssignment") if isinstance(psa, dict) else None
        if isinstance(ta, dict) and "domains" in ta:
            raise InvalidInput(f"{where}: field `status.admission.podSetAssignments[{i}].topologyAssignment.domains`: "
                               f"is the kueue.x-k8s.io/v1beta1 form; {api_version} takes `slices`")


_INT64 = range(-(2**63), 2**63)


def _check_integers(node: Any, where: str) -> None:
    """Kubernetes' integers are at most 64 bits; a larger one could not be written to the log."""
    for at, value in leaves(node):
        if isinstance(value, int) and not isinstance(value, bool) and value not in _INT64:
            raise InvalidInput(f"{where}: field `{at}`: {value} is out of range (at most 64 bits)")


MAX_TYPE_ERRORS = 20
_STEP = re.compile(r"\.([^.\[]+)|\[(\d+|\.\.\.)\]")
_JSON_TYPES: dict[str, type] = {"array": list, "object": dict, "str": str, "int": int, "float": float,
                                "bool": bool, "null": type(None)}


def _is_crd(doc: dict[str, Any]) -> bool:
    """Whether ``doc`` is a custom resource (Kueue's, or another ``x-k8s.io`` project's)."""
    return str(doc.get("apiVersion", "")).split("/")[0].endswith("x-k8s.io")


def _type_errors(doc: dict[str, Any], first: str) -> list[str]:
    """The fields of ``doc`` of the wrong type, from the decoder's first error (``first``), each named to its map
    key: for a custom resource, every one (up to :data:`MAX_TYPE_ERRORS`), as the apiserver's schema validation
    lists them; a built-in kind's JSON decoding stops at the first, and so does this. Each further one is found by
    decoding again without the field last found wrong; a list item or a required field cannot be left out, and
    ends the search. Only on the way to a refusal."""
    crd = _is_crd(doc)
    trial = copy.deepcopy(doc)
    messages: list[str] = []
    error = first
    while True:
        steps = _error_steps(trial, error)
        messages.append(_field_message(error, steps))
        if not crd or len(messages) >= MAX_TYPE_ERRORS or not _leave_out(trial, steps):
            break
        try:
            msgspec.convert(trial, o.KueueObject, strict=False)
            break
        except msgspec.ValidationError as exc:
            error = str(exc)
            if error.startswith("Object missing required field"):
                break
    return messages


def _error_steps(doc: dict[str, Any], error: str) -> list[str | int] | None:
    """The path the decoder's ``error`` names, a map entry (``[...]`` to the decoder) resolved to its key when it
    is the last step: the first entry whose value is of the type the error says it got. None when it cannot be
    followed in ``doc``."""
    text, _, path = error.partition(" - at `$")
    steps: list[str | int] = []
    node: Any = doc
    found = _STEP.findall(path.rstrip("`"))
    for n, (name, index) in enumerate(found):
        key: str | int | None = name or (int(index) if index.isascii() and index.isdigit() else None)
        if key is None and n == len(found) - 1 and isinstance(node, dict):
            got = re.search(r"got `(\w+)`", text)
            want = _JSON_TYPES.get(got.group(1)) if got else None
            key = next((k for k, v in node.items() if want is not None and type(v) is want), None)
        if isinstance(key, str) and isinstance(node, dict) and key in node:
            node = node[key]
        elif isinstance(key, int) and isinstance(node, list) and key < len(node):
            node = node[key]
        else:
            return None
        steps.append(key)
    return steps


def _leave_out(doc: dict[str, Any], steps: list[str | int] | None) -> bool:
    """Drop from ``doc`` the mapping entry at ``steps``; False when they end at no mapping's entry."""
    if not steps or not isinstance(steps[-1], str):
        return False
    node: Any = doc
    for step in steps[:-1]:
        node = node[step]
    if not isinstance(node, dict):
        return False
    del node[steps[-1]]
    return True


def _field_message(msg: str, steps: list[str | int] | None = None) -> str:
    """msgspec says "Expected `int`, got `str` - at `$.spec.x`"; say "field `spec.x`: expected int, got str"
    (with ``steps``, the path resolved in the document, a map entry named by its key: ``requests[cpu]``)."""
    if " - at `$" in msg:
        text, _, path = msg.partition(" - at `$")
        path = path.rstrip("`").lstrip(".")
        if steps is not None and not text.startswith("Object missing required field `"):
            path = _path_text(steps, path)
        if text.startswith("Object missing required field `"):
            missing = text.split("`")[1]
            return f"field `{path + '.' if path else ''}{missing}` is required"
        return f"field `{path}`: {text[0].lower()}{text[1:]}"
    return msg


def _path_text(steps: list[str | int], path: str) -> str:
    """``steps`` as a field path; a map key (where ``path``, the decoder's, has ``[...]``) in brackets."""
    keyed = path.count("[...]")
    out = ""
    for n, step in enumerate(steps):
        if isinstance(step, int):
            out += f"[{step}]"
        elif keyed and n == len(steps) - 1:
            out += f"[{step}]"
        else:
            out += f".{step}" if out else step
    return out


def validate_object(obj: o.KObject, where: str, *, checks: Checks = Checks(),
                    doc: dict[str, Any] | None = None) -> None:
    """Everything Kueue refuses in a new object, for what kueue-es is handed as input (``kueue-es import``, a
    STATE.yaml, its validating webhooks): what the projections need (:func:`check_foldable`), the rules Kueue holds
    its kinds to whatever the gates (:mod:`events.object_rules`; with ``doc``, the plain data ``obj`` was read from,
    also those that tell a field left out from one given empty), then those ``checks`` turns on
    (:func:`validate_gated`). A ClusterQueue's webhook rules, gated or not, are refused together, in Kueue's order
    (:func:`events.object_rules.check_cluster_queue`)."""
    if isinstance(obj, o.ClusterQueue):
        object_rules.check_cluster_queue(obj, where, schema=queue_schema_errors(obj),
                                         cel=queue_cel_errors(obj),
                                         also=_gated_cluster_queue_errors(obj, checks),
                                         ratcheted=checks.ratcheted, doc=doc)
        return
    if isinstance(obj, o.Cohort):
        object_rules.check_cohort(obj, where, schema=queue_schema_errors(obj), cel=queue_cel_errors(obj))
        return
    if isinstance(obj, o.Workload):
        _validate_workload(obj, where, checks, doc)
        return
    _validate_ungated(obj, where, checks.ratcheted, doc)
    if doc is not None:
        object_rules.check_document(doc, where, ratcheted=checks.ratcheted)
    validate_gated(obj, where, checks)


def _validate_workload(wl: o.Workload, where: str, checks: Checks, doc: dict[str, Any] | None) -> None:
    """A Workload's rules, each kind's errors together, as the apiserver and Kueue's webhook return them: what the
    projections need (every one broken), then its CRD's rules (the document's CEL rules on tolerations with them),
    then the webhook's, ungated then gated, refused as one
    :class:`~events.object_rules.WorkloadRefused` so that an update's own join them
    (:mod:`connectors.k8s.validating`). The CRD's rule on ``minCount`` (under ``PartialAdmission``, as
    :func:`gated_workload_errors`) is among its CRD's."""
    _validate_shape(wl, where, stored=False)  # input: the reclaimable pods' names are Kueue's webhook's, below
    schema, webhook = object_rules.workload_errors(wl, unique_names=checks.unique_names,
                                                   ratcheted=checks.ratcheted)
    if not schema and doc is not None:
        schema = object_rules.document_errors(doc)
    if not schema and checks.min_count:
        schema = object_rules.min_count_rule_errors(wl)
    if schema:
        raise object_rules.WorkloadRefused(where, schema, [], wl)
    webhook += gated_workload_errors(wl, checks)
    if webhook:
        raise object_rules.WorkloadRefused(where, [], webhook, wl)


def check_foldable(obj: o.KObject, where: str) -> None:
    """What the projections need of an object to fold it: times and quantities that parse, known enum values,
    counts in range. All the watch holds a stored object to: Kueue's controllers act on a stored object whatever
    its admission rules would say of it now (written while no webhook answered, or before a stricter version),
    and so does kueue-es."""
    _validate_shape(obj, where)
    if isinstance(obj, o.ClusterQueue | o.Cohort):
        groups = obj.spec.resource_groups
        object_rules.refuse_all(quota_rules.webhook_errors(groups, parent="", cohort=False, full=False), where)


QUEUE_ENUMS = (("spec.queueingStrategy", ("StrictFIFO", "BestEffortFIFO")),
               ("spec.preemption.reclaimWithinCohort", ("Never", "LowerPriority", "Any")),
               ("spec.preemption.withinClusterQueue", ("Never", "LowerPriority", "LowerOrNewerEqualPriority")),
               ("spec.stopPolicy", ("None", "Hold", "HoldAndDrain")))
"""The values a ClusterQueue's CRD takes in the fields the projections read, in its enums' order (which the
apiserver's refusal lists)."""


def queue_schema_errors(obj: o.ClusterQueue | o.Cohort, *, full: bool = True) -> list[str]:
    """What a ClusterQueue's or Cohort's CRD schema refuses, every rule broken, as the apiserver lists them: a
    creation time, quantities, names unique in their lists, lists within their ``maxItems``, known policy
    values, a fair sharing weight that is a quantity (its CEL rules are :func:`queue_cel_errors`). Without
    ``full``, only what the projections need: not the ``maxItems``, and a weight not negative (with ``full``,
    Kueue's webhook's to refuse: :func:`events.object_rules.check_cluster_queue`)."""
    spec = obj.spec
    errors = [f"field `{at}`: {problem}" for at, problem in (
        ("metadata.creationTimestamp", time_problem(obj.metadata.creation_timestamp)),) if problem is not None]
    errors += quota_rules.schema_errors(spec.resource_groups, full=full)
    if isinstance(obj, o.ClusterQueue):
        values = (spec.queueing_strategy, spec.preemption.reclaim_within_cohort,  # type: ignore[union-attr]
                  spec.preemption.within_cluster_queue, spec.stop_policy)  # type: ignore[union-attr]
        for (at, allowed), value in zip(QUEUE_ENUMS, values, strict=True):
            if value not in allowed:
                errors.append(f"field `{at}`: {not_supported(go_quote(value), allowed)}")
    # a negative weight is Kueue's webhook's to refuse (object_rules); the watch, which folds what passes
    # here, cannot take one (the fair share divides by it)
    errors += _weight_errors(spec.fair_sharing, negative=full)
    return errors


def queue_cel_errors(obj: o.ClusterQueue | o.Cohort, *, full: bool = True) -> list[str]:
    """The CEL rules of a ClusterQueue's or Cohort's CRD on its quotas, the spec's then its groups': a
    ClusterQueue's borrowing limits only with a cohort (``full`` only), each group's resource count. Checked
    only when no schema error stops them (:func:`events.field_errors.with_cel_rules`), a ClusterQueue's after
    its markers (:func:`events.object_rules.check_cluster_queue`)."""
    spec = obj.spec
    errors = []
    if full and isinstance(obj, o.ClusterQueue):
        errors += quota_rules.borrowing_errors(spec.resource_groups, obj.spec.cohort_name)
    return errors + quota_rules.count_errors(spec.resource_groups)


def validate_gated(obj: o.KObject, where: str, checks: Checks) -> None:
    """The checks Kueue's webhooks make only under a feature gate, those ``checks`` turns on."""
    match obj:
        case o.Workload():
            object_rules.refuse_all(gated_workload_errors(obj, checks), where)
        case o.ClusterQueue():
            object_rules.refuse_all(_gated_cluster_queue_errors(obj, checks), where)
        case _:
            pass


def _gated_cluster_queue_errors(cq: o.ClusterQueue, checks: Checks) -> list[str]:
    """The gated rules of Kueue's ClusterQueue webhook ``cq`` breaks, in its order: the concurrent admission
    policy's (last of the spec's), then ``onFlavors``."""
    return ((object_rules.concurrent_admission_errors(cq) if checks.concurrent_admission else [])
            + (on_flavors_errors(cq) if checks.on_flavors else []))


def gated_workload_errors(wl: o.Workload, checks: Checks) -> list[str]:
    """The field errors of the Workload checks ``checks`` turns on, every one broken, in the order Kueue's webhook
    makes them: the priority boost, each pod set's template metadata, non-negative requests and slice size, the
    minimum counts, the admission gate, the topology spreading, the unhealthy-nodes threshold, the reclaimable
    pods (their pod set names whatever ``checks`` says, and their counts' bound). A ``minCount`` above its count breaks the CRD's rule, which the apiserver checks before the
    webhook runs: its errors are then the only ones."""
    rule_errors = object_rules.min_count_rule_errors(wl) if checks.min_count else []
    if rule_errors:  # the CRD's rule: the apiserver refuses before Kueue's webhook runs
        return rule_errors
    errors = priority_boost_errors(wl) if checks.priority_boost else []
    for i, ps in enumerate(wl.spec.pod_sets):
        at = f"spec.podSets[{i}]"
        if checks.pod_set_metadata:
            errors += _template_metadata_errors(ps.template.metadata, f"{at}.template.metadata")
        if checks.non_negative:
            errors += object_rules.non_negative_errors(ps.template.spec, f"{at}.template.spec")
        if checks.slice_size and ps.topology_request is not None:
            errors += _slice_size_errors(ps.topology_request, f"{at}.topologyRequest")
    if checks.min_count:
        errors += object_rules.min_count_errors(wl, scale_up=checks.elastic_min_count)
    if checks.admission_gate:
        errors += object_rules.admission_gate_errors(wl.metadata.annotations)
    if checks.topology_spreading:
        errors += topology_spreading.workload_errors(wl.spec.pod_sets)
    if checks.unhealthy_threshold:
        errors += unhealthy_threshold.threshold_errors(wl.metadata.annotations)
    errors += reclaimable_errors(wl, bounds=checks.reclaimable_bounds)
    return errors


def _validate_ungated(obj: o.KObject, where: str, ratcheted: frozenset[str] = frozenset(),
                      doc: dict[str, Any] | None = None) -> None:
    _validate_shape(obj, where)
    object_rules.check(obj, where, ratcheted=ratcheted, doc=doc)


def _validate_shape(obj: o.KObject, where: str, *, stored: bool = True) -> None:
    """What the projections need of an object to fold it: times and quantities that parse, known enum values,
    counts in range (the rules Kueue holds its own kinds to come after: :mod:`events.object_rules`)."""
    if isinstance(obj, o.ClusterQueue | o.Cohort):
        object_rules.refuse_all(with_cel_rules(queue_schema_errors(obj, full=False),
                                               queue_cel_errors(obj, full=False)), where, crd=True)
        return
    if isinstance(obj, o.Workload):
        # the CRD's schema; with the reclaimable pods' names (the watch's check), a rule of Kueue's webhook joins it
        object_rules.refuse_all(_workload_shape_errors(obj, stored=stored), where, crd=not stored)
        return
    check_time(obj.metadata.creation_timestamp, where, "metadata.creationTimestamp")
    match obj:
        case o.Pod():
            _check_pod_spec(obj.spec, where, "spec")
        case o.Job():
            _check_pod_spec(obj.spec.template.spec, where, "spec.template.spec")
        case o.PodTemplate():
            _check_pod_spec(obj.template.spec, where, "template.spec")
        case o.Node():
            _check_quantities(obj.status.allocatable, where, "status.allocatable")
            for i, c in enumerate(obj.status.conditions):
                check_time(c.last_transition_time, where, f"status.conditions[{i}].lastTransitionTime")
        case o.LocalQueue():
            _check_weight(obj.spec.fair_sharing, where)
        case o.LimitRange():
            _validate_limit_range(obj, where)
        case o.RuntimeClass():
            if not obj.handler:
                raise InvalidInput(f"{where}: field `handler` is required")
            fixed = obj.overhead.pod_fixed if obj.overhead is not None else {}
            for r in sorted(fixed):
                check_quantity(fixed[r], where, f"overhead.podFixed.{r}")
        case o.ResourceClaimTemplate():
            _validate_claim_template(obj, where)
        case o.ResourceSlice():
            _check_resource_slice(obj.spec, where)
        case o.PreemptionConfig():
            object_rules.refuse_all(preemption_config_errors(obj.spec), where)
        case o.MultiKueueCluster():
            validate_multikueue_cluster(obj.spec, where)
        case o.MultiKueueConfig():
            validate_multikueue_config(obj.spec, where)
        case _:
            pass


def _slice_size_errors(req: o.PodSetTopologyRequest, at: str) -> list[str]:
    """``TASValidateWorkloadSliceSize``: ``podSetSliceSize`` comes with ``podSetSliceRequiredTopology``, and the
    slice topology with a size; every one broken, as Kueue's field errors (its test's types: Required, Forbidden;
    the details are its release note's words, its source not being at hand). The sizes' minimum is the CRD's,
    checked before, whatever the gate (#12728): :func:`_topology_request_errors`."""
    size, level = req.pod_set_slice_size, req.pod_set_slice_required_topology
    errors: list[str] = []
    if size is not None and level is None:
        errors.append(f"field `{at}.podSetSliceSize`: Forbidden: may only be set together with "
                      "podSetSliceRequiredTopology")
    if level is not None and size is None:
        errors.append(f"field `{at}.podSetSliceSize`: Required value: must be set when podSetSliceRequiredTopology "
                      "is set")
    return errors


def _template_metadata_errors(meta: o.TemplateMeta, at: str) -> list[str]:
    """``WorkloadValidationForPodSetMetadata``: a pod set template's labels and annotations as Kubernetes
    checks a pod's (:mod:`events.labels`)."""
    return ([f"field `{at}.labels`: {body}" for body in label_map_errors(meta.labels)]
            + [f"field `{at}.annotations`: {body}" for body in annotation_map_errors(meta.annotations)])


def check_on_flavors(cq: o.ClusterQueue, where: str, *, kept_from: o.ClusterQueue | None = None) -> None:
    """Refuse ``cq`` for every ``onFlavors`` entry :func:`on_flavors_errors` finds wrong, in one message."""
    object_rules.refuse_all(on_flavors_errors(cq, kept_from=kept_from), where)


def on_flavors_errors(cq: o.ClusterQueue, *, kept_from: o.ClusterQueue | None = None) -> list[str]:
    """Every ``onFlavors`` entry of the admission checks strategy that names none of the ClusterQueue's flavors.
    ``kept_from``: the ClusterQueue before an update that leaves its flavors as they were; a check whose
    ``onFlavors`` that update leaves unchanged is not looked at (Kueue's update rule with
    ``RejectUpdatesToCQWithInvalidOnFlavors`` off)."""
    strategy = cq.spec.admission_checks_strategy
    if strategy is None:
        return []
    flavors = _flavor_names(cq)
    kept: dict[str, frozenset[str]] = {}
    old_strategy = kept_from.spec.admission_checks_strategy if kept_from is not None else None
    if kept_from is not None and old_strategy is not None and _flavor_names(kept_from) == flavors:
        kept = {rule.name: frozenset(rule.on_flavors) for rule in old_strategy.admission_checks}
    supported = ", ".join(f'"{f}"' for f in sorted(flavors)) or "none"
    return [f"field `spec.admissionChecksStrategy.admissionChecks[{i}].onFlavors[{j}]`: "
            f'Unsupported value: "{flavor}": supported values: {supported}'
            for i, rule in enumerate(strategy.admission_checks) if kept.get(rule.name) != frozenset(rule.on_flavors)
            for j, flavor in enumerate(rule.on_flavors) if flavor not in flavors]


def _flavor_names(cq: o.ClusterQueue) -> frozenset[str]:
    return frozenset(fq.name for rg in cq.spec.resource_groups for fq in rg.flavors)


def priority_boost_errors(wl: o.Workload) -> list[str]:
    """Kueue's Workload webhook under the ``PriorityBoost`` gate: a ``kueue.x-k8s.io/priority-boost`` annotation
    must be an int32 (:mod:`events.priority_boost`). Gate off, the annotation is not looked at."""
    problem = priority_boost_error(wl.metadata.annotations.get(PRIORITY_BOOST_ANNOTATION))
    return [problem] if problem is not None else []


def _validate_claim_template(t: o.ResourceClaimTemplate, where: str) -> None:
    """What the API server checks of a ResourceClaimTemplate's device requests that the quota charge relies on:
    a named request is ``exactly`` or ``firstAvailable`` (not both), a known allocation mode, a positive count,
    capacity requests that parse."""
    for i, r in enumerate(t.spec.spec.devices.requests):
        at = f"spec.spec.devices.requests[{i}]"
        if not r.name:
            raise InvalidInput(f"{where}: field `{at}.name` is required")
        if (r.exactly is None) == (r.first_available is None):
            raise InvalidInput(f"{where}: field `{at}`: exactly one of `exactly` or `firstAvailable` is required")
        x = r.exactly
        if x is None:
            continue
        if not x.device_class_name:
            raise InvalidInput(f"{where}: field `{at}.exactly.deviceClassName` is required")
        if x.allocation_mode and x.allocation_mode not in o.DEVICE_ALLOCATION_MODES:
            raise InvalidInput(f"{where}: field `{at}.exactly.allocationMode`: must be ExactCount or All, not "
                               f"{x.allocation_mode!r}")
        if x.count is not None and x.count <= 0:
            raise InvalidInput(f"{where}: field `{at}.exactly.count`: must be greater than zero")
        wanted = x.capacity.requests if x.capacity is not None else {}
        for name in sorted(wanted):
            check_quantity(wanted[name], where, f"{at}.exactly.capacity.requests.{name}")


_LIMIT_LISTS = ("max", "min", "default", "default_request", "max_limit_request_ratio")


def _validate_limit_range(lr: o.LimitRange, where: str) -> None:
    """What the API server checks of a LimitRange that the projections rely on: known types, valid quantities,
    ``min`` not above ``max``, ratios of at least 1."""
    for i, item in enumerate(lr.spec.limits):
        at = f"spec.limits[{i}]"
        if not item.type:
            raise InvalidInput(f"{where}: field `{at}.type` is required")
        if item.type not in o.LIMIT_TYPES:
            raise InvalidInput(f"{where}: field `{at}.type`: must be {', '.join(o.LIMIT_TYPES[:-1])} or "
                               f"{o.LIMIT_TYPES[-1]}, not {item.type!r}")
        for fname in _LIMIT_LISTS:
            values = getattr(item, fname)
            for r in sorted(values):
                check_quantity(values[r], where, f"{at}.{_camel(fname)}.{r}")
        for r in sorted(item.min):
            if r in item.max and parse_quantity(item.min[r]) > parse_quantity(item.max[r]):
                raise InvalidInput(f"{where}: field `{at}.min.{r}`: {item.min[r]} is greater than max "
                                   f"{item.max[r]}")
        for r in sorted(item.max_limit_request_ratio):
            if parse_quantity(item.max_limit_request_ratio[r]) < 1:
                raise InvalidInput(f"{where}: field `{at}.maxLimitRequestRatio.{r}`: must be at least 1")


MAX_SLICE_LAYERS = 3


TOPOLOGY_REQUEST_MINIMUMS = (("subGroupCount", "sub_group_count", 0), ("podSetSliceSize", "pod_set_slice_size", 1))
"""The minimums Kueue's Workload CRD puts on a topology request's counts (v0.20: #13108, #13634), in its fields'
order: (field, view attribute, minimum)."""


def _topology_request_errors(req: o.PodSetTopologyRequest, request_at: str, *, minimums: bool) -> list[str]:
    """The bounds Kueue's CRD puts on a topology request, every one broken: with ``minimums`` (input, not a stored
    object), its counts' minimums (:data:`TOPOLOGY_REQUEST_MINIMUMS`, in the apiserver's words, whatever the
    gates), then the slice layers' (1–63 character level, size >= 1, at most 3 layers); whether the layers fit a
    topology is only known at placement, which reports it as the pod set's failure. The watch folds a stored
    Workload below the minimums (stored under a CRD that had none: Kueue v0.19's, kueue-es's before): placement
    fails it, and a relist never drops it from the log."""
    errors: list[str] = []
    for name, attr, minimum in TOPOLOGY_REQUEST_MINIMUMS if minimums else ():
        value, field_at = getattr(req, attr), f"{request_at}.{name}"
        if value is not None and value < minimum:
            errors.append(f"field `{field_at}`: Invalid value: {value}: {field_at} in body should be greater than or "
                          f"equal to {minimum}")
    layers = req.podset_slice_required_topology_constraints
    at = f"{request_at}.podsetSliceRequiredTopologyConstraints"
    if len(layers) > MAX_SLICE_LAYERS:
        errors.append(f"field `{at}` must have at most {MAX_SLICE_LAYERS} items, has {len(layers)}")
    for j, layer in enumerate(layers):
        if not layer.topology:
            errors.append(f"field `{at}[{j}].topology` is required")
        elif len(layer.topology) > 63:
            errors.append(f"field `{at}[{j}].topology` must be at most 63 characters")
        if layer.size < 1:
            errors.append(f"field `{at}[{j}].size`: Invalid value: {layer.size}: must be greater than 0")
    return errors


PREEMPTION_GATE_POSITIONS = ("Open", "Closed")
"""``status.preemptionGates[].position``: Kueue's enum."""


def _preemption_gate_errors(wl: o.Workload) -> list[str]:
    """The schema of Kueue's preemption gates: each named (1 to 63 characters, once per list), a status entry at
    ``Open`` or ``Closed`` with a time that parses. Every one broken, in order."""
    errors: list[str] = []
    for field_, entries in (("spec", wl.spec.preemption_gates), ("status", wl.status.preemption_gates)):
        seen: set[str] = set()
        for i, gate in enumerate(entries):
            at = f"{field_}.preemptionGates[{i}]"
            if not gate.name:
                errors.append(f"field `{at}.name` must not be empty")
            elif len(gate.name) > 63:
                errors.append(f"field `{at}.name` must be at most 63 characters, not {len(gate.name)}")
            elif gate.name in seen:
                errors.append(f"field `{at}.name`: duplicate value {gate.name!r}")
            seen.add(gate.name)
            if isinstance(gate, o.PreemptionGateState):
                if gate.position not in PREEMPTION_GATE_POSITIONS:
                    errors.append(f"field `{at}.position` must be one of Open, Closed, not {gate.position!r}")
                errors += _time_errors(gate.last_transition_time, f"{at}.lastTransitionTime")
    return errors


def _workload_shape_errors(wl: o.Workload, *, stored: bool = True) -> list[str]:
    """What the projections need of a Workload (:func:`_validate_shape`): every field error, in order. A
    ``stored`` one (the watch's) is held to the reclaimable pods' names too; input (not ``stored``: its names are
    Kueue's webhook's, checked apart) to the topology requests' CRD minimums."""
    errors = _time_errors(wl.metadata.creation_timestamp, "metadata.creationTimestamp")
    for i, c in enumerate(wl.status.conditions):
        errors += _time_errors(c.last_transition_time, f"status.conditions[{i}].lastTransitionTime")
    requeue = wl.status.requeue_state
    if requeue is not None:
        errors += _time_errors(requeue.requeue_at, "status.requeueState.requeueAt")
    if not wl.spec.pod_sets:
        errors.append("field `spec.podSets` must have at least 1 item")
    limit = wl.spec.maximum_execution_time_seconds
    if limit is not None and limit < 1:
        errors.append(f"field `spec.maximumExecutionTimeSeconds` must be >= 1, not {limit}")
    errors += _workload_tas_errors(wl)
    for i, ps in enumerate(wl.spec.pod_sets):
        at = f"spec.podSets[{i}]"
        if ps.count < 0:
            errors.append(f"field `{at}.count` must be >= 0")
        if ps.topology_request is not None:
            errors += _topology_request_errors(ps.topology_request, f"{at}.topologyRequest",
                                               minimums=not stored)
        # The fold needs no more; the CRD's ``minCount <= count`` is checked under PartialAdmission (off, Kueue's
        # defaulting drops minCount first): object_rules.min_count_rule_errors.
        if ps.min_count is not None and ps.min_count < 0:
            errors.append(f"field `{at}.minCount` must be >= 0")
        errors += _pod_spec_errors(ps.template.spec, f"{at}.template.spec", negative=True)
    return (errors + _workload_status_quantity_errors(wl.status) + _reclaimable_pod_errors(wl, names=stored)
            + _preemption_gate_errors(wl))


def _reclaimable_pod_errors(wl: o.Workload, *, names: bool = True) -> list[str]:
    """The checks of ``status.reclaimablePods`` a stored object is held to: each names a pod set (with ``names``:
    the watch's; an admission check makes it Kueue's webhook's, :func:`reclaimable_errors`), once, with a count
    not below 0. Every one broken, in order."""
    counts = {ps.name: ps.count for ps in wl.spec.pod_sets}
    errors = reclaimable_errors(wl, bounds=False) if names else []
    seen: set[str] = set()
    for rp in wl.status.reclaimable_pods:
        at = f"status.reclaimablePods[{rp.name}]"
        if rp.name not in counts:
            continue
        if rp.name in seen:
            errors.append(f"field `{at}.name`: given more than once")
        seen.add(rp.name)
        if rp.count < 0:
            errors.append(f"field `{at}.count`: must be between 0 and the pod set's count ({counts[rp.name]}), "
                          f"got {rp.count}")
    return errors


def reclaimable_errors(wl: o.Workload, *, names: bool = True, bounds: bool = True,
                       kept: Callable[[str, int], bool] | None = None) -> list[str]:
    """Kueue's webhook on ``status.reclaimablePods``, an error per entry at most, in order: with ``names``, one
    naming no pod set (``Unsupported value``, the pod sets in the spec's order); with ``bounds``, a count above its
    pod set's (``Invalid value``), unless ``kept(name, count)`` (an update of an elastic workload leaving an entry
    unchanged above a pod set its Job scaled down: :mod:`events.update_rules`). The bound is not held to a stored
    object: Kueue lets such an entry be stored, and the fold floors a count at 0."""
    counts = {ps.name: ps.count for ps in wl.spec.pod_sets}
    errors: list[str] = []
    for rp in wl.status.reclaimable_pods:
        at = f"status.reclaimablePods[{rp.name}]"
        if rp.name not in counts:
            if names:
                errors.append(f"field `{at}.name`: {not_supported(go_quote(rp.name), list(counts))}")
        elif bounds and rp.count > counts[rp.name] and not (kept is not None and kept(rp.name, rp.count)):
            errors.append(f"field `{at}.count`: Invalid value: {rp.count}: should be less or equal to "
                          f"{counts[rp.name]}")
    return errors


def reclaimable_bound_errors(wl: o.Workload, *, kept: Callable[[str, int], bool] | None = None) -> list[str]:
    """:func:`reclaimable_errors`' bounds alone."""
    return reclaimable_errors(wl, names=False, kept=kept)


def _workload_tas_errors(wl: o.Workload) -> list[str]:
    """The admission's topology assignments and delayed topology requests, and the unhealthy nodes: every field
    error, in order."""
    errors: list[str] = []
    admission = wl.status.admission
    for i, psa in enumerate(admission.pod_set_assignments if admission is not None else ()):
        at = f"status.admission.podSetAssignments[{i}]"
        if psa.topology_assignment is not None:
            errors += tas.errors(psa.topology_assignment, f"{at}.topologyAssignment")
        if psa.delayed_topology_request not in (None, "Pending", "Ready"):
            errors.append(f"field `{at}.delayedTopologyRequest`: must be Pending or Ready, "
                          f"not {psa.delayed_topology_request!r}")
    nodes = wl.status.unhealthy_nodes
    if len(nodes) > 8:
        errors.append(f"field `status.unhealthyNodes`: must have at most 8 items, has {len(nodes)}")
    errors += [f"field `status.unhealthyNodes[{i}].name` must not be empty" for i, node in enumerate(nodes)
               if not node.name]
    return errors


def validate_multikueue_cluster(spec: o.MultiKueueClusterSpec, where: str) -> None:
    """Kueue's CRD: exactly one cluster source; a kubeconfig location of 1-256 characters, of type Secret or Path;
    a ClusterProfile name of 1-256 characters."""
    source = spec.cluster_source
    if (source.kube_config is None) == (source.cluster_profile_ref is None):
        raise SchemaRefused(where, ["field `spec.clusterSource`: exactly one of kubeConfig or clusterProfileRef "
                                    "must be set"])
    kc = source.kube_config
    if kc is not None:
        if not 1 <= len(kc.location) <= 256:
            raise SchemaRefused(where, ["field `spec.clusterSource.kubeConfig.location` must be 1 to 256 characters"])
        if kc.location_type not in o.MULTIKUEUE_LOCATION_TYPES:
            raise SchemaRefused(where, ["field `spec.clusterSource.kubeConfig.locationType`: must be Secret or Path, "
                                        f"not {kc.location_type!r}"])
    ref = source.cluster_profile_ref
    if ref is not None and not 1 <= len(ref.name) <= 256:
        raise SchemaRefused(where, ["field `spec.clusterSource.clusterProfileRef.name` must be 1 to 256 characters"])


def validate_multikueue_config(spec: o.MultiKueueConfigSpec, where: str) -> None:
    """Kueue's CRD: 1-20 distinct cluster names of at most 256 characters; quotaManagement Manual or Automated.
    The names are a list-set, which the apiserver checks after the rest of the schema: each name given again, at
    its first repeat, in kube-apiserver's words (v1.36)."""
    clusters = spec.clusters
    if not 1 <= len(clusters) <= 20:
        raise SchemaRefused(where, [f"field `spec.clusters` must have 1 to 20 items, has {len(clusters)}"])
    for i, name in enumerate(clusters):
        if not name or len(name) > 256:
            raise SchemaRefused(where, [f"field `spec.clusters[{i}]` must be 1 to 256 characters"])
    seen: set[str] = set()
    repeated: dict[str, int] = {}
    for i, name in enumerate(clusters):
        if name in seen:
            repeated.setdefault(name, i)
        seen.add(name)
    object_rules.refuse_all([f"field `spec.clusters[{i}]`: Duplicate value: {go_quote(name)}"
                             for name, i in repeated.items()], where, crd=True)  # in the order of the repeats
    if spec.quota_management is not None and spec.quota_management not in ("Manual", "Automated"):
        raise SchemaRefused(where, ["field `spec.quotaManagement`: must be Manual or Automated, "
                                    f"not {spec.quota_management!r}"])


def _as_errors(problem: str | None, at: str) -> list[str]:
    """``problem`` with field ``at`` as a field error, or none."""
    return [f"field `{at}`: {problem}"] if problem is not None else []


def _time_errors(text: str | None, at: str) -> list[str]:
    return _as_errors(time_problem(text), at)


def check_time(text: str | None, where: str, field_: str) -> None:
    """Timestamps the projections read must parse, or folding the log would fail later."""
    refuse_field(time_problem(text), where, field_)


def time_problem(text: str | None) -> str | None:
    """Why ``text`` (None: no time) is not a time the projections can read; None when it is one."""
    if text is None:
        return None
    try:
        parse_rfc3339(text)
    except (ValueError, OverflowError):
        zone = " (no time zone)" if ZONELESS.fullmatch(text) else ""
        return f"not an RFC 3339 time{zone}: {text!r}"
    return None


def check_quantity(q: object, where: str, field_: str, *, negative: bool = False) -> None:
    """``q`` parses as a quantity, and (unless ``negative``: the projections read a negative one as 0) is not
    negative."""
    refuse_field(quota_rules.quantity_problem(q, negative=negative), where, field_)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w.title() for w in rest)


def _check_resource_slice(spec: o.ResourceSliceSpec, where: str) -> None:
    """Every quantity of a ResourceSlice parses (a negative one is taken: Kueue reads a driver's negative value as
    0)."""
    for i, cs in enumerate(spec.shared_counters):
        for c in sorted(cs.counters):
            check_quantity(cs.counters[c].value, where, f"spec.sharedCounters[{i}].counters.{c}.value", negative=True)
    for i, d in enumerate(spec.devices):
        at = f"spec.devices[{i}]"
        for j, cc in enumerate(d.consumes_counters):
            for c in sorted(cc.counters):
                check_quantity(cc.counters[c].value, where, f"{at}.consumesCounters[{j}].counters.{c}.value",
                               negative=True)
        for name in sorted(d.capacity):
            cap, here = d.capacity[name], f"{at}.capacity.{name}"
            check_quantity(cap.value, where, f"{here}.value", negative=True)
            policy = cap.request_policy
            if policy is None:
                continue
            bounds = policy.valid_range
            for key, q in (("default", policy.default), *((f"validValues[{k}]", v) for k, v in
                                                          enumerate(policy.valid_values)),
                           *((f"validRange.{b}", getattr(bounds, b)) for b in ("min", "max", "step")
                             if bounds is not None)):
                if q is not None:
                    check_quantity(q, where, f"{here}.requestPolicy.{key}", negative=True)


def _check_quantities(values: dict[str, o.Quantity], where: str, at: str) -> None:
    object_rules.refuse_first(_quantity_errors(values, at), where)


def _quantity_errors(values: dict[str, o.Quantity], at: str, *, negative: bool = False) -> list[str]:
    """Each of ``values`` (by name) that does not parse as a quantity, or (unless ``negative``) is negative."""
    return [f"field `{at}.{r}`: {problem}" for r in sorted(values)
            if (problem := quota_rules.quantity_problem(values[r], negative=negative)) is not None]


def _check_pod_spec(pod: o.PodSpec, where: str, at: str) -> None:
    """A Pod's, a Job's or a PodTemplate's quantities: the first that does not parse or is negative is refused."""
    object_rules.refuse_first(_pod_spec_errors(pod, at), where)


def _pod_spec_errors(pod: o.PodSpec, at: str, *, negative: bool = False) -> list[str]:
    """Every quantity of a pod spec that the projections could not turn into a number when they fold the object.
    ``negative``: a negative one is taken (a Workload's pod template, which Kueue's webhook checks for that only
    under ``WorkloadValidateResourcesAreNonNegative``, and then not its overhead: :func:`validate_gated`); the
    apiserver refuses one in a Pod's, a Job's or a PodTemplate's."""
    errors: list[str] = []
    for field_, containers in (("containers", pod.containers), ("initContainers", pod.init_containers)):
        for i, c in enumerate(containers):
            for r, q in (*c.resources.requests.items(), *c.resources.limits.items()):
                errors += _as_errors(quota_rules.quantity_problem(q, negative=negative),
                                     f"{at}.{field_}[{i}].resources: {r}")
    if pod.resources is not None:
        for r, q in (*pod.resources.requests.items(), *pod.resources.limits.items()):
            errors += _as_errors(quota_rules.quantity_problem(q, negative=negative), f"{at}.resources: {r}")
    return errors + _quantity_errors(pod.overhead, f"{at}.overhead", negative=negative)


def _workload_status_quantity_errors(status: o.WorkloadStatus) -> list[str]:
    errors: list[str] = []
    if status.admission is not None:
        for i, psa in enumerate(status.admission.pod_set_assignments):
            errors += _quantity_errors(psa.resource_usage, f"status.admission.podSetAssignments[{i}].resourceUsage")
    for i, req in enumerate(status.resource_requests):
        errors += _quantity_errors(req.resources, f"status.resourceRequests[{i}].resources")
    return errors


def _weight_errors(fair_sharing: o.FairSharing | None, *, negative: bool = False) -> list[str]:
    """What a queue's fair sharing weight breaks: off the quantity pattern or no quantity (the CRD's), or, unless
    ``negative``, below zero."""
    weight = fair_sharing.weight if fair_sharing is not None else None
    error = None if weight is None else quota_rules.quantity_error("spec.fairSharing.weight", weight,
                                                                   negative=negative)
    return [] if error is None else [error]


def _check_weight(fair_sharing: o.FairSharing | None, where: str) -> None:
    """A LocalQueue's weight: one off the quantity pattern is its CRD's to refuse
    (:class:`~events.errors.SchemaRefused`); a negative one is refused as before (kueue-es's rule: the projections
    read it as 0; whose rule it is in Kueue is not confirmed)."""
    object_rules.refuse_all(_weight_errors(fair_sharing, negative=True), where, crd=True)
    object_rules.refuse_all(_weight_errors(fair_sharing), where)


# --- v1beta1 -> v1beta2 -----------------------------------------------------------------------------------------


def convert_v1beta1(doc: dict[str, Any], where: str = "v1beta1 object") -> dict[str, Any]:
    """Convert a v1beta1 Kueue object (plain data) to its v1beta2 shape; ``where`` names it in errors."""
    doc = conversion.to_v1beta2(doc, where)
    spec = doc.get("spec")
    if doc.get("kind") == "Workload" and isinstance(spec, dict) and "podSets" in spec:
        doc["spec"] = {**spec, "podSets": _drop_slice_layers(spec["podSets"])}
    return doc


def _drop_slice_layers(pod_sets: Any) -> Any:
    """v1beta1 has no ``podsetSliceRequiredTopologyConstraints`` (Kueue drops it converting to v1beta1): an
    unknown field in a v1beta1 manifest, as Kueue's apiserver would prune it. (The conversion webhook keeps it
    instead, so that a v1beta1 client's read-modify-write of a v1beta2 object does not lose it.)"""
    if not isinstance(pod_sets, list):
        return pod_sets
    out = []
    for ps in pod_sets:
        tr = ps.get("topologyRequest") if isinstance(ps, dict) else None
        if isinstance(tr, dict) and "podsetSliceRequiredTopologyConstraints" in tr:
            tr = {k: v for k, v in tr.items() if k != "podsetSliceRequiredTopologyConstraints"}
            ps = {**ps, "topologyRequest": tr}
        out.append(ps)
    return out
