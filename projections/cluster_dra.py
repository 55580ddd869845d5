"""Dynamic Resource Allocation in the fold: what the configuration and the DRA objects say about claims' charges.

A part of :class:`projections.cluster.ClusterState` (a mixin: the state's attributes are set by its ``__init__``,
its slots are its own). It reads the DRA configuration in force, builds each namespace's :class:`DraView` (what
decides the charge of its pods' claims: :mod:`projections.dra`) from the ResourceClaimTemplates, DeviceClasses and
ResourceSlices, and, when one of those changes, drops what it derived and has the pending workloads charged anew
or their queues flushed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from events import objects as o
from events import schema as ev
from projections import gates
from projections.dra import DraView, has_claims, needs_extended, serving_classes
from projections.dra import capacities_of as dra_capacities_of
from projections.dra import cel_classes as _cel_classes
from projections.dra import counters_of as dra_counters_of
from projections.dra import extended_on as dra_extended_on
from projections.dra import mapping_of as dra_mapping_of
from projections.dra import mode_of as dra_mode_of
from projections.dra import prioritized_on as dra_prioritized_on
from projections.resource_slices import ResourceSlices


class DraCharges:
    """:class:`~projections.cluster.ClusterState`'s view of DRA: the configuration's, each namespace's, and what
    a change of a DRA object redoes."""

    __slots__ = ()

    if TYPE_CHECKING:  # ClusterState's, set by its __init__
        config: ev.ConfigRecorded | None
        claim_templates: dict[str, o.ResourceClaimTemplate]
        device_classes: dict[str, o.DeviceClass]
        resource_slices: ResourceSlices
        _selecting: bool | None
        _served: tuple[tuple[str, str], ...] | None
        _dra_views: dict[str, DraView]
        _dra_of: ev.ConfigRecorded | None
        _dra: tuple[str, tuple[tuple[str, str], ...], bool, tuple, tuple, bool]
        _bytes_of: ev.ConfigRecorded | None
        _bytes: frozenset[str]

        def gate(self, name: str) -> bool: ...
        def _readjust(self, namespace: str | None = None, runtime_class: str | None = None,
                      claims: bool = False) -> None: ...
        def _flush_all(self) -> None: ...

    def dra_config(self) -> tuple[str, tuple[tuple[str, str], ...], bool, tuple, tuple, bool]:
        """The DRA mode, device-class mapping, KueueDRAIntegrationExtendedResource (with the DRA gate), the
        counter sources of DeviceClasses (:func:`projections.dra.counters_of`), their capacity sources
        (:func:`projections.dra.capacities_of`) and KueueDRAIntegrationPrioritizedList (with the DRA gate) of the
        configuration in force (:mod:`projections.dra`)."""
        config = self.config
        if self._dra_of is not config:
            doc = config.document if config is not None else None
            self._dra_of, self._dra = config, (dra_mode_of(doc), dra_mapping_of(doc), dra_extended_on(doc),
                                               dra_counters_of(doc), dra_capacities_of(doc), dra_prioritized_on(doc))
        return self._dra

    def byte_valued(self) -> frozenset[str]:
        """The logical resources of the counter-sourced ``deviceClassMappings`` of the configuration in force: byte
        counts Kueue writes in binary units (``50Gi``) wherever it formats a quantity, as its mapper registers them
        for its resource formatter (kubernetes-sigs/kueue#12989, v0.18.x on); capacity-sourced ones it does not."""
        config = self.config
        if self._bytes_of is not config:
            counters = self.dra_config()[3]
            self._bytes_of, self._bytes = config, frozenset(s.resource for _, sources in counters for s in sources)
        return self._bytes

    def _sourced(self) -> tuple[tuple[str, tuple], ...]:
        """DeviceClass -> its counter and capacity sources, by DeviceClass then counters first."""
        _, _, _, counters, capacities, _ = self.dra_config()
        return (*counters, *capacities)

    def served_extended(self) -> tuple[tuple[str, str], ...]:
        """Extended resource -> the DeviceClass serving it, by resource, while Kueue charges those as DRA devices
        (KueueDRAIntegrationExtendedResource with the DRA gate); empty otherwise, or without such classes."""
        if not self.device_classes or not self.dra_config()[2]:
            return ()
        if self._served is None:
            self._served = serving_classes(self.device_classes[k] for k in sorted(self.device_classes))
        return self._served

    def dra_view(self, namespace: str) -> DraView | None:
        """What decides the claims of ``namespace``'s pods (None: claims are ignored, both DRA gates off)."""
        found = self._dra_views.get(namespace)
        if found is not None:
            return found
        mode, mapping, _, counters, capacities, prioritized = self.dra_config()
        if not mode:
            return None
        prefix = namespace + "/"
        templates = tuple(sorted((k[len(prefix):], t.spec.spec) for k, t in self.claim_templates.items()
                                 if k.startswith(prefix)))
        classes: set[str] = set()
        devices: tuple = ()
        slice_devices = None
        if (counters or capacities) and mode == "charge":
            sourced = self._sourced()
            classes.update(dc for dc, _ in sourced)
            drivers = sorted({cs.driver for _, sources in sourced for cs in sources})
            devices = tuple((d, self.resource_slices.devices(d)) for d in drivers)
        else:
            counters = capacities = ()
        selecting = {dc for _, spec in templates for dc in _cel_classes(spec)}
        if selecting and mode == "charge":
            classes.update(selecting)
            by_name = self.resource_slices.by_name
            slice_devices = tuple((by_name[k].spec.driver, d) for k in sorted(by_name) for d in by_name[k].spec.devices)
        found = self._dra_views[namespace] = DraView(
            reject=mode == "reject", mapping=mapping, templates=templates, extended=self.served_extended(),
            counters=counters, class_selectors=tuple((dc, self._class_selectors(dc)) for dc in sorted(classes) if dc),
            devices=devices, capacities=capacities, slice_devices=slice_devices, prioritized=prioritized)
        return found

    def _class_selectors(self, name: str) -> tuple[str, ...] | None:
        """The CEL expressions of DeviceClass ``name``'s selectors (None: the log holds no such class)."""
        dc = self.device_classes.get(name)
        if dc is None:
            return None
        return tuple(s.cel.expression for s in dc.spec.selectors if s.cel is not None)

    def _dra_for(self, namespace: str, pod_sets: Any) -> DraView | None:
        """:meth:`dra_view` for a workload whose pod templates have claims or request an extended resource a
        DeviceClass serves (:func:`projections.dra.needs_extended`), else None (most: no look-up)."""
        if has_claims(pod_sets):
            return self.dra_view(namespace)
        served = self.served_extended()
        if served and needs_extended(pod_sets, dict(served)):
            return self.dra_view(namespace)
        return None

    def _claim_templates_changed(self, namespace: str) -> None:
        """A ResourceClaimTemplate of ``namespace`` came, changed or went: its pending workloads with claims are
        charged anew, and those whose DRA requests change go back to their queue's heap (reference §3.4: a
        parked workload is unparked by a change of its DRA requests)."""
        self._dra_views.pop(namespace, None)
        self._selecting = None
        self._readjust(namespace=namespace, claims=True)

    def _device_classes_changed(self, before: tuple[tuple[str, str], ...], name: str) -> None:
        """DeviceClass ``name`` came, changed or went (``before``: which classes served which extended resources):
        when what classes serve changes, or the class has counter or capacity sources (its selectors choose the
        devices charged), the pending workloads asking for extended resources or with claims are charged anew (Kueue's
        workload controller looks the classes up at each reconcile; reference §3.4: a change of DRA requests
        unparks)."""
        self._served = None
        if (self.served_extended() != before or any(dc == name for dc, _ in self._sourced())
                or self._selecting_templates()):
            self._dra_views.clear()
            self._readjust(claims=True)

    def _selecting_templates(self) -> bool:
        """Some ResourceClaimTemplate has a request with CEL selectors, which Kueue matches against every device
        (:func:`projections.dra.claim_charge`): a DeviceClass or ResourceSlice changing may change its charge."""
        if self._selecting is None:
            self._selecting = any(_cel_classes(t.spec.spec) for t in self.claim_templates.values())
        return self._selecting

    def _slices_changed(self, driver: str) -> None:
        """A ResourceSlice of ``driver`` came, changed or went: when a counter or capacity source reads that driver's devices,
        the pending workloads with claims are charged anew (Kueue retries their charge until the devices it needs
        are published)."""
        if any(cs.driver == driver for _, sources in self._sourced() for cs in sources) or self._selecting_templates():
            self._dra_views.clear()
            self._readjust(claims=True)

    def _taint_rules_changed(self) -> None:
        """A DeviceTaintRule came, changed or went: under KueueDRAIntegrationDeviceTaints (which needs
        KueueDRADeviceFeasibility) the parked workloads go back to their queues, as Kueue checks the workloads its
        device check refused again."""
        if self.gate(gates.KUEUE_DRA_INTEGRATION_DEVICE_TAINTS) and self.gate(gates.KUEUE_DRA_DEVICE_FEASIBILITY):
            self._flush_all()

    def _devices_changed(self) -> None:
        """A ResourceSlice or DeviceClass came, changed or went, or a ResourceClaim released devices: under
        KueueDRADeviceFeasibility the parked workloads go back to their queues, as Kueue checks again the workloads
        its device check refused."""
        if self.gate(gates.KUEUE_DRA_DEVICE_FEASIBILITY):
            self._flush_all()
