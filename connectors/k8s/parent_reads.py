"""Reading a job's parent from the apiserver for the ancestor walk
(:func:`connectors.k8s.child_jobs.walk_reading`): the webhooks' parents not held in memory, and the
reconcilers' parents of a kind Kueue knows whose integration is off (no informer lists those). Kueue reads
such a parent as metadata through its manager's cache; kueue-es GETs it and keeps only its metadata.
``kueue-es manifests`` grants getting every kind read here."""

from __future__ import annotations

import msgspec

from connectors.k8s import job_selection
from connectors.k8s import resources as res
from connectors.k8s.client import KubeClient
from connectors.k8s.errors import NotFound
from events import objects as o

PARENT_RESOURCES: dict[str, res.Resource] = {**job_selection.OWNER_RESOURCES, **{r.kind: r for r in (
    res.DEPLOYMENTS, res.STATEFUL_SETS, res.REPLICA_SETS)}}
"""Where a parent of each kind the walk reads (:func:`connectors.k8s.job_selection.known_owner`) is got: the
integrations' kinds (:data:`~connectors.k8s.job_selection.OWNER_RESOURCES`, which retention deletes too) and
the serving sets' and the ReplicaSet between a Deployment and its Pods."""


async def read_parent_meta(client: KubeClient, namespace: str, ref: o.OwnerReference) -> o.ObjectMeta | None:
    """The metadata of the parent ``ref`` names in ``namespace``; None: not there (404), or of a kind not read
    here. Another failure raises :class:`~connectors.k8s.errors.KubeError`."""
    resource = PARENT_RESOURCES.get(ref.kind)
    if resource is None:
        return None
    try:
        raw = msgspec.json.decode(await client.get(resource, ref.name, namespace))  # the body's bytes
    except NotFound:
        return None
    meta = raw.get("metadata") if isinstance(raw, dict) else None
    return msgspec.convert(meta or {}, o.ObjectMeta, strict=False)
