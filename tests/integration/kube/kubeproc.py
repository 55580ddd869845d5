"""``kueue-es run --kube`` as a child process of a test: its structured reports (stdout) and logs (stderr)
collected, its health server probed and its metrics scraped, killed (SIGKILL) when the block ends unless it
already exited."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from kubehelp import eventually, free_port, kueue_config_file

REPO = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent


@dataclass
class Proc:
    name: str
    proc: asyncio.subprocess.Process
    port: int
    metrics_port: int
    reports: list[dict[str, Any]] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def reported(self, kind: str) -> bool:
        return any(r.get("event") == kind for r in self.reports)

    async def get(self, path: str) -> tuple[int, dict[str, Any]]:
        async with aiohttp.ClientSession() as s, s.get(f"http://127.0.0.1:{self.port}{path}") as r:
            return r.status, await r.json()

    async def metrics(self) -> str:
        """``/metrics`` (the Prometheus text format)."""
        async with aiohttp.ClientSession() as s, s.get(f"http://127.0.0.1:{self.metrics_port}/metrics") as r:
            assert r.status == 200
            return await r.text()


async def _pump(stream: asyncio.StreamReader, into: list, parse: bool) -> None:
    while line := await stream.readline():
        text = line.decode(errors="replace").rstrip()
        if parse:
            with contextlib.suppress(ValueError):
                into.append(json.loads(text))
        else:
            into.append(text)


@contextlib.asynccontextmanager
async def run(cluster, name: str, log_dir: Path, lease_ns: str, *, script: str | None = None,
              extra_env: dict[str, str] | None = None) -> AsyncIterator[Proc]:
    """``kueue-es run --kube`` over ``log_dir`` (its Lease in ``lease_ns``, short election timings); ``script``: a
    file in this directory run instead of ``-m kueue_es`` (e.g. ``crashing_kube_run.py``). The renew deadline
    leaves room for an apiserver slowed by a loaded machine: a leader that misses it exits, and a test then sees
    its servers vanish. When the block fails, the process's last log lines go to stderr, for pytest to show."""
    port, metrics_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUEUE_ES_")}
    env.update({"KUEUE_ES_KUBE_LEASE_NAMESPACE": lease_ns, "KUEUE_ES_KUBE_LEASE_DURATION_S": "6",
                "KUEUE_ES_KUBE_RENEW_DEADLINE_S": "4", "KUEUE_ES_KUBE_RETRY_PERIOD_S": "0.5",
                "KUEUE_ES_KUBE_WATCH_TIMEOUT_S": "30",
                "KUEUE_ES_SCHEDULER_KUEUE_CONFIG": str(kueue_config_file()), **(extra_env or {})})
    entry = [str(HERE / script)] if script else ["-m", "kueue_es"]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, *entry, "run", "--kube", "--kubeconfig", cluster.kubeconfig, "--log", str(log_dir),
        "--health-port", str(port), "--metrics-port", str(metrics_port), "--instance-id", name, cwd=REPO, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    p = Proc(name, proc, port, metrics_port)
    assert proc.stdout is not None and proc.stderr is not None
    p.tasks = [asyncio.create_task(_pump(proc.stdout, p.reports, True)),
               asyncio.create_task(_pump(proc.stderr, p.logs, False))]
    try:
        yield p
    except BaseException:
        sys.stderr.write(f"--- {name}: exit code {proc.returncode}, last log lines ---\n" + "\n".join(p.logs[-40:]) + "\n")
        raise
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
        for t in p.tasks:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(t, 5)


async def ready(p: Proc, role: str) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        with contextlib.suppress(aiohttp.ClientError):
            status, body = await p.get("/readyz")
            if status == 200 and body.get("role") == role:
                return body
        assert p.proc.returncode is None, f"{p.name} exited: " + "\n".join(p.logs[-20:])
        return None

    return await eventually(probe, timeout=60, what=f"{p.name} ready as {role}")


