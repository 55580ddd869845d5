"""Kueue's ``tls`` Configuration stanza (``minVersion``, ``cipherSuites``, ``curvePreferences``), read as
Kueue reads it under its ``TLSOptions`` gate (GA and locked on since v0.20) for the servers it runs: the
webhooks and the visibility API (kueue-es serves its metrics over plain HTTP, so there is no third).

Kueue parses the stanza with the Kubernetes flag helpers: ``minVersion`` is one of Go's ``VersionTLS1x``
names, TLS 1.0 and 1.1 refused, 1.2 when unset; ``cipherSuites`` are Go's (IANA) suite names, which constrain
TLS 1.2 only (TLS 1.3 suites are not configurable, in Go as in OpenSSL); ``curvePreferences`` (v0.19, #11832)
are numeric IANA TLS Supported Group IDs, each one Go names, none twice (the helper's checks, :data:`CURVES`),
which bind TLS 1.2 and 1.3 alike. A stanza it cannot parse stops its visibility server from starting (so Kueue
exits while ``VisibilityOnDemand`` is on) and leaves its webhook server on Go's defaults. Gate off, or no
stanza: the TLS library's defaults (here Python's and OpenSSL's, there Go's).

Pure: names in, settings or a problem out; :mod:`connectors.k8s.https` applies them to a server's context.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

VERSIONS = {"VersionTLS12": (1, 2), "VersionTLS13": (1, 3)}
"""The ``minVersion`` values Kueue takes."""
REFUSED_VERSIONS = ("VersionTLS10", "VersionTLS11")
"""Names Go knows and Kueue refuses."""

_TLS13_SUITES = ("TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256")
CIPHER_SUITES: dict[str, str | None] = {
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256": "AES128-SHA256",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA": "DES-CBC3-SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA": "ECDHE-RSA-DES-CBC3-SHA",
    "TLS_RSA_WITH_RC4_128_SHA": "RC4-SHA",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA": "ECDHE-RSA-RC4-SHA",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA": "ECDHE-ECDSA-RC4-SHA",
    **dict.fromkeys(_TLS13_SUITES),
}
"""Go's cipher-suite names (secure and insecure, as the flag helper takes them) -> OpenSSL's name; None for a TLS
1.3 suite, which is taken and changes nothing."""


CURVES = {23: "CurveP256", 24: "CurveP384", 25: "CurveP521", 29: "X25519", 4587: "SecP256r1MLKEM768",
          4588: "X25519MLKEM768", 4589: "SecP384r1MLKEM1024"}
"""The Supported Group IDs Go 1.26's ``tls.CurveID`` names, the ones the Kubernetes helper Kueue parses the
list with takes ("supported by the current Go version"), with Go's names."""
MAX_CURVE_ID = 65535


def _curve_problem(curves: Sequence[int]) -> str | None:
    """What Kueue's helper says of the first ID it refuses: out of ``1-65535``, repeated, or one Go does not
    name."""
    seen: set[int] = set()
    for curve in curves:
        if not 0 < curve <= MAX_CURVE_ID:
            return f"curve preference {curve} is out of range (must be 1-{MAX_CURVE_ID})"
        if curve in seen:
            return f"duplicate curve preference {curve}"
        seen.add(curve)
        if curve not in CURVES:
            return f"curve preference {curve} is not supported by the current Go version"
    return None


class TLSSettings(NamedTuple):
    """What a server's TLS context is given."""

    min_version: tuple[int, int]
    """(1, 2) or (1, 3)."""
    ciphers: tuple[str, ...]
    """OpenSSL names of the TLS 1.2 suites allowed; empty: the library's default list."""
    curves: tuple[int, ...] = ()
    """The Supported Group IDs ``curvePreferences`` allows; empty: the library's default groups. Not applied
    (:func:`connectors.k8s.https.server_tls` says so): Python's ``ssl`` sets no list of groups."""


def problems(min_version: str, cipher_suites: Sequence[str], curves: Sequence[int] = ()) -> list[str]:
    """What Kueue's ParseTLSOptions finds wrong in a ``tls`` stanza, in its words and its order: the version,
    then the suites (their first unknown name), then the curves (their first problem); each is looked at
    whatever the others hold, and Kueue joins those it finds (Go's errors.Join)."""
    found = []
    if min_version in REFUSED_VERSIONS:
        found.append("invalid minVersion. Please use VersionTLS12 or VersionTLS13")
    elif min_version and min_version not in VERSIONS:
        found.append(f'invalid minVersion: unknown tls version "{min_version}". Please use VersionTLS12 or '
                     "VersionTLS13")
    unknown = [name for name in cipher_suites if name not in CIPHER_SUITES]
    if unknown:
        found.append(f"invalid cipher suites: Cipher suite {unknown[0]} not supported or doesn't exist")
    curve_problem = _curve_problem(curves)
    if curve_problem is not None:
        found.append(f"invalid curve preferences: {curve_problem}")
    return found


def parse(min_version: str, cipher_suites: list[str],
          curves: Sequence[int] = ()) -> tuple[TLSSettings | None, str | None]:
    """The settings of a ``tls`` stanza, or what Kueue finds wrong in it (:func:`problems`, joined by "; ":
    Kueue puts a newline between them, kueue-es keeps its messages on one line); Kueue reports it as one
    field error on ``tls``, the stanza, whichever of its fields is at fault."""
    found = problems(min_version, cipher_suites, curves)
    if found:
        return None, "; ".join(found)
    ciphers = tuple(dict.fromkeys(n for n in (CIPHER_SUITES[s] for s in cipher_suites) if n is not None))
    version = VERSIONS.get(min_version, (1, 2))
    if cipher_suites and not ciphers:  # TLS 1.3 suites alone: no TLS 1.2 suite is left, so TLS 1.2 cannot be had
        version = (1, 3)
    return TLSSettings(version, ciphers, tuple(curves)), None
