"""Whether waitForPodsReady is in force under a Kueue Configuration: one reading for the scheduler and the projection.

The scheduler decides by it (timeouts, evictions, blockAdmission: ``kueue_es.scheduler.config``); the metrics fold
needs it too, because Kueue writes the PodsReady condition, and observes the ready wait times, only while it is in
force (:mod:`projections.metrics`). The fold has only the recorded document, and may not import the scheduler, so
the rule lives here; the gate is read through :mod:`projections.gates`, as ``SchedulerConfig.pods_ready`` reads it.

Kueue's rule (config v1beta2): a Configuration without a ``waitForPodsReady`` stanza gets one by defaulting, so
waitForPodsReady is on unless the ``DisableWaitForPodsReady`` gate (alpha, off by default) turns it off; a stanza
with ``enable: false`` (v1beta1's switch: a v1beta2 file with it is refused, but a log may have recorded one)
turns it off too. A v1beta1 document is read with v1beta1's meaning (:mod:`projections.config_version`): off unless
its stanza says ``enable: true``.
"""

from __future__ import annotations

from typing import Any

import msgspec

from projections import config_version, gates


class _Stanza(msgspec.Struct, forbid_unknown_fields=False):
    enable: bool = True


class _Switches(msgspec.Struct, rename="camel", forbid_unknown_fields=False):
    wait_for_pods_ready: _Stanza | None = None
    feature_gates: dict[str, bool] = {}


def waits_for_pods_ready(document: dict[str, Any] | None) -> bool:
    """Whether waitForPodsReady is in force under a recorded Configuration document (None: none recorded, Kueue's
    defaults: on). Decoded as the scheduler decodes it (loosely: ``"false"`` is false); the document was validated
    before it was recorded, and one that does not decode counts as Kueue's defaults rather than stopping the fold."""
    document = config_version.as_hub(document)
    if not document:
        return True
    try:
        switches = msgspec.convert(document, _Switches, strict=False)
    except msgspec.ValidationError:
        return True
    if gates.enabled(switches.feature_gates, gates.DISABLE_WAIT_FOR_PODS_READY):
        return False
    return switches.wait_for_pods_ready is None or switches.wait_for_pods_ready.enable
