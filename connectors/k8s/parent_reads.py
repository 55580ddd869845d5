"""Reading a job's parent from the apiserver for the ancestor walk
(:func:`connectors.k8s.child_jobs.walk_reading`): the webhooks' parents not held in memory, the reconcilers'
parents of a kind Kueue knows whose integration is off (no informer lists those), and parents of the kinds an
external controller runs for Kueue (``integrations.externalFrameworks``). Kueue reads such a parent as
metadata through its manager's cache; kueue-es GETs it and keeps only its metadata. ``kueue-es manifests``
grants getting every kind Kueue knows; as in Kueue, getting an external kind is the user's to grant."""

from __future__ import annotations

from collections.abc import Collection

import msgspec

from connectors.k8s import job_selection
from connectors.k8s import resources as res
from connectors.k8s.client import KubeClient
from connectors.k8s.discovery import discover
from connectors.k8s.errors import KubeError, NotFound
from events import objects as o

PARENT_RESOURCES: dict[str, res.Resource] = {**job_selection.OWNER_RESOURCES, **{r.kind: r for r in (
    res.DEPLOYMENTS, res.STATEFUL_SETS, res.REPLICA_SETS)}}
"""Where a parent of each kind the walk reads (:func:`connectors.k8s.job_selection.known_owner`) is got: the
integrations' kinds (:data:`~connectors.k8s.job_selection.OWNER_RESOURCES`, which retention deletes too) and
the serving sets' and the ReplicaSet between a Deployment and its Pods."""

Found = dict[tuple[str, str], res.Resource]
"""The resources of external kinds found through discovery so far, by (apiVersion, kind): a reader's cache."""


async def read_parent_meta(client: KubeClient, namespace: str, ref: o.OwnerReference,
                           external: Collection[tuple[str, str]] = (), found: Found | None = None
                           ) -> o.ObjectMeta | None:
    """The metadata of the parent ``ref`` names in ``namespace``; None: not there (404), or of a kind not read
    here. A parent of one of the ``external`` kinds (``SchedulerConfig.external_job_kinds``) is read at the
    resource the apiserver's discovery names for it (kept in ``found``); a kind it serves no resource for is
    an error, as Kueue's client has no mapping for it. Another failure raises
    :class:`~connectors.k8s.errors.KubeError`."""
    owner = (ref.api_version, ref.kind)
    if owner in external:
        resource = await _external_resource(client, owner, {} if found is None else found)
    else:
        resource = PARENT_RESOURCES.get(ref.kind)
    if resource is None:
        return None
    try:
        raw = msgspec.json.decode(await client.get(resource, ref.name, namespace))  # the body's bytes
    except NotFound:
        if found is not None:
            found.pop(owner, None)  # its CRD may have gone since: found again at the next read
        return None
    meta = raw.get("metadata") if isinstance(raw, dict) else None
    return msgspec.convert(meta or {}, o.ObjectMeta, strict=False)


async def _external_resource(client: KubeClient, kind: tuple[str, str], found: Found) -> res.Resource:
    """The resource serving the external ``kind``, from ``found`` or else the apiserver's discovery."""
    resource = found.get(kind)
    if resource is None:
        resource = await discover(client, kind)
        if resource is None:
            raise KubeError(f'no matches for kind "{kind[1]}" in version "{kind[0]}"')
        found[kind] = resource
    return resource
