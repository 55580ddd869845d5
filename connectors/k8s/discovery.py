"""Which resource serves a kind on an apiserver, as its API discovery documents say: for kinds kueue-es has no
fixed resource for (MultiKueue's custom kinds, ``integrations.externalFrameworks``), whose plural only the
kind's installed CRD knows."""

from __future__ import annotations

import msgspec

from connectors.k8s.client import KubeClient
from connectors.k8s.errors import NotFound
from connectors.k8s.resources import Resource


async def discover(client: KubeClient, kind: tuple[str, str]) -> Resource | None:
    """The resource serving ``kind`` ((apiVersion, kind)) on the apiserver ``client`` reaches, found in its
    discovery document (the group version's resource list) as Kueue's client maps a kind to its resource; None
    when it serves no such kind (its CRD not installed)."""
    api_version, name = kind
    group, _, version = api_version.rpartition("/")
    path = f"/apis/{api_version}" if group else f"/api/{version}"
    try:
        doc = msgspec.json.decode(await client.request("GET", path))
    except NotFound:
        return None
    listed = doc.get("resources") if isinstance(doc, dict) else None
    names = {r.get("name") for r in listed or () if isinstance(r, dict)}
    for r in listed or ():
        plural = r.get("name", "") if isinstance(r, dict) else ""
        if r.get("kind") == name and plural and "/" not in plural:
            return Resource(name, group, version, plural, bool(r.get("namespaced")),
                            status_subresource=f"{plural}/status" in names, optional=True)
    return None
