"""Kueue's Prometheus metrics over HTTP, and as text: exposition of :mod:`projections.metrics`.

The metrics are the projection's (counters and histograms folded from the log, gauges computed from the state):
a custom collector turns them into Prometheus families at each scrape, adding the ``replica_role`` label Kueue
puts on every metric — ``leader`` for the replica that decides (the Kafka replica active for a shard, the
Lease holder of ``--kube``), ``follower`` for a standby, ``standalone`` without leader election (the embedded
log, ``kueue-es metrics``). A standby holds no state: it exposes only the process metrics.

``/metrics`` is served by aiohttp on the event loop that folds the log, so a scrape always sees the state
between two records, never in the middle of one.

One metric is not the log's: ``kueue_admission_attempt_duration_seconds``, the wall time of each scheduling
attempt (:class:`AttemptDurations`), is a live timing of this process. It is kept in memory, outside the state,
its digest and its snapshots, and starts from zero whenever the process starts, as Kueue's does.
"""

from __future__ import annotations

import contextlib
import platform as py_platform
import sys
from bisect import bisect_left
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from itertools import accumulate

from aiohttp import web
from prometheus_client import GCCollector, PlatformCollector, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import choose_encoder, generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

from kueue_es.scheduler import afs
from projections.cluster import ClusterState
from projections.metrics import DEFAULT_BUCKETS, Family, Spec, batch_result, families, merged

LEADER, FOLLOWER, STANDALONE = "leader", "follower", "standalone"

States = Callable[[], Sequence[ClusterState | list[Family]]]
"""The states a scrape reads; in place of one that cannot be read now, the families a scrape read of it before."""
Role = Callable[[], str]


ATTEMPT_DURATION = Spec(
    "kueue_admission_attempt_duration_seconds", "histogram",
    "Wall time of a scheduling attempt (one run of the scheduler that tried to admit workloads), by the result "
    "admission_attempts_total counts the same attempt under: 'success' when at least one workload got quota, "
    "'inadmissible' otherwise. Measured live by the replica that decides; starts from zero when it starts.",
    ("result",), DEFAULT_BUCKETS)
"""Kueue sets no buckets on it: the Prometheus client's defaults."""


class AttemptDurations:
    """``kueue_admission_attempt_duration_seconds`` of this process: one observation per scheduling attempt."""

    def __init__(self) -> None:
        self.series: dict[str, tuple[list[int], float]] = {}
        """Result -> (observations per bucket, then past the largest; their sum in seconds)."""

    def observe(self, batch: Sequence[object], seconds: float) -> None:
        """``batch`` was decided in ``seconds``: an attempt when ``admission_attempts_total`` will count it (by
        :func:`projections.metrics.batch_result`, under the same result); anything else is not one."""
        result = batch_result(list(batch))
        if not result:
            return
        counts, total = self.series.get(result) or ([0] * (len(ATTEMPT_DURATION.buckets) + 1), 0.0)
        counts[bisect_left(ATTEMPT_DURATION.buckets, seconds)] += 1
        self.series[result] = (counts, total + seconds)

    def family(self) -> Family:
        samples = []
        for result in sorted(self.series):
            counts, total = self.series[result]
            samples.append(((result,), list(accumulate(counts)), total))
        return Family(ATTEMPT_DURATION, samples)


ATTEMPTS = AttemptDurations()
"""This process's attempts (process-wide, as Kueue's metric is)."""

BUILD_INFO = Spec(
    "kueue_build_info", "gauge",
    "kueue-es build information: 1, labelled with its version (git_version; git_commit and build_date are not "
    "known to a Python package and stay empty), the Python that runs it (go_version, compiler) and the platform.",
    ("git_version", "git_commit", "build_date", "go_version", "compiler", "platform"))


class BuildInfo(Collector):
    """Kueue's ``kueue_build_info`` for this process: what runs, not what the log holds (no ``replica_role``, as
    Kueue's has none)."""

    def __init__(self) -> None:
        self.labels = (_version(), "", "", f"python{py_platform.python_version()}",
                       py_platform.python_implementation().lower(), f"{sys.platform}/{py_platform.machine()}")

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        m = GaugeMetricFamily(BUILD_INFO.name, BUILD_INFO.help, labels=list(BUILD_INFO.labels))
        m.add_metric(list(self.labels), 1.0)
        yield m


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # only a serving process asks

    try:
        return version("kueue-es")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree without metadata
        return "unknown"


class LogMetrics(Collector):
    """The metrics of the states ``states()`` returns (summed when there are several: the shards a Kafka replica
    is active for), labelled with ``role()``; with ``attempts``, the durations of this process's attempts."""

    def __init__(self, states: States, role: Role, attempts: AttemptDurations | None = None) -> None:
        self.states = states
        self.role = role
        self.attempts = attempts

    def describe(self) -> list[Metric]:
        return []  # nothing to check at registration; the families depend on the state

    def collect(self) -> Iterator[Metric]:
        states = list(self.states())
        if not states:
            return
        role = self.role()
        for family in merged([s if isinstance(s, list) else families_of(s) for s in states]):
            yield _family(family, role)
        if self.attempts is not None:
            yield _family(self.attempts.family(), role)


def families_of(state: ClusterState) -> list[Family]:
    """Every metric of ``state``, as a scrape reads it."""
    return families(state, afs.usage_samples)


def _family(f: Family, role: str) -> Metric:
    spec = f.spec
    labels = [*spec.labels, "replica_role"]
    if spec.kind == "histogram":
        h = HistogramMetricFamily(spec.name, spec.help, labels=labels)
        bounds = [_go_float(b) for b in spec.buckets] + ["+Inf"]
        for values, counts, total in f.samples:
            h.add_metric([*values, role], list(zip(bounds, counts, strict=True)), total)
        return h
    m = (CounterMetricFamily if spec.kind == "counter" else GaugeMetricFamily)(spec.name, spec.help, labels=labels)
    for values, value in f.samples:
        m.add_metric([*values, role], value)
    return m


def _go_float(x: float) -> str:
    """Bucket bounds written as Kueue's Go client writes them (``1``, ``2.5``, ``10240``)."""
    return repr(x).removesuffix(".0")


def registry(states: States, role: Role, *, process: bool = True,
             attempts: AttemptDurations | None = ATTEMPTS) -> CollectorRegistry:
    """The metrics of ``states`` and of this process's scheduling ``attempts``, and (``process``) this process's
    build information, CPU, memory, file descriptors and garbage collections — the counterpart of the build and
    process metrics every Kueue replica serves."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(LogMetrics(states, role, attempts))
    if process:
        reg.register(BuildInfo())
        ProcessCollector(registry=reg)
        PlatformCollector(registry=reg)
        GCCollector(registry=reg)
    return reg


def text(states: Sequence[ClusterState], role: str = STANDALONE) -> str:
    """The Prometheus text exposition of ``states``' metrics alone (what ``kueue-es metrics`` prints: the log's,
    without the live attempt durations of a process that decided nothing)."""
    return generate_latest(registry(lambda: states, lambda: role, process=False, attempts=None)).decode()


async def start_server(reg: CollectorRegistry, address: str, port: int) -> web.AppRunner:
    """Serve ``reg`` on ``http://address:port/metrics`` (the text format, or OpenMetrics when asked for)."""

    async def metrics(request: web.Request) -> web.Response:
        encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        return web.Response(body=encoder(reg), headers={"Content-Type": content_type})

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, address, port).start()
    return runner


@contextlib.asynccontextmanager
async def serving(address: str, port: int, states: States, role: Role) -> AsyncIterator[None]:
    """``/metrics`` for the duration of the block; nothing when ``port`` is 0."""
    runner = await start_server(registry(states, role), address, port) if port else None
    try:
        yield
    finally:
        if runner is not None:
            await runner.cleanup()
