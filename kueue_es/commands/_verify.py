"""``kueue-es replay --verify``: the determinism check (see :mod:`kueue_es.verify`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from typing import Any

from events.schema import Record
from kueue_es.commands._common import (
    load_kueue_config_document,
    log_end,
    open_readonly,
    read_progress,
    warn_afs_override,
    write_data,
)
from kueue_es.scheduler import config_record
from kueue_es.verify import VerifyReport, verify


def run_verify(args: argparse.Namespace) -> int:
    loaded_override = load_kueue_config_document(args.config)
    override, document = loaded_override if loaded_override is not None else (None, None)
    log = open_readonly(args.log)
    try:
        end = log_end(log)
        passes = iter(("Finding decisions in", "Verifying"))

        def read() -> Iterator[Record]:
            """One pass over the log up to ``end``, read once: on a live log both passes stop where the first did,
            so the second never meets a decision the first did not see (as ``fold_log(to=end - 1)`` does)."""
            with read_progress(log, 0, end, next(passes, "Verifying")) as past:
                for batch in log.scan(0, lazy=True):
                    if batch[-1].offset >= end:
                        yield from (r for r in batch if r.offset < end)  # Kafka's offsets may have gaps
                        return
                    yield from batch
                    past(batch[-1].offset)

        report = verify(read, override)
    finally:
        log.close_sync()
    warn_afs_override(args.config, document, [e.document for _, e in report.configs])
    configs = [config_record.entry(e, off, document=False, invalid_ok=override is not None)
               for off, e in report.configs]
    data = {
        "log": args.log,
        "decisionBatches": report.batches,
        "decisions": report.decisions,
        "mismatches": [m.describe() for m in report.mismatches],
        "verified": report.ok,
        "configurations": configs,
        "configOverride": args.config,
        "batchesBeforeConfiguration": report.before_config,
    }
    if args.output == "summary":
        for line in _config_notes(args.config, report, configs):
            sys.stdout.write(line + "\n")
        if report.ok:
            sys.stdout.write(f"verified: {report.batches} decision batches ({report.decisions} decisions) "
                             "re-run to identical results\n")
        else:
            sys.stdout.write(f"MISMATCH: {len(report.mismatches)} of {report.batches} decision batches differ "
                             "from a re-run of the scheduler\n")
            for m in report.mismatches[:20]:
                sys.stdout.write(f"  {m.describe()}\n")
    else:
        write_data(data, args.output)
    return 0 if report.ok else 1


def _config_notes(override: str | None, report: VerifyReport, configs: list[dict[str, Any]]) -> list[str]:
    """Which Kueue Configuration the batches were re-run under."""
    if override is not None:
        if not configs:
            return [f"configuration: --config {override} (the log records none)"]
        at = ", ".join(str(c["offset"]) for c in configs)
        return [f"note: --config {override} overrides the configuration recorded in the log (at offset {at}): "
                f"every batch is re-run under {override}"]
    if not configs:
        return ["configuration: none recorded in the log: re-run under Kueue's defaults (pass --config FILE if "
                "the scheduler ran with another)"]
    lines = [f"configuration: {config_record.one_line(c)}" for c in configs]
    if report.before_config:
        lines.append(f"note: {report.before_config} decision batch(es) come before the first recorded configuration: "
                     "re-run under Kueue's defaults")
    return lines
