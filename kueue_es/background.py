"""Encoding a large state off the event loop.

Encoding a ClusterState takes a while (~100-250 ms for 30,000 workloads on a busy 2-CPU VM), all of it holding
the GIL: done on the event loop, it would stall every decision for that long. :func:`encode_in_background`
instead forks, and the child encodes the state as it was at the fork (copy-on-write pages, as Redis snapshots
its data set), while the scheduler goes on deciding. The Kafka service's snapshots and the embedded log's
checkpoints both go through it.
"""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import traceback
import warnings
from collections.abc import Callable

from events.errors import KueueEsError
from projections import snapshot
from projections.cluster import ClusterState


class EncoderFailed(KueueEsError):
    """The child that encoded a state did not finish (its traceback went to stderr)."""


def encode_in_background(state: ClusterState, finish: Callable[[bytes], bytes]) -> asyncio.Task[bytes]:
    """``finish(projections.snapshot.encode(state))`` of ``state`` as it is at this call, computed by a forked
    child process while the caller's event loop goes on (the caller may change ``state`` at once). ``finish``
    runs in the child too (compressing, framing). Where there is no ``fork``, the state is encoded right away,
    on the caller's thread. Raises :class:`OSError` when the fork fails."""
    if not hasattr(os, "fork"):  # pragma: no cover - every supported platform has fork
        raw = snapshot.encode(state)
        return asyncio.ensure_future(asyncio.to_thread(finish, raw))
    r, w = os.pipe()
    try:
        with warnings.catch_warnings():
            # Python 3.12+ warns that a fork of a process with threads (asyncio's executor) may deadlock in the
            # child. This child takes no lock another thread could hold: it encodes, writes a pipe and _exits.
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        raise
    if pid == 0:  # pragma: no cover - the child (coverage is not collected there)
        code = 1
        try:
            signal.set_wakeup_fd(-1)  # a signal to the child must not wake the parent's event loop
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, signal.SIG_DFL)
            gc.disable()  # a collection would only copy pages the child never writes
            os.close(r)
            view = memoryview(finish(snapshot.encode(state)))
            while view:
                view = view[os.write(w, view):]
            code = 0
        except BaseException:  # noqa: BLE001 - reported on stderr; the parent sees the exit code
            os.write(2, traceback.format_exc().encode(errors="replace"))  # not sys.stderr: its lock may be held
        finally:
            os._exit(code)  # nothing of the parent's (atexit, buffers, sockets) runs in the child
    os.close(w)
    # The reading thread runs to the end even if the task is cancelled, so the child is always reaped.
    return asyncio.ensure_future(asyncio.to_thread(_collect, r, pid))


def _collect(fd: int, pid: int) -> bytes:
    with open(fd, "rb") as f:
        data = f.read()
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise EncoderFailed(f"the snapshot encoder (pid {pid}) exited with {code}")
    return data
