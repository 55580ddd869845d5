"""``kueue-es run --kube`` that SIGKILLs itself right before its Nth Workload status write (tests only).

Environment: ``CRASH_BEFORE_WRITE`` — which status write (1-based); with ``CRASH_WORKLOAD`` (a Workload's name)
only the writes of that Workload count (the test apiserver is shared: other tests' Workloads are written too).
By then the decision is in the log (fsync'd) but the cluster has not seen it: the window where a restart must
neither lose nor repeat it.
"""

from __future__ import annotations

import os
import signal
import sys

from connectors.k8s.writer import StatusWriter
from kueue_es.cli import main

AT = int(os.environ["CRASH_BEFORE_WRITE"])
ONLY = os.environ.get("CRASH_WORKLOAD", "")
_count = 0
_patch = StatusWriter._patch


async def _crashing_patch(self, obs, *args, **kwargs):  # type: ignore[no-untyped-def]
    global _count
    if not ONLY or obs.metadata.name == ONLY:
        _count += 1
        if _count == AT:
            os.kill(os.getpid(), signal.SIGKILL)
    return await _patch(self, obs, *args, **kwargs)


StatusWriter._patch = _crashing_patch  # type: ignore[method-assign]

if __name__ == "__main__":
    sys.exit(main())
