"""``kueue-es run --kube``: the scheduler and the Kubernetes connector in one process, over the embedded log.

1. connect to the apiserver (kubeconfig, or the pod's service account), start ``/healthz`` and ``/readyz``;
2. with leader election (the default), wait as a standby until this replica holds the Lease;
3. open the log and fold it into the connector's mirror, renewing the Lease meanwhile (the fold hands the loop over
   every :data:`FOLD_PACE_EVENTS` events). The embedded log (a directory in ``--log``): this process
   is its single writer; the fold starts from the newest checkpoint that holds the mirror (one this mode wrote),
   else from the beginning. Under leader election the log is folded only if it is the one the Lease names (the
   log of the replica that led last): another log is moved aside and a fresh one started (:class:`_EmbeddedLog`).
   Then the Lease is renewed, naming the log, before anything acts on it (the first acts: the CRDs and the
   webhooks' registration, :func:`_set_up`). Kafka (``--log kafka://HOST:PORT/TOPIC[?shard=N]``): the scheduler service writes
   the same partition, so the mirror follows it from the beginning;
4. run, as one task group: the connector (watch → log; status writer and Job integration once every kind is
   listed), the scheduler (once every kind is listed: the loop over the same state, or with Kafka a replica of
   the scheduler service, which may be active for the shard or stand by), and the Lease renewal. Losing the Lease stops everything
   with exit code 1 (the pod restarts as a standby); SIGTERM stops gracefully and releases the Lease.

Logs are JSON lines (structlog) on stderr; progress reports stay JSON lines on stdout like the other modes.
``/healthz`` is 200 while the process runs; ``/readyz`` is 200 for a standby and, for the leader, once the
connector has listed every kind (503 before). With ``webhook_port`` every replica also serves the batch/v1 Job
and Pod mutating webhooks (the Pod one as the Kueue Configuration's ``integrations.frameworks`` says), the
validating webhooks for the Kueue kinds (under the Kueue Configuration's gates) and the CRD
conversion webhook over HTTPS (``connectors/k8s/webhook.py``), which the leader registers (``webhook_register``) once
it may act, after installing the CRDs (``install_crds``; standbys write neither); with
``visibility_port``, Kueue's visibility API for the aggregation layer (``connectors/k8s/visibility.py``), answered
by the leader once synced (503 before, and on standbys), which registers its APIServices when told to — unless the
Kueue Configuration turns ``VisibilityOnDemand`` off, which Kueue starts no visibility server under. With
``$.metrics.port`` every replica serves Kueue's Prometheus metrics on ``/metrics``: the leader's from its state, a
standby's (it holds none) only its process metrics.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import zlib
from typing import Any

import structlog
from aiohttp import web

from connectors.k8s import crds, mirror_snapshot
from connectors.k8s import visibility as visibility_api
from connectors.k8s import webhook as job_webhook
from connectors.k8s.client import KubeClient
from connectors.k8s.connector import Connector, schedule
from connectors.k8s.journal import FollowingJournal, Journal, LocalJournal
from connectors.k8s.leader import LeaderElector, LeaseTiming
from connectors.k8s.mirror import Mirror
from connectors.k8s.pod_webhook import PodDefaulting
from connectors.k8s.settings import KubeSettings
from connectors.k8s.settings import validate as validate_kube
from connectors.kafka import snapshots
from connectors.kafka.log import KafkaLog
from connectors.kafka.scheduler_service import SchedulerReplica
from connectors.kafka.settings import parse_url
from connectors.kafka.topics import prepare_topics
from events.errors import InvalidInput, KueueEsError
from events.filelog import FileLog
from kueue_es import checkpoints, log_lineage, metrics
from projections.cluster import ClusterState
from projections.gates import VISIBILITY_ON_DEMAND

log = structlog.get_logger("kueue_es.k8s.service")


def configure_logging(level: int = logging.INFO) -> None:
    """structlog → JSON lines on stderr (timestamp, level, logger, event, fields)."""
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=False,
    )


class Health:
    """What /healthz and /readyz report."""

    def __init__(self) -> None:
        self.role = "starting"
        self.connector: Connector | None = None

    def ready(self) -> tuple[bool, dict[str, Any]]:
        if self.role == "standby":
            return True, {"role": "standby"}
        if self.role == "leader" and self.connector is not None and self.connector.ready:
            return True, {"role": "leader", "offset": self.connector.journal.mirror.offset}
        pending = []
        if self.connector is not None:
            pending = sorted(k for k, e in self.connector.watcher.synced.items() if not e.is_set())
        return False, {"role": self.role, "unsynced": pending}


async def start_health_server(health: Health, address: str, port: int) -> web.AppRunner:
    async def healthz(_: web.Request) -> web.Response:
        return web.json_response({"status": "ok", "role": health.role})

    async def readyz(_: web.Request) -> web.Response:
        ok, body = health.ready()
        return web.json_response({"status": "ok" if ok else "not ready", **body}, status=200 if ok else 503)

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, address, port).start()
    return runner


class _Stopped(Exception):
    pass


async def serve(settings: Any, opts: Any, stop: asyncio.Event, report: Any) -> None:
    """Run until ``stop`` is set; ``settings`` is :class:`kueue_es.config.Settings` (``settings.kube``)."""
    k: KubeSettings = validate_kube(settings.kube)
    configure_logging()
    from kueue_es.config import DEFAULT_EMBEDDED_LOG

    path = settings.log or DEFAULT_EMBEDDED_LOG
    client = await KubeClient.connect(k.kubeconfig, k.context)
    health = Health()
    runner = await start_health_server(health, k.health_address, k.health_port) if k.health_port else None
    m = settings.metrics
    metrics_runner = await metrics.start_server(
        metrics.registry(lambda: [health.connector.journal.mirror.state] if health.connector is not None else [],
                         lambda: _replica_role(health, k)),
        m.address, m.port) if m.port else None
    elector: LeaderElector | None = None
    webhook: job_webhook.WebhookServer | None = None
    visibility: visibility_api.VisibilityServer | None = None
    try:
        if k.webhook_port:  # every replica serves it, standbys too; the leader registers it (_set_up)
            webhook = await job_webhook.serve(client, k, feature_gates=opts.config.feature_gates,
                                              pods=PodDefaulting.of(opts.config), config=opts.config,
                                              register_now=False)
        if k.visibility_port:
            visibility = await _visibility_server(client, k, opts.config)
        if k.leader_election:
            elector = LeaderElector(client, k.lease_namespace, k.lease_name, opts.instance_id,
                                    LeaseTiming(k.lease_duration_s, k.renew_deadline_s, k.retry_period_s))
            health.role = "standby"
            report("standby", {"instance": opts.instance_id, "lease": f"{k.lease_namespace}/{k.lease_name}"})
            if not await _until_stopped(elector.acquire(), stop):
                report("stopped", {"instance": opts.instance_id, "role": "standby"})
                return
        health.role = "leader"
        await _lead(settings, opts, path, client, health, elector, stop, report, visibility, webhook=webhook)
    finally:
        if elector is not None:
            with contextlib.suppress(Exception):
                await elector.release()
        if webhook is not None:
            await webhook.stop()
        if visibility is not None:
            await visibility.stop()
        if runner is not None:
            await runner.cleanup()
        if metrics_runner is not None:
            await metrics_runner.cleanup()
        await client.close()


def first_error(group: BaseExceptionGroup) -> KueueEsError | None:
    """The first of kueue-es's own errors in ``group``, however deep: the connector and the appliers under it run
    task groups of their own, so the error that stopped the service may lie a group or two down."""
    for e in group.exceptions:
        found = first_error(e) if isinstance(e, BaseExceptionGroup) else e if isinstance(e, KueueEsError) else None
        if found is not None:
            return found
    return None


async def _visibility_server(client: KubeClient, k: KubeSettings,
                             config: Any) -> visibility_api.VisibilityServer | None:
    """The visibility API's server, started as Kueue starts its own: only under the Kueue Configuration's
    ``VisibilityOnDemand`` gate (beta, on). Off, nothing listens on ``visibility_port`` and the leader registers
    no APIServices (``visibility_register`` notwithstanding), so the apiserver answers for none of its group."""
    if not config.gate(VISIBILITY_ON_DEMAND):
        log.info("visibility API not served: the VisibilityOnDemand feature gate is off", port=k.visibility_port)
        return None
    return await visibility_api.serve(client, k, tls=config.server_tls)


def _replica_role(health: Health, k: KubeSettings) -> str:
    """Kueue's ``replica_role``: the Lease holder leads, the others follow; without leader election a replica
    stands alone."""
    if not k.leader_election:
        return metrics.STANDALONE
    return metrics.LEADER if health.role == "leader" else metrics.FOLLOWER


async def _until_stopped(work: Any, stop: asyncio.Event) -> bool:
    """Run ``work`` unless ``stop`` comes first; True if ``work`` finished."""
    task = asyncio.ensure_future(work)
    stopper = asyncio.ensure_future(stop.wait())
    done, _ = await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    for t in (task, stopper):
        if t not in done:
            t.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await t
    if task in done:
        task.result()
        return True
    return False


FOLD_PACE_EVENTS = 1000
"""A fold lets the event loop run after about this many events, so the Lease is renewed while it goes on."""


class _Pace:
    """Hands the loop over now and then during a fold (between batches, which change nothing else: the fold's
    result is the same, and nothing reads the mirror before it is done)."""

    def __init__(self) -> None:
        self.since = 0

    async def applied(self, events: int) -> None:
        self.since += events
        if self.since >= FOLD_PACE_EVENTS:
            self.since = 0
            await asyncio.sleep(0)


class _Backend:
    """The log the leader works over: its mirror (restored from a checkpoint where there is one, checkpointed as it
    folds) and the scheduler that runs beside the connector."""

    def __init__(self, opts: Any, report: Any, *, events: bool = True) -> None:
        self.opts, self.report, self.events = opts, report, events
        self.restored: int | None = None
        """The offset of the checkpoint the mirror was restored from (None: folded from the beginning)."""
        self.ckpt: checkpoints.Checkpointer | None = None

    def _mirror(self, restored: Mirror | None) -> Mirror:
        """The mirror to fold on: ``restored`` from a checkpoint, else a new one. With Kubernetes Events off
        (``kube.events: false``) its Events ledger keeps nothing once carried out (no recorder will ask)."""
        self.restored = restored.offset if restored is not None else None
        mirror = restored or Mirror()
        if not self.events:
            mirror.kube_events.window_ms = 0
        return mirror

    async def open(self) -> Journal:
        raise NotImplementedError

    def start(self, tg: asyncio.TaskGroup, journal: Any, connector: Connector, stop: asyncio.Event) -> None:
        raise NotImplementedError

    def _checkpoint(self, target: FileLog | checkpoints.Sink, mirror: Mirror) -> None:
        """Checkpoint ``mirror`` (its state and the mirror beyond it) as it folds, at the service's cadence."""
        self.ckpt = writer = checkpoints.Checkpointer.of_service(
            target, self.opts, self.report, since=mirror.offset, connector=lambda: mirror_snapshot.encode(mirror))
        mirror.listeners.append(lambda records: writer.after(mirror.state, events=len(records)))

    async def stopping(self) -> None:
        """At a graceful stop, before the task group is cancelled."""

    async def stopped(self, mirror: Mirror) -> None:
        if self.ckpt is not None:
            await self.ckpt.close(mirror.state)  # the next start folds nothing

    async def close(self) -> None:
        if self.ckpt is not None:
            await self.ckpt.close()


class _EmbeddedLog(_Backend):
    """This process is the embedded log's only writer: its mirror starts from the newest checkpoint that holds
    one, and the scheduler decides in-process on the mirror's state once the connector has listed every kind.

    ``led_by`` (under leader election): the log the Lease named when this replica won it. The log is folded only
    if it is that one. Otherwise another replica may have led since this log last did, and the fold would hold
    what this log last saw — a Workload it admitted that the other leader evicted — and write it back over what
    that leader did: a Workload's observed status is taken only when the log first sees it. Such a log (or one
    whose identity is unknown: a Lease deleted, or written before logs were named) is moved aside, never deleted,
    and a fresh log is started, which learns the cluster from its objects as a replica with an empty log does."""

    def __init__(self, path: str, opts: Any, report: Any, *, events: bool = True,
                 led_by: str | None = None) -> None:
        super().__init__(opts, report, events=events)
        self.path = path
        self.filelog = FileLog.open(path, fsync="always")
        self.identity = self._own_log(led_by)

    def _own_log(self, led_by: str | None) -> str:
        """The identity of the log to lead over, moving a stale one aside first (see the class)."""
        own = log_lineage.identity(self.filelog.directory)
        if led_by is not None and (not own or own != led_by) and self._holds_history():
            self._move_aside(own, led_by)
            own = ""
        return own or log_lineage.new_identity(self.filelog.directory)

    def _holds_history(self) -> bool:
        return self.filelog.stored_end() > 0 or bool(checkpoints.listed(self.filelog.directory))

    def _move_aside(self, own: str, led_by: str) -> None:
        """Move the log aside (writer lock held: :func:`log_lineage.move_aside`) and open a fresh one in its
        place."""
        aside = log_lineage.move_aside(self.filelog.directory, own)
        log.warning("log moved aside: another log led since this one last did; starting a fresh log",
                    log=self.path, moved_to=str(aside), identity=own, lease_named=led_by)
        self.report("log_moved_aside", {"log": self.path, "moved_to": str(aside), "identity": own,
                                        "lease_named": led_by})
        self.filelog.close_sync()
        self.filelog = FileLog.open(self.path, fsync="always")

    async def open(self) -> LocalJournal:
        start = checkpoints.restore(self.filelog, connector=mirror_snapshot.restore)
        for passed in start.passed_over:
            self.report("checkpoint_passed_over", {"log": self.path, "reason": passed})
        mirror = self._mirror(start.connector)
        pace = _Pace()
        for batch in self.filelog.scan(mirror.offset + 1):
            mirror.apply_batch(batch)
            await pace.applied(len(batch))
        self._checkpoint(self.filelog, mirror)
        return LocalJournal(self.filelog, mirror)

    def start(self, tg: asyncio.TaskGroup, journal: Any, connector: Connector, stop: asyncio.Event) -> None:
        opts = self.opts
        tg.create_task(schedule(journal, opts.config, ticks=opts.ticks,
                                record_config=lambda state: opts.config_to_record(state, opts.instance_id),
                                ready=connector.watcher.wait_synced), name="scheduler")

    async def close(self) -> None:
        await super().close()
        await self.filelog.close()


def _mirror_of(rec: snapshots.SnapshotRecord, state: ClusterState) -> Mirror:
    """The connector's mirror a snapshot holds around its state (InvalidInput: damaged)."""
    try:
        return mirror_snapshot.restore(state, zlib.decompress(rec.connector))
    except zlib.error as exc:
        raise InvalidInput(f"damaged: {exc}") from None


class _KafkaLog(_Backend):
    """One shard (partition) of the Kafka log, which the scheduler service writes too: the mirror follows it, from
    the connector's newest snapshot on the snapshot topic (:class:`connectors.kafka.snapshots.ConnectorSink`, at
    the embedded log's checkpoint cadence), and this process runs a scheduler replica
    (:mod:`connectors.kafka.scheduler_service`) once the connector has listed every kind, so its decisions are
    never made on a log the cluster has moved on from."""

    def __init__(self, settings: Any, opts: Any, report: Any) -> None:
        super().__init__(opts, report, events=settings.kube.events)
        self.kafka, self.shard = parse_url(settings.log, settings.kafka)
        self.log: KafkaLog | None = None
        self.replica: asyncio.Task[None] | None = None
        self.sink = snapshots.ConnectorSink(self.kafka, self.shard)

    async def open(self) -> FollowingJournal:
        await prepare_topics(self.kafka)
        self.log = await KafkaLog.open(self.kafka, self.shard)
        mirror = self._mirror(await self._restored())
        pace = _Pace()
        async for batch in self.log.read_batches(mirror.offset + 1):  # to the end the log has now
            mirror.apply_batch(batch)
            await pace.applied(len(batch))
        self._checkpoint(self.sink, mirror)
        return FollowingJournal(self.log, mirror)

    async def _restored(self) -> Mirror | None:
        """The mirror of the connector's newest snapshot of this very log (:func:`snapshots.restore`: one of
        another history of the topic, or that cannot be read, is passed over and named), or None."""
        found = await snapshots.restore(self.kafka, self.shard, connector=True, part=_mirror_of)
        for reason in found.passed_over:
            self.report("checkpoint_passed_over", {"log": self.sink.where, "reason": reason})
        return found.part

    def start(self, tg: asyncio.TaskGroup, journal: Any, connector: Connector, stop: asyncio.Event) -> None:
        async def replica() -> None:
            await connector.watcher.wait_synced()
            await SchedulerReplica(self.kafka, self.opts, self.report).run(stop)

        tg.create_task(journal.follow(), name="follower")
        self.replica = tg.create_task(replica(), name="scheduler")

    async def stopping(self) -> None:
        """Let the replica leave its group and close its producer (the next active one then starts at once)."""
        if self.replica is not None:
            await asyncio.wait({self.replica}, timeout=2 * self.opts.shutdown_step_s)

    async def close(self) -> None:
        await super().close()
        await self.sink.close()
        if self.log is not None:
            await self.log.close()


async def _open(backend: _Backend, elector: LeaderElector | None) -> Journal:
    """Open the log (the fold, which may last longer than the Lease) while the Lease is renewed: patiently, as
    nothing acts yet (:meth:`LeaderElector.hold` ``acting=False``), so no standby takes over a leader that is only
    folding, and a Lease another took meanwhile stops the fold (:class:`LeadershipLost`)."""
    if elector is None:
        return await backend.open()
    keeper = asyncio.create_task(elector.hold(acting=False), name="lease-during-fold")
    opening = asyncio.ensure_future(backend.open())
    try:
        await asyncio.wait({keeper, opening}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (keeper, opening):
            task.cancel()
        await asyncio.gather(keeper, opening, return_exceptions=True)
    if keeper.done() and not keeper.cancelled() and (lost := keeper.exception()) is not None:
        raise lost
    return opening.result()


async def _fence(client: KubeClient, elector: LeaderElector, backend: _Backend) -> KubeClient:
    """Once the log is open (which may take longer than the Lease lasts): renew the Lease, naming the log (the
    embedded one's identity), before anything acts on it (:class:`LeadershipLost` if it moved meanwhile), and
    return the client that writes only while it stays held."""
    if isinstance(backend, _EmbeddedLog):
        elector.log = backend.identity
    await elector.renew()
    return KubeClient(client.api, fence=elector.fence)


async def _set_up(client: KubeClient, k: KubeSettings, webhook: job_webhook.WebhookServer | None) -> None:
    """The cluster's set-up, written by the leader once it may act, before its connector lists anything: the CRDs
    (``install_crds``: converting through the webhook from the start when it is registered) and the webhooks'
    registration (``webhook_register``). Never by a standby, which may be of another version (a rolling upgrade, a
    rollback) and would rewrite them under the leader. Kueue's CRDs and webhook configurations come from its
    manifests, and every replica injects the one CA their Secret holds; a registration trusts one CA too, which
    the settings check every replica serves with (``webhook_secret`` or ``webhook_cert_dir``)."""
    registration = webhook.registration if webhook is not None else None
    if k.install_crds:
        stanza = job_webhook.conversion_stanza(k, webhook.ca_pem) if webhook is not None and registration else None
        await crds.install(client, docs=crds.all_crds(stanza))
    if registration is not None:
        await registration(client)


async def _lead(settings: Any, opts: Any, path: str, client: KubeClient, health: Health,
                elector: LeaderElector | None, stop: asyncio.Event, report: Any,
                visibility: visibility_api.VisibilityServer | None = None,
                webhook: job_webhook.WebhookServer | None = None) -> None:
    k: KubeSettings = settings.kube
    backend: _Backend = (_KafkaLog(settings, opts, report) if settings.uses_kafka  # one log: it is the history
                         else _EmbeddedLog(path, opts, report, events=k.events,
                                           led_by=elector.led_by if elector is not None else None))
    try:
        journal = await _open(backend, elector)
        mirror = journal.mirror
        if elector is not None:
            client = await _fence(client, elector, backend)
        connector = Connector(client, journal, watch_timeout_s=k.watch_timeout_s, jobs=k.jobs,
                              queue_status=k.queue_status, finalizers=k.finalizers, events=k.events,
                              instance=opts.instance_id)
        health.connector = connector
        if webhook is not None and connector.jobs is not None:  # the webhooks' walks read what the connector holds
            webhook.held_parents.attach(connector.jobs.parents, lambda: mirror.state.jobs)
        if visibility is not None:
            visibility.source = visibility_api.leader_source(mirror, opts.config, lambda: connector.ready)
            if k.visibility_register:
                await visibility_api.register(client, visibility_api.registration(k, visibility.ca_pem))
        report("active", {"log": path, "instance": opts.instance_id, "offset": mirror.offset, "mode": "kube",
                          "checkpoint": backend.restored})

        async def connect() -> None:
            await _set_up(client, k, webhook)  # the Lease renewed meanwhile (it may wait for the CRDs)
            await connector.run()

        async def until_stop() -> None:
            await stop.wait()
            await backend.stopping()
            raise _Stopped

        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(connect(), name="connector")
                backend.start(tg, journal, connector, stop)
                if elector is not None:
                    tg.create_task(elector.hold(), name="lease")
                tg.create_task(until_stop(), name="stop")
        except BaseExceptionGroup as group:
            _stopped, rest = group.split(_Stopped)
            ours = first_error(rest) if rest is not None else None
            if ours is not None:
                report("stopped", {"log": path, "instance": opts.instance_id, "error": str(ours)})
                raise ours from group
            if rest is not None:
                raise
        await backend.stopped(mirror)
        report("stopped", {"log": path, "instance": opts.instance_id, "offset": mirror.offset,
                           "writes": connector.writer.stats.writes, "jobs_started": connector.jobs.stats.started
                           if connector.jobs else 0})
    finally:
        if webhook is not None:
            webhook.held_parents.detach()
        await backend.close()
