"""Settings of the Kubernetes connector (``$.kube`` in kueue-es's settings, ``KUEUE_ES_KUBE_*``)."""

from __future__ import annotations

import msgspec


class KubeSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    enabled: bool = False
    """Run against a cluster: watch it, write Workload status, drive batch/v1 Jobs (``kueue-es run --kube``)."""
    kubeconfig: str = ""
    """Client configuration; empty: ``$KUBECONFIG``/``~/.kube/config``, or the pod's service account in-cluster."""
    context: str = ""
    install_crds: bool = False
    """When leading, create or update the kueue.x-k8s.io CRDs (needs the rights to; the manifests install them
    too)."""
    leader_election: bool = True
    lease_name: str = "kueue-es"
    lease_namespace: str = "kueue-system"
    lease_duration_s: float = 15.0
    renew_deadline_s: float = 10.0
    retry_period_s: float = 2.0
    health_port: int = 8081
    """/healthz and /readyz; 0: no health server."""
    health_address: str = "0.0.0.0"
    watch_timeout_s: int = 300
    """How long one watch request may last before it is renewed from where it stopped."""
    jobs: bool = True
    """The batch/v1 Job integration, and the plain-Pod one (which the Kueue Configuration turns on)."""
    queue_status: bool = True
    """Write ClusterQueue and LocalQueue status (counts, flavor usage, the Active condition) as Kueue does."""
    finalizers: bool = True
    """Keep Kueue's ``kueue.x-k8s.io/resource-in-use`` finalizer on ClusterQueues, ResourceFlavors,
    AdmissionChecks and Topologies (removed once nothing uses a deleted one)."""
    events: bool = True
    """Record the Kubernetes Events Kueue records for its decisions (QuotaReserved, Admitted, Preempted, ...)."""
    webhook_port: int = 0
    """Serve the batch/v1 Job mutating webhook over HTTPS on this port (Kueue uses 9443); 0: no webhook."""
    webhook_address: str = "0.0.0.0"
    webhook_cert_dir: str = ""
    """``ca.crt``, ``tls.crt``, ``tls.key`` to serve with (e.g. a mounted kubernetes.io/tls Secret); empty: a
    self-signed CA and certificate for ``webhook_hosts``, shared through ``webhook_secret`` when set."""
    webhook_secret: str = ""
    """A Secret in ``lease_namespace`` holding the generated certificate, so every replica serves the same one
    (the first creates it); empty: each process makes its own."""
    webhook_hosts: str = ""
    """Comma-separated names the serving certificate is for; empty: the Service's DNS names."""
    webhook_register: bool = False
    """When leading, create or update the webhook configurations and the CRDs' conversion with this certificate's
    CA; under leader election it needs ``webhook_secret`` or ``webhook_cert_dir`` (one CA for every replica)."""
    webhook_url: str = ""
    """Where the apiserver calls the webhook when it is not the Service ``webhook_service`` (out of cluster)."""
    webhook_service: str = "kueue-es-webhook"
    visibility_port: int = 0
    """Serve Kueue's visibility API (``visibility.kueue.x-k8s.io``: pending workloads on demand) over HTTPS on this
    port, for the apiserver's aggregation layer (Kueue uses 8082); 0: not served."""
    visibility_address: str = "0.0.0.0"
    visibility_cert_dir: str = ""
    """``ca.crt``, ``tls.crt``, ``tls.key`` to serve with; empty: a self-signed CA and certificate for the Service's
    names (``visibility_service``.``lease_namespace``.svc)."""
    visibility_register: bool = False
    """When leading, create or update the APIServices (v1beta2, v1beta1) with this certificate's CA, pointing at
    the Service ``visibility_service``."""
    visibility_service: str = "kueue-es-visibility"
    visibility_advertise_address: str = ""
    """With ``visibility_register``: the IP the apiserver reaches this replica at (e.g. the pod IP); the leader then
    also writes the Service (without selector), Endpoints and EndpointSlice routing it there. Empty: the Service
    and its endpoints are someone else's (e.g. the manifests)."""


def lease_seconds(duration_s: float) -> int:
    """The Lease's ``leaseDurationSeconds`` for ``lease_duration_s``: whole seconds (rounded), at least 1."""
    return max(1, round(duration_s))


def validate(s: KubeSettings) -> KubeSettings:
    """Checks that span fields; errors name the setting (``$.kube.*``)."""
    from events.errors import InvalidInput

    if s.leader_election:
        if not 0 < s.retry_period_s < s.renew_deadline_s < s.lease_duration_s:
            raise InvalidInput("$.kube: leader election needs 0 < retry_period_s < renew_deadline_s < "
                               f"lease_duration_s (got {s.retry_period_s}, {s.renew_deadline_s}, "
                               f"{s.lease_duration_s})")
        if not s.renew_deadline_s < lease_seconds(s.lease_duration_s):  # what the standbys wait for
            raise InvalidInput(f"$.kube.renew_deadline_s: must be below the Lease's duration in whole seconds, "
                               f"{lease_seconds(s.lease_duration_s)} for lease_duration_s {s.lease_duration_s} "
                               f"(got {s.renew_deadline_s}): the leader would act after a standby may take over")
        if not s.lease_name or not s.lease_namespace:
            raise InvalidInput("$.kube.lease_name, $.kube.lease_namespace: must not be empty")
    if not 0 <= s.health_port <= 65535:
        raise InvalidInput(f"$.kube.health_port: must be a port number (0-65535), not {s.health_port}")
    if not 0 <= s.webhook_port <= 65535:
        raise InvalidInput(f"$.kube.webhook_port: must be a port number (0-65535), not {s.webhook_port}")
    if s.webhook_port and s.webhook_register and not (s.webhook_url or s.webhook_service):
        raise InvalidInput("$.kube.webhook_register: needs $.kube.webhook_url or $.kube.webhook_service")
    if s.leader_election and s.webhook_port and s.webhook_register and not (s.webhook_secret or s.webhook_cert_dir):
        raise InvalidInput("$.kube.webhook_register: under leader election needs $.kube.webhook_secret or "
                           "$.kube.webhook_cert_dir: every replica serves the webhook, and the one CA the leader "
                           "registers must be the one they all serve with (else each signs its own)")
    if not 0 <= s.visibility_port <= 65535:
        raise InvalidInput(f"$.kube.visibility_port: must be a port number (0-65535), not {s.visibility_port}")
    if s.visibility_port and s.visibility_advertise_address:
        import ipaddress

        try:
            ip = ipaddress.ip_address(s.visibility_advertise_address)
        except ValueError:
            raise InvalidInput(f"$.kube.visibility_advertise_address: not an IP address: "
                               f"{s.visibility_advertise_address!r}") from None
        if ip.is_loopback or ip.is_link_local or ip.is_unspecified:
            raise InvalidInput(f"$.kube.visibility_advertise_address: {ip} is refused in Endpoints (loopback, "
                               "link-local and unspecified addresses are): use an address of this machine the "
                               "apiserver can reach")
    if s.watch_timeout_s < 1:
        raise InvalidInput("$.kube.watch_timeout_s: must be at least 1")
    return s
