"""Host ports: what a pod asks of its node's ports, and which bound pods hold which (Kueue's SchedulerLibraryIntegration).

Under that alpha gate Kueue filters a pod set's nodes with the kube-scheduler's own filter plugins, run against
every pod bound to a node and not yet terminal, and of those plugins only NodePorts reads the pods
(:mod:`kueue_es.scheduler.tas.library`). The Kubernetes rules kept here:

* a pod's host ports are those of its containers and of its restartable (``restartPolicy: Always``) init
  containers with a ``hostPort`` above 0; an empty protocol is TCP and an empty host IP is ``0.0.0.0``;
* two host ports conflict when protocol and port are equal and either host IP is ``0.0.0.0`` or both are the
  same (``::`` is not a wildcard there, as in the scheduler);
* a pod holding ports belongs to the workload its ``kueue.x-k8s.io/workload`` annotation names (in its own
  namespace), or to none: Kueue's simulator releases the first kind with the workload it preempts, and keeps the
  second kind even when it assumes every workload gone.

:class:`HostPorts` is the fold's part, kept current pod event by pod event; it holds only pods that hold a host
port, so a cluster without any costs one scan of each pod's (trimmed, usually empty) port lists.
"""

from __future__ import annotations

from collections.abc import Mapping

from events import objects as o

HostPort = tuple[str, int, str]
"""(protocol, port, host IP), defaults filled in."""

ANY_IP = "0.0.0.0"


def _ports_of(containers: list[o.Container], out: list[HostPort]) -> None:
    for c in containers:
        for p in c.ports:
            if p.host_port > 0:
                out.append((p.protocol or "TCP", p.host_port, p.host_ip or ANY_IP))


def host_ports(spec: o.PodSpec) -> tuple[HostPort, ...]:
    """The host ports a pod of ``spec`` takes on its node (the scheduler's ``GetHostPorts``), sorted."""
    out: list[HostPort] = []
    for c in spec.containers:
        if c.ports:
            _ports_of(spec.containers, out)
            break
    for c in spec.init_containers:
        if c.ports:
            _ports_of([c for c in spec.init_containers if c.restart_policy == "Always"], out)
            break
    return tuple(sorted(set(out))) if out else ()


def conflict(wanted: tuple[HostPort, ...], held: tuple[HostPort, ...]) -> bool:
    """Whether any of ``wanted`` conflicts with any of ``held`` (the NodePorts filter's rule)."""
    for proto, port, ip in wanted:
        for hproto, hport, hip in held:
            if port == hport and proto == hproto and (ip == ANY_IP or hip == ANY_IP or ip == hip):
                return True
    return False


Holder = tuple[str, tuple[HostPort, ...]]
"""(owning workload key, empty for none; the host ports one pod holds)."""


class HostPorts:
    """Bound, non-terminal pods holding host ports: pod key -> (node, owner, ports); ``generation`` is bumped when
    that changes."""

    __slots__ = ("pods", "generation")

    def __init__(self) -> None:
        self.pods: dict[str, tuple[str, str, tuple[HostPort, ...]]] = {}
        self.generation = 0

    def pod_changed(self, key: str, pod: o.Pod | None, workload_annotation: str) -> None:
        """Pod ``key`` is now ``pod`` (None: deleted); its owner is named by its ``workload_annotation``."""
        ports = host_ports(pod.spec) if pod is not None and pod.spec.node_name and \
            pod.status.phase not in ("Succeeded", "Failed") else ()
        if not ports:
            if key in self.pods:
                del self.pods[key]
                self.generation += 1
            return
        assert pod is not None
        name = pod.metadata.annotations.get(workload_annotation, "")
        new = (pod.spec.node_name, f"{pod.metadata.namespace}/{name}" if name else "", ports)
        if self.pods.get(key) != new:
            self.pods[key] = new
            self.generation += 1


def held_on(holders: Mapping[str, tuple[Holder, ...]], node: str, *, simulate_empty: bool,
            released: frozenset[str]) -> tuple[HostPort, ...]:
    """The host ports taken on ``node``: every holder's but those of ``released`` workloads (preempted in the
    simulation) and, when the cluster is assumed empty, those of any workload."""
    out: list[HostPort] = []
    for owner, ports in holders.get(node, ()):
        if owner and (simulate_empty or owner in released):
            continue
        out.extend(ports)
    return tuple(out)
