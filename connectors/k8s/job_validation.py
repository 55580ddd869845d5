"""Kueue's validating webhook for batch/v1 Jobs (``vjob.kb.io`` at ``/validate-batch-v1-job``, CREATE and
UPDATE): what Kueue's manager refuses in a Job, worded as it words it (Kubernetes field errors, several joined as
``[a, b]``), under the Kueue Configuration's feature gates.

Kueue validates every Job its webhook configuration selects (all namespaces but ``kube-system`` and its own),
with a queue name or not (``pkg/controller/jobs/job/job_webhook.go``, ``pkg/controller/jobframework/
validation.go`` and ``tas_validation.go``):

* **on create, and again on every update**: the ``kueue.x-k8s.io/queue-name`` and
  ``kueue.x-k8s.io/prebuilt-workload-name`` labels are DNS-1123 subdomains, the latter only on a kind Kueue
  supports prebuilt Workloads for (:data:`PREBUILT_KINDS`: not a JAXJob, a SparkApplication nor a RayService,
  whose webhooks share these rules); ``kueue.x-k8s.io/max-exec-time-seconds``
  is an integer above 0 (:func:`connectors.k8s.workload_body.max_execution_seconds`);
  ``kueue.x-k8s.io/job-min-parallelism`` is an integer from 1 to the pod count (``min(parallelism,
  completions)``) less one — whatever ``PartialAdmission`` says, as in Kueue, whose gate only decides whether the
  Workload keeps the ``minCount``; on update only when the annotation changes;
  ``kueue.x-k8s.io/job-completions-equal-parallelism`` is a boolean, and when true only on an Indexed Job whose
  completions equal its parallelism; under ``TopologyAwareScheduling``, the pod template's TAS annotations
  (:func:`topology_errors`);
* **on update**: while the Job is not suspended its queue name does not change, nor its prebuilt Workload's name
  (suspended, that label is checked as on create); the queue name is not removed in a namespace with a LocalQueue
  ``default``; the maximum execution time does not change unless the Job is suspended before and after; a
  WorkloadPriorityClass label is not added to a running Job, nor ever removed (changing it is allowed); with
  ``job-min-parallelism`` set, ``parallelism`` does not change while the old Job runs; the
  completions-equal-parallelism setting does not change while the Job runs; under ``AdmissionGatedBy`` its
  ``kueue.x-k8s.io/admission-gated-by`` gates are removed, never added (:func:`events.update_rules.admission_gate_errors`:
  none after a creation without one), as Kueue holds every job it manages — so a gate only ever leaves the Job's
  Workload too.

* **elastic Jobs** (``kueue.x-k8s.io/elastic-job: "true"`` under ``ElasticJobsViaWorkloadSlices``,
  :mod:`connectors.k8s.workload_slices`): whether a Job is elastic does not change on update (the error at
  ``metadata.annotations[kueue.x-k8s.io/elastic-job]``, as Kueue since #11342); an elastic Job's prebuilt
  Workload name may change while it runs
  (checked as on create). A Job is not refused for being elastic with a ``job-min-parallelism``: Kueue's Workload
  webhook then refuses its Workload ("partial admission and elastic job cannot be used together").

Where Kueue's text comes from Go's JSON decoder (a malformed slice-layers annotation) or is not in its source as
read, the detail is kueue-es's.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any

import msgspec

from connectors.k8s import field_errors, pods_ready_validation, prebuilt
from connectors.k8s.job_events import QUEUE_LABEL
from connectors.k8s.job_priority import PRIORITY_LABEL
from connectors.k8s.pod_roles import shape_changes
from connectors.k8s.pods_ready_validation import PodsReadyRule
from connectors.k8s.resources import MIN_PARALLELISM
from connectors.k8s.workload_body import MAX_EXEC_LABEL, max_execution_seconds
from connectors.k8s.workload_slices import ELASTIC_JOB_ANNOTATION
from events import admission_gate, topology_spreading
from events import objects as o
from events.errors import InvalidInput, aggregate
from events.goint import is_go_int, parse_bool, parse_int
from events.labels import NAME, NAME_FMT, NAME_MAX, regex_error, subdomain_problems
from events.update_rules import GATE_PATH, admission_gate_errors
from projections import gates

PATH = "/validate-batch-v1-job"
WEBHOOK_NAME = "vjob.kb.io"
COMPLETIONS_EQUAL_PARALLELISM = "kueue.x-k8s.io/job-completions-equal-parallelism"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
SPREADING = topology_spreading.SPREADING_ANNOTATION
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
SLICE_REQUIRED = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
SLICE_LAYERS = "kueue.x-k8s.io/podset-slice-required-topology-constraints"
GROUP_NAME = "kueue.x-k8s.io/podset-group-name"
POD_INDEX_OFFSET = "kueue.x-k8s.io/pod-index-offset"
IMMUTABLE = "field is immutable"
MAX_LAYERS = 3

HasDefaultQueue = Callable[[str], Awaitable[bool]]

_LABELS, _ANNOTATIONS = "metadata.labels", "metadata.annotations"
_TEMPLATE_ANNOTATIONS = "spec.template.metadata.annotations"
_INT32, _INT64, _UINT64 = 2**31, 2**63, 2**64
_DIGITS = re.compile(r"[0-9]+")


# --- Kubernetes field errors, as the apiserver's validation words them (:mod:`connectors.k8s.field_errors`) ----

_OMIT = field_errors.OMIT
_invalid, _forbidden, _required = field_errors.invalid, field_errors.forbidden, field_errors.required
_duplicate, _shown, _go_quote = field_errors.duplicate, field_errors.shown, field_errors.go_quote


def _key(path: str, key: str) -> str:
    return f"{path}[{key}]"


# --- Kubernetes' name syntaxes ---------------------------------------------------------------------------------

_KEY_NAME_MAX = NAME_MAX
_KEY_RULE = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"


def label_key_problems(value: str) -> list[str]:
    """Why ``value`` is not a label key (a name, optionally after a DNS subdomain and '/'); empty: it is one."""
    parts = value.split("/")
    problems: list[str] = []
    if len(parts) > 2:
        return ["a valid label key " + regex_error(_KEY_RULE, NAME_FMT, "MyName", "my.name", "123-abc")
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            problems.append("prefix part must be non-empty")
        else:
            problems += ["prefix part " + p for p in subdomain_problems(prefix, "bytes")]
    if not name:
        problems.append("name part must be non-empty")
    elif len(name.encode()) > _KEY_NAME_MAX:
        problems.append(f"name part must be no more than {_KEY_NAME_MAX} bytes")
    if not NAME.fullmatch(name):
        problems.append("name part " + regex_error(_KEY_RULE, NAME_FMT, "MyName", "my.name", "123-abc"))
    return problems


def _name_label(labels: Mapping[str, str], key: str) -> list[str]:
    """A label naming a Kueue object, when present, is a DNS-1123 subdomain."""
    if key not in labels:
        return []
    problems = subdomain_problems(labels[key])
    return [_invalid(_key(_LABELS, key), labels[key], ",".join(problems))] if problems else []


def name_label_errors(labels: Mapping[str, str], key: str) -> list[str]:
    """Kueue's error for a label ``key`` that names a Kueue object (a queue, say) and is no DNS-1123 subdomain."""
    return _name_label(labels, key)


def _label_name(value: str, path: str) -> list[str]:
    return [_invalid(path, value, p) for p in label_key_problems(value)]


# --- Go's integer and boolean parsing --------------------------------------------------------------------------


def _parse_int32(text: str) -> tuple[int | None, str]:
    """``strconv.ParseInt(text, 10, 32)``: the value, or None and Go's error."""
    if not is_go_int(text):
        return None, f'strconv.ParseInt: parsing {_go_quote(text)}: invalid syntax'
    if parse_int(text, 32) is None:
        return None, f'strconv.ParseInt: parsing {_go_quote(text)}: value out of range'
    return int(text), ""


def _atoi(text: str) -> tuple[int | None, str]:
    """``strconv.Atoi`` (64-bit): the value, or None and Go's error."""
    if not is_go_int(text):
        return None, f'strconv.Atoi: parsing {_go_quote(text)}: invalid syntax'
    value = int(text)
    if not -_INT64 <= value < _INT64:
        return None, f'strconv.Atoi: parsing {_go_quote(text)}: value out of range'
    return value, ""


# --- the Job -----------------------------------------------------------------------------------------------------


def _meta(job: Mapping[str, Any], field: str) -> dict[str, str]:
    meta = job.get("metadata") or {}
    value = meta.get(field) if isinstance(meta, dict) else None
    return value if isinstance(value, dict) else {}


def _spec(job: Mapping[str, Any]) -> dict[str, Any]:
    spec = job.get("spec")
    return spec if isinstance(spec, dict) else {}


def _suspended(job: Mapping[str, Any]) -> bool:
    return _spec(job).get("suspend") is True


def _parallelism(job: Mapping[str, Any]) -> int:
    value = _spec(job).get("parallelism")
    return value if isinstance(value, int) else 1


def pod_count(job: Mapping[str, Any]) -> int:
    """The Job's pods as Kueue counts them: its parallelism, or its completions when fewer."""
    completions = _spec(job).get("completions")
    count = _parallelism(job)
    return min(count, completions) if isinstance(completions, int) else count


def _completions_equal_parallelism(job: Mapping[str, Any]) -> bool:
    return parse_bool(_meta(job, "annotations").get(COMPLETIONS_EQUAL_PARALLELISM, "")) is True


def _prebuilt_name(job: Mapping[str, Any], feature_gates: Mapping[str, bool]) -> str:
    view = o.Job(metadata=o.ObjectMeta(name="", labels=_meta(job, "labels"), annotations=_meta(job, "annotations")))
    return prebuilt.name_of(view, gates.enabled(feature_gates, gates.WORKLOAD_IDENTIFIER_ANNOTATIONS))


# --- the rules ---------------------------------------------------------------------------------------------------


PREBUILT_KINDS = frozenset({
    ("batch/v1", "Job"), ("jobset.x-k8s.io/v1alpha2", "JobSet"), ("kubeflow.org/v1", "TFJob"),
    ("kubeflow.org/v1", "PaddleJob"), ("kubeflow.org/v1", "PyTorchJob"), ("kubeflow.org/v1", "XGBoostJob"),
    ("trainer.kubeflow.org/v1alpha1", "TrainJob"), ("kubeflow.org/v2beta1", "MPIJob"),
    ("ray.io/v1", "RayJob"), ("v1", "Pod"), ("ray.io/v1", "RayCluster"),
    ("workload.codeflare.dev/v1beta2", "AppWrapper")})
"""The kinds Kueue lets name a prebuilt Workload (its ``supportedPrebuiltWlJobGVKs``); of the others whose
webhooks run the generic job rules — a JAXJob, a SparkApplication, a RayService — Kueue refuses the label."""


def _prebuilt_source(job: Mapping[str, Any], feature_gates: Mapping[str, bool]) -> tuple[str, str | None]:
    """Where the prebuilt Workload's name is read and checked (its field path, its value; None: not there):
    under ``WorkloadIdentifierAnnotations`` the ``kueue.x-k8s.io/prebuilt-workload-name`` annotation when it
    names one (the label then ignored, as Kueue's ``PrebuiltWorkloadNameFor``), else the label of that key
    (Kueue's job_webhook_test.go "invalid prebuilt workload annotation, WorkloadIdentifierAnnotations
    enabled", "immutable prebuilt workload annotation, ..."; the gate off, the annotation is not
    looked at)."""
    annotations = _meta(job, "annotations")
    if gates.enabled(feature_gates, gates.WORKLOAD_IDENTIFIER_ANNOTATIONS) and annotations.get(prebuilt.KEY):
        return _key(_ANNOTATIONS, prebuilt.KEY), annotations[prebuilt.KEY]
    return _key(_LABELS, prebuilt.KEY), _meta(job, "labels").get(prebuilt.KEY)


def _prebuilt(job: Mapping[str, Any], feature_gates: Mapping[str, bool]) -> list[str]:
    """The prebuilt Workload's name as on creation (:func:`_prebuilt_source`): a DNS-1123 subdomain, on a kind
    Kueue supports it for (:data:`PREBUILT_KINDS`; an object naming no kind, never one under review, is not
    asked)."""
    path, name = _prebuilt_source(job, feature_gates)
    if name is None:
        return []
    problems = subdomain_problems(name)
    errors = [_invalid(path, name, ",".join(problems))] if problems else []
    api_version, kind = job.get("apiVersion"), job.get("kind")
    if (isinstance(api_version, str) and isinstance(kind, str) and kind
            and (api_version, kind) not in PREBUILT_KINDS):
        errors.append(_forbidden(path, f'Is not supported for "{_gvk(api_version, kind)}"'))
    return errors


def _gvk(api_version: str, kind: str) -> str:
    """Go's ``GroupVersionKind.String()``: ``<group>/<version>, Kind=<kind>`` (the core group empty)."""
    group, _, version = api_version.rpartition("/")
    return f"{group}/{version}, Kind={kind}"


def _labels_on_create(job: Mapping[str, Any], feature_gates: Mapping[str, bool]) -> list[str]:
    """The queue name, the prebuilt Workload's name and the maximum execution time, as on creation."""
    labels = _meta(job, "labels")
    errors = _name_label(labels, QUEUE_LABEL) + _prebuilt(job, feature_gates)
    try:
        max_execution_seconds(labels)
    except InvalidInput as exc:
        errors.append(str(exc))
    return errors


def _min_parallelism(job: Mapping[str, Any], feature_gates: Mapping[str, bool]) -> list[str]:
    """``job-min-parallelism`` is an int32 (Kueue #15499 reads it with ``ParseInt(.., 10, 32)``: a value past
    int32 is refused with Go's range error rather than wrapped) from 1 to the pod count less one; an elastic
    Job (:func:`_elastic`) may not ask for partial admission at all (Kueue's job_webhook_test.go "partial
    admission and elastic job cannot be used together", the Workload webhook's rule seen on the Job; listed
    before the value's own problems, an order unconfirmed)."""
    text = _meta(job, "annotations").get(MIN_PARALLELISM)
    if text is None:
        return []
    path = _key(_ANNOTATIONS, MIN_PARALLELISM)
    errors = []
    if _elastic(job, feature_gates):
        errors.append(_invalid(path, text, "partial admission and elastic job cannot be used together"))
    value, error = _parse_int32(text)
    if value is None:
        return [*errors, _invalid(path, text, error)]
    count = pod_count(job)
    if value >= count or value <= 0:
        errors.append(_invalid(path, value, f"should be between 0 and {count - 1}"))
    return errors


def _completions_setting(job: Mapping[str, Any]) -> list[str]:
    """``job-completions-equal-parallelism`` is a boolean; true only on an Indexed Job with completions equal to
    its parallelism."""
    text = _meta(job, "annotations").get(COMPLETIONS_EQUAL_PARALLELISM)
    if text is None:
        return []
    path = _key(_ANNOTATIONS, COMPLETIONS_EQUAL_PARALLELISM)
    enabled = parse_bool(text)
    if enabled is None:
        return [_invalid(path, text, f"strconv.ParseBool: parsing {_go_quote(text)}: invalid syntax")]
    if not enabled:
        return []
    spec = _spec(job)
    errors = []
    if spec.get("completionMode") in (None, "NonIndexed"):
        errors.append(_invalid(path, text, "should not be enabled for NonIndexed jobs"))
    completions = spec.get("completions")
    if _parallelism(job) != (completions if isinstance(completions, int) else 1):
        errors.append(_invalid("spec.completions", completions, "should be equal to parallelism when "
                               f"{COMPLETIONS_EQUAL_PARALLELISM} is annotation is true"))
    return errors


class _Layer(msgspec.Struct):
    topology: str = ""
    size: int = 0


_LAYERS = msgspec.json.Decoder(list[_Layer] | None)


def topology_errors(annotations: Mapping[str, str], count: int | None, gate: Callable[[str], bool], *,
                    path: str = _TEMPLATE_ANNOTATIONS) -> list[str]:
    """What Kueue refuses in a pod template's TAS annotations (under ``TopologyAwareScheduling``): more than one
    of required, preferred and unconstrained; a level that is not a label key; an unconstrained value that is not a
    boolean, or (``TASRejectFalseUnconstrainedTopology``) one that reads as false; a slice size that is not an
    int32 of at least 1, or without its slice topology (and the topology without a size); a ``podset-group-name``
    that is a number, or without a required or preferred level, or (with ``TASGroupedPodSetSlicing`` off) beside a
    slice request; the slice layers (only under ``TASMultiLayerTopology``) as :func:`_layers_errors` says; the
    topology spreading annotation (only under ``TASTopologySpreading``) as :func:`_spreading_errors` says; a
    ``pod-index-offset`` as :func:`_offset_errors` says.
    ``gate``: a feature gate's name -> on. A request that passes may not ask for a slice (or an outer layer) larger
    than the ``count`` pods, nor (under ``TASPartialSlices``) two or more layers whose outer size does not divide
    ``count`` (no bound when ``count`` is None: Kueue's Pod webhook has none). ``path``: where the annotations sit
    in the object."""
    found = {k for k in (REQUIRED, PREFERRED, UNCONSTRAINED, SLICE_REQUIRED, SLICE_SIZE, GROUP_NAME)
             if k in annotations}
    errors = []
    if len(found & {REQUIRED, PREFERRED, UNCONSTRAINED}) > 1:
        errors.append(_invalid(path, _OMIT, "must not contain more than one topology annotation: "
                                            f'["{REQUIRED}", "{PREFERRED}", "{UNCONSTRAINED}"]'))
    for key in (REQUIRED, PREFERRED, SLICE_REQUIRED):
        if key in found:
            errors += _label_name(annotations[key], _key(path, key))
    if GROUP_NAME in found:
        errors += _group_name_errors(annotations[GROUP_NAME], found, path, gate(gates.TAS_GROUPED_POD_SET_SLICING))
    if UNCONSTRAINED in found:
        errors += _unconstrained_errors(annotations[UNCONSTRAINED], gate(gates.TAS_REJECT_FALSE_UNCONSTRAINED), path)
    if SLICE_SIZE in found:
        size = parse_int(annotations[SLICE_SIZE], 32)
        if size is None:
            errors.append(_invalid(_key(path, SLICE_SIZE), annotations[SLICE_SIZE], "must be a numeric value"))
        elif size < 1:
            errors.append(_invalid(_key(path, SLICE_SIZE), annotations[SLICE_SIZE],
                                   "must be greater than or equal to 1"))
    if SLICE_REQUIRED in found and SLICE_SIZE not in found:
        errors.append(_required(_key(path, SLICE_SIZE), f"must be set when '{SLICE_REQUIRED}' is specified"))
    if SLICE_SIZE in found and SLICE_REQUIRED not in found:
        errors.append(_forbidden(_key(path, SLICE_SIZE), f"may not be set when '{SLICE_REQUIRED}' is not specified"))
    if SLICE_LAYERS in annotations:
        errors += _layers_errors(annotations[SLICE_LAYERS], found, gate, path)
    if SPREADING in annotations and gate(gates.TAS_TOPOLOGY_SPREADING):
        errors += _spreading_errors(annotations[SPREADING], REQUIRED in found, _key(path, SPREADING))
    if POD_INDEX_OFFSET in annotations:
        errors += _offset_errors(annotations[POD_INDEX_OFFSET], GROUP_NAME in found, path)
    if errors or count is None:
        return errors
    return _upper_bound_errors(annotations, count, path, gate(gates.TAS_PARTIAL_SLICES))


def _spreading_errors(value: str, required: bool, at: str) -> list[str]:
    """``TASTopologySpreading``: the ``kueue.x-k8s.io/podset-topology-spreading`` annotation comes with a required
    topology and holds a valid value (:func:`events.topology_spreading.annotation_problems`); off, it is not looked
    at (Kueue lets it be staged before the gate is turned on)."""
    if not required:
        return [_forbidden(at, f"may only be set together with '{REQUIRED}'")]
    return [f"{where}: {problem}" for where, problem in topology_spreading.annotation_problems(value, at)]


def _offset_errors(value: str, grouped: bool, path: str) -> list[str]:
    """The pod index offset the TAS ungater adds to a pod's rank (Kueue v0.20's #14485): never beside a pod-set
    group name (the group places the ranks itself), else a non-negative int32 (Kueue parses it with 32
    bits)."""
    at = _key(path, POD_INDEX_OFFSET)
    if grouped:
        return [_forbidden(at, f"may not be set when '{GROUP_NAME}' is specified")]
    offset = parse_int(value, 32)
    if offset is None or offset < 0:
        return [_invalid(at, value, "must be a non-negative integer")]
    return []


def _unconstrained_errors(value: str, reject_false: bool, path: str) -> list[str]:
    """The unconstrained annotation is a boolean; under ``TASRejectFalseUnconstrainedTopology`` (Kueue v0.20, beta,
    on) a true one: it is an opt-in, and a false one would ask for TAS without a level Kueue could place at."""
    parsed = parse_bool(value)
    if parsed is None:
        return [_invalid(_key(path, UNCONSTRAINED), value, "must be a boolean value")]
    if reject_false and not parsed:
        return [_invalid(_key(path, UNCONSTRAINED), value, 'must be "true" when set')]
    return []


def _group_name_errors(name: str, found: set[str], path: str, grouped_slicing: bool) -> list[str]:
    at = _key(path, GROUP_NAME)
    errors = []
    if _DIGITS.fullmatch(name) and int(name) < _UINT64:
        errors.append(_invalid(at, name, "must not be a number"))
    for key in (SLICE_SIZE, SLICE_REQUIRED):
        if key in found and not grouped_slicing:
            errors.append(_forbidden(at, f"may not be set when '{key}' is specified"))
    if PREFERRED not in found and REQUIRED not in found:
        errors.append(_forbidden(at, f"may not be set when neither '{PREFERRED}' nor '{REQUIRED}' is specified"))
    return errors


def _layers_errors(text: str, found: set[str], gate: Callable[[str], bool], path: str) -> list[str]:
    """The slice layers annotation (a JSON list of ``{topology, size}``): only under ``TASMultiLayerTopology``,
    never with the single-slice annotations, nor with a group name unless ``TASGroupedPodSetSlicing``; 1 to 3
    layers, each a label key and a size of at least 1, no level twice, each size dividing the one above it."""
    at = _key(path, SLICE_LAYERS)
    if not gate(gates.TAS_MULTI_LAYER_TOPOLOGY):
        return [_forbidden(at, f"the {gates.TAS_MULTI_LAYER_TOPOLOGY} feature gate must be enabled to use this "
                               "annotation")]
    errors = [_forbidden(at, f"may not be set when '{key}' is specified")
              for key in (SLICE_REQUIRED, SLICE_SIZE) if key in found]
    if GROUP_NAME in found and not gate(gates.TAS_GROUPED_POD_SET_SLICING):
        errors.append(_forbidden(_key(path, GROUP_NAME), f"may not be set when '{SLICE_LAYERS}' is specified"))
    try:
        layers = _LAYERS.decode(text) or []
    except msgspec.DecodeError as exc:
        return [*errors, _invalid(at, text, f"must be a valid JSON array: {exc}")]
    if any(not -_INT32 <= layer.size < _INT32 for layer in layers):
        return [*errors, _invalid(at, text, "must be a valid JSON array: a size is not an int32")]
    if not 1 <= len(layers) <= MAX_LAYERS:
        return [*errors, _invalid(at, text, f"must have between 1 and {MAX_LAYERS} layers")]
    for i, layer in enumerate(layers):
        errors += _label_name(layer.topology, f"{at}[{i}].topology")
        if layer.size < 1:
            errors.append(_invalid(f"{at}[{i}].size", layer.size, "must be greater than or equal to 1"))
    first: dict[str, int] = {}
    for i, layer in enumerate(layers):
        if layer.topology in first:
            errors.append(_duplicate(f"{at}[{i}].topology", f"{layer.topology} (also at index {first[layer.topology]})"))
        else:
            first[layer.topology] = i
    for i in range(len(layers) - 1):
        outer, inner = layers[i].size, layers[i + 1].size
        if inner > 0 and outer % inner != 0:
            errors.append(_invalid(f"{at}[{i + 1}].size", inner, f"must evenly divide the parent layer size {outer}"))
    return errors


def _upper_bound_errors(annotations: Mapping[str, str], count: int, path: str, partial_slices: bool) -> list[str]:
    errors = []
    if SLICE_SIZE in annotations:
        size = parse_int(annotations[SLICE_SIZE], 32)
        if size is not None and size > count:
            errors.append(_invalid(_key(path, SLICE_SIZE), annotations[SLICE_SIZE],
                                   f"must not be greater than pod set count {count}"))
    if SLICE_LAYERS in annotations:
        try:
            layers = _LAYERS.decode(annotations[SLICE_LAYERS]) or []
        except msgspec.DecodeError:
            layers = []
        if layers and layers[0].size > count:
            errors.append(_invalid(_key(path, SLICE_LAYERS), layers[0].size,
                                   f"must not be greater than pod set count {count}"))
        elif partial_slices and len(layers) > 1 and count % layers[0].size:
            errors.append(_invalid(_key(path, SLICE_LAYERS), layers[0].size,
                                   f"must evenly divide pod set count {count} when more than one layer is specified"))
    return errors


def _template_annotations(job: Mapping[str, Any]) -> dict[str, str]:
    template = _spec(job).get("template")
    return _meta(template, "annotations") if isinstance(template, dict) else {}


def _topology(job: Mapping[str, Any], feature_gates: Mapping[str, bool]) -> list[str]:
    gate = partial(gates.enabled, feature_gates)
    if not gate(gates.TOPOLOGY_AWARE_SCHEDULING):
        return []
    annotations = _template_annotations(job)
    if _elastic(job, feature_gates):
        refused = elastic_topology_error(annotations, _TEMPLATE_ANNOTATIONS)
        if refused:
            return [refused]
    return topology_errors(annotations, pod_count(job), gate)


def elastic_topology_error(annotations: Mapping[str, str], path: str) -> str:
    """An elastic job's pods may ask for no required or preferred topology (only unconstrained: Kueue v0.17's
    first elastic TAS iteration, KEP-77 as amended by kubernetes-sigs/kueue#8642; job_webhook_test.go "elastic
    job with required topology is rejected", "... preferred ..."). Kueue names the annotation as a child of
    ``path`` (``<path>.<key>``, not ``<path>[<key>]``) and reports nothing else of the request; empty:
    allowed."""
    for key, mode in ((REQUIRED, "required"), (PREFERRED, "preferred")):
        if key in annotations:
            return _forbidden(f"{path}.{key}", f"{mode} topology is not supported with elastic jobs")
    return ""


def create_errors(job: Mapping[str, Any], feature_gates: Mapping[str, bool], *,
                  pods_ready: PodsReadyRule | None = None) -> list[str]:
    """What Kueue refuses in a Job being created, in its order (``pods_ready``: the
    ``kueue.x-k8s.io/wait-for-pods-ready`` checks in force, :mod:`connectors.k8s.pods_ready_validation`)."""
    return (generic_create_errors(job, feature_gates, pods_ready=pods_ready)
            + _min_parallelism(job, feature_gates)
            + _completions_setting(job)
            + _topology(job, feature_gates))


def queue_removed(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """The update takes the queue name away (the one rule that asks whether the namespace has a default
    LocalQueue)."""
    return bool(_meta(old, "labels").get(QUEUE_LABEL)) and not _meta(new, "labels").get(QUEUE_LABEL)


def update_errors(old: Mapping[str, Any], new: Mapping[str, Any], feature_gates: Mapping[str, bool], *,
                  default_queue: bool = False, pods_ready: PodsReadyRule | None = None) -> list[str]:
    """What Kueue refuses in the update of Job ``old`` into ``new``, in its order. ``default_queue``: the
    namespace has a LocalQueue ``default``; ``pods_ready``: as for :func:`create_errors`."""
    errors = _labels_on_create(new, feature_gates)
    if _meta(new, "annotations").get(MIN_PARALLELISM, "") != _meta(old, "annotations").get(MIN_PARALLELISM, ""):
        errors += _min_parallelism(new, feature_gates)
    errors += _completions_setting(new)
    errors += generic_update_errors(old, new, feature_gates, default_queue=default_queue, pods_ready=pods_ready)
    errors += _running_update(old, new)
    return errors + _topology(new, feature_gates)


def gate_create(obj: Mapping[str, Any], feature_gates: Mapping[str, bool]) -> list[str]:
    """Under ``AdmissionGatedBy``: the object's ``kueue.x-k8s.io/admission-gated-by``, when it names any gate, is
    well formed (:func:`events.admission_gate.format_problems`, every problem); off, it is not looked at."""
    if not gates.enabled(feature_gates, gates.ADMISSION_GATED_BY):
        return []
    value = _meta(obj, "annotations").get(admission_gate.ANNOTATION)
    return [f"{GATE_PATH}: {problem}"
            for problem in admission_gate.format_problems(value if isinstance(value, str) else "", shown)]


def gate_update(old: Mapping[str, Any], new: Mapping[str, Any], feature_gates: Mapping[str, bool]) -> list[str]:
    """Under ``AdmissionGatedBy``: admission gates are removed, never added, and what is left is well formed (as on
    create)."""
    if not gates.enabled(feature_gates, gates.ADMISSION_GATED_BY):
        return []
    return ([f"{GATE_PATH}: {problem}" for problem in admission_gate_errors(old.get("metadata"), new.get("metadata"))]
            + gate_create(new, feature_gates))


def as_generic_job(obj: Mapping[str, Any], suspended: bool) -> dict[str, Any]:
    """Any kind's object as the generic job rules read a job: its apiVersion and kind (the prebuilt Workload
    rule asks them), its metadata, and whether it is ``suspended`` (where each kind says)."""
    return {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
            "metadata": obj.get("metadata") or {}, "spec": {"suspend": suspended}}


def generic_create_errors(job: Mapping[str, Any], feature_gates: Mapping[str, bool], *,
                          pods_ready: PodsReadyRule | None = None, gate_form: bool = True) -> list[str]:
    """What Kueue refuses in any job it manages (a Pod too) on creation: its queue name, prebuilt Workload name
    and maximum execution time labels, under ``WorkloadLevelWaitForPodsReady`` (``pods_ready``) its
    ``kueue.x-k8s.io/wait-for-pods-ready`` annotation, and under ``AdmissionGatedBy`` its admission gate's form
    (:func:`gate_create`). ``gate_form`` False: the create rules run on an update's new object after
    :func:`generic_update_errors`, which checked the gate's form already (each problem is reported once)."""
    return (_labels_on_create(job, feature_gates) + pods_ready_validation.create_errors(job, pods_ready)
            + (gate_create(job, feature_gates) if gate_form else []))


def generic_update_errors(old: Mapping[str, Any], new: Mapping[str, Any], feature_gates: Mapping[str, bool], *,
                          default_queue: bool = False, pods_ready: PodsReadyRule | None = None) -> list[str]:
    """What Kueue refuses in the update of any job it manages (a Pod too, seen as suspended while gated), in its
    order: the queue name, the prebuilt Workload's name, the maximum execution time, the WorkloadPriorityClass,
    whether it is elastic, under ``WorkloadLevelWaitForPodsReady`` (``pods_ready``) a change of its
    ``kueue.x-k8s.io/wait-for-pods-ready`` annotation, and under ``AdmissionGatedBy`` an admission gate added or
    ill formed (:func:`gate_update`)."""
    return (_queue_name_update(old, new, default_queue) + _prebuilt_update(old, new, feature_gates)
            + _max_exec_update(old, new) + _priority_class_update(old, new) + _elastic_update(old, new, feature_gates)
            + pods_ready_validation.update_errors(old, new, pods_ready, old_suspended=_suspended(old),
                                                  new_suspended=_suspended(new))
            + gate_update(old, new, feature_gates))


invalid, forbidden, required, shown = field_errors.invalid, field_errors.forbidden, field_errors.required, field_errors.shown
"""Kubernetes' ``Invalid value``, ``Forbidden`` and ``Required value`` field errors, and a value as they show it (a
string Go-quoted)."""


def _queue_name_update(old: Mapping[str, Any], new: Mapping[str, Any], default_queue: bool) -> list[str]:
    path = _key(_LABELS, QUEUE_LABEL)
    old_queue, new_queue = _meta(old, "labels").get(QUEUE_LABEL, ""), _meta(new, "labels").get(QUEUE_LABEL, "")
    errors = []
    if not _suspended(new) and new_queue != old_queue:
        errors.append(_invalid(path, new_queue, IMMUTABLE))
    if not new_queue and old_queue and default_queue:
        errors.append(_invalid(path, "", "queue-name must not be empty in namespace with default queue"))
    return errors


def _elastic(job: Mapping[str, Any], feature_gates: Mapping[str, bool]) -> bool:
    """Whether the job is elastic: ``ElasticJobsViaWorkloadSlices`` on and ``kueue.x-k8s.io/elastic-job: "true"``."""
    return (gates.enabled(feature_gates, gates.ELASTIC_JOBS_VIA_WORKLOAD_SLICES)
            and _meta(job, "annotations").get(ELASTIC_JOB_ANNOTATION) == "true")


def elastic_unsupported(job: Mapping[str, Any], gvk: str, feature_gates: Mapping[str, bool]) -> list[str]:
    """Kueue's ``ValidateElasticJobAnnotation`` for a kind that does not run on workload slices (``gvk`` as Go
    prints a GroupVersionKind): under ``ElasticJobsViaWorkloadSlices``, an object asking to be elastic is
    refused rather than admitted as a fixed-size one. (Which values Kueue reads as asking is unconfirmed;
    kueue-es reads ``"true"``, as :func:`_elastic`.)"""
    if not _elastic(job, feature_gates):
        return []
    return [_forbidden(_key(_ANNOTATIONS, ELASTIC_JOB_ANNOTATION),
                       f"elastic job is not supported for {_go_quote(gvk)}")]


def _elastic_update(old: Mapping[str, Any], new: Mapping[str, Any], feature_gates: Mapping[str, bool]) -> list[str]:
    """A job does not become elastic, nor stop being so; the error names the annotation where it is (Kueue's
    #11342 moved it from ``metadata.labels``)."""
    was, now = _elastic(old, feature_gates), _elastic(new, feature_gates)
    return [] if was == now else [_invalid(_key(_ANNOTATIONS, ELASTIC_JOB_ANNOTATION), now, IMMUTABLE)]


def _prebuilt_update(old: Mapping[str, Any], new: Mapping[str, Any], feature_gates: Mapping[str, bool]) -> list[str]:
    """Suspended, or elastic before, the prebuilt Workload's name is checked as on creation; otherwise,
    running, its name does not change (moving it from the label to the annotation changes nothing); the error
    names where the new object keeps it (:func:`_prebuilt_source`)."""
    if _suspended(new) or _elastic(old, feature_gates):
        return _prebuilt(new, feature_gates)
    new_name, old_name = _prebuilt_name(new, feature_gates), _prebuilt_name(old, feature_gates)
    path = _prebuilt_source(new, feature_gates)[0]
    return [] if new_name == old_name else [_invalid(path, new_name, IMMUTABLE)]


def _max_exec_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    new_value, old_value = _meta(new, "labels").get(MAX_EXEC_LABEL, ""), _meta(old, "labels").get(MAX_EXEC_LABEL, "")
    if (_suspended(new) and _suspended(old)) or new_value == old_value:
        return []
    return [_invalid(_key(_LABELS, MAX_EXEC_LABEL), new_value, IMMUTABLE)]


def pod_group_spec_errors(old_spec: Mapping[str, Any], new_spec: Mapping[str, Any], path: str) -> list[str]:
    """A queued serving group's pod spec changed in what admission looks at (its role: requests, ports, node
    selector, affinity, tolerations, ...), each field as Kueue's ``ValidateImmutablePodGroupPodSpec`` refuses it;
    anything else (images, env, command, probes) may change. A structured value is shown as JSON, keys sorted,
    where Kueue prints Go's ``%#v`` of its types."""
    return [f"{at}: Invalid value: {_shape_value(value)}: {IMMUTABLE}"
            for at, value in shape_changes(old_spec, new_spec, path)]


def _shape_value(value: Any) -> str:
    if value is None or isinstance(value, str | int):
        return shown(value)
    return msgspec.json.encode(value, order="sorted").decode()


def no_ready_replica(obj: Mapping[str, Any]) -> bool:
    """Whether a serving set (LeaderWorkerSet, StatefulSet) counts as suspended for Kueue's update rules: none of
    its replicas is ready (``status.readyReplicas`` 0 or unset), as Kueue reads the old object."""
    status = obj.get("status")
    ready = status.get("readyReplicas") if isinstance(status, dict) else None
    return not (isinstance(ready, int) and ready > 0)


def _priority_class_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    return priority_class_update(old, new, suspended=_suspended(new))


def priority_class_update(old: Mapping[str, Any], new: Mapping[str, Any], *, suspended: bool) -> list[str]:
    """A WorkloadPriorityClass label is not added to a running object, nor ever removed; it may change. Each kind
    says what ``suspended`` means for it: a job's ``spec.suspend``, a serving set's no ready replica."""
    path = _key(_LABELS, PRIORITY_LABEL)
    new_class, old_class = _meta(new, "labels").get(PRIORITY_LABEL, ""), _meta(old, "labels").get(PRIORITY_LABEL, "")
    if not suspended and not old_class and new_class:
        return [_invalid(path, new_class, "WorkloadPriorityClass cannot be added to a non-suspended workload")]
    if not new_class and old_class:
        return [_invalid(path, new_class, "WorkloadPriorityClass cannot be removed from a workload")]
    return []


def _running_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """With a minimum parallelism, a running Job's parallelism stays; the completions setting stays while the
    Job runs."""
    errors = []
    if (MIN_PARALLELISM in _meta(old, "annotations") and not _suspended(old)
            and _parallelism(old) != _parallelism(new)):
        errors.append(_forbidden("spec.parallelism",
                                 "cannot change when partial admission is enabled and the job is not suspended"))
    if (not _suspended(old) and not _suspended(new)
            and _completions_equal_parallelism(old) != _completions_equal_parallelism(new)):
        errors.append(_forbidden(_key(_ANNOTATIONS, COMPLETIONS_EQUAL_PARALLELISM),
                                 f"{IMMUTABLE} while the job is not suspended"))
    return errors


async def review(body: bytes, feature_gates: Mapping[str, bool], has_default_queue: HasDefaultQueue, *,
                 pods_ready: PodsReadyRule | None = None) -> dict[str, Any]:
    """Answer one AdmissionReview (v1) for a Job: allowed, or refused (403) with Kueue's field errors."""
    return await answer(body, has_default_queue, lambda new: create_errors(new, feature_gates, pods_ready=pods_ready),
                        lambda old, new, default: update_errors(old, new, feature_gates, default_queue=default,
                                                                pods_ready=pods_ready))


CreateErrors = Callable[[Mapping[str, Any]], list[str]]
UpdateErrors = Callable[[Mapping[str, Any], Mapping[str, Any], bool], list[str]]
Warnings = Callable[[Mapping[str, Any], Mapping[str, Any] | None], list[str]]
"""The warnings a webhook gives with its answer: for the new object and the old one (None on creation)."""


async def answer(body: bytes, has_default_queue: HasDefaultQueue, create: CreateErrors, update: UpdateErrors,
                 warnings: Warnings | None = None) -> dict[str, Any]:
    """Answer one AdmissionReview (v1) of a Job or a Pod with the field errors ``create`` or ``update`` finds
    (``update`` told whether the namespace has a default LocalQueue when the update takes the queue name away):
    allowed, or refused (403) with them joined as Kueue joins them; with the ``warnings`` found, if any,
    either way (controller-runtime's validator returns a validator's warnings with its verdict)."""
    req = msgspec.json.decode(body).get("request") or {}
    response: dict[str, Any] = {"uid": req.get("uid", ""), "allowed": True}
    new, old, operation = req.get("object"), req.get("oldObject"), req.get("operation", "")
    errors: list[str] = []
    warned: list[str] = []
    if operation == "CREATE" and isinstance(new, dict):
        errors = create(new)
        warned = warnings(new, None) if warnings else []
    elif operation == "UPDATE" and isinstance(new, dict) and isinstance(old, dict):
        namespace = req.get("namespace") or _meta_namespace(old)
        default = queue_removed(old, new) and bool(namespace) and await has_default_queue(namespace)
        errors = update(old, new, default)
        warned = warnings(new, old) if warnings else []
    message = aggregate(errors)
    if message is not None:
        response.update(allowed=False, status={"code": 403, "reason": "Forbidden", "message": message})
    if warned:
        response["warnings"] = warned
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


def _meta_namespace(job: Mapping[str, Any]) -> str:
    meta = job.get("metadata")
    return str(meta.get("namespace", "")) if isinstance(meta, dict) else ""
