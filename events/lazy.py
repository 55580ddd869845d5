"""Lazily decoded Workload upserts, for folds that read little of them.

Half of a busy log is the watcher's upserts of whole Workloads, and the cluster fold reads only part of each:
the metadata, the spec (which rarely changes: most upserts are status changes), and the status only the first
time it sees the workload. Decoding all of it was most of replay's decode time. Here a Workload upsert
decodes its metadata at once and keeps ``spec`` and ``status`` as undecoded msgpack (:class:`msgspec.Raw`)
until they are read; a spec is decoded once per distinct encoding (equal bytes, equal spec), so the status
upserts of one workload share one decoded spec.

The wire form is the log's own (same tags, same fields): :data:`LazyEvent` is :data:`events.schema.AnyEvent`
with ``ObjectUpserted`` replaced by :class:`LazyObjectUpserted`, whose object is any kind but a Workload, decoded
as usual, or a :class:`LazyWorkload`. A lazy decode checks what it decodes; a part left undecoded is checked
when it is read (and raises :class:`UndecodablePart`). Readers that need every field checked up front, or
that quarantine bad events, decode normally.
"""

from __future__ import annotations

from typing import Any, Union

import msgspec
from zlib_ng.zlib_ng import crc32

from events import objects as o
from events import schema as ev

_EMPTY = msgspec.Raw(b"")
_spec_decoder = msgspec.msgpack.Decoder(o.WorkloadSpec)
_status_decoder = msgspec.msgpack.Decoder(o.WorkloadStatus)
_DEFAULT_SPEC = o.WorkloadSpec()
_DEFAULT_STATUS = o.WorkloadStatus()
_SPECS: dict[int, tuple[msgspec.Raw, o.WorkloadSpec]] = {}
SPEC_MEMO_SIZE = 8192
"""Decoded specs kept (by the CRC-32 of their bytes, with those bytes); enough for every workload in flight in a
busy cluster to find its own spec again at its next upsert. Cleared when full: a cache, never part of state."""


class LazyWorkload(o.KObject, tag="Workload"):
    """A Workload with ``spec`` and ``status`` decoded on first read (see the module docstring)."""

    spec_raw: msgspec.Raw = msgspec.field(default=_EMPTY, name="spec")
    status_raw: msgspec.Raw = msgspec.field(default=_EMPTY, name="status")

    @property
    def spec(self) -> o.WorkloadSpec:
        """The decoded spec; equal encodings give the same (immutable) object while it is remembered."""
        raw = self.spec_raw
        if not raw:
            return _DEFAULT_SPEC
        # Keyed by zlib-ng's CRC-32 of the bytes, read in place: the bytes are neither copied nor hashed with
        # SipHash (several times dearer per byte) at every upsert; equal CRCs are then told apart by the bytes.
        crc = crc32(raw)
        known = _SPECS.get(crc)
        if known is not None and known[0] == raw:
            return known[1]
        if len(_SPECS) >= SPEC_MEMO_SIZE:
            _SPECS.clear()
        data = msgspec.Raw(bytes(raw))  # its own copy: ``raw`` holds the whole frame's buffer
        spec = _decode(_spec_decoder, data, "spec")
        _SPECS[crc] = data, spec
        return spec

    @property
    def status(self) -> o.WorkloadStatus:
        """The decoded status (decoded again at every read: a fold reads it once)."""
        raw = self.status_raw
        return _decode(_status_decoder, raw, "status") if raw else _DEFAULT_STATUS

    def full(self) -> o.Workload:
        return o.Workload(api_version=self.api_version, metadata=self.metadata, spec=self.spec, status=self.status)


class UndecodablePart(msgspec.ValidationError):
    """A part of a lazily decoded event is invalid; found when it was read. The message says where in the event,
    as decoding the whole event would have."""


def _decode(decoder: msgspec.msgpack.Decoder, data: Any, part: str) -> Any:
    try:
        return decoder.decode(data)
    except msgspec.ValidationError as exc:
        raise UndecodablePart(str(exc).replace("`$", f"`$.obj.{part}", 1)) from None


LazyObject: Any = Union[  # type: ignore[valid-type]  # noqa: UP007 - built from a tuple at run time
    tuple(LazyWorkload if t is o.Workload else t for t in o.KueueObject.__args__)  # type: ignore[attr-defined]
]
"""Every kind of :data:`events.objects.KueueObject`, with a Workload decoded lazily."""


class LazyObjectUpserted(ev.Event, tag="ObjectUpserted"):
    """``ObjectUpserted`` as a lazy fold reads it: the object is a :class:`LazyWorkload` for a Workload."""

    obj: LazyObject

    def full(self) -> ev.ObjectUpserted:
        obj = self.obj.full() if isinstance(self.obj, LazyWorkload) else self.obj
        return ev.ObjectUpserted(time=self.time, key=self.key, uid=self.uid, resource_version=self.resource_version,
                                 id=self.id, schema=self.schema, obj=obj)


LazyEvent: Any = Union[  # type: ignore[valid-type]  # noqa: UP007 - built from a tuple at run time
    tuple(LazyObjectUpserted if t is ev.ObjectUpserted else t for t in ev.AnyEvent.__args__)  # type: ignore[attr-defined]
]
"""Every event of :data:`events.schema.AnyEvent`, with ``ObjectUpserted`` decoded lazily."""
