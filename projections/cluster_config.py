"""The Kueue Configuration in force, as the fold reads it: feature gates and the settings it asks about per event.

A part of :class:`projections.cluster.ClusterState` (a mixin: the state's attributes are set by its ``__init__``,
its slots are its own). Each accessor reads :attr:`config` (the latest Configuration recorded in the log) once per
recorded configuration and keeps its answer beside the configuration it was read from, as the fold asks per event:
gates, request rules, waitForPodsReady, the MultiKueue dispatcher, LocalQueue metrics and custom metric labels.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from events import objects as o
from events import schema as ev
from projections import effective_quotas, gates, pods_scheduled
from projections.admissionchecks import external_dispatcher
from projections.custom_labels import CustomLabels
from projections.custom_labels import of_document as custom_labels_of
from projections.local_queue_metrics import LocalQueueMetricsSetting
from projections.local_queue_metrics import of_document as lq_metrics_of
from projections.local_queue_metrics import selects as lq_metrics_selects
from projections.pods_ready import waits_for_pods_ready
from projections.request_rules import RequestRules, reclaims, rules_of


class ConfigReadings:
    """:class:`~projections.cluster.ClusterState`'s answers to what the Configuration in force says."""

    __slots__ = ()

    if TYPE_CHECKING:  # ClusterState's, set by its __init__
        config: ev.ConfigRecorded | None
        local_queues: dict[str, o.LocalQueue]
        _rules_of: ev.ConfigRecorded | None
        _rules: tuple[RequestRules | None, bool]
        _pods_ready_of: ev.ConfigRecorded | None
        _pods_ready: bool
        _scheduling_of: ev.ConfigRecorded | None
        _scheduling: bool
        _gates_of: ev.ConfigRecorded | None
        _gates: dict[str, bool]
        _dispatcher_of: ev.ConfigRecorded | None
        _external_dispatcher: bool
        _custom_labels_of: ev.ConfigRecorded | None
        _custom_labels: CustomLabels | None
        _lq_metrics_of: ev.ConfigRecorded | None
        _lq_metrics: LocalQueueMetricsSetting
        _lq_selected_of: ev.ConfigRecorded | None
        _lq_every: bool | None
        _lq_selected: dict[str, tuple[o.LocalQueue | None, bool]]

    @property
    def request_rules(self) -> RequestRules | None:
        """The ``resources`` rules of the configuration in force: what they do to requests (None: nothing)."""
        return self._rules_in_force()[0]

    @property
    def reclaim_enabled(self) -> bool:
        """Kueue's ``ReclaimablePods`` gate in the configuration in force: reclaimable pods need no quota."""
        return self._rules_in_force()[1]

    @property
    def waits_for_pods_ready(self) -> bool:
        """waitForPodsReady is in force under the recorded configuration (:mod:`projections.pods_ready`)."""
        config = self.config
        if self._pods_ready_of is not config:
            doc = config.document if config is not None else None
            self._pods_ready_of, self._pods_ready = config, waits_for_pods_ready(doc)
        return self._pods_ready

    @property
    def tracks_pods_scheduled(self) -> bool:
        """Kueue's UnscheduledPodsTracker runs under the recorded configuration (WaitForPodsReadyUnscheduledTimeout
        on, waitForPodsReady in force with a positive ``unscheduledTimeout``: :func:`pods_scheduled.tracking`)."""
        config = self.config
        if self._scheduling_of is not config:
            doc = config.document if config is not None else None
            self._scheduling_of, self._scheduling = config, pods_scheduled.tracking(doc, self.gate)
        return self._scheduling

    def gate(self, name: str) -> bool:
        """Kueue's feature gate ``name`` under the recorded configuration (its default when none is recorded). Each
        gate is read once per recorded configuration: the fold asks per event, the Job integration per Job."""
        config = self.config
        if self._gates_of is not config:
            self._gates_of, self._gates = config, {}
        found = self._gates.get(name)
        if found is None:
            found = self._gates[name] = gates.enabled(
                gates.of_document(config.document if config is not None else None), name)
        return found

    @property
    def external_dispatcher(self) -> bool:
        """An external controller nominates MultiKueue workers under the recorded configuration (MultiKueue on, a
        ``multiKueue.dispatcherName`` Kueue has no dispatcher for): the nominations are the Workload's, observed."""
        config = self.config
        if self._dispatcher_of is not config:
            doc = config.document if config is not None else None
            self._dispatcher_of = config
            self._external_dispatcher = external_dispatcher(doc) and self.gate(gates.MULTIKUEUE)
        return self._external_dispatcher

    @property
    def admission_gated_by(self) -> bool:
        """Kueue's ``AdmissionGatedBy`` gate in the configuration in force: a workload whose
        ``kueue.x-k8s.io/admission-gated-by`` annotation is not empty is not queued."""
        return self.gate(gates.ADMISSION_GATED_BY)

    @property
    def concurrent_admission(self) -> bool:
        """Kueue's ``ConcurrentAdmission`` gate in the configuration in force: a parent workload (labelled
        ``kueue.x-k8s.io/concurrent-admission-parent: "true"``) is not queued, its variants are."""
        return self.gate(gates.CONCURRENT_ADMISSION)

    @property
    def priority_boost(self) -> bool:
        """Kueue's ``PriorityBoost`` gate in the configuration in force: a workload's
        ``kueue.x-k8s.io/priority-boost`` annotation is added to its priority (:attr:`WorkloadInfo.boost`)."""
        return self.gate(gates.PRIORITY_BOOST)

    @property
    def local_queue_metrics(self) -> bool:
        """Kueue's ``LocalQueueMetrics`` gate and ``metrics.localQueueMetrics.enable`` in the configuration in
        force: the ``local_queue_*`` metrics are folded and exposed (:mod:`projections.metrics`), for the
        LocalQueues :meth:`local_queue_metrics_for` selects."""
        return self.gate(gates.LOCAL_QUEUE_METRICS) and self._local_queue_setting().enable

    def local_queue_metrics_for(self, namespace: str, name: str) -> bool:
        """Whether the metrics of LocalQueue ``namespace/name`` are folded and exposed: :attr:`local_queue_metrics`
        and the LocalQueue's labels match ``metrics.localQueueMetrics.localQueueSelector``
        (:mod:`projections.local_queue_metrics`). Asked at each workload event the LocalQueue metrics fold: the
        gate and stanza are read once per configuration, and a selector's match once per LocalQueue object (an
        upsert replaces the object, so changed labels are matched again)."""
        config = self.config
        if self._lq_selected_of is not config:
            self._lq_selected_of, self._lq_selected = config, {}
            if not self.local_queue_metrics:
                self._lq_every = False
            else:  # without a selector, every LocalQueue
                self._lq_every = True if self._local_queue_setting().selector is None else None
        every = self._lq_every
        if every is not None:
            return every
        key = f"{namespace}/{name}"
        lq = self.local_queues.get(key)
        known = self._lq_selected.get(key)
        if known is None or known[0] is not lq:
            known = self._lq_selected[key] = (lq, lq_metrics_selects(self._local_queue_setting(), lq))
        return known[1]

    def _local_queue_setting(self) -> LocalQueueMetricsSetting:
        config = self.config
        if self._lq_metrics_of is not config:
            self._lq_metrics = lq_metrics_of(config.document if config is not None else None)
            self._lq_metrics_of = config
        return self._lq_metrics

    @property
    def custom_labels(self) -> CustomLabels | None:
        """The Configuration's ``metrics.customLabels`` while its ``CustomMetricLabels`` gate is on (None when off,
        or none are configured): the labels the metrics carry (:mod:`projections.custom_labels`)."""
        config = self.config
        if self._custom_labels_of is not config:
            found = None
            if self.gate(gates.CUSTOM_METRIC_LABELS):
                found = custom_labels_of(config.document if config is not None else None)
            self._custom_labels_of, self._custom_labels = config, found
        return self._custom_labels

    def _metric_annotations(self, annotations: dict[str, str]) -> tuple[tuple[str, str], ...]:
        """The annotations of a workload that the Workload custom labels in force read (none while the gate is
        off or none reads an annotation: the common case costs one cached lookup per annotated workload)."""
        custom = self.custom_labels
        keys = custom.workload_annotation_keys if custom is not None else ()
        if not keys:
            return ()
        return tuple(sorted((k, v) for k, v in annotations.items() if k in keys))

    def _relabelled(self, kind: str, old: o.KObject | None, new: o.KObject) -> bool:
        """An update changed the custom label values of an object of ``kind``: Kueue then clears the series it
        keyed with the old ones, so the object's counters and histograms start again from zero."""
        custom = self.custom_labels
        return custom is not None and old is not None and custom.changed(kind, old.metadata, new.metadata)

    def _unselected(self, old: o.LocalQueue | None, new: o.LocalQueue) -> bool:
        """An update made a LocalQueue stop matching ``metrics.localQueueMetrics.localQueueSelector``: Kueue then
        clears its series, so if it matches again later it counts from zero."""
        if old is None or not self.local_queue_metrics:
            return False
        setting = self._local_queue_setting()
        return setting.selector is not None and lq_metrics_selects(setting, old) and not lq_metrics_selects(
            setting, new)

    @property
    def dynamic_quotas(self) -> bool:
        """Kueue's ``DynamicQuotaOrchestration`` gate in the configuration in force: a ClusterQueue's or Cohort's
        ``status.effectiveQuotas`` stands for its spec's resource groups (:mod:`projections.effective_quotas`)."""
        return self.gate(gates.DYNAMIC_QUOTA_ORCHESTRATION)

    def _requotaed(self, old: o.ClusterQueue | o.Cohort | None, new: o.ClusterQueue | o.Cohort) -> bool:
        """An upsert changed the quotas in force of a ClusterQueue or Cohort: its spec, or, under
        DynamicQuotaOrchestration, the effective quotas its status sets."""
        if old is None or old.spec != new.spec:
            return True
        return self.dynamic_quotas and (effective_quotas.effective_groups(old.status)
                                        != effective_quotas.effective_groups(new.status))

    @property
    def tas_enabled(self) -> bool:
        """Kueue's ``TopologyAwareScheduling`` gate in the configuration in force: off, Kueue neither filters flavors
        nor places pods by topology, a missing Topology leaves a ClusterQueue active, and the Job integration and
        the ungater leave topology alone."""
        return self.gate(gates.TOPOLOGY_AWARE_SCHEDULING)

    @property
    def shapes_name_pod_sets(self) -> bool:
        """Whether the shapes scheduling equivalence is judged on name the pod sets (Kueue's
        ``SchedulingEquivalenceHashingIgnorePodSetName`` off, in the configuration in force)."""
        return not self.gate(gates.SCHEDULING_EQUIVALENCE_HASHING_IGNORE_POD_SET_NAME)

    def _rules_in_force(self) -> tuple[RequestRules | None, bool]:
        config = self.config
        if self._rules_of is not config:
            doc = config.document if config is not None else None
            self._rules_of, self._rules = config, (rules_of(doc), reclaims(doc))
        return self._rules
