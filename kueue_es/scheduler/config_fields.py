"""The fields a Kueue ``Configuration`` may hold, for refusing the ones it may not, as Kueue does.

Kueue reads its configuration file with a strict decoder: a field its Configuration type does not have stops it
from starting, with the decoder's error (``strict decoding error: unknown field "waitForPodsReady.timeoutt"``, every
unknown field named, in the document's order). kueue-es refuses such a file the same way (:func:`unknown_fields`).

The fields known are those kueue-es reads (its :class:`~kueue_es.scheduler.config.SchedulerConfig`, whatever it
models of Kueue's newer fields) together with those of Kueue's ``config.kueue.x-k8s.io`` v1beta2 and v1beta1
types it does not read (:data:`UNREAD`): the webhook and metrics servers, leader election, the client, the
certificates, the deprecated v1beta1 stanzas. One set for both versions: a field of one version in a document of
the other is taken, not refused. Free-form maps (``featureGates``, label selectors' ``matchLabels``, an exec
plugin's configuration) are not looked into.
"""

from __future__ import annotations

from typing import Any

import msgspec.inspect as mi

Tree = dict[str, Any]
"""Field name -> ``None`` (a value not looked into), a :data:`Tree` (an object) or ``[Tree]`` (a list of objects)."""

_SELECTOR: Tree = {"matchLabels": None, "matchExpressions": [{"key": None, "operator": None, "values": None}]}

UNREAD: Tree = {
    "webhook": {"port": None, "host": None, "certDir": None},
    "leaderElection": {"leaderElect": None, "leaseDuration": None, "renewDeadline": None, "retryPeriod": None,
                       "resourceLock": None, "resourceName": None, "resourceNamespace": None},
    "metrics": {"bindAddress": None},
    "health": {"healthProbeBindAddress": None, "readinessEndpointName": None, "livenessEndpointName": None},
    "pprofBindAddress": None,
    "controller": {"groupKindConcurrency": None, "cacheSyncTimeout": None},
    "internalCertManagement": {"enable": None, "webhookServiceName": None, "webhookSecretName": None},
    "clientConnection": {"qps": None, "burst": None},
    "integrations": {"externalFrameworks": None, "podOptions": {"namespaceSelector": _SELECTOR,
                                                                 "podSelector": _SELECTOR}},
    "queueVisibility": {"updateIntervalSeconds": None, "clusterQueues": {"maxCount": None}},
    "multiKueue": {"clusterProfile": {"credentialsProviders": [{"name": None, "execConfig": None}]}},
    "fairSharing": {"enable": None},
    "managedJobsNamespaceSelector": _SELECTOR,
}


def _tree(info: mi.Type) -> Tree | list[Tree] | None:
    """What a decoded type of kueue-es's own says of the fields below it."""
    if isinstance(info, mi.UnionType):
        found = [t for t in (_tree(member) for member in info.types) if t is not None]
        return found[0] if found else None
    if isinstance(info, mi.StructType):
        return {f.encode_name: _tree(f.type) for f in info.fields}
    if isinstance(info, mi.ListType | mi.VarTupleType):
        item = _tree(info.item_type)
        return [item] if isinstance(item, dict) else None
    return None


def _merge(a: Any, b: Any) -> Any:
    if isinstance(a, dict) and isinstance(b, dict):
        return {**a, **b, **{k: _merge(a[k], b[k]) for k in a.keys() & b.keys()}}
    if isinstance(a, list) and isinstance(b, list):
        return [_merge(a[0], b[0])]
    return a if a is not None else b


def known(read: type) -> Tree:
    """The fields known: those of ``read`` (the type kueue-es decodes a Configuration as), and :data:`UNREAD`."""
    tree = _merge(_tree(mi.type_info(read)), UNREAD)
    assert isinstance(tree, dict)
    return tree


def unknown_fields(doc: Any, tree: Tree, at: str = "") -> list[str]:
    """The paths (``a.b[0].c``) of the fields of ``doc`` that ``tree`` does not know, in the document's order."""
    found: list[str] = []
    if not isinstance(doc, dict):
        return found
    for key, value in doc.items():
        path = f"{at}.{key}" if at else str(key)
        if key not in tree:
            found.append(path)
            continue
        below = tree[key]
        if isinstance(below, dict):
            found += unknown_fields(value, below, path)
        elif isinstance(below, list) and isinstance(value, list):
            for i, item in enumerate(value):
                found += unknown_fields(item, below[0], f"{path}[{i}]")
    return found
