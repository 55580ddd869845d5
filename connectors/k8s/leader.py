"""Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it.

One replica holds the Lease (``holderIdentity``) and renews it (``renewTime``) every ``retry_period_s``. Others
try as often; they take it over only once it has not changed for ``lease_duration_s`` as *they* observed it
(their own monotonic clock, so clock skew between nodes does not matter). Every write is conditioned on the
Lease's resourceVersion, so two candidates can never both win. The leader that cannot renew within
``renew_deadline_s`` loses leadership: :meth:`LeaderElector.hold` raises :class:`LeadershipLost`, and the
process stops acting (and exits, so its pod restarts as a candidate). On a graceful shutdown the leader
releases the Lease (empty holder, 1 s duration) so a standby takes over at once.

The leader also names the log it works over in the Lease (annotation :data:`LOG_ANNOTATION`), so the next leader
knows whether its own log is still the history of the cluster's leadership (``kueue_es/kube_service.py``).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import msgspec
import structlog

from connectors.k8s.client import KubeClient
from connectors.k8s.errors import AlreadyExists, Conflict, KubeError, NotFound
from connectors.k8s.resources import LEASES
from connectors.k8s.settings import lease_seconds
from events.errors import KueueEsError

log = structlog.get_logger("kueue_es.k8s.leader")

LOG_ANNOTATION = "kueue-es/leader-log"
"""The Lease annotation naming the log the leader works over, as ``ID@TRANSITIONS``: the log's identity and the
``leaseTransitions`` of the leadership that wrote it (kueue-es's own key; the Lease's fields stay as Kubernetes
has them). A Lease that changed hands since (``leaseTransitions`` moved on) names no log any more: a replica that
names none (an earlier version, in a rolling upgrade or a rollback) may have led in between."""


class LeadershipLost(KueueEsError):
    """The Lease could not be renewed in time, or another replica holds it now (exit code 1: restart)."""


@dataclass(frozen=True)
class LeaseTiming:
    lease_duration_s: float = 15.0
    renew_deadline_s: float = 10.0
    retry_period_s: float = 2.0


def _log_named(metadata: dict[str, Any], transitions: int) -> str:
    """The log a Lease read with ``metadata`` and ``leaseTransitions`` ``transitions`` names: "" if none, or if it
    was named by a leadership before the last transition."""
    named = str((metadata.get("annotations") or {}).get(LOG_ANNOTATION) or "")
    ident, _, at = named.rpartition("@")
    return ident if ident and at == str(transitions) else ""


def _micro_time(dt: datetime) -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(self, client: KubeClient, namespace: str, name: str, identity: str,
                 timing: LeaseTiming = LeaseTiming()) -> None:
        self.client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.timing = timing
        self.is_leader = False
        self.log = ""
        """The identity of the log this replica leads over: once set, every write that wins or renews the Lease
        names it (:data:`LOG_ANNOTATION`)."""
        self.led_by: str | None = None
        """Once this replica has won the Lease: the log the Lease named just before (``""``: none, a new Lease)."""
        self._observed: tuple[str, str] | None = None
        self._observed_at = 0.0
        self._last_renew = 0.0  # when the last successful write was *sent*: its answer may come late
        self._last_try = 0.0  # when the last attempt was sent

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    async def _sleep(self, seconds: float) -> None:
        """Wait on the loop's clock (tests drive both this and :meth:`_now` from a fake clock)."""
        await asyncio.sleep(seconds)

    def valid(self) -> bool:
        """True while this replica may act as the leader: it holds the Lease and sent its last successful renewal
        less than ``renew_deadline_s`` ago (a standby takes over no sooner than ``lease_duration_s`` after it saw
        that renewal, so the two never act at once)."""
        return self.is_leader and self._now() - self._last_renew < self.timing.renew_deadline_s

    def fence(self, method: str, path: str) -> None:
        """A client's fence (:attr:`KubeClient.fence`): a write is sent only while :meth:`valid`, so one woken after
        the loop was busy or blocked past the renew deadline (a long fold, a long decision pass, a paused process)
        never reaches an apiserver after a standby may have taken over, whatever order the tasks then run in."""
        if not self.valid():
            raise LeadershipLost(f"not writing ({method} {path}): the lease {self.namespace}/{self.name} is not held")

    async def try_acquire_or_renew(self) -> bool:
        """One attempt; True if this replica holds the Lease afterwards. A conflicting write while leading means
        another wrote the Lease: it is read again at once (renewed if still ours, else lost), not left to the
        next attempt ``retry_period_s`` later."""
        for _ in range(2):
            won = await self._attempt()
            if won is not None:
                return won
        return False

    async def _attempt(self) -> bool | None:
        """One read and write of the Lease; None: a leader's write conflicted (read it again)."""
        sent = self._last_try = self._now()
        now = datetime.now(UTC)
        spec_new: dict[str, Any] = {"holderIdentity": self.identity,
                                    "leaseDurationSeconds": lease_seconds(self.timing.lease_duration_s),
                                    "renewTime": _micro_time(now)}
        try:
            lease = msgspec.json.decode(await self.client.get(LEASES, self.name, self.namespace))
        except NotFound:
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": self._named({"name": self.name, "namespace": self.namespace}, self.log, 0),
                    "spec": {**spec_new, "acquireTime": _micro_time(now), "leaseTransitions": 0}}
            try:
                await self.client.create(LEASES, body, self.namespace)
            except AlreadyExists:
                return False
            return self._won(sent, previous_log="")  # a new Lease: who led before is unknown
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        record = (holder, spec.get("renewTime") or "")
        if record != self._observed:
            self._observed, self._observed_at = record, self._now()
        if self.is_leader and holder != self.identity:
            # another replica took it (and maybe released it since): taking it back would hide that it led
            log.warning("the lease is no longer ours", lease=f"{self.namespace}/{self.name}", holder=holder)
            self.is_leader = False
            return False
        duration = float(spec.get("leaseDurationSeconds") or self.timing.lease_duration_s)
        if holder and holder != self.identity and self._observed_at + duration > self._now():
            return False
        transitions = int(spec.get("leaseTransitions") or 0)
        if holder == self.identity:
            spec_new["acquireTime"] = spec.get("acquireTime") or _micro_time(now)
            spec_new["leaseTransitions"] = transitions
        else:
            spec_new["acquireTime"] = _micro_time(now)
            spec_new["leaseTransitions"] = transitions + 1
        metadata = lease.get("metadata") or {}
        previous_log = _log_named(metadata, transitions)
        # a winner whose log is not open yet carries the named one forward: it acts on nothing before it names its
        # own, so if it stops before that, the log named last is still the cluster's history
        body = {**lease, "metadata": self._named(metadata, self.log or previous_log, spec_new["leaseTransitions"]),
                "spec": {**spec, **spec_new}}
        try:
            await self.client.replace(LEASES, self.name, body, self.namespace)
        except Conflict:
            return None if self.is_leader else False
        return self._won(sent, previous_log)

    @staticmethod
    def _named(metadata: dict[str, Any], log_id: str, transitions: int) -> dict[str, Any]:
        """``metadata`` naming the log ``log_id``, when there is one, as of the leadership ``transitions``."""
        if not log_id:
            return metadata
        named = f"{log_id}@{transitions}"
        return {**metadata, "annotations": {**(metadata.get("annotations") or {}), LOG_ANNOTATION: named}}

    def _won(self, sent: float, previous_log: str) -> bool:
        if not self.is_leader:
            log.info("became leader", lease=f"{self.namespace}/{self.name}", identity=self.identity,
                     previous_log=previous_log)
            self.led_by = previous_log
        self.is_leader = True
        self._last_renew = sent
        return True

    async def acquire(self) -> None:
        """Return once this replica holds the Lease (retrying every ``retry_period_s``)."""
        while True:
            try:
                if await self.try_acquire_or_renew():
                    return
            except KubeError as exc:
                log.warning("leader election attempt failed", error=str(exc))
            await self._sleep(self.timing.retry_period_s)

    async def renew(self) -> None:
        """Renew now (after the log is open, before anything acts on it), retrying every ``retry_period_s``;
        :class:`LeadershipLost` once the Lease is another's. Nothing acts until this returns, so an attempt is not
        cut at the renew deadline, which a fold longer than it has passed already (a write conditioned on the
        Lease's resourceVersion that succeeds shows that no other replica took it meanwhile)."""
        while not await self._renew_once(acting=False):
            await self._sleep(self.timing.retry_period_s)

    async def hold(self, *, acting: bool = True) -> None:
        """Renew until leadership is lost (raises :class:`LeadershipLost`); runs until cancelled otherwise. The
        first look comes at once when the last attempt is already ``retry_period_s`` old (the loop was busy or
        blocked since), not a whole period later.

        ``acting=False``: while the leader only folds its log, before anything acts (the renewal that names the log
        comes after, :meth:`renew`). Each attempt is as patient as :meth:`renew`'s, and only a Lease another holds
        ends it: renewed all along, the Lease is not taken over by a standby during a fold longer than it lasts."""
        while True:
            await self._sleep(max(0.0, self.timing.retry_period_s - (self._now() - self._last_try)))
            await self._renew_once(acting)

    async def _renew_once(self, acting: bool = True) -> bool:
        # while the leader acts, an attempt never outlives the renew deadline, so a leader that cannot renew stops
        # acting before the lease can expire for the others (renew_deadline_s < lease_duration_s)
        left = self.timing.renew_deadline_s - (self._now() - self._last_renew)
        limit = max(0.05, left) if acting else max(left, self.timing.lease_duration_s)
        try:  # asyncio.timeout: wait_for (3.11) can swallow the cancellation that stops this loop
            async with asyncio.timeout(limit):
                ok = await self.try_acquire_or_renew()
        except (KubeError, TimeoutError) as exc:
            log.warning("lease renewal failed", error=str(exc) or type(exc).__name__)
            ok = False
        overdue = acting and self._now() - self._last_renew >= self.timing.renew_deadline_s
        if not ok and (not self.is_leader or overdue):
            self.is_leader = False
            raise LeadershipLost(f"lost the lease {self.namespace}/{self.name}")
        return ok

    async def release(self) -> None:
        """Give the Lease up (graceful shutdown), so another replica need not wait for it to expire."""
        if not self.is_leader:
            return
        self.is_leader = False
        try:
            lease = msgspec.json.decode(await self.client.get(LEASES, self.name, self.namespace))
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != self.identity:
                return
            spec.update({"holderIdentity": "", "leaseDurationSeconds": 1,
                         "renewTime": _micro_time(datetime.now(UTC))})
            await self.client.replace(LEASES, self.name, {**lease, "spec": spec}, self.namespace)
            log.info("released the lease", lease=f"{self.namespace}/{self.name}")
        except KubeError as exc:
            log.warning("could not release the lease", error=str(exc))
