"""The HTTPS servers the connector runs beside the apiserver (admission and conversion webhooks, the aggregated
visibility API): one way to set up their TLS and their aiohttp site."""

from __future__ import annotations

import ssl

import structlog
from aiohttp import web

from kueue_es.scheduler.tls_options import TLSSettings

_VERSIONS = {(1, 2): ssl.TLSVersion.TLSv1_2, (1, 3): ssl.TLSVersion.TLSv1_3}
log = structlog.get_logger("kueue_es.k8s.https")


def _limit_tls12_suites(tls: ssl.SSLContext, ciphers: tuple[str, ...]) -> None:
    """Only ``ciphers`` for TLS 1.2. Kueue takes Go's insecure suite names too (3DES, RC4), which OpenSSL 3 does
    not offer: the ones it has are kept and, none left, TLS 1.2 is not served at all (TLS 1.3, whose suites are
    not configurable, still is) rather than the server failing to start, as for a list of TLS 1.3 suites alone."""
    try:
        tls.set_ciphers(":".join(ciphers))
    except ssl.SSLError:  # "No cipher can be selected": not one of them is available here
        tls.minimum_version = ssl.TLSVersion.TLSv1_3


def server_tls(certfile: str, keyfile: str, client_ca: bytes = b"", options: TLSSettings | None = None
               ) -> ssl.SSLContext:
    """A serving context for ``certfile``/``keyfile``; with ``client_ca``, client certificates it signed are
    verified when offered (the front proxy's, for an aggregated API server), and the handler decides. ``options``:
    the Kueue Configuration's ``tls`` stanza (``TLSOptions``, locked on: the lowest version a client may use, the TLS 1.2
    suites it may choose); None: the library's defaults. Its ``curvePreferences`` are not applied: Python's
    ``ssl`` sets one ECDH curve at most, no list of groups, so the library's default groups stay, with a
    warning."""
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    if options is not None:
        tls.minimum_version = _VERSIONS[options.min_version]
        if options.ciphers:
            _limit_tls12_suites(tls, options.ciphers)
        if options.curves:
            log.warning("tls.curvePreferences is not applied: the server keeps the TLS library's default "
                        "groups", curve_preferences=list(options.curves))
    tls.load_cert_chain(certfile, keyfile)
    if client_ca:
        tls.verify_mode = ssl.CERT_OPTIONAL
        tls.load_verify_locations(cadata=client_ca.decode())
    return tls


async def serve(app: web.Application, address: str, port: int, tls: ssl.SSLContext) -> web.AppRunner:
    """Start ``app`` on ``address:port``; the caller stops it with ``cleanup()`` on the returned runner."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, address, port, ssl_context=tls).start()
    return runner
