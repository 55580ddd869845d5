"""A scenario expanded into the objects Kueue's performance runner creates, and the workloads' arrival schedule.

Names follow Kueue's generator: cohort ``<class>-<i>``, ClusterQueue ``<qclass>-<set>-<i>-<cohort>`` with a
Namespace and a LocalQueue of the same name, workload ``<class>-<set>-<n>-<template>`` in that namespace, one
pod set ``main`` of ``podCount`` pods requesting ``request`` cpu each, priority in ``spec.priority``, and the
runner's class and running-time labels. A workloads set creates its workloads one after another, every
``creationIntervalMs``, starting at ``initialDelayMs``, independently in every ClusterQueue.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field

from events import objects as o
from events.quantity import to_int
from kueue_es.simulator.config import CohortSet, Scenario, WorkloadTemplate

CLASS_LABEL = "kueue.x-k8s.io/performance-scheduler-class"
RUNTIME_LABEL = "kueue.x-k8s.io/performance-scheduler-running-ms"
CLEANUP_LABEL = "kueue.x-k8s.io/performance-scheduler-cleanup"
TAS_NODE_GROUP_LABEL_VALUE = "tas"
HOSTNAME_LABEL = "kubernetes.io/hostname"


@dataclass
class Arrival:
    at: int
    """Creation time, ms after the start of the run."""
    namespace: str
    name: str
    queue: str
    template: WorkloadTemplate
    cq_class: str
    uid: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def cpu_milli(self) -> int:
        return self.template.request_milli * self.template.pod_count


@dataclass
class Plan:
    scenario: Scenario
    objects: list[o.KObject] = field(default_factory=list)
    """Setup objects in creation order (flavor, topology, nodes, cohorts, namespaces, queues)."""
    arrivals: list[Arrival] = field(default_factory=list)
    """Every workload, sorted by creation time (ties in generation order)."""
    cq_class: dict[str, str] = field(default_factory=dict)
    cq_nominal: dict[str, int] = field(default_factory=dict)
    """ClusterQueue -> nominal cpu quota, milli."""
    cohorts: list[str] = field(default_factory=list)
    node_cpu: int = 0
    """Total allocatable cpu of the generated nodes, milli (TAS scenarios)."""
    nodes: int = 0

    @property
    def tas(self) -> bool:
        return self.scenario.topology is not None or any(a.template.tas_level for a in self.arrivals)

    @property
    def capacity(self) -> int:
        """cpu the whole cluster can hold at once, milli: the quotas, and the nodes when there are any."""
        quota = sum(self.cq_nominal.values())
        return min(quota, self.node_cpu) if self.nodes else quota

    def class_nominal(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for cq, cls in self.cq_class.items():
            out[cls] = out.get(cls, 0) + self.cq_nominal[cq]
        return out

    def lower_bound(self) -> tuple[int, int, int]:
        """(bound, resource bound, arrival bound) of the simulated wall time, ms.

        The resource bound is every requested cpu·ms over the capacity; the arrival bound is the latest
        creation-plus-runtime (no workload can finish before it was created and ran once).
        """
        work = sum(a.cpu_milli * a.template.runtime_ms for a in self.arrivals)
        cap = self.capacity
        resource = -(-work // cap) if cap else 0
        arrival = max((a.at + a.template.runtime_ms for a in self.arrivals), default=0)
        return max(resource, arrival), resource, arrival


def build_plan(scenario: Scenario, rng: random.Random, jitter_ms: int = 0) -> Plan:
    plan = Plan(scenario)
    fl = scenario.flavor
    rf_spec = o.ResourceFlavorSpec()
    if fl.topology_name:
        rf_spec = o.ResourceFlavorSpec(node_labels={fl.node_label: TAS_NODE_GROUP_LABEL_VALUE},
                                       topology_name=fl.topology_name)
    plan.objects.append(o.ResourceFlavor(api_version="kueue.x-k8s.io/v1beta2",
                                         metadata=_meta(fl.name, labels={CLEANUP_LABEL: "true"}), spec=rf_spec))
    if scenario.topology is not None:
        _topology(plan)
    arrivals: list[tuple[int, int, Arrival]] = []
    for cset in scenario.cohorts:
        for ci in range(cset.count):
            _cohort(plan, cset, f"{cset.class_name}-{ci}", "", arrivals)
    arrivals.sort(key=lambda x: (x[0], x[1]))
    for at, _, a in arrivals:
        if jitter_ms:
            a.at = at + rng.randint(0, jitter_ms)
        a.uid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    if jitter_ms:
        arrivals.sort(key=lambda x: (x[2].at, x[1]))
    plan.arrivals = [a for _, _, a in arrivals]
    return plan


def _meta(name: str, namespace: str = "", labels: dict[str, str] | None = None, uid: str = "") -> o.ObjectMeta:
    return o.ObjectMeta(name=name, namespace=namespace, uid=uid or f"sim-{namespace + '-' if namespace else ''}{name}",
                        labels=labels or {})


def _cohort(plan: Plan, cset: CohortSet, name: str, parent: str, arrivals: list[tuple[int, int, Arrival]]) -> None:
    plan.cohorts.append(name)
    if parent:
        plan.objects.append(o.Cohort(api_version="kueue.x-k8s.io/v1beta2",
                                     metadata=_meta(name, labels={CLEANUP_LABEL: "true"}),
                                     spec=o.CohortSpec(parent_name=parent)))
    flavor = plan.scenario.flavor.name
    for qsi, qs in enumerate(cset.queues_sets):
        for qi in range(qs.count):
            cq_name = f"{qs.class_name}-{qsi}-{qi}-{name}"
            labels = {CLASS_LABEL: qs.class_name, CLEANUP_LABEL: "true"}
            quota = o.ResourceQuota(name="cpu", nominal_quota=qs.nominal_quota, borrowing_limit=qs.borrowing_limit,
                                    lending_limit=qs.lending_limit)
            cq = o.ClusterQueue(
                api_version="kueue.x-k8s.io/v1beta2",
                metadata=_meta(cq_name, labels=labels),
                spec=o.ClusterQueueSpec(
                    cohort_name=name,
                    namespace_selector=o.LabelSelector(),
                    resource_groups=[o.ResourceGroup(covered_resources=["cpu"],
                                                     flavors=[o.FlavorQuotas(name=flavor, resources=[quota])])],
                    preemption=o.ClusterQueuePreemption(reclaim_within_cohort=qs.reclaim_within_cohort,
                                                        within_cluster_queue=qs.within_cluster_queue),
                ),
            )
            plan.objects.append(o.Namespace(api_version="v1", metadata=_meta(cq_name, labels={CLEANUP_LABEL: "true"})))
            plan.objects.append(cq)
            plan.objects.append(o.LocalQueue(api_version="kueue.x-k8s.io/v1beta2",
                                             metadata=_meta(cq_name, namespace=cq_name),
                                             spec=o.LocalQueueSpec(cluster_queue=cq_name)))
            plan.cq_class[cq_name] = qs.class_name
            plan.cq_nominal[cq_name] = to_int("cpu", qs.nominal_quota)
            for wsi, ws in enumerate(qs.workloads_sets):
                k = 0
                for si in range(ws.count):
                    for ti, tpl in enumerate(ws.workloads):
                        at = ws.initial_delay_ms + k * ws.creation_interval_ms
                        k += 1
                        a = Arrival(at, cq_name, f"{tpl.class_name}-{wsi}-{si}-{ti}", cq_name, tpl, qs.class_name)
                        arrivals.append((at, len(arrivals), a))
    for child in cset.children:
        for i in range(child.count):
            _cohort(plan, child, f"{name}-{child.class_name}-{i}", name, arrivals)


def _topology(plan: Plan) -> None:
    topo = plan.scenario.topology
    assert topo is not None
    plan.objects.append(o.Topology(
        api_version="kueue.x-k8s.io/v1beta2", metadata=_meta(topo.name, labels={CLEANUP_LABEL: "true"}),
        spec=o.TopologySpec(levels=[o.TopologyLevel(node_label=lv.node_label) for lv in topo.levels]),
    ))
    leaf = topo.levels[-1]
    group_label = plan.scenario.flavor.node_label or "tas-node-group"
    allocatable: dict[str, o.Quantity] = {"cpu": leaf.cpu, "memory": leaf.memory, "pods": "110"}

    def walk(depth: int, values: list[str]) -> None:
        if depth == len(topo.levels):
            name = "node" + "".join(f"-{v[0]}{v.rsplit('-', 1)[1]}" for v in values)
            labels = {CLEANUP_LABEL: "true", group_label: TAS_NODE_GROUP_LABEL_VALUE}
            for lv, v in zip(topo.levels, values, strict=True):
                labels[lv.node_label] = v
            labels[HOSTNAME_LABEL] = name
            plan.objects.append(o.Node(
                api_version="v1", metadata=_meta(name, labels=labels),
                status=o.NodeStatus(allocatable=dict(allocatable),
                                    conditions=[o.Condition(type="Ready", status="True", reason="KubeletReady")]),
            ))
            plan.nodes += 1
            plan.node_cpu += to_int("cpu", leaf.cpu)
            return
        lv = topo.levels[depth]
        for i in range(lv.count):
            walk(depth + 1, [*values, f"{lv.name}-{i}"])

    walk(0, [])


def workload_object(a: Arrival) -> o.Workload:
    tpl = a.template
    topology = None
    if tpl.tas_level:
        if tpl.tas_constraint == "preferred":
            topology = o.PodSetTopologyRequest(preferred=tpl.tas_level)
        elif tpl.tas_constraint == "balanced":
            topology = o.PodSetTopologyRequest(pod_set_slice_required_topology=tpl.tas_level,
                                               pod_set_slice_size=tpl.slice_size or None)
        else:
            topology = o.PodSetTopologyRequest(required=tpl.tas_level)
    pod_set = o.PodSet(
        name="main", count=tpl.pod_count,
        template=o.PodTemplateSpec(spec=o.PodSpec(containers=[
            o.Container(name="c", resources=o.ResourceRequirements(requests={"cpu": tpl.request}))
        ])),
        topology_request=topology,
    )
    return o.Workload(
        api_version="kueue.x-k8s.io/v1beta2",
        metadata=_meta(a.name, namespace=a.namespace, uid=a.uid,
                       labels={CLASS_LABEL: tpl.class_name, RUNTIME_LABEL: str(tpl.runtime_ms)}),
        spec=o.WorkloadSpec(queue_name=a.queue, priority=tpl.priority, pod_sets=[pod_set]),
    )
