"""kueue.x-k8s.io v1beta1 <-> v1beta2, on plain data, as Kueue's conversion functions do it.

What differs between the two versions (``apis/kueue/v1beta1/*_conversion.go`` and the generated conversions):

============  =================================================  =====================================================
kind          v1beta1                                            v1beta2
============  =================================================  =====================================================
ClusterQueue  ``spec.cohort``                                    ``spec.cohortName``
ClusterQueue  ``spec.admissionChecks: [name]`` (when not empty,  ``spec.admissionChecksStrategy.admissionChecks:
              it replaces any ``admissionChecksStrategy``)       [{name}]``; v1beta1 also has the strategy, kept as is
ClusterQueue  ``flavorFungibility.whenCanBorrow: Borrow``,       ``MayStopSearch``
              ``whenCanPreempt: Preempt``
ClusterQueue  ``status.pendingWorkloadsStatus``                  dropped (no longer maintained)
Workload      ``spec.priorityClassName`` + ``priorityClassSource``  ``spec.priorityClassRef {group, kind, name}``
              (``kueue.x-k8s.io/workloadpriorityclass`` or
              ``scheduling.k8s.io/priorityclass``)
Workload      ``status.accumulatedPastExexcutionTimeSeconds``    ``status.accumulatedPastExecutionTimeSeconds``
Workload      ``topologyAssignment {levels, domains}``           ``topologyAssignment {levels, slices}``
LocalQueue    ``status.flavorUsage``; ``status.flavors``         ``status.flavorsUsage``; ``flavors`` dropped
AdmissionChk  ``spec.retryDelayMinutes``                         dropped
Cohort        ``spec.parentName`` (older Kueue: ``spec.parent``)  ``spec.parentName``
============  =================================================  =====================================================

Everything else is the same in both versions and is copied untouched (a ResourceFlavor's
``spec.resourceWeights``, KEP-8902, either way: whether Kueue's v1beta1 type has it is not in the sources at
hand, whose v1beta1 ResourceFlavorSpec lacks it), fields we do not model included, so a
round trip v1beta2 -> v1beta1 -> v1beta2 gives back the same object (a topology assignment comes back in the
canonical encoding :func:`events.tas_assignment.encode` writes, under Kueue's TASAssignmentsEncodingByHostnamePrefix
gate as the caller says; the domains it stands for are always the same).
Where Kueue's conversion would lose something it cannot express in the other version, the field is kept as it
is instead (still unknown there, and restored on the way back): a ``priorityClassName`` without a known
``priorityClassSource`` (Kueue drops it — and ignores it for priority, as kueue-es does), a ``priorityClassRef`` to
a kind v1beta1 cannot name, fields only v1beta2 has (a pod set's ``podsetSliceRequiredTopologyConstraints``, a
Cohort's ``status.effectiveQuotas``), so a v1beta1 client's read-modify-write loses none of them. What Kueue deliberately folds is folded the same way, so those v1beta1 round trips
are not exact: ``admissionChecks`` comes back as ``admissionChecksStrategy``, ``Borrow``/``Preempt`` as
``MayStopSearch``, a Cohort's ``parent`` as ``parentName``; the dropped fields do not come back.

Input is never mutated. Errors are :class:`~events.errors.InvalidInput` naming the object (``where``) and the
field, e.g. ``Workload team/w: field `spec.priorityClassRef`: expected an object, got str``.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import msgspec

from events import objects as o
from events import tas_assignment as tas
from events.errors import InvalidInput

GROUP = "kueue.x-k8s.io"
V1BETA1 = f"{GROUP}/v1beta1"
V1BETA2 = f"{GROUP}/v1beta2"
VERSIONS = (V1BETA2, V1BETA1)

WORKLOAD_PRIORITY_CLASS_SOURCE = "kueue.x-k8s.io/workloadpriorityclass"
POD_PRIORITY_CLASS_SOURCE = "scheduling.k8s.io/priorityclass"
_REF_OF_SOURCE = {
    WORKLOAD_PRIORITY_CLASS_SOURCE: ("kueue.x-k8s.io", "WorkloadPriorityClass"),
    POD_PRIORITY_CLASS_SOURCE: ("scheduling.k8s.io", "PriorityClass"),
}
_SOURCE_OF_REF = {ref: source for source, ref in _REF_OF_SOURCE.items()}
_DEPRECATED_FUNGIBILITY = (("whenCanBorrow", "Borrow"), ("whenCanPreempt", "Preempt"))


def describe(doc: Any, index: int | None = None) -> str:
    """How errors name an object: ``Workload team/w`` (or its position when it has no name)."""
    kind = doc.get("kind") if isinstance(doc, dict) else None
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    ns = meta.get("namespace") if isinstance(meta, dict) else None
    if isinstance(name, str) and name:
        return f"{kind or 'object'} {ns + '/' if isinstance(ns, str) and ns else ''}{name}"
    at = f"object {index}" if index is not None else "object"
    return f"{at} ({kind})" if isinstance(kind, str) and kind else at


def convert(doc: Any, api_version: str, where: str = "", *, by_hostname_prefix: bool = True) -> dict[str, Any]:
    """``doc`` (a kueue.x-k8s.io object of either version) in ``api_version``. ``by_hostname_prefix``: Kueue's
    TASAssignmentsEncodingByHostnamePrefix gate, which decides how a topology assignment is encoded in v1beta2."""
    where = where or describe(doc)
    if not isinstance(doc, dict):
        raise InvalidInput(f"{where}: expected an object, got {_type(doc)}")
    if api_version not in VERSIONS:
        raise InvalidInput(f"{where}: cannot convert to {api_version!r}: only {' and '.join(VERSIONS)}")
    source = doc.get("apiVersion")
    if source not in VERSIONS:
        raise InvalidInput(f"{where}: field `apiVersion`: must be {' or '.join(VERSIONS)}, not {source!r}")
    kind = doc.get("kind")
    if not isinstance(kind, str) or not kind:
        raise InvalidInput(f"{where}: field `kind` is required")
    if source == api_version:
        return doc
    if api_version == V1BETA2:
        return to_v1beta2(doc, where, by_hostname_prefix=by_hostname_prefix)
    return to_v1beta1(doc, where)


# --- v1beta1 -> v1beta2 -----------------------------------------------------------------------------------------


def to_v1beta2(doc: dict[str, Any], where: str = "v1beta1 object", *,
               by_hostname_prefix: bool = True) -> dict[str, Any]:
    out = dict(doc)
    kind = doc.get("kind")
    spec = _section(doc, "spec", where)
    status = _section(doc, "status", where)
    if kind == "ClusterQueue":
        if spec is not None:
            _cluster_queue_to_v1beta2(spec, where)
        if status is not None:
            status.pop("pendingWorkloadsStatus", None)
    elif kind == "Workload":
        if spec is not None:
            _priority_to_v1beta2(spec, where)
        if status is not None:
            _rename(status, "accumulatedPastExexcutionTimeSeconds", "accumulatedPastExecutionTimeSeconds")
            _each_assignment(status, where, partial(_assignment_to_v1beta2, by_hostname_prefix=by_hostname_prefix))
    elif kind == "LocalQueue" and status is not None:
        _rename(status, "flavorUsage", "flavorsUsage")
        status.pop("flavors", None)
    elif kind == "AdmissionCheck" and spec is not None:
        spec.pop("retryDelayMinutes", None)
    elif kind == "Cohort" and spec is not None and "parent" in spec:
        parent = _optional_str(spec.pop("parent"), where, "spec.parent")
        spec.setdefault("parentName", parent)
    elif kind == "MultiKueueCluster" and spec is not None and ("kubeConfig" in spec or "clusterProfileRef" in spec):
        # v1beta1 names the kubeconfig (and, only so that no data is lost, a ClusterProfile) at the top of the
        # spec; v1beta2 under clusterSource; a kubeconfig with no location is none (Kueue's conversion)
        source: dict[str, Any] = {}
        kube_config = _object(spec.pop("kubeConfig", None) or {}, where, "spec.kubeConfig")
        if kube_config.get("location"):
            source["kubeConfig"] = kube_config
        if "clusterProfileRef" in spec:
            source["clusterProfileRef"] = _object(spec.pop("clusterProfileRef"), where, "spec.clusterProfileRef")
        spec["clusterSource"] = source
    _put(out, "spec", spec)
    _put(out, "status", status)
    out["apiVersion"] = V1BETA2
    return out


def _cluster_queue_to_v1beta2(spec: dict[str, Any], where: str) -> None:
    if "cohort" in spec:
        _optional_str(spec["cohort"], where, "spec.cohort")
        _rename(spec, "cohort", "cohortName")
    if "admissionChecks" in spec:
        names = _names(spec.pop("admissionChecks"), where, "spec.admissionChecks")
        if names:
            spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": n} for n in names]}
    ff = spec.get("flavorFungibility")
    if ff is not None:
        ff = dict(_object(ff, where, "spec.flavorFungibility"))
        for key, deprecated in _DEPRECATED_FUNGIBILITY:
            if ff.get(key) == deprecated:
                ff[key] = "MayStopSearch"
        spec["flavorFungibility"] = ff


def _priority_to_v1beta2(spec: dict[str, Any], where: str) -> None:
    source = spec.get("priorityClassSource")
    ref = _REF_OF_SOURCE.get(source) if isinstance(source, str) else None
    if ref is None:
        return  # Kueue has no reference to make of it: kept as it is (see the module docstring)
    name = _optional_str(spec.pop("priorityClassName", None), where, "spec.priorityClassName")
    del spec["priorityClassSource"]
    spec["priorityClassRef"] = {"group": ref[0], "kind": ref[1], "name": name}


def _assignment_to_v1beta2(psa: dict[str, Any], where: str, path: str, *,
                           by_hostname_prefix: bool) -> dict[str, Any]:
    ta = psa.get("topologyAssignment")
    if not isinstance(ta, dict) or "domains" not in ta:
        return psa
    path += ".topologyAssignment"
    v1 = _typed(ta, o.TopologyAssignmentV1Beta1, where, path)
    v2 = tas.from_v1beta1(v1, where, path, by_hostname_prefix=by_hostname_prefix)
    return {**psa, "topologyAssignment": msgspec.to_builtins(v2)}


# --- v1beta2 -> v1beta1 -----------------------------------------------------------------------------------------


def to_v1beta1(doc: dict[str, Any], where: str = "v1beta2 object") -> dict[str, Any]:
    out = dict(doc)
    kind = doc.get("kind")
    spec = _section(doc, "spec", where)
    status = _section(doc, "status", where)
    if kind == "ClusterQueue" and spec is not None and "cohortName" in spec:
        _optional_str(spec["cohortName"], where, "spec.cohortName")
        _rename(spec, "cohortName", "cohort")
    elif kind == "Workload":
        if spec is not None and spec.get("priorityClassRef") is not None:
            ref = _object(spec["priorityClassRef"], where, "spec.priorityClassRef")
            source = _SOURCE_OF_REF.get((ref.get("group"), ref.get("kind")))
            if source is not None:  # any other reference has no v1beta1 form: kept as it is
                del spec["priorityClassRef"]
                spec["priorityClassName"] = _optional_str(ref.get("name"), where, "spec.priorityClassRef.name")
                spec["priorityClassSource"] = source
        if status is not None:
            _rename(status, "accumulatedPastExecutionTimeSeconds", "accumulatedPastExexcutionTimeSeconds")
            _each_assignment(status, where, _assignment_to_v1beta1)
    elif kind == "LocalQueue" and status is not None:
        _rename(status, "flavorsUsage", "flavorUsage")
    elif kind == "MultiKueueCluster" and spec is not None and "clusterSource" in spec:
        source = _object(spec.pop("clusterSource"), where, "spec.clusterSource")
        if "kubeConfig" in source:
            spec["kubeConfig"] = source["kubeConfig"]
        if "clusterProfileRef" in source:  # kept in v1beta1 only so that it comes back (Kueue's conversion)
            spec["clusterProfileRef"] = source["clusterProfileRef"]
    _put(out, "spec", spec)
    _put(out, "status", status)
    out["apiVersion"] = V1BETA1
    return out


def _assignment_to_v1beta1(psa: dict[str, Any], where: str, path: str) -> dict[str, Any]:
    ta = psa.get("topologyAssignment")
    if not isinstance(ta, dict) or "domains" in ta:
        return psa  # none, or already the v1beta1 form (stored that way before conversion was served)
    path += ".topologyAssignment"
    v2 = _typed(ta, o.TopologyAssignment, where, path)
    tas.validate(v2, where, path)
    return {**psa, "topologyAssignment": msgspec.to_builtins(tas.to_v1beta1(v2))}


# --- helpers ------------------------------------------------------------------------------------------------------


def _type(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer", float: "number",
            type(None): "null"}.get(type(value), type(value).__name__)


def _object(value: Any, where: str, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidInput(f"{where}: field `{path}`: expected an object, got {_type(value)}")
    return value


def _section(doc: dict[str, Any], key: str, where: str) -> dict[str, Any] | None:
    """A copy of ``doc[key]`` to edit (None when absent or null)."""
    value = doc.get(key)
    return None if value is None else dict(_object(value, where, key))


def _put(out: dict[str, Any], key: str, value: dict[str, Any] | None) -> None:
    if value is not None:
        out[key] = value


def _optional_str(value: Any, where: str, path: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidInput(f"{where}: field `{path}`: expected a string, got {_type(value)}")
    return value


def _names(value: Any, where: str, path: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidInput(f"{where}: field `{path}`: expected an array of names, got {_type(value)}")
    for i, name in enumerate(value):
        if not isinstance(name, str) or not name:
            raise InvalidInput(f"{where}: field `{path}[{i}]`: expected a name, got {_type(name)}")
    return value


def _rename(d: dict[str, Any], old: str, new: str) -> None:
    if old in d:
        d[new] = d.pop(old)


def _each_assignment(status: dict[str, Any], where: str, fn: Any) -> None:
    adm = status.get("admission")
    if adm is None:
        return
    adm = dict(_object(adm, where, "status.admission"))
    psas = adm.get("podSetAssignments")
    if psas is None:
        return
    if not isinstance(psas, list):
        raise InvalidInput(f"{where}: field `status.admission.podSetAssignments`: expected an array, "
                           f"got {_type(psas)}")
    path = "status.admission.podSetAssignments"
    adm["podSetAssignments"] = [fn(_object(p, where, f"{path}[{i}]"), where, f"{path}[{i}]")
                                for i, p in enumerate(psas)]
    status["admission"] = adm


def _typed(value: dict[str, Any], view: type[Any], where: str, path: str) -> Any:
    try:
        return msgspec.convert(value, view, strict=False)
    except msgspec.ValidationError as exc:
        text, _, at = str(exc).partition(" - at `$")
        field = path + at.rstrip("`")
        if text.startswith("Object missing required field `"):
            raise InvalidInput(f"{where}: field `{field}.{text.split('`')[1]}` is required") from None
        raise InvalidInput(f"{where}: field `{field}`: {text[0].lower()}{text[1:]}") from None
