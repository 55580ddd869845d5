"""Codecs: msgpack for the log (a frame holds a batch of events), JSON for people.

Decoding a whole batch in one call keeps replay fast; when a batch fails, each event is decoded on its own so
the error names the exact offset, or, when quarantining, only the bad event is set aside.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import repeat
from typing import Any

import msgspec

from events.errors import UndecodableRecord
from events.lazy import LazyEvent
from events.schema import AnyEvent, Record

_encoder = msgspec.msgpack.Encoder()
_batch_decoder = msgspec.msgpack.Decoder(list[AnyEvent])
_event_decoder = msgspec.msgpack.Decoder(AnyEvent)
_lazy_batch_decoder = msgspec.msgpack.Decoder(list[LazyEvent])
_lazy_event_decoder = msgspec.msgpack.Decoder(LazyEvent)
_raw_batch_decoder = msgspec.msgpack.Decoder(list[msgspec.Raw])
_json_encoder = msgspec.json.Encoder()
_json_decoder = msgspec.json.Decoder(AnyEvent)
_new_tuple = tuple.__new__


class Quarantined(msgspec.Struct, frozen=True):
    """An event that could not be decoded, set aside with the reason, when reading with quarantine."""

    offset: int
    error: str
    payload: bytes


def encode_event(event: AnyEvent) -> bytes:
    return _encoder.encode(event)


def decode_event(payload: bytes | memoryview, offset: int) -> AnyEvent:
    try:
        return _event_decoder.decode(payload)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise UndecodableRecord(offset, str(exc)) from exc


def encode_batch(events: Sequence[AnyEvent]) -> bytes:
    return _encoder.encode(events)


def decode_batch(
    payload: bytes | memoryview,
    base_offset: int,
    quarantine: list[Quarantined] | None = None,
    start: int = 0,
    *,
    lazy: bool = False,
) -> list[Record]:
    """Decode one frame, from offset ``start`` on if it falls inside the frame. Without ``quarantine`` a bad
    event raises; with it, the event is recorded there. Events before ``start`` are never looked at. With
    ``lazy``, Workload upserts are :class:`events.lazy.LazyObjectUpserted` (for folds that read little of them)."""
    try:
        events = (_lazy_batch_decoder if lazy else _batch_decoder).decode(payload)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return _decode_one_by_one(payload, base_offset, quarantine, start, lazy)
    if start > base_offset:
        return [Record(base_offset + i, e) for i, e in enumerate(events) if base_offset + i >= start]
    # tuple.__new__ builds the Records without a Python-level call per event (replay's hottest loop)
    n = len(events)
    return list(map(_new_tuple, repeat(Record, n), zip(range(base_offset, base_offset + n), events, strict=True)))


def _decode_one_by_one(
    payload: bytes | memoryview, base: int, quarantine: list[Quarantined] | None, start: int = 0, lazy: bool = False
) -> list[Record]:
    try:
        raws = _raw_batch_decoder.decode(payload)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        if quarantine is None:
            raise UndecodableRecord(base, f"frame is not a msgpack array of events: {exc}") from exc
        quarantine.append(Quarantined(base, str(exc), bytes(payload)))
        return []
    out: list[Record] = []
    decoder = _lazy_event_decoder if lazy else _event_decoder
    for i, raw in enumerate(raws):
        if base + i < start:
            continue
        try:
            out.append(Record(base + i, decoder.decode(raw)))
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            if quarantine is None:
                raise UndecodableRecord(base + i, str(exc)) from exc
            quarantine.append(Quarantined(base + i, str(exc), bytes(raw)))
    return out


def to_builtins(event: Any) -> Any:
    """Plain dicts/lists for YAML or JSON output to people."""
    return msgspec.to_builtins(event)


def to_json(event: AnyEvent) -> bytes:
    return _json_encoder.encode(event)


def from_json(data: bytes | str) -> AnyEvent:
    return _json_decoder.decode(data)


def records_to_builtins(records: Iterable[Record]) -> list[dict[str, Any]]:
    return [{"offset": r.offset, **msgspec.to_builtins(r.event)} for r in records]
