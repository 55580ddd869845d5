"""``kueue-es run --kube`` that SIGKILLs itself right before its Nth Workload status write (tests only).

Environment: ``CRASH_BEFORE_WRITE`` — which status write (1-based). By then the decision is in the log
(fsync'd) but the cluster has not seen it: the window where a restart must neither lose nor repeat it.
"""

from __future__ import annotations

import os
import signal
import sys

from connectors.k8s.writer import StatusWriter
from kueue_es.cli import main

AT = int(os.environ["CRASH_BEFORE_WRITE"])
_count = 0
_patch = StatusWriter._patch


async def _crashing_patch(self, *args, **kwargs):  # type: ignore[no-untyped-def]
    global _count
    _count += 1
    if _count == AT:
        os.kill(os.getpid(), signal.SIGKILL)
    return await _patch(self, *args, **kwargs)


StatusWriter._patch = _crashing_patch  # type: ignore[method-assign]

if __name__ == "__main__":
    sys.exit(main())
