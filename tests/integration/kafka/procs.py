"""Scheduler replicas as real processes (``python -m kueue_es run --log kafka://...``), killable with SIGKILL.

Each replica's JSON-lines reports (stdout) are collected with the wall time they were read.
"""

from __future__ import annotations

import asyncio
import ctypes
import json
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[3]


@dataclass
class Replica:
    name: str
    proc: asyncio.subprocess.Process
    reports: list[dict[str, Any]] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def events(self, kind: str) -> list[dict[str, Any]]:
        return [r for r in self.reports if r.get("event") == kind]

    async def wait_for(self, kind: str, count: int = 1, timeout: float = 60) -> dict[str, Any]:
        async with asyncio.timeout(timeout):
            while len(self.events(kind)) < count:
                if self.proc.returncode is not None:
                    raise AssertionError(f"{self.name} exited with {self.proc.returncode} before {kind!r}:\n"
                                         + "".join(self.stderr[-40:]))
                self.changed.clear()
                await self.changed.wait()
        return self.events(kind)[count - 1]

    def kill(self) -> float:
        """SIGKILL; returns the wall time (ms) of the kill."""
        t = time.time() * 1000
        self.proc.send_signal(signal.SIGKILL)
        return t

    async def wait(self, timeout: float = 60) -> int:
        async with asyncio.timeout(timeout):
            rc = await self.proc.wait()
            for t in self._tasks:
                await t
            return rc

    async def terminate(self, timeout: float = 30) -> int:
        """SIGTERM and wait; SIGKILL (and fail) if it does not exit in time."""
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return await self.wait(timeout)
        except TimeoutError:
            self.kill()
            await self.wait()
            raise AssertionError(f"{self.name} did not stop within {timeout}s of SIGTERM:\n"
                                 + "".join(self.stderr[-40:])) from None


def _die_with_parent() -> None:
    """In the child: SIGKILL when the test process dies, however it dies (Linux prctl PR_SET_PDEATHSIG)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
    except OSError:  # pragma: no cover - not Linux
        pass


async def start_replica(name: str, url: str, env: dict[str, str] | None = None,
                        crash: tuple[str, int] | None = None) -> Replica:
    """``crash=(point, n)``: the process SIGKILLs itself at ``point`` of its ``n``-th decision transaction
    (see ``crashing_run.py``)."""
    full_env = {**os.environ, "KUEUE_ES_SCHEDULER_TICKS": "false", "PYTHONUNBUFFERED": "1", **(env or {})}
    entry = ["-m", "kueue_es"]
    if crash is not None:
        entry = [str(Path(__file__).with_name("crashing_run.py"))]
        # The crash points are counted by the offsets call: with it in every decision transaction.
        full_env |= {"CRASH_POINT": crash[0], "CRASH_AT_TXN": str(crash[1]),
                     "KUEUE_ES_SCHEDULER_OFFSETS_COMMIT_INTERVAL_MS": "0"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, *entry, "run", "--log", url, "--instance-id", name,
        cwd=REPO, env=full_env, stdin=asyncio.subprocess.DEVNULL, preexec_fn=_die_with_parent,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    r = Replica(name, proc)

    async def pump_out() -> None:
        assert proc.stdout is not None
        async for line in proc.stdout:
            try:
                rep = json.loads(line)
            except ValueError:
                r.stderr.append(line.decode(errors="replace"))
                continue
            rep["readAtMs"] = time.time() * 1000
            r.reports.append(rep)
            r.changed.set()
        r.changed.set()

    async def pump_err() -> None:
        assert proc.stderr is not None
        async for line in proc.stderr:
            r.stderr.append(line.decode(errors="replace"))
            del r.stderr[:-400]
        r.changed.set()

    r._tasks = [asyncio.create_task(pump_out()), asyncio.create_task(pump_err())]
    return r


async def stop_all(replicas: list[Replica]) -> None:
    """Stop every replica still running (SIGCONT first, in case one is paused); all of them, even when one
    fails to stop, which is then reported."""
    errors = []
    for r in replicas:
        if r.proc.returncode is None:
            r.proc.send_signal(signal.SIGCONT)
            try:
                await r.terminate()
            except AssertionError as exc:
                errors.append(exc)
    if errors:
        raise errors[0]
