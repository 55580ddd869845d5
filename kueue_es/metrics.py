"""Kueue's Prometheus metrics over HTTP, and as text: exposition of :mod:`projections.metrics`.

The metrics are the projection's (counters and histograms folded from the log, gauges computed from the state):
a custom collector turns them into Prometheus families at each scrape, adding the ``replica_role`` label Kueue
puts on every metric — ``leader`` for the replica that decides (the Kafka replica active for a shard, the
Lease holder of ``--kube``), ``follower`` for a standby, ``standalone`` without leader election (the embedded
log, ``kueue-es metrics``). A standby holds no state: it exposes only the process metrics.

``/metrics`` is served by aiohttp on the event loop that folds the log, so a scrape always sees the state
between two records, never in the middle of one.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterator, Sequence

from aiohttp import web
from prometheus_client import GCCollector, PlatformCollector, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import choose_encoder, generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

from projections.cluster import ClusterState
from projections.metrics import Family, families, merged

LEADER, FOLLOWER, STANDALONE = "leader", "follower", "standalone"

States = Callable[[], Sequence[ClusterState]]
Role = Callable[[], str]


class LogMetrics(Collector):
    """The metrics of the states ``states()`` returns (summed when there are several: the shards a Kafka replica
    is active for), labelled with ``role()``."""

    def __init__(self, states: States, role: Role) -> None:
        self.states = states
        self.role = role

    def describe(self) -> list[Metric]:
        return []  # nothing to check at registration; the families depend on the state

    def collect(self) -> Iterator[Metric]:
        states = list(self.states())
        if not states:
            return
        role = self.role()
        for family in merged([families(s) for s in states]):
            yield _family(family, role)


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


def registry(states: States, role: Role, *, process: bool = True) -> CollectorRegistry:
    """The metrics of ``states``, and (``process``) this process's CPU, memory, file descriptors and garbage
    collections — the counterpart of the process metrics every Kueue replica serves."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(LogMetrics(states, role))
    if process:
        ProcessCollector(registry=reg)
        PlatformCollector(registry=reg)
        GCCollector(registry=reg)
    return reg


def text(states: Sequence[ClusterState], role: str = STANDALONE) -> str:
    """The Prometheus text exposition of ``states``' metrics alone (what ``kueue-es metrics`` prints)."""
    return generate_latest(registry(lambda: states, lambda: role, process=False)).decode()


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
