"""Kueue's ``TLSOptions`` gate (beta, on): the Configuration's ``tls`` stanza (``minVersion``, ``cipherSuites``) on
the HTTPS servers the connector runs, checked with real handshakes against the webhook server; and the size of a
review that server takes."""

from __future__ import annotations

import asyncio
import io
import socket
import ssl
import tempfile
from pathlib import Path

import aiohttp
import msgspec
import pytest
import structlog

from connectors.k8s import https
from connectors.k8s.certs import self_signed
from connectors.k8s.webhook import MAX_REVIEW_BYTES, WebhookServer
from events import schema as ev
from events.errors import InvalidInput
from kueue_es.scheduler.config import load_config
from kueue_es.scheduler.config_record import load_recorded
from kueue_es.scheduler.tls_options import TLSSettings


async def _no_default_queue(namespace: str) -> bool:
    return False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _handshake(config: dict, *, max_version: ssl.TLSVersion | None = None, ciphers: str = "") -> str:
    """Serve the webhook under ``config`` and connect with a client limited to ``max_version`` and ``ciphers``:
    the protocol agreed, or the handshake's failure (``refused``)."""
    bundle = self_signed(["127.0.0.1"])
    _, cert, key = bundle.write(tempfile.mkdtemp(prefix="kueue-es-tls-test-"))
    server, port = WebhookServer(_no_default_queue), _free_port()
    await server.start("127.0.0.1", port, str(cert), str(key), load_config(config).server_tls)
    client = ssl.create_default_context(cadata=bundle.ca_pem.decode())
    if max_version is not None:
        client.maximum_version = max_version
    if ciphers:
        client.set_ciphers(ciphers)
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client, server_hostname="127.0.0.1")
        version = writer.get_extra_info("ssl_object").version()
        writer.close()
        await writer.wait_closed()
        return version
    except (ssl.SSLError, ConnectionResetError):
        return "refused"
    finally:
        await server.stop()


TLS13 = {"tls": {"minVersion": "VersionTLS13"}}


@pytest.mark.asyncio
async def test_a_client_offering_only_a_refused_version_fails_the_handshake() -> None:
    """``minVersion: VersionTLS13`` refuses a TLS 1.2 client; without the stanza, TLS 1.2 is served."""
    assert await _handshake(TLS13, max_version=ssl.TLSVersion.TLSv1_2) == "refused"
    assert await _handshake(TLS13) == "TLSv1.3"
    assert await _handshake({}, max_version=ssl.TLSVersion.TLSv1_2) == "TLSv1.2"


def test_the_gate_is_locked_on() -> None:
    """``TLSOptions`` is GA in Kueue v0.20, locked to on: a Configuration turning it off is refused at start-up."""
    with pytest.raises(InvalidInput, match="cannot set feature gate TLSOptions to false, feature is locked to true"):
        load_config({"tls": {"minVersion": "VersionTLS13"}, "featureGates": {"TLSOptions": False}})
    assert load_config({"tls": {}, "featureGates": {"TLSOptions": True}}).server_tls == TLSSettings((1, 2), ())


@pytest.mark.asyncio
async def test_cipher_suites_limit_what_a_tls_1_2_client_may_choose() -> None:
    """The serving certificate's key is an ECDSA one: the ECDSA suites are the ones a handshake can agree on."""
    only_256 = {"tls": {"cipherSuites": ["TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"]}}
    tls12 = ssl.TLSVersion.TLSv1_2
    assert await _handshake(only_256, max_version=tls12, ciphers="ECDHE-ECDSA-AES128-GCM-SHA256") == "refused"
    assert await _handshake(only_256, max_version=tls12, ciphers="ECDHE-ECDSA-AES256-GCM-SHA384") == "TLSv1.2"
    assert await _handshake({}, max_version=tls12, ciphers="ECDHE-ECDSA-AES128-GCM-SHA256") == "TLSv1.2"


def test_the_stanza_as_kueue_reads_it() -> None:
    assert load_config({}).server_tls is None, "no stanza: the library's defaults"
    assert load_config({"tls": {}}).server_tls == TLSSettings((1, 2), ()), "a stanza: at least TLS 1.2"
    assert load_config({"tls": {"cipherSuites": ["TLS_AES_128_GCM_SHA256"]}}).server_tls == TLSSettings((1, 3), ()), \
        "TLS 1.3 suites alone leave no TLS 1.2 suite"


CURVES = "field `tls`: invalid curve preferences: "


@pytest.mark.parametrize(("stanza", "error"), [
    ({"minVersion": "VersionTLS11"}, "field `tls`: invalid minVersion. Please use VersionTLS12 or "
                                     "VersionTLS13"),
    ({"minVersion": "TLS1.3"}, 'field `tls`: invalid minVersion: unknown tls version "TLS1.3". Please '
                               "use VersionTLS12 or VersionTLS13"),
    ({"cipherSuites": ["TLS_NOPE"]}, "field `tls`: invalid cipher suites: Cipher suite TLS_NOPE not "
                                     "supported or doesn't exist"),
    ({"curvePreferences": [0]}, f"{CURVES}curve preference 0 is out of range (must be 1-65535)"),
    ({"curvePreferences": [23, 65536]}, f"{CURVES}curve preference 65536 is out of range (must be 1-65535)"),
    ({"curvePreferences": [29, 23, 29]}, f"{CURVES}duplicate curve preference 29"),
    ({"curvePreferences": [23, 1]}, f"{CURVES}curve preference 1 is not supported by the current Go version"),
])
def test_a_stanza_kueue_cannot_parse_is_refused(stanza: dict, error: str) -> None:
    """The newest Kueue's validateTLS refuses it at start-up, whether the visibility API is served or not (before,
    only its visibility server exited on it); a log that recorded one without that server replays as it did, the
    webhooks on the library's defaults. (Curves alone, which only a newer build can have recorded, keep the
    version and suites: the test of a recorded stanza with curves this build does not name.)"""
    for gates in ({}, {"VisibilityOnDemand": False}):
        with pytest.raises(InvalidInput) as refused:
            load_config({"tls": stanza, "featureGates": gates})
        assert str(refused.value) == f"<config>: {error}"
    recorded = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "tls": stanza,
                "featureGates": {"VisibilityOnDemand": False}}
    curves = tuple(stanza.get("curvePreferences", ()))
    assert load_recorded(ev.ConfigRecorded(time=0, document=recorded), 5).server_tls == (
        TLSSettings((1, 2), (), curves) if curves else None)


def test_cipher_suites_with_tls_1_3_as_the_minimum_are_refused() -> None:
    """TLS 1.3's suites are not configurable, so Kueue's validateTLS refuses a list beside ``minVersion:
    VersionTLS13``; a log that recorded one replays as it did."""
    stanza = {"minVersion": "VersionTLS13", "cipherSuites": ["TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"]}
    with pytest.raises(InvalidInput) as refused:
        load_config({"tls": stanza})
    assert str(refused.value) == (
        "<config>: field `tls.cipherSuites`: Invalid value: "
        '[]string{"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"}: may not be specified when `minVersion` is '
        "'VersionTLS13'")
    recorded = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "tls": stanza}
    assert load_recorded(ev.ConfigRecorded(time=0, document=recorded), 5).server_tls is not None


@pytest.mark.asyncio
async def test_tls_1_2_suites_openssl_cannot_offer_leave_tls_1_3_instead_of_a_server_that_cannot_start() -> None:
    """Kueue takes Go's insecure suite names too (3DES, RC4), which this OpenSSL cannot offer: rather than fail to
    start, the server is left with TLS 1.3 (whose suites are not configurable), as for TLS 1.3 suites alone; a
    suite it can offer beside them is kept for TLS 1.2."""
    only_3des = {"tls": {"cipherSuites": ["TLS_RSA_WITH_3DES_EDE_CBC_SHA"]}}
    assert await _handshake(only_3des) == "TLSv1.3"
    assert await _handshake(only_3des, max_version=ssl.TLSVersion.TLSv1_2) == "refused"
    mixed = {"tls": {"cipherSuites": ["TLS_ECDHE_RSA_WITH_RC4_128_SHA", "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"]}}
    assert await _handshake(mixed, max_version=ssl.TLSVersion.TLSv1_2,
                            ciphers="ECDHE-ECDSA-AES256-GCM-SHA384") == "TLSv1.2"


# --- the review body: as large as Kueue's server takes (controller-runtime's 7 MiB: an object and its old object at
# the apiserver's 3 MiB each), not aiohttp's default 1 MiB, which answered 413 to a large object's review and, the
# webhook failing closed, had the apiserver refuse an object Kueue takes ---------------------------------------


def _review(size: int) -> bytes:
    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
              "metadata": {"name": "big", "annotations": {"example.com/notes": "x" * size}}, "spec": {}}
    return msgspec.json.encode({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u-1", "operation": "UPDATE", "object": flavor, "oldObject": flavor}})


@pytest.mark.asyncio
async def test_a_review_of_a_large_object_is_answered() -> None:
    bundle = self_signed(["127.0.0.1"])
    _, cert, key = bundle.write(tempfile.mkdtemp(prefix="kueue-es-body-test-"))
    server, port = WebhookServer(_no_default_queue), _free_port()
    await server.start("127.0.0.1", port, str(cert), str(key))
    client = ssl.create_default_context(cadata=bundle.ca_pem.decode())
    url = f"https://127.0.0.1:{port}/validate-kueue-x-k8s-io-v1beta2-resourceflavor"
    try:
        async with aiohttp.ClientSession() as session:
            async with session.post(url, data=io.BytesIO(_review(1536 * 1024)), ssl=client) as resp:  # 3 MiB in all
                assert resp.status == 200
                assert (await resp.json())["response"]["uid"] == "u-1"
            async with session.post(url, data=io.BytesIO(_review(MAX_REVIEW_BYTES // 2)), ssl=client) as resp:
                assert resp.status == 413
    finally:
        await server.stop()


@pytest.mark.parametrize("api_version", ["config.kueue.x-k8s.io/v1beta1", "config.kueue.x-k8s.io/v1beta2"])
def test_curve_preferences_are_taken_in_both_versions(api_version: str) -> None:
    """Kueue v0.19 (#11832) added ``curvePreferences`` (numeric IANA TLS Supported Group IDs) to both
    versions' ``TLSOptions``: the key exchanges Go names (P-256, P-384, P-521, X25519 and the ML-KEM hybrids)
    are taken, in the order given."""
    groups = [23, 24, 25, 29, 4587, 4588, 4589]
    doc = {"apiVersion": api_version, "kind": "Configuration", "tls": {"curvePreferences": groups}}
    cfg = load_config(doc)
    assert cfg.tls is not None and cfg.tls.curve_preferences == groups
    assert cfg.server_tls == TLSSettings((1, 2), (), tuple(groups))
    assert load_config({"tls": {"minVersion": "VersionTLS13", "curvePreferences": [29]}}).server_tls == \
        TLSSettings((1, 3), (), (29,)), "unlike cipherSuites, curves bind TLS 1.3 too: taken beside it"


def test_a_recorded_stanza_with_curves_this_build_does_not_name_keeps_its_version_and_suites() -> None:
    """A document recorded by a newer build may name a curve this one does not (it is not held to the curves):
    those are not applied anyway, so the servers still take its ``minVersion`` and ``cipherSuites`` rather
    than the library's defaults, and say the curves are not applied
    (:func:`connectors.k8s.https.server_tls`)."""
    doc = {"tls": {"minVersion": "VersionTLS13", "curvePreferences": [23, 9999]}}
    with pytest.raises(InvalidInput):
        load_config(doc)  # a new document is held to them
    assert load_config(doc, strict=False).server_tls == TLSSettings((1, 3), (), (23, 9999))
    suites = {"tls": {"cipherSuites": ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"], "curvePreferences": [1]}}
    kept = TLSSettings((1, 2), ("ECDHE-RSA-AES128-GCM-SHA256",), (1,))
    assert load_config(suites, strict=False).server_tls == kept


def test_curve_preferences_are_not_applied_and_the_servers_say_so(tmp_path: Path) -> None:
    """Python's ``ssl`` (3.11, OpenSSL 3.0) sets one ECDH curve at most, no list of groups: the servers keep
    the library's default groups and warn, once per server, rather than apply a part of the list."""
    _, cert, key = self_signed(["127.0.0.1"]).write(str(tmp_path))
    with structlog.testing.capture_logs() as logs:
        https.server_tls(str(cert), str(key), options=TLSSettings((1, 2), (), (23, 29)))
        https.server_tls(str(cert), str(key), options=TLSSettings((1, 2), ()))
    assert [(e["log_level"], e["event"], e["curve_preferences"]) for e in logs] == [
        ("warning", "tls.curvePreferences is not applied: the server keeps the TLS library's default groups",
         [23, 29])]


VERSION_DUMMY = 'invalid minVersion: unknown tls version "DUMMY". Please use VersionTLS12 or VersionTLS13'


@pytest.mark.parametrize(("stanza", "problems"), [
    # Kueue's pkg/config/validation_test.go TestValidate cases, each a field error on "tls"
    # invalid TLS and valid cipher suites
    ({"minVersion": "DUMMY", "cipherSuites": ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"]},
     [VERSION_DUMMY]),
    ({"minVersion": "DUMMY", "cipherSuites": ["DUMMY"]},  # invalid TLS and invalid cipher suites
     [VERSION_DUMMY, "invalid cipher suites: Cipher suite DUMMY not supported or doesn't exist"]),
    ({"minVersion": "VersionTLS12", "curvePreferences": [0]},  # invalid TLS with invalid curve preferences
     ["invalid curve preferences: curve preference 0 is out of range (must be 1-65535)"]),
    ({"minVersion": "VersionTLS10", "cipherSuites": ["TLS_NOPE"], "curvePreferences": [29, 29]},
     ["invalid minVersion. Please use VersionTLS12 or VersionTLS13",
      "invalid cipher suites: Cipher suite TLS_NOPE not supported or doesn't exist",
      "invalid curve preferences: duplicate curve preference 29"]),
])
def test_a_stanza_kueue_cannot_parse_is_one_error_on_tls_naming_every_problem(stanza: dict,
                                                                              problems: list) -> None:
    """Kueue's validateTLS reports what its ParseTLSOptions returns as one field error on ``tls`` (the
    stanza's root, not the field at fault), the version's, the suites' and the curves' problems joined (Go's
    errors.Join, a newline between them; kueue-es keeps its one-line message and joins them with "; ")."""
    with pytest.raises(InvalidInput) as refused:
        load_config({"tls": stanza})
    assert str(refused.value) == "<config>: field `tls`: " + "; ".join(problems)
