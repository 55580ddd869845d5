"""Follow one named object: list it, then watch it, handing each state seen (None: there is none) to a callback;
a read that fails is reported and tried again. What the MultiKueue connector reads a worker's kubeconfig Secret
and a worker's ClusterProfile with (Kueue's cluster controller reads both from its informers' caches, woken by
their changes)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import msgspec

from connectors.k8s.client import KubeClient
from connectors.k8s.errors import Gone
from connectors.k8s.resources import Resource


async def follow(client: KubeClient, r: Resource, name: str, namespace: str, *,
                 seen: Callable[[dict[str, Any] | None], None], failed: Callable[[Exception], None],
                 watch_timeout_s: int, retry_s: float) -> None:
    """Until cancelled: ``seen`` the object ``name`` of kind ``r`` in ``namespace`` as listed, then at every change
    (None once deleted); ``failed`` with the error when a list or watch fails, then listed again after
    ``retry_s``. A watch that fell behind (410 Gone) is listed again at once."""
    selector = f"metadata.name={name}"
    while True:
        try:
            page = await client.list(r, field_selector=selector, namespace=namespace)
            seen(msgspec.json.decode(page.items[0]) if page.items else None)
            rv = page.metadata.resource_version
            while True:
                async for e in client.watch(r, rv, timeout_seconds=watch_timeout_s, field_selector=selector,
                                            namespace=namespace):
                    obj = msgspec.json.decode(e.object)
                    rv = (obj.get("metadata") or {}).get("resourceVersion", rv)
                    if e.type != "BOOKMARK":
                        seen(None if e.type == "DELETED" else obj)
        except asyncio.CancelledError:
            raise
        except Gone:
            continue
        except Exception as exc:  # noqa: BLE001 - whatever kept it from being read is reported, and retried
            failed(exc)
            await asyncio.sleep(retry_s)


async def stopped(task: asyncio.Task) -> None:
    """Cancel ``task`` and wait for its end, whatever it raised, without swallowing a cancellation of the caller
    that comes meanwhile (a shutdown while a worker's watches were being stopped: the connector's loop would go on,
    and its task group wait for it)."""
    caller = asyncio.current_task()
    cancels = caller.cancelling() if caller is not None else 0
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        if caller is not None and caller.cancelling() > cancels:
            raise
    except Exception:  # the task's own failure ends with it
        pass
