"""The CRD conversion webhook: the apiserver asks, kueue-es converts kueue.x-k8s.io objects between v1beta1 and
v1beta2 (:mod:`events.conversion`), so objects written as v1beta1 are stored as v1beta2 and read back either way.

:func:`review` answers one ``apiextensions.k8s.io/v1`` ConversionReview: every object converted to
``desiredAPIVersion``, or — when any object cannot be — none, with a ``Failure`` result whose message names the
object and the field (the apiserver then refuses the request it was converting for). It is served at
:data:`PATH` by the webhook server (:mod:`connectors.k8s.webhook`) next to the Job webhook, with the same
certificate. :func:`register` points the installed CRDs at it (``spec.conversion``, with the CA as
``caBundle``), as :func:`connectors.k8s.crds.webhook_conversion` describes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec
import structlog

from connectors.k8s.client import KubeClient
from connectors.k8s.crds import CONVERSION_PATH, CRD_RESOURCE
from connectors.k8s.errors import NotFound
from connectors.k8s.resources import KUEUE_RESOURCES
from events import conversion
from events.errors import InvalidInput
from projections import gates

log = structlog.get_logger("kueue_es.k8s.conversion")

PATH = CONVERSION_PATH
REVIEW_API_VERSION = "apiextensions.k8s.io/v1"


def convert_request(req: Any, feature_gates: Mapping[str, bool] | None = None) -> list[dict[str, Any]]:
    """The converted objects of one ConversionReview request, under the Kueue Configuration's ``feature_gates``
    (TASAssignmentsEncodingByHostnamePrefix: how a topology assignment is written in v1beta2, as Kueue's
    conversion writes it); :class:`InvalidInput` names what is wrong."""
    if not isinstance(req, dict):
        raise InvalidInput("ConversionReview: field `request` is required")
    desired = req.get("desiredAPIVersion")
    if not isinstance(desired, str) or not desired:
        raise InvalidInput("ConversionReview: field `request.desiredAPIVersion` is required")
    objects = req.get("objects")
    if not isinstance(objects, list):
        raise InvalidInput("ConversionReview: field `request.objects`: expected an array of objects")
    by_prefix = gates.enabled(feature_gates or {}, gates.TAS_ASSIGNMENTS_ENCODING_BY_HOSTNAME_PREFIX)
    return [conversion.convert(doc, desired, conversion.describe(doc, i), by_hostname_prefix=by_prefix)
            for i, doc in enumerate(objects)]


def review(body: bytes, feature_gates: Mapping[str, bool] | None = None) -> dict[str, Any]:
    """Answer one ConversionReview under ``feature_gates`` (raises :class:`msgspec.DecodeError` when ``body`` is
    not JSON at all)."""
    doc = msgspec.json.decode(body)
    req = doc.get("request") if isinstance(doc, dict) else None
    uid = req.get("uid", "") if isinstance(req, dict) else ""
    result: dict[str, Any] = {"status": "Success"}
    converted: list[dict[str, Any]] = []
    try:
        if not isinstance(doc, dict) or doc.get("kind") != "ConversionReview" or \
                doc.get("apiVersion") != REVIEW_API_VERSION:
            raise InvalidInput(f"not a ConversionReview of {REVIEW_API_VERSION}")
        converted = convert_request(req, feature_gates)
    except InvalidInput as exc:
        result = {"status": "Failure", "message": str(exc)}
        log.warning("conversion refused", uid=uid, error=str(exc))
    return {"apiVersion": REVIEW_API_VERSION, "kind": "ConversionReview",
            "response": {"uid": uid, "convertedObjects": converted, "result": result}}


async def register(client: KubeClient, stanza: dict[str, Any]) -> list[str]:
    """Set ``spec.conversion`` of every installed kueue.x-k8s.io CRD to ``stanza``; returns the CRDs patched
    (one not installed is skipped: ``kueue-es manifests`` or ``install_crds`` installs them)."""
    patched = []
    for r in KUEUE_RESOURCES:
        name = f"{r.plural}.{r.group}"
        try:
            await client.patch(CRD_RESOURCE, name, {"spec": {"conversion": stanza}})
        except NotFound:
            log.warning("CRD not installed, no conversion to set", crd=name)
            continue
        patched.append(name)
    log.info("conversion webhook registered", crds=len(patched))
    return patched
