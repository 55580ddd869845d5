"""``kueue-es import``: append Kubernetes/Kueue objects from YAML to the log as observed events.

Every document of every file is validated before anything is written (the checks Kueue's webhooks make only
under a feature gate as the Configuration recorded in the log sets the gates, as the watch holds objects to them);
the objects are then appended as one batch, so an import is stored entirely or not at all. Each object becomes an ``ObjectUpserted`` event whose
time is the object's ``creationTimestamp``, else ``--time``, else the latest time already in the log; its
envelope carries the object's key, uid and resourceVersion and an id derived from its content. As with
``kubectl apply``, an object whose latest event in the log is that very event (same id: same content and time)
is reported unchanged and not appended again, so importing a file twice appends nothing the second time (without
``--time``, an object without a ``creationTimestamp`` is compared as of its latest event's time, not as of the
log's latest time, which the first import may have moved on).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from functools import partial
from typing import Any

import anyio
import msgspec

from connectors.kafka.settings import is_kafka_url
from events import objects as o
from events.bounded_input import read_bounded
from events.errors import InvalidInput
from events.filelog import FileLog
from events.lazy import LazyObjectUpserted
from events.manifests import UNGATED, Checks, Manifest, decode_text, load_file, load_text
from events.schema import ConfigRecorded, ObjectDeleted, ObjectUpserted
from events.timefmt import format_time_ms, parse_time
from kueue_es.commands._common import (
    Log,
    add_log_argument,
    embedded_log_dir,
    kafka_reader,
    log_end,
    path_arg,
    read_progress,
    time_arg,
    warn,
    write_data,
)
from projections import gates

_ids = msgspec.msgpack.Encoder(order="deterministic")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "import",
        help="append objects from a YAML file to the log as observed events",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    p.add_argument("-f", "--filename", action="append", required=True, type=path_arg, metavar="FILE",
                   help="multi-document YAML of objects ('-' reads stdin); may be repeated")
    add_log_argument(p)
    p.add_argument("--time", type=time_arg("--time"), default=None, metavar="RFC3339",
                   help="time of objects without a creationTimestamp (default: the latest time in the log)")
    p.add_argument("-o", "--output", choices=["json", "yaml"], default=None,
                   help="print what was appended as json or yaml instead of text")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    manifests = [_load(f) for f in args.filename]
    _check_once(manifests)
    objects = [obj for m in manifests for obj in m.objects]
    configs = sum(len(m.configs) for m in manifests)
    if configs:
        warn(f"skipped {configs} Configuration document(s): configuration is not an object of the log")
    if not objects:
        sys.stdout.write("nothing to import: no objects in the input\n")
        return 0
    fresh = not is_kafka_url(args.log) and not os.path.exists(args.log)
    if fresh:  # a log yet to be made records no Configuration: checked now, so that a refusal makes no log
        _validate_gated(manifests, None)
    elif not is_kafka_url(args.log):
        embedded_log_dir(args.log)
    log = kafka_reader(args.log, writes=True) if is_kafka_url(args.log) else FileLog.open(args.log)
    if isinstance(log, FileLog) and log.truncated_bytes:
        warn(f"--log {args.log}: cut off a torn tail of {log.truncated_bytes} bytes (the start of an append a crash "
             "interrupted, never acknowledged)")
    try:
        latest, current, config = read_log(log)
        if not fresh:
            _validate_gated(manifests, config)
        default_time = args.time
        undated = sum(obj.metadata.creation_timestamp is None for obj in objects)
        if default_time is None and undated:
            default_time = latest
            if default_time == 0:
                warn(f"{undated} object(s) have no creationTimestamp and the log holds no time yet: their events "
                     f"get time {format_time_ms(0)}; pass --time to choose one")
        observed_now = [_observed(obj, default_time or 0, current, explicit=args.time is not None) for obj in objects]
        is_latest = [current.get((kind_of(e.obj), e.key), ("", 0))[0] == e.id for e in observed_now]
        unchanged = [e for e, same in zip(observed_now, is_latest, strict=True) if same]
        events = [e for e, same in zip(observed_now, is_latest, strict=True) if not same]
        offsets = anyio.run(log.append, events) if events else []
    finally:
        log.close_sync()
    _report(args, events, offsets, unchanged)
    return 0


def _check_once(manifests: list[Manifest]) -> None:
    """Each object at most once in an import: of two documents for one object the first would be stored only to be
    superseded in the same batch, and which of them the user meant is anyone's guess (``kueue-es schedule``
    refuses a STATE.yaml giving one twice too)."""
    first: dict[tuple[str, str], str] = {}
    for m in manifests:
        for obj, where in zip(m.objects, m.wheres, strict=True):
            seen = first.get((kind_of(obj), obj.key))
            if seen is not None:
                document = seen.split(" (", 1)[0]
                raise InvalidInput(f"{where}: {kind_of(obj)} {obj.key} is given more than once (first in {document})")
            first[(kind_of(obj), obj.key)] = where


def _validate_gated(manifests: list[Manifest], config: dict[str, Any] | None) -> None:
    """The checks Kueue's webhooks make under a feature gate, as the Configuration document ``config`` (None:
    Kueue's defaults) sets the gates."""
    checks = Checks.under(partial(gates.enabled, gates.of_document(config)))
    for m in manifests:
        m.validate_gated(checks)


def _load(path: str) -> Manifest:
    """Every document, held to the checks of every setting; the gated ones wait for the log's Configuration."""
    if path == "-":
        return load_text(decode_text(read_bounded(sys.stdin.buffer, "<stdin>"), "<stdin>"), "<stdin>",
                         checks=UNGATED)
    return load_file(path, checks=UNGATED)


def read_log(log: Log) -> tuple[int, dict[tuple[str, str], tuple[str, int]], dict[str, Any] | None]:
    """The latest time in the log, the id and time of the latest upsert of every object it holds, by (kind,
    key), and the Configuration document in force at its end (None: Kueue's defaults), whose feature gates decide
    the checks Kueue's webhooks make only under a gate, as the validating webhooks read them.

    Read lazily (:mod:`events.lazy`): of a Workload upsert, most of a busy log, only the envelope and the
    metadata are decoded, never the spec and status. The loop is inline (no call per event): what is done per
    event in Python is as much of the cost as the decoding left."""
    latest = 0
    current: dict[tuple[str, str], tuple[str, int]] = {}
    config: dict[str, Any] | None = None
    with read_progress(log, 0, log_end(log), "Reading") as past:
        for batch in log.scan(lazy=True):
            for record in batch:
                e = record.event
                if e.time > latest:
                    latest = e.time
                kind = type(e)
                if kind is LazyObjectUpserted:
                    current[(type(e.obj).__struct_config__.tag, e.key)] = (e.id, e.time)  # type: ignore[attr-defined]
                elif kind is ObjectDeleted:
                    current.pop((e.kind, e.key), None)
                elif kind is ConfigRecorded:
                    config = e.document
            past(batch[-1].offset)
    return latest, current, config


def _observed(obj: o.KObject, default_time: int, current: dict[tuple[str, str], tuple[str, int]], *,
              explicit: bool) -> ObjectUpserted:
    """:func:`observed`; an object without a creationTimestamp, imported again as the log's latest upsert of it
    has it and with no ``--time``, is that same observation (unchanged), not a new one at the log's latest time."""
    if not explicit and obj.metadata.creation_timestamp is None:
        seen = current.get((kind_of(obj), obj.key))
        if seen is not None:
            same = observed(obj, seen[1])
            if same.id == seen[0]:
                return same
    return observed(obj, default_time)


def observed(obj: o.KObject, default_time: int) -> ObjectUpserted:
    """The event a watcher would append for ``obj``, with a content-derived id."""
    m = obj.metadata
    try:
        time = parse_time(m.creation_timestamp) if m.creation_timestamp else default_time
    except ValueError:  # manifests validates this; objects built in code may not have been
        raise InvalidInput(f"{kind_of(obj)} {obj.key}: field `metadata.creationTimestamp`: "
                           f"not an RFC 3339 time: {m.creation_timestamp!r}") from None
    kind = kind_of(obj)
    digest = hashlib.sha256(_ids.encode([kind, obj.key, m.uid, m.resource_version, time, obj])).hexdigest()
    return ObjectUpserted(
        time=time, key=obj.key, uid=m.uid, resource_version=m.resource_version,
        id=f"import-{digest[:32]}", obj=obj,  # type: ignore[arg-type]
    )


def kind_of(obj: o.KObject) -> str:
    return type(obj).__struct_config__.tag  # type: ignore[attr-defined,return-value]


def _report(args: argparse.Namespace, events: list[ObjectUpserted], offsets: list[int],
            unchanged: list[ObjectUpserted]) -> None:
    rows = [
        {"offset": off, "kind": kind_of(e.obj), "key": e.key, "time": format_time_ms(e.time), "id": e.id}
        for off, e in zip(offsets, events, strict=True)
    ]
    same = [{"kind": kind_of(e.obj), "key": e.key, "id": e.id} for e in unchanged]
    if args.output:
        write_data({"log": args.log, "appended": len(rows), "events": rows, "unchanged": same}, args.output)
        return
    for r in rows:
        sys.stdout.write(f"{r['kind'].lower()}/{r['key']} imported at offset {r['offset']}\n")
    for r in same:
        sys.stdout.write(f"{r['kind'].lower()}/{r['key']} unchanged\n")
    if rows:
        sys.stdout.write(f"appended {len(rows)} events to {args.log} (offsets {offsets[0]}..{offsets[-1]})\n")
    else:
        sys.stdout.write(f"appended nothing to {args.log}: every object is unchanged\n")
