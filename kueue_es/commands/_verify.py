"""``kueue-es replay --verify``: the determinism check (see :mod:`kueue_es.verify`)."""

from __future__ import annotations

import argparse
import sys

from events.manifests import load_file
from kueue_es.commands._common import log_end, open_readonly, progress_bar, records, write_data
from kueue_es.scheduler.config import DEFAULT, load_config
from kueue_es.verify import verify


def run_verify(args: argparse.Namespace) -> int:
    config = DEFAULT
    if args.config:
        m = load_file(args.config)
        if len(m.configs) != 1 or m.objects:
            from events.errors import InvalidInput

            raise InvalidInput(f"--config {args.config}: expected exactly one Configuration document")
        config = load_config(m.configs[0], args.config)
    log = open_readonly(args.log)
    try:
        end = log_end(log)
        with progress_bar(2 * end, "Verifying") as advance:
            report = verify(lambda: records(log.scan(0, lazy=True)), config, on_progress=advance)
    finally:
        log.close_sync()
    data = {
        "log": args.log,
        "decisionBatches": report.batches,
        "decisions": report.decisions,
        "mismatches": [m.describe() for m in report.mismatches],
        "verified": report.ok,
    }
    if args.output == "summary":
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
