"""The CPU and memory a SparkApplication's driver or executor Pod requests, as Spark computes them when it makes the
Pod (Kueue v0.20, #15833: Kueue reserves what Spark requests), as pure data.

The Spark operator only turns the application into ``spark-submit`` properties; Spark sizes the Pods. Of the
properties it reads, a typed field of the role (``spec.driver``, ``spec.executor``) wins over ``spec.sparkConf``,
which wins over ``spec.memoryOverheadFactor``:

* **CPU**: the role's ``coreRequest`` (``spark.kubernetes.<role>.request.cores``), a Kubernetes quantity; else its
  ``cores`` (``spark.<role>.cores``, a whole number), 1 by default;
* **memory**, in MiB: the role's ``memory`` (``spark.<role>.memory``, 1g by default) plus its ``memoryOverhead``
  (``spark.<role>.memoryOverhead``), which defaults to the memory times the overhead factor, cut to a whole MiB,
  and at least 384 MiB. The factor is ``spark.<role>.memoryOverheadFactor``, else
  ``spark.kubernetes.memoryOverheadFactor``, else ``spec.memoryOverheadFactor``, else 0.4 for a ``Python`` or ``R``
  application and 0.1 for the others. An executor adds ``spark.executor.pyspark.memory`` (a Python application's)
  and, with ``spark.memory.offHeap.enabled`` true, ``spark.memory.offHeap.size`` (bytes when it has no unit).

Memory sizes are Java's, as Spark reads them: a whole number and an optional unit ``b``, ``k``/``kb``, ``m``/``mb``,
``g``/``gb``, ``t``/``tb``, ``p``/``pb`` (any case; no unit: MiB). A Kubernetes quantity (``512Mi``) is not one:
:class:`~events.errors.InvalidInput` names what is wrong, as Kueue's error does.
"""

from __future__ import annotations

import math
import re
from typing import Any

from events.errors import InvalidInput
from events.quantity import MAX_INT64, QuantityError, parse_quantity

DEFAULT_CORES = 1
DEFAULT_MEMORY_MIB = 1024
MIN_OVERHEAD_MIB = 384
JVM_FACTOR, NON_JVM_FACTOR = 0.1, 0.4
NON_JVM_TYPES = ("Python", "R")
MAX_MIB = MAX_INT64 >> 20
"""The most MiB whose bytes an int64 holds."""

_JAVA_SIZE = re.compile(r"([0-9]+)([a-z]+)?")
_UNIT_BYTES = {"b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "g": 1 << 30, "gb": 1 << 30,
               "t": 1 << 40, "tb": 1 << 40, "p": 1 << 50, "pb": 1 << 50}

PYSPARK_MEMORY = "spark.executor.pyspark.memory"
OFF_HEAP_ENABLED, OFF_HEAP_SIZE = "spark.memory.offHeap.enabled", "spark.memory.offHeap.size"
GLOBAL_FACTOR = "spark.kubernetes.memoryOverheadFactor"


def _map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def java_bytes(text: str, default_unit: int) -> int:
    """A Java memory size in bytes (``default_unit``: the bytes of a number without a unit)."""
    m = _JAVA_SIZE.fullmatch(text.strip().lower())
    if m is None:
        raise InvalidInput(f'invalid Spark memory string "{text}"')
    number = int(m.group(1))
    unit = default_unit
    if m.group(2):
        if m.group(2) not in _UNIT_BYTES:
            raise InvalidInput(f'invalid Spark memory string "{text}": unknown unit "{m.group(2)}"')
        unit = _UNIT_BYTES[m.group(2)]
    if number > MAX_INT64 // unit:
        raise InvalidInput(f'invalid Spark memory string "{text}": value is too large')
    return number * unit


def java_mib(text: str) -> int:
    """A Java memory size in whole MiB (no unit: MiB)."""
    return java_bytes(text, 1 << 20) >> 20


class _Role:
    """One role's settings: its typed fields, the application's ``sparkConf`` under the role's keys."""

    def __init__(self, spec: dict[str, Any], role: str) -> None:
        self.spec, self.role = spec, role
        self.fields = _map(spec.get(role))
        self.conf = {k: v for k, v in _map(spec.get("sparkConf")).items() if isinstance(v, str)}

    def setting(self, field: str, key: str) -> str | None:
        value = self.fields.get(field)
        return value if isinstance(value, str) else self.conf.get(key)


def cpu_request(spec: dict[str, Any], role: str) -> str:
    """The role's CPU request, as a Kubernetes quantity (module docstring)."""
    r = _Role(spec, role)
    requested = r.setting("coreRequest", f"spark.kubernetes.{role}.request.cores")
    if requested is not None:
        try:
            parse_quantity(requested)
        except QuantityError as exc:
            raise InvalidInput(f"failed to parse CPU requests {requested}: {exc}") from None
        return requested
    cores = r.fields.get("cores")
    if isinstance(cores, int) and not isinstance(cores, bool):
        return str(cores)
    key = f"spark.{role}.cores"
    if key in r.conf:
        text = r.conf[key]
        if not re.fullmatch(r"[+-]?[0-9]+", text) or not -(2**31) <= int(text) < 2**31:
            raise InvalidInput(f"failed to parse {key}={text}: not a whole number")
        return str(int(text))
    return str(DEFAULT_CORES)


def _factor(r: _Role) -> float:
    text = r.conf.get(f"spark.{r.role}.memoryOverheadFactor", r.conf.get(GLOBAL_FACTOR))
    if text is None:
        spec_factor = r.spec.get("memoryOverheadFactor")
        text = spec_factor if isinstance(spec_factor, str) and spec_factor else None
    if text is None:
        return NON_JVM_FACTOR if r.spec.get("type") in NON_JVM_TYPES else JVM_FACTOR
    try:
        factor = float(text.strip()) if "_" not in text else math.nan
    except ValueError:
        factor = math.nan
    if not factor >= 0:
        raise InvalidInput(f'invalid memory overhead factor "{text}": must be a non-negative number')
    return factor


def _overhead_mib(r: _Role, memory: int) -> int:
    given = r.setting("memoryOverhead", f"spark.{r.role}.memoryOverhead")
    if given is not None:
        try:
            return java_mib(given)
        except InvalidInput as exc:
            raise InvalidInput(f"failed to parse memory overhead: {exc}") from None
    overhead = _factor(r) * memory  # a float product, cut to whole MiB, as Spark does
    if overhead > MAX_MIB:
        raise InvalidInput(f"memory overhead of {overhead:g}MiB is too large")
    return max(int(overhead), MIN_OVERHEAD_MIB)


def _executor_extra_mib(r: _Role) -> int:
    extra = 0
    if PYSPARK_MEMORY in r.conf and r.spec.get("type") == "Python":
        try:
            extra += java_mib(r.conf[PYSPARK_MEMORY])
        except InvalidInput as exc:
            raise InvalidInput(f"failed to parse {PYSPARK_MEMORY}: {exc}") from None
    if r.conf.get(OFF_HEAP_ENABLED, "").lower() == "true" and OFF_HEAP_SIZE in r.conf:
        try:
            extra += java_bytes(r.conf[OFF_HEAP_SIZE], 1) >> 20
        except InvalidInput as exc:
            raise InvalidInput(f"failed to parse {OFF_HEAP_SIZE}: {exc}") from None
    return extra


def memory_request(spec: dict[str, Any], role: str) -> str:
    """The role's memory request, as a Kubernetes quantity in MiB (module docstring)."""
    r = _Role(spec, role)
    memory = DEFAULT_MEMORY_MIB
    given = r.setting("memory", f"spark.{role}.memory")
    if given is not None:
        try:
            memory = java_mib(given)
        except InvalidInput as exc:
            raise InvalidInput(f"failed to parse memory requests: {exc}") from None
    total = memory + _overhead_mib(r, memory)
    if role == "executor":
        total += _executor_extra_mib(r)
    if total > MAX_MIB:
        raise InvalidInput(f"memory request of {total}MiB is too large")
    return f"{total}Mi"
