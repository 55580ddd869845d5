"""``kueue-es log ...``: look at a log's storage. ``log inspect`` lists segments and counts events by type;
``log verify`` (:mod:`kueue_es.commands.log_verify`) checks every frame and event, and the checkpoints.

Every frame's checksum is verified; a damaged frame stops the command with an error naming segment and offset.
Event types are read from each event's ``type`` tag without decoding the rest, so inspecting works on logs
written by newer versions too. End offsets are exclusive: the offset the next event would get. The log's
checkpoints (:mod:`kueue_es.checkpoints`) are listed, not read. A Kafka log (``kafka://HOST:PORT/TOPIC``) is
read through, batch by batch: its events are counted by type.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import msgspec

from connectors.kafka.settings import is_kafka_url
from events.errors import CorruptRecord
from events.filelog import SegmentWalk, list_segments
from kueue_es import checkpoints
from kueue_es.commands import log_verify
from kueue_es.commands._common import (
    add_log_argument,
    add_output_argument,
    log_end,
    open_readonly,
    progress_bar,
    read_progress,
    render_table,
    time_text,
    write_data,
)


class _Head(msgspec.Struct, forbid_unknown_fields=False):
    type: str = "?"
    time: int = 0


_heads = msgspec.msgpack.Decoder(list[_Head])
_raw = msgspec.msgpack.Decoder(list[msgspec.Raw])
_head = msgspec.msgpack.Decoder(_Head)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("log", help="inspect a log's storage", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(title="log commands", metavar="COMMAND")
    p.set_defaults(func=lambda args: _missing(p))
    inspect = sub.add_parser(
        "inspect", help="segments, sizes and event counts by type",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    add_log_argument(inspect)
    add_output_argument(inspect, ["text", "json", "yaml"], "text")
    inspect.set_defaults(func=run_inspect)
    log_verify.register(sub)


def _missing(parser: argparse.ArgumentParser) -> int:
    parser.error("a log command is required (inspect, verify)")
    return 2  # pragma: no cover - error() raises


def inspect_kafka(path: str) -> dict[str, Any]:
    """A Kafka partition: its batches (one Kafka record each) and events by type. Reading it decodes every
    event: there are no segment files to walk."""
    log = open_readonly(path)
    by_type: dict[str, int] = {}
    first = last = None
    events = batches = 0
    try:
        end = log_end(log)
        with read_progress(log, 0, end, "Inspecting") as past:
            for batch in log.scan():
                batches += 1
                events += len(batch)
                for r in batch:
                    tag = type(r.event).__struct_config__.tag  # type: ignore[attr-defined]
                    by_type[tag] = by_type.get(tag, 0) + 1
                    first = r.event.time if first is None else min(first, r.event.time)
                    last = r.event.time if last is None else max(last, r.event.time)
                past(batch[-1].offset)
    finally:
        log.close_sync()
    return {"log": path, "batches": batches, "events": events, "endOffset": end,
            "byType": dict(sorted(by_type.items())), "firstTime": time_text(first) if first is not None else None,
            "lastTime": time_text(last) if last is not None else None}


def inspect_log(path: str) -> dict[str, Any]:
    if is_kafka_url(path):
        return inspect_kafka(path)
    log = open_readonly(path)
    try:
        directory = log.directory
        segments = list_segments(directory)
        by_type: dict[str, int] = {}
        seg_rows: list[dict[str, Any]] = []
        first = last = None
        total_bytes = total_events = 0
        torn = 0
        ends = [b for b, _ in segments[1:]] + [log.stored_end()]  # for the progress bars, before each walk
        for i, (base, seg_path) in enumerate(segments):
            walk = SegmentWalk(seg_path, base)
            with progress_bar(ends[i] - base, f"Inspecting {seg_path.name}") as advance:
                for window in walk.windows():
                    for fr in window.frames:
                        for h in _decode_heads(window.payload(fr)):
                            by_type[h.type] = by_type.get(h.type, 0) + 1
                            if h.time:
                                first = h.time if first is None else min(first, h.time)
                                last = h.time if last is None else max(last, h.time)
                        advance(fr.count)
            assert walk.size is not None
            if walk.torn_at is not None:
                if i + 1 < len(segments):
                    raise CorruptRecord(seg_path.name, walk.expect, walk.torn_at, "truncated frame")
                torn = walk.size - walk.torn_at
            seg_rows.append({"file": seg_path.name, "baseOffset": base, "endOffset": walk.expect,
                             "frames": walk.frames, "bytes": walk.size})
            total_bytes += walk.size
            total_events = walk.expect
    finally:
        log.close_sync()
    out: dict[str, Any] = {
        "log": path,
        "segments": seg_rows,
        "events": total_events - (seg_rows[0]["baseOffset"] if seg_rows else 0),
        "endOffset": total_events,
        "bytes": total_bytes,
        "byType": dict(sorted(by_type.items())),
        "firstTime": time_text(first) if first is not None else None,
        "lastTime": time_text(last) if last is not None else None,
    }
    if torn:
        out["tornTailBytes"] = torn
    kept = checkpoints.listed(directory)
    if kept:  # where replays and restarts start from (kueue_es.checkpoints); read, and checked, only when used
        out["checkpoints"] = [{"file": f"{checkpoints.DIRECTORY}/{p.name}", "offset": off, "bytes": p.stat().st_size}
                              for off, p in kept]
    return out


def _decode_heads(payload: memoryview) -> list[_Head]:
    try:
        return _heads.decode(payload)
    except (msgspec.DecodeError, msgspec.ValidationError):
        pass
    try:
        raws = _raw.decode(payload)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return [_Head(type="(undecodable frame)")]
    out = []
    for r in raws:
        try:
            out.append(_head.decode(r))
        except (msgspec.DecodeError, msgspec.ValidationError):
            out.append(_Head(type="(undecodable)"))
    return out


def run_inspect(args: argparse.Namespace) -> int:
    data = inspect_log(args.log)
    if args.output != "text":
        write_data(data, args.output)
        return 0
    sys.stdout.write(render_inspect(data))
    return 0


def render_inspect(data: dict[str, Any]) -> str:
    if "segments" not in data:  # Kafka
        out = [f"Log {data['log']}: {data['events']} events in {data['batches']} batches (Kafka records), "
               f"end offset {data['endOffset']}\n"]
        if data["firstTime"]:
            out.append(f"Event times: {data['firstTime']} .. {data['lastTime']}\n")
        out.append("\n")
        out.append(render_table(["EVENT TYPE", "COUNT"], list(data["byType"].items()), empty="No events."))
        return "".join(out)
    n = len(data["segments"])
    out = [
        f"Log {data['log']}: {data['events']} events in {n} segment{'s' if n != 1 else ''}, "
        f"{_size(data['bytes'])}\n"
    ]
    if data["firstTime"]:
        out.append(f"Event times: {data['firstTime']} .. {data['lastTime']}\n")
    if data.get("tornTailBytes"):
        out.append(f"Torn tail: {data['tornTailBytes']} bytes after the last complete frame "
                   "(the writer truncates them when it next opens the log)\n")
    if data.get("checkpoints"):
        cks = data["checkpoints"]
        out.append(f"Checkpoints: {len(cks)}, at offsets {', '.join(str(c['offset']) for c in cks)}\n")
    out.append("\n")
    out.append(render_table(
        ["SEGMENT", "BASE OFFSET", "END OFFSET", "FRAMES", "BYTES"],
        [[s["file"], s["baseOffset"], s["endOffset"], s["frames"], s["bytes"]] for s in data["segments"]],
        empty="No segments.",
    ))
    out.append("\n")
    out.append(render_table(["EVENT TYPE", "COUNT"], list(data["byType"].items()), empty="No events."))
    return "".join(out)


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} bytes"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            break
    return f"{n} bytes ({value:.1f} {unit})"
