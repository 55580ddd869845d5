"""Kueue's ProvisioningRequest admission-check controller, as pure decisions over the projection.

kueue-es is the controller of every AdmissionCheck whose ``controllerName`` is
``kueue.x-k8s.io/provisioning-request``. For a workload, :func:`reconcile_workload` does what one pass of Kueue's
controller does (``pkg/controller/admissionchecks/provisioning``), in Kueue's order:

1. for each of its listed checks that kueue-es controls, the state the check should show — "the check is not
   active" while the check's ProvisioningRequestConfig is missing, Ready when no pod set needs provisioning,
   else mapped from the conditions of the check's active request (Failed and BookingExpired retry with a
   backoff, then Reject; CapacityRevoked rejects; Provisioned is Ready with podSetUpdates; Accepted shows the
   ETA) — an ``AdmissionCheckUpdated`` for each check whose state changes;
2. a ``ProvisioningRequestDeleted`` for every owned request that is not the active one of its check;
3. a ``ProvisioningRequestCreated`` for each Pending check that needs a (new) request.

A creation the apiserver refused (``ProvisioningRequestCreateFailed``: the fold drops the request never made)
puts its error on the still Pending check, as Kueue's ``handleError`` does, and is decided again once its
backoff has passed (:mod:`projections.create_failures`).

:func:`cleanup` deletes the requests of finished workloads and, under the CleanupProvisioningRequestsOnEviction
gate (on by default), of evicted ones. Nothing here reads a clock: backoffs are whole
seconds without Kueue's tiny jitter, so that the same log always gives the same decisions.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

import msgspec

from events import objects as o
from events import schema as ev
from events.message_limits import CONDITION_MESSAGE_BYTES, truncate_message
from events.quantity import parse_quantity
from events.tolerations import added as added_tolerations
from kueue_es.scheduler.provisioning_slices import provisioned
from projections.admissionchecks import PROVISIONING_CONTROLLER, config_for
from projections.cluster import ClusterState
from projections.create_failures import FailedCreate, of_check
from projections.workloads import (
    ADMITTED,
    FINISHED,
    MANAGED_LABEL,
    PENDING,
    TOPOLOGY_GATE,
    WORKLOAD_ANNOTATION,
    WorkloadInfo,
)

NOT_ACTIVE = "the check is not active"
NOT_NEEDED = "the provisioning request is not needed"
FORGOTTEN = "ReservationForgotten"
"""The deletion reason of a request decided for a reservation the fold forgot (:func:`cleanup`)."""
CONSUMES_ANNOTATION = "autoscaling.x-k8s.io/consume-provisioning-request"
CLASS_ANNOTATION = "autoscaling.x-k8s.io/provisioning-class-name"
STALE_ANNOTATIONS = frozenset((CONSUMES_ANNOTATION, CLASS_ANNOTATION, WORKLOAD_ANNOTATION,
                               "kueue.x-k8s.io/workload-slice-name"))
"""What an earlier admission may have left on a pod set's template, which a request's PodTemplate drops."""
REQUEST_API_VERSION = "autoscaling.x-k8s.io/v1"
WORKLOAD_API_VERSION = "kueue.x-k8s.io/v1beta2"
NAME_PREFIX_MAX = 247
"""253 characters, less one for the ``-`` and five for the hash."""
_DIGITS = re.compile(r"[0-9]+")


# --- names (Kueue's provisioning.go) ------------------------------------------------------------------------------


def limit_name(full: str) -> str:
    """A name longer than 247 characters becomes its first 247, ``-`` and 5 hex digits of SHA-1(full name)."""
    if len(full) <= NAME_PREFIX_MAX:
        return full
    return f"{full[:NAME_PREFIX_MAX]}-{hashlib.sha1(full.encode()).hexdigest()[:5]}"


def request_name(workload: str, check: str, attempt: int) -> str:
    return limit_name(f"{workload}-{check}-{attempt}")


def template_name(request: str, pod_set: str) -> str:
    return limit_name(f"ppt-{request}-{pod_set}")


def attempt_of(name: str, workload: str, check: str, max_attempt: int) -> int | None:
    """The attempt a request name stands for, or None when it is not a request of this workload and check.

    Kueue parses ``^<prefix>([0-9]+)$``, which never matches a shortened (hashed) name; those are matched here
    against the names of the attempts that can exist (1 to the retry limit + 1) instead, so that a long
    workload name does not make the active request look foreign and get deleted and created again forever.
    """
    prefix = limit_name(f"{workload}-{check}-")
    if name.startswith(prefix) and _DIGITS.fullmatch(name, len(prefix)):
        return int(name[len(prefix):])
    if len(name) == NAME_PREFIX_MAX + 6:
        for n in range(1, max_attempt + 1):
            if request_name(workload, check, n) == name:
                return n
    return None


# --- what a workload needs --------------------------------------------------------------------------------------


def _uses(spec: o.PodSpec, managed: frozenset[str]) -> bool:
    for c in (*spec.init_containers, *spec.containers):
        if any(r in managed for r in c.resources.requests) or any(r in managed for r in c.resources.limits):
            return True
    return False


def _templates(state: ClusterState, wl: WorkloadInfo) -> tuple[o.PodTemplateSpec, ...]:
    found = state.pod_templates.get(wl.key)
    return found if found is not None else tuple(o.PodTemplateSpec() for _ in wl.pod_sets)


def needed_pod_sets(state: ClusterState, wl: WorkloadInfo, config: o.ProvisioningRequestConfig
                    ) -> list[tuple[int, int]]:
    """(pod-set index, count to provision) of the pod sets that need provisioning, in spec order: a count above
    0, a managed resource in some container's requests or limits (any resource when none is listed), and an
    admitted count above 0 — less, for an elastic Job's scale-up slice under
    ``ElasticJobsViaWorkloadSlicesForProvisioningRequests``, what its chain's last admitted slice runs there
    (:mod:`~kueue_es.scheduler.provisioning_slices`), a pod set left with nothing to add being no longer
    needed.

    The counts are the spec's, as Kueue's reqIsNeeded and mergePodSets read them: pods that turn reclaimable
    after the admission leave the check's request in place (it stays the check's until the workload
    finishes)."""
    managed = frozenset(config.spec.managed_resources)
    templates = _templates(state, wl)
    assigned = {psa.name: psa.count for psa in wl.admission.pod_set_assignments} if wl.admission else {}
    running = provisioned(state, wl)
    out = []
    for i, ps in enumerate(wl.spec_sets):
        if ps.count <= 0 or ps.name not in assigned:
            continue
        if managed and not _uses(templates[i].spec, managed):
            continue
        count = assigned[ps.name]
        count = (ps.count if count is None else count) - running.get(ps.name, 0)
        if count > 0:
            out.append((i, count))
    return out


def _quantities(resources: dict[str, o.Quantity]) -> dict[str, object]:
    return {r: parse_quantity(q) for r, q in resources.items()}


def _same_requests(a: list[o.Container], b: list[o.Container]) -> bool:
    return len(a) == len(b) and all(
        _quantities(x.resources.requests) == _quantities(y.resources.requests) for x, y in zip(a, b, strict=True))


def _same_scheduling(a: o.PodSpec, b: o.PodSpec) -> bool:
    """Kueue's IdenticalWorkloadSchedulingRequirements: equal per-container requests, pod resources, node
    selector, tolerations, affinity and pod-level resourceClaims (a pod set that claims devices is not another's
    twin however alike their cpu and memory: Kueue #5290)."""
    ra, rb = a.resources or o.ResourceRequirements(), b.resources or o.ResourceRequirements()
    return (_same_requests(a.containers, b.containers) and _same_requests(a.init_containers, b.init_containers)
            and _quantities(ra.requests) == _quantities(rb.requests)
            and _quantities(ra.limits) == _quantities(rb.limits)
            and a.node_selector == b.node_selector and a.tolerations == b.tolerations and a.affinity == b.affinity
            and a.resource_claims == b.resource_claims)


def _by_value(r: o.ResourceRequirements) -> o.ResourceRequirements:
    return o.ResourceRequirements(requests=_quantities(r.requests), limits=_quantities(r.limits))  # type: ignore[arg-type]


def _canonical(t: o.PodTemplateSpec) -> o.PodTemplateSpec:
    """``t`` with its quantities by value, as Kueue's equality.Semantic compares templates ("1000m" cpu is "1").

    It keeps the template's :attr:`~events.objects.PodTemplateSpec.digest`, the whole raw template's, so that two
    views compare equal only when what the view leaves out (command, args, env, volumes, spread constraints...) is
    equal too. Templates of a log written before digests carry none (None equals None): they compare by the view
    alone, as they did, until their Workload is upserted again."""
    spec = t.spec
    spec = msgspec.structs.replace(
        spec, containers=[msgspec.structs.replace(c, resources=_by_value(c.resources)) for c in spec.containers],
        init_containers=[msgspec.structs.replace(c, resources=_by_value(c.resources)) for c in spec.init_containers],
        overhead=_quantities(spec.overhead), resources=None if spec.resources is None else _by_value(spec.resources))
    return msgspec.structs.replace(t, spec=spec)


def merged_pod_sets(state: ClusterState, wl: WorkloadInfo, config: o.ProvisioningRequestConfig
                    ) -> list[tuple[int, int]]:
    """(pod-set index, count) of the request's pod sets: the needed ones, each added to the first earlier entry
    the merge policy lets it join (IdenticalPodTemplates: equal views and equal whole-template digests,
    :func:`_canonical`)."""
    policy = config.spec.pod_set_merge_policy
    templates = _templates(state, wl)
    merged: list[list[int]] = []
    for i, count in needed_pod_sets(state, wl, config):
        for entry in merged:
            first = templates[entry[0]]
            if (policy == "IdenticalPodTemplates" and _canonical(first) == _canonical(templates[i])) or (
                    policy == "IdenticalWorkloadSchedulingRequirements" and _same_scheduling(first.spec, templates[i].spec)):
                entry[1] += count
                break
        else:
            merged.append([i, count])
    return [(i, c) for i, c in merged]


# --- the objects the connector creates ---------------------------------------------------------------------------


def _owner(wl: WorkloadInfo) -> o.OwnerReference:
    return o.OwnerReference(api_version=WORKLOAD_API_VERSION, kind="Workload", name=wl.name, uid=wl.uid,
                            controller=True, block_owner_deletion=True)


def _limits_as_requests(containers: list[o.Container]) -> list[o.Container]:
    out = []
    for c in containers:
        missing = {r: q for r, q in c.resources.limits.items() if r not in c.resources.requests}
        if missing:
            c = msgspec.structs.replace(c, resources=o.ResourceRequirements(
                requests={**c.resources.requests, **missing}, limits=c.resources.limits))
        out.append(c)
    return out


def pod_template(state: ClusterState, wl: WorkloadInfo, index: int, name: str) -> o.PodTemplate:
    """The PodTemplate of one request pod set: the pod set's template with what its admission adds (the
    flavors' node labels and tolerations; Kueue's TAS label and scheduling gate once it has a topology
    assignment) and limits copied into missing requests. Owned by the Workload until the request exists.

    The template's own scheduling gates and the annotations of an earlier admission are dropped first, as
    Kueue sanitizes it: the autoscaler ignores gated pods, and a template naming an earlier request or
    Workload would describe pods that are not the ones to provision for."""
    template = _templates(state, wl)[index]
    spec, meta = template.spec, template.metadata
    ps_name = wl.pod_sets[index].name
    psa = next(p for p in wl.admission.pod_set_assignments if p.name == ps_name)  # type: ignore[union-attr]
    node_selector = dict(spec.node_selector)
    tolerations = list(spec.tolerations)
    seen: set[str] = set()
    for resource in sorted(psa.flavors):
        flavor_name = psa.flavors[resource]
        if flavor_name in seen:
            continue
        seen.add(flavor_name)
        flavor = state.flavors.get(flavor_name)
        if flavor is None:
            continue
        for k, v in sorted(flavor.spec.node_labels.items()):
            node_selector.setdefault(k, v)
        tolerations = added_tolerations(tolerations, flavor.spec.tolerations)
    labels = dict(meta.labels)
    annotations = {k: v for k, v in meta.annotations.items() if k not in STALE_ANNOTATIONS}
    gates = [{"name": TOPOLOGY_GATE}] if psa.topology_assignment is not None else []
    merged_spec = msgspec.structs.replace(
        spec, node_selector=node_selector, tolerations=tolerations, scheduling_gates=gates,
        containers=_limits_as_requests(spec.containers), init_containers=_limits_as_requests(spec.init_containers))
    return o.PodTemplate(
        api_version="v1",
        metadata=o.ObjectMeta(name=name, namespace=wl.namespace, labels={MANAGED_LABEL: "true"},
                              owner_references=[_owner(wl)]),
        template=o.PodTemplateSpec(metadata=o.TemplateMeta(labels=labels, annotations=annotations),
                                   spec=merged_spec),
    )


def build_request(state: ClusterState, wl: WorkloadInfo, check: str, attempt: int,
                  config: o.ProvisioningRequestConfig, base: dict) -> ev.ProvisioningRequestCreated:
    """The request of one attempt: the config's class and parameters (overlaid by the workload's
    ``provreq.kueue.x-k8s.io/`` annotations), one pod set per merged pod set, owned by the Workload."""
    name = request_name(wl.name, check, attempt)
    pod_sets, templates = [], []
    for index, count in merged_pod_sets(state, wl, config):
        ppt = template_name(name, wl.pod_sets[index].name)
        templates.append(pod_template(state, wl, index, ppt))
        pod_sets.append(o.ProvisioningRequestPodSet(pod_template_ref=o.PodTemplateRef(name=ppt), count=count))
    parameters = dict(config.spec.parameters)
    parameters.update(wl.provreq_parameters)
    request = o.ProvisioningRequest(
        api_version=REQUEST_API_VERSION,
        metadata=o.ObjectMeta(name=name, namespace=wl.namespace, labels={MANAGED_LABEL: "true"},
                              owner_references=[_owner(wl)]),
        spec=o.ProvisioningRequestSpec(provisioning_class_name=config.spec.provisioning_class_name,
                                       parameters=dict(sorted(parameters.items())), pod_sets=pod_sets),
    )
    return ev.ProvisioningRequestCreated(key=wl.key, uid=wl.uid, check=check, attempt=attempt, request=request,
                                         pod_templates=templates, **base)


# --- request conditions -> check state ---------------------------------------------------------------------------


def _condition(req: o.ProvisioningRequest, type_: str) -> o.Condition | None:
    for c in req.status.conditions:
        if c.type == type_:
            return c
    return None


def _true(req: o.ProvisioningRequest, type_: str) -> bool:
    c = _condition(req, type_)
    return c is not None and c.status == "True"


def backoff_seconds(strategy: o.ProvisioningRequestRetryStrategy, retry_count: int) -> int:
    """requeueAfterSeconds of the next retry: base·2^retryCount, at most the maximum (no jitter), and no less
    than 0: Kueue's CRD takes a negative base or maximum, its Workload's a negative wait not (no wait is a
    retry at once)."""
    return max(0, min(strategy.backoff_base_seconds * 2 ** retry_count, strategy.backoff_max_seconds))


def attempts(strategy: o.ProvisioningRequestRetryStrategy) -> int:
    """How many requests a check may make: the first and a retry per ``backoffLimitCount``, none for a
    negative one (Kueue's CRD takes it; an attempt is retried while at most the limit)."""
    return max(strategy.backoff_limit_count, 0) + 1


def pod_set_updates(wl: WorkloadInfo, req: o.ProvisioningRequest, config: o.ProvisioningRequestConfig
                    ) -> list[o.PodSetUpdate]:
    """One update per request pod set, named after the workload pod set it stands for: the annotations that
    make the pods consume the request, and the config's node selector read from the provisioning class
    details (entries without a detail are skipped)."""
    by_template = {template_name(req.metadata.name, ps.name): ps.name for ps in wl.pod_sets}
    details = req.status.provisioning_class_details
    updates = []
    for ps in req.spec.pod_sets:
        selector: dict[str, str] = {}
        if config.spec.pod_set_updates is not None:
            for ns in config.spec.pod_set_updates.node_selector:
                value = details.get(ns.value_from_provisioning_class_detail)
                if value is not None:
                    selector[ns.key] = value
        updates.append(o.PodSetUpdate(
            name=by_template.get(ps.pod_template_ref.name, ""),
            annotations={CONSUMES_ANNOTATION: req.metadata.name, CLASS_ANNOTATION: req.spec.provisioning_class_name},
            node_selector=selector))
    return updates


class _Check(msgspec.Struct):
    """A check's state while the pass computes it (mutable; the projection's states are not)."""

    state: str
    message: str
    requeue_after_seconds: int | None
    retry_count: int | None
    pod_set_updates: list[o.PodSetUpdate]

    @classmethod
    def of(cls, s: o.AdmissionCheckState) -> _Check:
        return cls(s.state, s.message, s.requeue_after_seconds, s.retry_count, list(s.pod_set_updates))

    def set_message(self, message: str) -> None:
        """An empty message too (Kueue #13785): one left by an earlier state (a creation error) would mislead,
        and would be appended to every Event built from the check."""
        self.message = message


def _retry_or_reject(c: _Check, attempt: int, strategy: o.ProvisioningRequestRetryStrategy, cond: o.Condition,
                     prefix: str) -> None:
    if attempt <= strategy.backoff_limit_count:
        c.set_message(prefix + cond.message)
        if attempt > (c.retry_count or 0):  # never retry on an old request
            c.state = "Retry"
            c.requeue_after_seconds = backoff_seconds(strategy, c.retry_count or 0)
    else:
        c.state = "Rejected"
        c.message = cond.message


def _map_request(c: _Check, wl: WorkloadInfo, check: str, req: o.ProvisioningRequest,
                 config: o.ProvisioningRequestConfig) -> None:
    """Kueue's mapping of the active request's conditions (the first that holds wins) onto the check."""
    strategy = config.spec.retry
    attempt = attempt_of(req.metadata.name, wl.name, check, attempts(strategy)) or 1
    failed, revoked, expired = (_condition(req, t) for t in ("Failed", "CapacityRevoked", "BookingExpired"))
    if failed is not None and failed.status == "True":
        _retry_or_reject(c, attempt, strategy, failed, "Retrying after failure: ")
    elif revoked is not None and revoked.status == "True":
        if wl.active and wl.phase != FINISHED:  # rejecting deactivates: the nodes are gone
            c.state = "Rejected"
            c.set_message(revoked.message)
    elif expired is not None and expired.status == "True":
        if wl.phase != ADMITTED:
            _retry_or_reject(c, attempt, strategy, expired, "Retrying after booking expired: ")
    elif _true(req, "Provisioned"):
        if c.state != "Ready":
            c.state = "Ready"
            c.pod_set_updates = pod_set_updates(wl, req, config)
            c.set_message(_condition(req, "Provisioned").message)  # type: ignore[union-attr]
    elif _true(req, "Accepted"):
        provisioned = _condition(req, "Provisioned")
        if provisioned is not None:  # the ETA, while capacity is on its way
            c.set_message(provisioned.message)
            c.state = "Pending"
    else:
        c.state = "Pending"
        # seen, with nothing said yet: what an earlier state left (an error) no longer holds
        if req.metadata.uid:
            c.message = ""


# --- one pass ---------------------------------------------------------------------------------------------------


def _synced(req: o.ProvisioningRequest, config: o.ProvisioningRequestConfig, wl: WorkloadInfo) -> bool:
    """The request still agrees with the config: same class, and every config parameter with the value a new
    request would get. Kueue compares with the config's own value, so a workload annotation that overrides a
    config parameter makes its own request look stale, to be deleted and created again without end; the
    annotation's value is what a request of this workload is meant to carry, so it is what is compared here."""
    spec = req.spec
    if spec.provisioning_class_name != config.spec.provisioning_class_name:
        return False
    wanted = dict(config.spec.parameters)
    wanted.update((k, v) for k, v in wl.provreq_parameters if k in wanted)
    return all(spec.parameters.get(k) == v for k, v in wanted.items())


def _owned(state: ClusterState, wl: WorkloadInfo) -> list[o.ProvisioningRequest]:
    reqs = state.provisioning_requests
    return [reqs[k] for k in sorted(state.requests_of.get(wl.key, ()))]


def _delete(wl: WorkloadInfo, reqs: Iterable[o.ProvisioningRequest], reason: str, base: dict) -> list[ev.Decision]:
    return [ev.ProvisioningRequestDeleted(key=wl.key, uid=wl.uid, name=r.metadata.name,
                                          namespace=r.metadata.namespace, reason=reason,
                                          request_uid=r.metadata.uid, **base) for r in reqs]


def cleanup(state: ClusterState, base: dict, owners: Iterable[str] | None = None, *,
            on_eviction: bool = True) -> list[ev.Decision]:
    """Delete every request of a finished workload, and of an evicted one while ``on_eviction`` (Kueue's
    CleanupProvisioningRequestsOnEviction gate); a deleted workload's requests go with it through their owner
    reference. Only the requests of ``owners`` (workload keys) when given.

    With the gate off an evicted workload's requests stay as they are: at its next quota reservation
    :func:`reconcile_workload` takes the newest synced one as the check's active request again, so a
    provisioned one is reused (the check turns Ready at once) and a failed or expired one is superseded by the
    next attempt, named from it as Kueue names it (the same name the check's retry count gives).

    A pending workload, neither evicted nor finished, whose reservation the fold forgot (its Workload was
    rewritten with other pod sets before the reservation was written: ``WorkloadInfo.reservation_forgotten``) and
    that owns a request the watch never showed, lost the reservation that request was decided for. The applier
    holds such a creation until the stored Workload holds quota, so it was never made; and Kueue, whose controller
    sees only stored reservations, never decides one. Its deletion (``ReservationForgotten``) withdraws it, so that
    the next reservation gets a request of its own, counted from its own admission, instead of taking this one's
    pod sets and counts as its active request.

    A reservation given back (``QuotaReservationUnset``: its queue stopped, missing or terminating) keeps every
    request, seen or not, as Kueue's controller leaves alone a workload that holds no quota and is neither finished
    nor evicted: the next reservation takes the newest synced one as the check's active request, as it does after
    an eviction with the gate off."""
    out: list[ev.Decision] = []
    requests_of = state.requests_of
    # The intersection walks the smaller side: most passes touch many workloads and few own requests.
    for key in sorted(requests_of.keys() if owners is None else requests_of.keys() & owners):
        wl = state.workloads.get(key)
        if wl is None:
            continue
        if wl.phase == FINISHED:
            out.extend(_delete(wl, _owned(state, wl), "Finished", base))
        elif wl.evicted:
            if on_eviction:
                out.extend(_delete(wl, _owned(state, wl), "Evicted", base))
        elif wl.phase == PENDING and wl.reservation_forgotten:
            out.extend(_delete(wl, [r for r in _owned(state, wl) if not r.metadata.uid], FORGOTTEN, base))
    return out


def _refused(wl: WorkloadInfo, check: str, name: str) -> FailedCreate | None:
    """The failed creation of ``check``'s request ``name`` (:mod:`projections.create_failures`), if it is the
    last one of the check."""
    failed = of_check(wl.failed_creates, check)
    return failed if failed is not None and failed.name == name else None


def reconcile_workload(state: ClusterState, wl: WorkloadInfo, base: dict) -> list[ev.Decision]:
    """One pass of the controller over a workload that holds quota and is not evicted (see the module doc)."""
    acs = state.admission_checks
    configs: dict[str, o.ProvisioningRequestConfig | None] = {}
    for name in wl.check_states:
        ac = acs.get(name)
        if ac is not None and ac.spec.controller_name == PROVISIONING_CONTROLLER:
            configs[name] = config_for(ac, state.provisioning_configs)[0]
    owned = _owned(state, wl)
    if not configs and not owned:
        return []
    needed = {name: cfg is not None and bool(needed_pod_sets(state, wl, cfg)) for name, cfg in configs.items()}

    active: dict[str, tuple[int, o.ProvisioningRequest]] = {}
    for name, cfg in configs.items():
        if cfg is None or not needed[name]:
            continue
        limit = attempts(cfg.spec.retry)
        for req in owned:
            attempt = attempt_of(req.metadata.name, wl.name, name, limit)
            if attempt is not None and _synced(req, cfg, wl) and (name not in active or active[name][0] < attempt):
                active[name] = (attempt, req)

    out: list[ev.Decision] = []
    checks: dict[str, _Check] = {}
    for name in sorted(configs):
        cfg = configs[name]
        current = wl.check_states[name]
        c = checks[name] = _Check.of(current)
        if cfg is None:
            c.state = "Pending"
            c.set_message(NOT_ACTIVE)
        elif not needed[name]:
            if c.state != "Ready":
                c.state, c.message, c.pod_set_updates = "Ready", NOT_NEEDED, []
        elif name in active:
            _map_request(c, wl, name, active[name][1], cfg)
        elif c.state == "Pending":
            failed = _refused(wl, name, request_name(wl.name, name, (c.retry_count or 0) + 1))
            if failed is not None:
                c.set_message(failed.message)  # Kueue's handleError: the error on the check, still Pending
        # a prefix ("Retrying after failure: ") can take a request's message past the CRD's bound: cut here,
        # as Kueue cuts the condition messages it sets, so the check compares equal once the cut is folded
        c.message = truncate_message(c.message, CONDITION_MESSAGE_BYTES)
        if c != _Check.of(current):
            out.append(ev.AdmissionCheckUpdated(
                key=wl.key, uid=wl.uid, check=name, state=c.state, message=c.message,
                requeue_after_seconds=c.requeue_after_seconds, pod_set_updates=c.pod_set_updates, **base))

    keep = {req.key for _, req in active.values()}
    out.extend(_delete(wl, [r for r in owned if r.key not in keep], "Superseded", base))

    for name in sorted(configs):
        cfg = configs[name]
        if cfg is None or not needed[name] or checks[name].state != "Pending":
            continue  # Ready is done; Retry and Rejected wait for the eviction they cause
        attempt = (checks[name].retry_count or 0) + 1
        if name in active:
            prev, req = active[name]
            if not (_true(req, "Failed") or (_true(req, "BookingExpired") and wl.phase != ADMITTED)):
                continue
            attempt = prev + 1
        new = request_name(wl.name, name, attempt)
        if f"{wl.namespace}/{new}" in state.provisioning_requests and f"{wl.namespace}/{new}" in keep:
            continue
        failed = _refused(wl, name, new)
        if failed is not None and failed.retry_at > base["time"]:
            continue  # refused before: decided again once its backoff has passed (the fold's clock wakes it)
        out.append(build_request(state, wl, name, attempt, cfg, base))
    return out
