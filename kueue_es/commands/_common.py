"""Helpers shared by the subcommands: flags, output formats, opening logs, folding with a progress bar."""

from __future__ import annotations

import argparse
import csv
import io
import json
import logging
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TextIO, Union

import anyio
import yaml

from connectors.kafka.settings import is_kafka_url
from events.codec import Quarantined
from events.errors import InvalidInput, KueueEsError
from events.filelog import SEGMENT_SUFFIX, FileLog, list_segments
from events.manifests import load_file
from events.schema import Record
from events.timefmt import ZONELESS, format_time_ms, parse_rfc3339
from kueue_es import checkpoints
from kueue_es.scheduler.config import SchedulerConfig, as_decoded, load_config
from projections import afs_ledger, gates
from projections.cluster import ClusterState

if TYPE_CHECKING:
    from connectors.kafka.reader import KafkaReader

Log = Union[FileLog, "KafkaReader"]  # noqa: UP007 - a forward reference
"""What the tools read: the embedded log, or a Kafka partition (:mod:`connectors.kafka.reader`)."""


class ProgressUnit(NamedTuple):
    """What a progress bar over a read of a log counts."""

    name: str
    minimum: int
    """Reads shorter than this finish too fast to be worth a bar."""
    step: int
    """Units between two bar updates (rich's updates are not free)."""


EVENTS = ProgressUnit("events", 20_000, 8_192)
RECORDS = ProgressUnit("records", 1_000, 64)
"""Kafka records, one appended batch each: a Kafka log's offsets are not dense, so its events are not counted
before they are read."""


class NotFound(KueueEsError):
    """A named object asked for is not in the log (or the STATE.yaml). Exit code 1 and one line naming its kind and
    name, as ``kubectl get`` of a missing object ("Error from server (NotFound): ... not found"); CLI misuse is 2."""

    def __init__(self, kind: str, name: str, where: str, detail: str = "") -> None:
        super().__init__(f'(NotFound) {kind} "{name}" not found {where}{detail}')


def where_folded(args: argparse.Namespace, state: ClusterState) -> str:
    """Where a command reading ``-f STATE.yaml`` or ``--log`` (folded into ``state``) looked, for :class:`NotFound`."""
    if getattr(args, "filename", None) is not None:
        return f"in {args.filename}"
    return f"in the log at offset {state.offset}" if state.offset >= 0 else "in the log (no event folded)"


# --- flags -------------------------------------------------------------------------------------------------


def add_log_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--log", required=True, type=path_arg, metavar="PATH|URL",
                        help="directory of the event log, or kafka://HOST:PORT/TOPIC[?shard=N]")


def add_source_arguments(parser: argparse.ArgumentParser) -> None:
    """``--log PATH`` or ``-f STATE.yaml``, one of them required: commands that read a state either way."""
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--log", type=path_arg, metavar="PATH", help="directory of the event log")
    source.add_argument("-f", "--filename", type=path_arg, metavar="STATE.yaml", help="objects as a user would kubectl-apply them")


def add_point_arguments(parser: argparse.ArgumentParser, subject: str = "") -> None:
    """``--to OFFSET`` or ``--at TIME``: how far to fold the log. ``subject`` names what a command shows there
    when the log is only one of its sources (``-f`` being the other)."""
    point = parser.add_mutually_exclusive_group()
    if subject:
        to_help, at_help = f"with --log: {subject} at this offset", f"with --log: {subject} at this time"
    else:
        to_help, at_help = ("fold events up to and including OFFSET",
                            "fold the events whose time is at most TIME (RFC 3339)")
    point.add_argument("--to", type=offset_arg, metavar="OFFSET", help=to_help)
    point.add_argument("--at", type=time_arg("--at"), metavar="TIME", help=at_help)


def add_checkpoints_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-checkpoints", action="store_true",
                        help="fold (and check) the whole log instead of starting from its newest usable checkpoint")


def start_state(log: Log, args: argparse.Namespace) -> tuple[ClusterState, str | None]:
    """The state a fold of ``log`` up to ``args.to``/``args.at`` starts from, and where it was read (None: an
    empty state). The embedded log's newest usable checkpoint (:mod:`kueue_es.checkpoints`; any passed over are
    named on stderr); on Kafka, the shard's snapshot (the scheduler service's, on the snapshot topic) when it is
    not past the point."""
    if args.no_checkpoints:
        return ClusterState(), None
    return nearest_state(log, to=args.to, at=args.at)


def nearest_state(log: Log, *, to: int | None, at: int | None = None) -> tuple[ClusterState, str | None]:
    """:func:`start_state` with checkpoints: the newest usable checkpoint (or Kafka snapshot) not past ``to``/``at``,
    and where it was read (None: none, an empty state)."""
    if not isinstance(log, FileLog):
        found = anyio.run(log.latest_snapshot)
        for passed in log.passed_over:
            warn(f"snapshot passed over: {passed}")
        if found is None:
            return ClusterState(), None
        where, state = found
        if (to is not None and state.offset > to) or (at is not None and state.time > at):
            return ClusterState(), None
        return state, where
    start = checkpoints.restore(log, to=to, at=at)
    for passed in start.passed_over:
        warn(f"checkpoint passed over: {passed}")
    return (start.state, str(start.path)) if start.state is not None else (ClusterState(), None)


def add_output_argument(parser: argparse.ArgumentParser, choices: Sequence[str], default: str) -> None:
    parser.add_argument(
        "-o", "--output", choices=list(choices), default=default,
        help=f"output format: {', '.join(choices)} (default {default})",
    )


def time_arg(flag: str) -> Callable[[str], int]:
    """An argparse ``type`` for RFC 3339 timestamps, giving ms since the epoch."""

    def parse(text: str) -> int:
        text = text.strip()
        zoneless = ZONELESS.fullmatch(text) is not None
        try:
            return parse_rfc3339(text)
        except (ValueError, OverflowError):
            hint = ("no time zone: add Z for UTC or an offset such as +02:00" if zoneless
                    else "example: 2024-05-01T12:00:00Z")
            raise argparse.ArgumentTypeError(f"not an RFC 3339 time: {text!r} ({hint})") from None

    parse.__name__ = f"{flag} time"
    return parse


def int_arg(minimum: int, what: str = "an integer", maximum: int | None = None) -> Callable[[str], int]:
    """An argparse ``type`` for integers of at least ``minimum`` (and at most ``maximum``)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum or (maximum is not None and value > maximum):
            most = f" and <= {maximum}" if maximum is not None else ""
            raise argparse.ArgumentTypeError(f"not {what}: {text!r} (expected an integer >= {minimum}{most})")
        return value

    parse.__name__ = what
    return parse


offset_arg = int_arg(0, "an offset")


def path_arg(text: str) -> str:
    """An argparse ``type`` for a file or directory: an empty one (an unset shell variable) is misuse, not the
    current directory nor the flag left out."""
    if not text:
        raise argparse.ArgumentTypeError("empty path")
    return text


def name_arg(text: str) -> str:
    """An argparse ``type`` for the name of a cluster-scoped object: an empty name would match nothing, or, as
    a filter, everything."""
    if not text or "/" in text:
        raise argparse.ArgumentTypeError(f"not an object name: {text!r} (expected NAME, without a namespace)")
    return text


def key_arg(text: str) -> str:
    """An argparse ``type`` for a namespaced object: ``NAMESPACE/NAME``, both parts non-empty."""
    namespace, sep, name = text.partition("/")
    if not sep or not namespace or not name or "/" in name:
        raise argparse.ArgumentTypeError(f"not an object key: {text!r} (expected NAMESPACE/NAME)")
    return text


def namespace_arg(text: str) -> str:
    """An argparse ``type`` for a namespace completing a bare ``NAME``: non-empty, without a '/'."""
    if not text or "/" in text:
        raise argparse.ArgumentTypeError(f"not a namespace: {text!r}")
    return text


def key_or_name_arg(text: str) -> str:
    """:func:`key_arg`, or a bare ``NAME`` (the command completes it with ``--namespace``)."""
    return key_arg(text) if "/" in text else name_arg(text)


def load_kueue_config(path: str | None) -> SchedulerConfig | None:
    """``--config FILE``: one Kueue Configuration document (None without the flag)."""
    loaded = load_kueue_config_document(path)
    return loaded[0] if loaded is not None else None


def load_kueue_config_document(path: str | None) -> tuple[SchedulerConfig, dict[str, Any]] | None:
    """``--config FILE``: the configuration and its document as written, its nulls as Kueue reads them (what a
    scheduler records in the log: :func:`~kueue_es.scheduler.config.as_decoded`)."""
    if not path:
        return None
    m = load_file(path)
    if len(m.configs) != 1 or m.objects:
        raise InvalidInput(f"--config {path}: expected exactly one Configuration document")
    config = load_config(m.configs[0], path)
    warn_ignored_gates(config, path)
    return config, as_decoded(m.configs[0])


CONFIG_HELP_AFS = (" (an Admission Fair Sharing half-life or sampling interval other than the recorded one folds "
                   "only the entries after each LocalQueue's last checkpoint)")


def warn_afs_override(path: str | None, document: dict[str, Any] | None,
                      recorded: Iterable[dict[str, Any] | None]) -> None:
    """``--config FILE`` overriding the recorded Configuration(s) with Admission Fair Sharing on: the history was
    compacted under the recorded half-life and interval (:mod:`projections.afs_ledger`), so another one folds only
    what came after each LocalQueue's last checkpoint; and under a recorded Configuration with it off, or with none
    recorded, none is kept."""
    key = afs_ledger.key_of(document) if path and document is not None else None
    if key is None:
        return
    keys = [afs_ledger.key_of(d) for d in recorded if d is not None]
    if any(k is not None and k != key for k in keys):
        warn(f"--config {path}: its Admission Fair Sharing half-life or sampling interval differs from the recorded "
             "one: the override folds only the entries after each LocalQueue's last checkpoint (the usage before "
             "stays as the recorded configuration folded it)")
    elif not keys or keys[-1] is None:
        where = "the recorded configuration has it off" if keys else "the log records no configuration"
        warn(f"--config {path} turns Admission Fair Sharing on where {where}: no history was kept, so every "
             "LocalQueue's consumed usage reads 0")


def warn_ignored_gates(config: SchedulerConfig, source: str) -> None:
    """Say which of the Configuration's feature gates change nothing here (:func:`projections.gates.ignored`), and
    which it models only in part (:func:`projections.gates.partly_note`)."""
    for note in (gates.ignored_note(config.feature_gates, source), gates.partly_note(config.feature_gates, source)):
        if note is not None:
            warn(note)


# --- logs --------------------------------------------------------------------------------------------------


def open_readonly(path: str) -> Log:
    """Open an existing log for reading; a missing one is a user error (exit code 2). A ``kafka://`` URL reads
    that partition, with the Kafka settings of ``KUEUE_ES_CONFIG`` and ``KUEUE_ES_KAFKA_*`` (TLS, SASL)."""
    if is_kafka_url(path):
        return kafka_reader(path)
    return FileLog.open(embedded_log_dir(path), readonly=True)


def embedded_log_dir(path: str) -> Path:
    """The directory of the embedded log ``--log path`` names. Missing, a file, unreadable, or a directory holding
    other files but no segment (``--log .`` from the wrong place, ``--log ~``) is a user error: read as an empty
    log it would show an empty state as if that were the log's, and written, it would scatter a log among them. An
    empty directory is an empty log."""
    if not os.path.exists(path):
        raise InvalidInput(f"--log {path}: no such log")
    if not os.path.isdir(path):
        raise InvalidInput(f"--log {path}: not a log directory")
    directory = Path(path)
    try:
        names = [p.name for p in directory.iterdir()]
    except OSError as exc:
        raise InvalidInput(f"--log {path}: cannot read: {exc.strerror or exc}") from None
    segments = list_segments(directory)
    if not segments and any(not _left_beside_a_log(n) for n in names):
        raise InvalidInput(f"--log {path}: not a log directory (it holds files, but no segment *{SEGMENT_SUFFIX})")
    for _, segment in segments:  # up front: a reader starting from a checkpoint would stop half-way, exit code 1
        if not segment.is_file():
            raise InvalidInput(f"--log {path}: cannot read segment {segment.name}: not a file")
        if not os.access(segment, os.R_OK):
            raise InvalidInput(f"--log {path}: cannot read segment {segment.name}: permission denied")
    return directory


def _left_beside_a_log(name: str) -> bool:
    """What an empty log's directory may hold besides the log's own ``LOCK`` and checkpoints: what a fresh volume
    mounted there holds (``lost+found``) and hidden files (``.gitkeep``)."""
    return name in ("LOCK", checkpoints.DIRECTORY, "lost+found") or name.startswith(".")


def kafka_reader(url: str, *, writes: bool = False) -> KafkaReader:
    from connectors.kafka.reader import KafkaReader
    from kueue_es import config

    # aiokafka logs retries and refused connections itself; a tool's errors come as one line of its own
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    return KafkaReader(url, config.load().kafka, writes=writes)


def log_end(log: Log) -> int:
    """The log's end offset, from synchronous code (the CLI runs no event loop of its own)."""
    return anyio.run(log.end_offset)


class read_progress:  # noqa: N801 - used as a context manager
    """A progress bar over a read of ``log`` from offset ``start`` to ``end``, in the log's own unit: events on
    the embedded log, Kafka records on Kafka. Entered, it gives ``past(offset)``: the read has got past that
    offset."""

    def __init__(self, log: Log, start: int, end: int, label: str, out: TextIO | None = None) -> None:
        self.position: Callable[[int], int] = _offset if isinstance(log, FileLog) else log.record_of
        self.unit = EVENTS if isinstance(log, FileLog) else RECORDS
        self.done = self.position(start)
        self.bar = progress_bar(max(0, self.position(end) - self.done), label, out, self.unit)

    def __enter__(self) -> Callable[[int], None]:
        advance = self.bar.__enter__()
        if advance is _ignore:
            return _ignore

        def past(offset: int) -> None:
            reached = self.position(offset) + 1
            if reached > self.done:
                advance(reached - self.done)
                self.done = reached
        return past

    def __exit__(self, *exc: object) -> None:
        self.bar.__exit__(*exc)


def _offset(offset: int) -> int:
    return offset


def fold_log(
    log: Log,
    apply: Callable[[Record], None],
    *,
    start: int = 0,
    to: int | None = None,
    at: int | None = None,
    quarantine: list[Quarantined] | None = None,
    label: str = "Replaying",
    out: TextIO | None = None,
    lazy: bool = False,
) -> int:
    """Feed ``apply`` every record from ``start`` up to and including offset ``to``, skipping events whose
    time is after ``at``. Returns the number of records read. Shows a progress bar on a terminal.

    ``lazy``: ``apply`` takes lazily decoded Workload upserts (:mod:`events.lazy`; a ``ClusterState`` does).
    Not with ``quarantine``: a part decoded late could not be set aside, so everything is decoded up front."""
    end = log_end(log)
    if to is not None:
        end = min(end, to + 1)
    applied = 0
    with read_progress(log, start, end, label, out) as past:
        for batch in log.scan(start, quarantine, lazy=lazy and quarantine is None):
            if to is not None and batch[0].offset > to:
                break
            for record in batch:
                if to is not None and record.offset > to:
                    break
                if at is None or record.event.time <= at:
                    apply(record)
            applied += len(batch)
            past(batch[-1].offset)
    return applied


class progress_bar:  # noqa: N801 - used as a context manager
    """A transient rich progress bar on stdout, only when stdout is a terminal and the fold is long."""

    def __init__(self, total: int, label: str, out: TextIO | None = None, unit: ProgressUnit = EVENTS) -> None:
        stream = out if out is not None else sys.stdout
        self.total, self.label, self.stream, self.unit = total, label, stream, unit
        self.show = total >= unit.minimum and _isatty(stream)
        self._progress: Any = None
        self._task: Any = None
        self._pending = 0

    def __enter__(self) -> Callable[[int], None]:
        if not self.show:
            return _ignore
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self._progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
            console=Console(file=self.stream), transient=True,
        )
        self._progress.start()
        self._task = self._progress.add_task(f"{self.label} {self.unit.name}", total=self.total)
        return self._advance

    def _advance(self, n: int) -> None:
        self._pending += n
        if self._pending >= self.unit.step:
            self._progress.advance(self._task, self._pending)
            self._pending = 0

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()


def _ignore(n: int) -> None:
    return None


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


# --- output ------------------------------------------------------------------------------------------------


def write_json(data: Any, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    out.write(json.dumps(data, indent=2, ensure_ascii=False))
    out.write("\n")


def write_yaml(data: Any, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    yaml.safe_dump(data, out, sort_keys=False, default_flow_style=False, allow_unicode=True)


def write_data(data: Any, fmt: str, out: TextIO | None = None) -> None:
    if fmt == "json":
        write_json(data, out)
    elif fmt == "yaml":
        write_yaml(data, out)
    else:  # pragma: no cover - argparse restricts the choices
        raise InvalidInput(f"unknown output format {fmt!r}")


def render_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, empty: str = "") -> str:
    """kubectl-style columns: upper-case headers, left aligned, three spaces apart, no trailing blanks."""
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in row] for row in rows]
    if len(cells) == 1 and empty:
        return empty + "\n"
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for row in cells:
        parts = [c.ljust(widths[i]) if i < len(row) - 1 else c for i, c in enumerate(row)]
        lines.append("   ".join(parts).rstrip())
    return "\n".join(lines) + "\n"


def render_csv(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(headers)
    for row in rows:
        w.writerow(["" if c is None else c for c in row])
    return buf.getvalue()


def time_text(ms: int) -> str:
    return format_time_ms(ms)


def quarantine_report(quarantined: list[Quarantined]) -> list[dict[str, Any]]:
    return [{"offset": q.offset, "error": q.error, "bytes": len(q.payload)} for q in quarantined]


def warn_outside(args: argparse.Namespace, end: int, state: ClusterState, done: str) -> None:
    """Say what a point outside the log (``--to`` past its end, ``--at`` before its first event) was taken as."""
    if args.to is not None and args.to >= end:
        warn(f"--to {args.to} is past the end of the log; {done} up to offset {end - 1}")
    elif args.at is not None and end > 0 and state.offset < 0:
        warn(f"--at {format_time_ms(args.at)} is before the log's first event; the state is empty")


def state_at(args: argparse.Namespace) -> ClusterState:
    """The state at the point ``args`` name (``--to``/``--at``, else the end) of the log ``args.log``, folded from
    its newest usable checkpoint (:func:`start_state`), a point outside the log said on stderr: what a read-only
    command that looks at one point needs."""
    log = open_readonly(args.log)
    try:
        end = log_end(log)
        state, _ = start_state(log, args)
        fold_log(log, state.apply, start=state.offset + 1, to=args.to, at=args.at, label="Folding", lazy=True)
    finally:
        log.close_sync()
    warn_outside(args, end, state, "folded")
    return state


def warn(message: str) -> None:
    sys.stderr.write(f"kueue-es: warning: {one_line(message)}\n")


def one_line(message: str) -> str:
    return " ".join(str(message).split())
