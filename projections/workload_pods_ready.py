"""A workload's own waitForPodsReady timeouts: Kueue v0.20's ``kueue.x-k8s.io/wait-for-pods-ready`` annotation
(KEP-4803), read under its ``WorkloadLevelWaitForPodsReady`` gate (alpha, off by default). Pure.

The annotation is a JSON object, ``{"timeoutSeconds": 30, "recoveryTimeoutSeconds": 40}``. The job integrations copy
it from the job onto its Workload; the fold keeps what a Workload carries (:attr:`WorkloadInfo.own_pods_ready`),
whatever the gate, and the scheduler reads it only while the gate is on. Each value overrides the configuration's
(``waitForPodsReady.timeout``, ``recoveryTimeout``); without ``recoveryTimeoutSeconds`` the workload's own timeout is
its recovery timeout too. A value that is not a whole number above 0 (a Workload made without Kueue's webhook) is
not taken: the configuration's applies.
"""

from __future__ import annotations

import json

WAIT_FOR_PODS_READY_ANNOTATION = "kueue.x-k8s.io/wait-for-pods-ready"

DEFAULT_MAX_TIMEOUT_ON_WORKLOAD = "2h"
"""``waitForPodsReady.maxTimeoutOnWorkload`` when unset: the longest timeout a job may ask for."""


TIMEOUT_KEY, RECOVERY_KEY = "timeoutSeconds", "recoveryTimeoutSeconds"


def whole_seconds(raw: object) -> int | None:
    """A whole number of seconds above 0 (JSON's ``30``, not ``30.5``, ``"30"`` nor ``true``), else None."""
    if isinstance(raw, bool) or not isinstance(raw, int) or raw <= 0:
        return None
    return raw


def parse(value: str | None) -> dict[str, object] | None:
    """The annotation's object (None: absent, empty, not JSON, or not an object). The fold reads the timeouts of
    it; the job webhooks check it (:mod:`connectors.k8s.pods_ready_validation`)."""
    if not value:
        return None
    try:
        doc = json.loads(value)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def own_timeouts(value: str | None) -> tuple[int | None, int | None] | None:
    """``(timeout ms, recovery timeout ms)`` a Workload's annotation ``value`` sets (None in either place: the
    configuration's applies; None for both: it sets none)."""
    doc = parse(value)
    if doc is None:
        return None
    timeout = whole_seconds(doc.get(TIMEOUT_KEY))
    recovery = whole_seconds(doc.get(RECOVERY_KEY))
    if recovery is None:
        recovery = timeout
    if timeout is None and recovery is None:
        return None
    return (timeout * 1000 if timeout is not None else None, recovery * 1000 if recovery is not None else None)
