"""A ``config.kueue.x-k8s.io/v1beta1`` Configuration read with the meaning Kueue gives it.

Kueue decodes a v1beta1 file as v1beta1, defaults it with v1beta1's defaults and converts it to v1beta2, its
hub. Two switches mean something else in the older version:

* ``fairSharing``: in v1beta1 the stanza does nothing unless ``enable: true``; Kueue's conversion drops a stanza that
  is not enabled, and an enabled one without ``preemptionStrategies`` gets both strategies
  (``LessThanOrEqualToFinalShare``, ``LessThanInitialShare``). In v1beta2 the stanza's presence switches it on.
* ``waitForPodsReady``: in v1beta1 it is off unless the stanza says ``enable: true`` (no stanza: off, where v1beta2
  defaults one in and is on); enabled, its ``timeout`` defaults to 5 minutes and ``blockAdmission`` to true.

``queueVisibility`` and ``integrations.podOptions`` are dropped by the conversion (nothing reads them), and the
other fields the two versions share mean the same.

:func:`as_hub` says all of this once, on the plain document, for both readers of a configuration: the scheduler
loading it (``kueue_es.scheduler.config.load_config``) and the fold reading the recorded document
(:mod:`projections.fair_share`, :mod:`projections.pods_ready`, :mod:`projections.queue_order`). The result is still
a v1beta1 document, with its switches written out (``enable``), so converting it again changes nothing; a
waitForPodsReady that is off is ``{"enable": false}``, the form both readers take as off.
"""

from __future__ import annotations

from typing import Any

import msgspec

V1BETA1 = "config.kueue.x-k8s.io/v1beta1"

BOTH_STRATEGIES = ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]
"""Kueue's fair preemption strategies when an enabled v1beta1 ``fairSharing`` names none."""
V1BETA1_PODS_READY_TIMEOUT = "5m"
"""v1beta1's ``waitForPodsReady.timeout`` when enabled without one."""
PODS_READY_OFF: dict[str, Any] = {"enable": False}


def switch(value: Any) -> bool | None:
    """An ``enable`` value as the scheduler decodes it (loosely: ``"false"`` is false; unset is Go's false); None
    when it is no boolean at all (the decoder refuses it: :func:`as_hub` leaves such a stanza as it is)."""
    if value is None:
        return False
    try:
        return msgspec.convert(value, bool, strict=False)
    except msgspec.ValidationError:
        return None


def _fair_sharing(stanza: Any) -> dict[str, Any] | None:
    on = switch(stanza.get("enable")) if isinstance(stanza, dict) else False
    if on is None:
        return stanza  # type: ignore[no-any-return]
    if not on:
        return None
    return {**stanza, "enable": True, "preemptionStrategies": stanza.get("preemptionStrategies") or BOTH_STRATEGIES}


def _pods_ready(stanza: Any) -> dict[str, Any]:
    on = switch(stanza.get("enable")) if isinstance(stanza, dict) else False
    if on is None:
        return stanza  # type: ignore[no-any-return]
    if not on:
        return dict(PODS_READY_OFF)
    out = {**stanza, "enable": True}
    if out.get("timeout") is None:
        out["timeout"] = V1BETA1_PODS_READY_TIMEOUT
    if out.get("blockAdmission") is None:
        out["blockAdmission"] = True
    return out


def as_hub(document: dict[str, Any] | None) -> dict[str, Any] | None:
    """``document`` with Kueue's v1beta1 meaning written out (above) when its ``apiVersion`` is v1beta1; any other
    document (v1beta2, none) as it is. A new dict: ``document`` is not changed."""
    if not document or document.get("apiVersion") != V1BETA1:
        return document
    out = {k: v for k, v in document.items() if k != "queueVisibility"}
    fair = _fair_sharing(document.get("fairSharing"))
    if fair is None:
        out.pop("fairSharing", None)
    else:
        out["fairSharing"] = fair
    out["waitForPodsReady"] = _pods_ready(document.get("waitForPodsReady"))
    integrations = document.get("integrations")
    if isinstance(integrations, dict) and "podOptions" in integrations:
        out["integrations"] = {k: v for k, v in integrations.items() if k != "podOptions"}
    return out
