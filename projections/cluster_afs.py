"""Admission Fair Sharing in the fold: which LocalQueues keep usage history, and the history itself.

A part of :class:`projections.cluster.ClusterState` (a mixin: the state's attributes are set by its ``__init__``,
its slots are its own). It records each LocalQueue's Admission Fair Sharing facts (:attr:`afs_history`: seeds,
settlements, additions, releases, checkpoints) as workloads reach and leave their accounting anchor, keeps the
history in line with the configuration and the ClusterQueues, and folds it into the ledger the scheduler reads
(:mod:`projections.afs_ledger`).
"""

from __future__ import annotations

from decimal import ROUND_FLOOR
from typing import TYPE_CHECKING, Any

from events import objects as o
from events import schema as ev
from events.quantity import MAX_INT64, QuantityError, parse_quantity
from projections import afs_ledger, config_version, gates
from projections.afs_ledger import AFS_ADD, AFS_CHECKPOINT, AFS_RELEASE, AFS_SEED, AFS_SEED_SCALE, AFS_SETTLE
from projections.workloads import ADMITTED, RESERVED, WorkloadInfo

USAGE_BASED = "UsageBasedAdmissionFairSharing"

def _admission_mode(cq: o.ClusterQueue) -> str:
    scope = cq.spec.admission_scope
    return scope.admission_mode if scope is not None else ""


class AfsHistory:
    """:class:`~projections.cluster.ClusterState`'s Admission Fair Sharing history and what keeps it."""

    __slots__ = ()

    if TYPE_CHECKING:  # ClusterState's, set by its __init__
        time: int
        config: ev.ConfigRecorded | None
        cluster_queues: dict[str, o.ClusterQueue]
        local_queues: dict[str, o.LocalQueue]
        workloads: dict[str, WorkloadInfo]
        reserving: dict[str, dict[str, None]]
        lq_members: dict[str, dict[str, None]]
        derived: dict[str, Any]
        afs_history: dict[str, list[tuple[int, int, tuple[tuple[str, int], ...]]]]
        afs_dirty: dict[str, None]
        _afs_any_of: object
        _afs_any: bool

        def gate(self, name: str) -> bool: ...

    @property
    def afs_anchor_at_reservation(self) -> bool:
        """``AdmissionFairSharingAnchorAtQuotaReservation`` (beta, on): Admission Fair Sharing accounts a
        LocalQueue's usage from the quota reservation of its workloads rather than from their admission."""
        return self.gate(gates.ADMISSION_FAIR_SHARING_ANCHOR_AT_QUOTA_RESERVATION)

    @property
    def afs_configured(self) -> bool:
        """Whether the recorded Configuration turns Admission Fair Sharing on (an ``admissionFairSharing`` stanza, the
        AdmissionFairSharing gate on): Kueue's LocalQueue controller then samples the consumed usage of every
        LocalQueue, whatever its ClusterQueue's admission mode (``pkg/controller/core/localqueue_controller.go``)."""
        config = self.config
        memo = self.derived.get("afs_configured")
        if memo is not None and memo[0] is config:
            return memo[1]
        document = config_version.as_hub(config.document) if config is not None else None
        on = (bool(document) and document.get("admissionFairSharing") is not None  # type: ignore[union-attr]
              and self.gate(gates.ADMISSION_FAIR_SHARING))
        self.derived["afs_configured"] = (config, on)
        return on

    def cq_uses_afs(self, cq: str) -> bool:
        """Whether ClusterQueue ``cq`` orders by Admission Fair Sharing (``admissionScope.admissionMode:
        UsageBasedAdmissionFairSharing``): its admissions settle entry penalties, and its anchor may be the quota
        reservation."""
        obj = self.cluster_queues.get(cq)
        return obj is not None and _admission_mode(obj) == USAGE_BASED

    def afs_tracks(self, cq: str) -> bool:
        """Whether the LocalQueues of ClusterQueue ``cq`` have Admission Fair Sharing history: while the recorded
        Configuration turns it on, as Kueue then samples every LocalQueue (``cq`` is asked for the callers' sake:
        every ClusterQueue answers alike). None without Admission Fair Sharing, not even where a ClusterQueue orders
        by it: nothing samples or orders by it then (Kueue's scheduler and LocalQueue controller both ask the
        Configuration first), and nothing could compact it (no half-life to fold it under). That holds with no
        Configuration recorded at all too: whatever reads the log then reads Kueue's defaults, Admission Fair
        Sharing off (``explain``, ``pending``, ``replay --verify``; every scheduler loop and the simulator record
        theirs before they decide). Turned on, by the first Configuration recorded or a later one, the LocalQueues
        start from their persisted status and count what they hold, as on Kueue's start (:meth:`_afs_resync`)."""
        return self.afs_configured

    def _afs_counted(self, wl: WorkloadInfo) -> bool:
        """Whether ``wl``'s usage is in its LocalQueue's Admission Fair Sharing usage: its LocalQueue is there, in the
        ClusterQueue that holds its quota (Kueue reads the usage off that ClusterQueue's entry for the LocalQueue),
        and it is admitted, or, in a ClusterQueue ordering by Admission Fair Sharing under
        :attr:`afs_anchor_at_reservation`, holds quota (the anchor moves only there: Kueue's
        ``TestLocalQueueReconcileSamplesAnchoredUsage``). None in a ClusterQueue without history. Asked at each
        reservation, admission and release: a cluster without Admission Fair Sharing is answered at once."""
        if self._afs_any_of is not self.config:
            self._afs_any_of, self._afs_any = self.config, self.afs_configured
        if not self._afs_any or wl.phase not in (ADMITTED, RESERVED):
            return False  # _afs_any: every ClusterQueue's LocalQueues have history (afs_tracks), else none's
        lq = self.local_queues.get(f"{wl.namespace}/{wl.queue_name}")
        if lq is None or lq.spec.cluster_queue != wl.cluster_queue:
            return False
        if self.cq_uses_afs(wl.cluster_queue):
            return wl.phase == ADMITTED or self.afs_anchor_at_reservation
        return wl.phase == ADMITTED

    def _afs_queues(self) -> tuple[str, ...]:
        """Every ClusterQueue a LocalQueue or a workload holding quota names, sorted."""
        names = set(self.reserving) | {lq.spec.cluster_queue for lq in self.local_queues.values()}
        return tuple(sorted(names))

    def _afs_view(self, cqs: tuple[str, ...]) -> tuple[dict[str, bool], dict[str, bool]]:
        """Which of ``cqs`` have history and which of their quota holders are counted: taken before a change of the
        configuration or of a ClusterQueue or LocalQueue, for :meth:`_afs_resync` after it."""
        tracked = {cq: self.afs_tracks(cq) for cq in cqs}
        counted = {}
        for cq in cqs:
            for key in sorted(self.reserving.get(cq, ())):
                counted[key] = self._afs_counted(self.workloads[key])
        return tracked, counted

    def _afs_resync(self, tracked: dict[str, bool], counted: dict[str, bool], cqs: tuple[str, ...]) -> None:
        """After a change of the configuration or of a ClusterQueue, bring the history of ``cqs``' LocalQueues in line
        (``tracked``, ``counted``: the :meth:`_afs_view` before; a LocalQueue that appears or moves:
        :meth:`_afs_local_queue_appeared`). A ClusterQueue whose LocalQueues stop needing history drops it
        (Admission Fair Sharing turned off, or it stopped ordering by it without); one starting to need it seeds them
        from their persisted status and counts what they hold, as Kueue starts on a restart; a workload counted now
        and not before (an anchor that moved) enters — settled if it only holds quota, as at the anchor — and one no
        longer counted leaves."""
        live = {cq for cq in cqs if self.afs_tracks(cq)}
        flipped = {cq for cq in cqs if (cq in live) != tracked.get(cq, False)}
        for key in sorted(self.local_queues) if flipped else ():
            cq = self.local_queues[key].spec.cluster_queue
            if cq not in flipped:
                continue
            self._afs_drop_local_queue(key)  # starting: whatever a snapshot kept of it is superseded by the seed
            if cq in live:
                self.seed_afs(self.local_queues[key])
        for cq in cqs:
            if cq not in live:
                continue
            for key in sorted(self.reserving.get(cq, ())):
                wl = self.workloads[key]
                before = counted.get(key, False) and tracked.get(cq, False)
                after = self._afs_counted(wl)
                if after and not before:
                    self._afs_enter(wl)
                elif before and not after:
                    self._afs_append(wl, AFS_RELEASE)

    def _afs_local_queue_appeared(self, lq: o.LocalQueue) -> None:
        """LocalQueue ``lq`` just appeared or moved to another ClusterQueue: where that ClusterQueue keeps history, it
        is seeded from its status and its own workloads holding that ClusterQueue's quota enter (settled if they only
        hold quota, as at the anchor). None of them was counted before (:meth:`_afs_counted` needs the LocalQueue in
        their ClusterQueue), nor does the ClusterQueue's tracking change: so no other workload is looked at, and
        nothing at all where Admission Fair Sharing is off (a busy ClusterQueue onboarding namespaces)."""
        cq = lq.spec.cluster_queue
        if not self.afs_tracks(cq):
            return
        self.seed_afs(lq)
        holders = self.reserving.get(cq, {})
        for wk in sorted(self.lq_members.get(lq.key, ())):
            wl = self.workloads[wk]
            if wk in holders and self._afs_counted(wl):
                self._afs_enter(wl)

    def _afs_enter(self, wl: WorkloadInfo) -> None:
        """A workload holding quota starts to count outside a decision (an anchor that moved, its LocalQueue
        appearing, tracking that starts): settled if it only holds quota in a ClusterQueue ordering by Admission
        Fair Sharing, as at the anchor; else added without a settlement."""
        settle = wl.phase == RESERVED and self.cq_uses_afs(wl.cluster_queue)
        self._afs_append(wl, AFS_SETTLE if settle else AFS_ADD)

    def retrack_afs(self) -> None:
        """Restoring a snapshot older than version 47, whose history held a seed for every LocalQueue ever seen and
        admitted usage only in ClusterQueues ordering by Admission Fair Sharing: the history of LocalQueues gone or
        not of such a ClusterQueue is dropped, and, while the recorded Configuration turns Admission Fair Sharing
        on, the others start at the restore as on Kueue's restart (seeded from their status, counting what they
        hold)."""
        keep = {k for k, lq in self.local_queues.items()
                if self.cq_uses_afs(lq.spec.cluster_queue) and self.afs_tracks(lq.spec.cluster_queue)}
        self.afs_history = {k: v for k, v in self.afs_history.items() if k in keep}
        self.derived.pop("afs_ledger", None)
        self.derived.pop("afs", None)
        if self.afs_configured:
            cqs = tuple(sorted({lq.spec.cluster_queue for lq in self.local_queues.values()
                                if not self.cq_uses_afs(lq.spec.cluster_queue)}))
            self._afs_resync(dict.fromkeys(cqs, False), {}, cqs)

    def untrack_afs(self) -> None:
        """On every restore: a snapshot written before session 32 (version 49 or older) kept history for the
        LocalQueues of a ClusterQueue ordering by Admission Fair Sharing while the recorded Configuration had it off;
        that history goes, as a full fold keeps none (:meth:`afs_tracks`). A no-op on any other snapshot."""
        for key in sorted(self.afs_history):
            lq = self.local_queues.get(key)
            if lq is None or not self.afs_tracks(lq.spec.cluster_queue):
                self._afs_drop_local_queue(key)

    def _afs_drop_local_queue(self, key: str) -> None:
        """Forget LocalQueue ``key``'s history (deleted, moved, or no longer needing it): Kueue drops its ledger
        entry. The scheduler's fold forgets that LocalQueue alone (:attr:`afs_dirty`)."""
        if self.afs_history.pop(key, None) is not None:
            self._afs_touched(key)

    def reanchor_afs(self) -> None:
        """The accounting anchor moved on restoring a snapshot older than the gate (:mod:`projections.snapshot`),
        whose history was anchored at admission: under the gate, the workloads holding quota without being admitted
        in a ClusterQueue ordering by Admission Fair Sharing enter their LocalQueues' usage (their entry penalty
        settled). A configuration turning the gate on or off does the same through :meth:`_afs_resync`."""
        if not self.afs_anchor_at_reservation:
            return
        for key in sorted(self.workloads):
            wl = self.workloads[key]
            if wl.phase == RESERVED and self._afs_counted(wl):
                self._afs_append(wl, AFS_SETTLE)

    def seed_afs(self, lq: o.LocalQueue, only_persisted: bool = False) -> None:
        """A LocalQueue seen for the first time: the consumed usage its status persisted (Kueue v0.20 #12891 seeds
        its in-memory entry from it when it first meets the LocalQueue, so a restart or a takeover keeps the
        history), in thousandths of a unit (:data:`AFS_SEED_SCALE`) rounded down and held to int64 (a snapshot's
        msgpack takes no larger integer: 64Gi of memory in nano-units would not fit), as a sign-0 entry of
        :attr:`afs_history` (none ``only_persisted`` when there is none: a restore from a snapshot older than the
        seeds)."""
        fs = lq.status.get("fairSharing") if isinstance(lq.status, dict) else None
        afs = fs.get("admissionFairSharingStatus") if isinstance(fs, dict) else None
        consumed = afs.get("consumedResources") if isinstance(afs, dict) else None
        seed: dict[str, int] = {}
        for r, q in sorted(consumed.items()) if isinstance(consumed, dict) else ():
            try:
                scaled = int((parse_quantity(q) * AFS_SEED_SCALE).to_integral_value(rounding=ROUND_FLOOR))
            except (QuantityError, ArithmeticError, TypeError):
                continue
            if scaled > 0:
                seed[r] = min(scaled, MAX_INT64)
        if seed or not only_persisted:
            self._afs_add(lq.key, AFS_SEED, tuple(sorted(seed.items())))

    def _afs_record(self, wl: WorkloadInfo, sign: int) -> None:
        """A counted workload reached its anchor (+1: settled in a ClusterQueue ordering by Admission Fair Sharing,
        added without a settlement elsewhere) or left it (-1)."""
        if sign > 0:
            self._afs_append(wl, AFS_SETTLE if self.cq_uses_afs(wl.cluster_queue) else AFS_ADD)
        else:
            self._afs_append(wl, AFS_RELEASE)

    def _afs_append(self, wl: WorkloadInfo, sign: int) -> None:
        per_resource: dict[str, int] = {}
        for fr, v in wl.usage.items():
            r = fr.split("/", 1)[1]
            per_resource[r] = per_resource.get(r, 0) + v
        self._afs_add(f"{wl.namespace}/{wl.queue_name}", sign, tuple(sorted(per_resource.items())))

    def _afs_add(self, lq: str, sign: int, usage: tuple[tuple[str, int], ...]) -> None:
        entries = self.afs_history.get(lq)
        if entries is None:
            entries = self.afs_history[lq] = []
        entries.append((self.time, sign, usage))
        self._afs_touched(lq)
        if len(entries) > afs_ledger.COMPACT_AT:
            key = self._afs_key()
            if key is not None:
                self.afs_history[lq] = self._afs_folded(key).compact(lq, entries)

    def _afs_key(self) -> tuple[float, int] | None:
        """The half-life and sampling interval the history is compacted under (:mod:`projections.afs_ledger`): the
        recorded Configuration's, None while it has Admission Fair Sharing off (or none is recorded)."""
        config = self.config
        memo = self.derived.get("afs_key")
        if memo is not None and memo[0] is config:
            return memo[1]
        key = afs_ledger.key_of(config.document) if config is not None else None
        self.derived["afs_key"] = (config, key)
        return key

    def _afs_checkpoint_all(self, next_config: ev.ConfigRecorded) -> None:
        """Before a configuration with another half-life or sampling interval (or none) replaces the one in force:
        every LocalQueue's history is checkpointed under the one in force, which its entries were recorded under."""
        key = self._afs_key()
        if key is None or key == afs_ledger.key_of(next_config.document):
            return
        for lq in sorted(self.afs_history):
            entries = self.afs_history[lq]
            if entries and not (len(entries) == 1 and entries[0][1] == AFS_CHECKPOINT):
                self.afs_history[lq] = self._afs_folded(key).compact(lq, entries)
                self._afs_touched(lq)

    def _afs_touched(self, lq: str) -> None:
        """LocalQueue ``lq``'s history changed: the ledger (:meth:`afs_ledger`), if there is one, takes it in when
        next asked (without one there is nothing to tell: a ledger started afresh reads every LocalQueue, so the
        set stays within the LocalQueues changed between two questions)."""
        if "afs_ledger" in self.derived:
            self.afs_dirty[lq] = None

    def afs_ledger(self, key: tuple[float, int]) -> afs_ledger.AfsLedger | None:
        """The history folded under the recorded configuration's half-life and sampling interval, up to date, where
        they are ``key`` (None otherwise: Admission Fair Sharing off, or a reader folding under others). The one
        fold of the history: the compaction checkpoints it, the scheduler reads it (derived, rebuilt from the
        history when it is not there, as after a restore)."""
        if self._afs_key() != key:
            return None
        ledger = self._afs_folded(key)
        for lq in sorted(self.afs_dirty):
            ledger.extend(lq, self.afs_history.get(lq))
        self.afs_dirty.clear()
        return ledger

    def _afs_folded(self, key: tuple[float, int]) -> afs_ledger.AfsLedger:
        """The ledger under ``key`` (:meth:`afs_ledger`), as far as it has taken the history in: a new one (none
        yet, or under another key) has every LocalQueue still to take in."""
        ledger: afs_ledger.AfsLedger | None = self.derived.get("afs_ledger")
        if ledger is None or ledger.key() != key:
            ledger = self.derived["afs_ledger"] = afs_ledger.AfsLedger(*key)
            self.afs_dirty = dict.fromkeys(self.afs_history)
        return ledger

    def afs_entries(self) -> list[tuple[int, str, int, tuple[tuple[str, int], ...]]]:
        """:attr:`afs_history` as one list of (time, LocalQueue, sign, usage): by LocalQueue, each in log order."""
        return [(t, lq, sign, u) for lq in sorted(self.afs_history) for t, sign, u in self.afs_history[lq]]
