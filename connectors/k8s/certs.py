"""A self-signed CA and a serving certificate for the admission webhook (what Kueue's cert rotator makes).

The apiserver calls the webhook over TLS and checks the serving certificate against the ``caBundle`` of the
MutatingWebhookConfiguration, so the CA is registered there. Keys are ECDSA P-256; the serving certificate
names every host the apiserver may use (the Service's DNS names, or ``127.0.0.1`` for a webhook on loopback).
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def ca_bundle(ca_pem: bytes) -> dict[str, str]:
    """The ``caBundle`` field of a webhook's client config or an APIService's spec for ``ca_pem``; none while
    no CA is known yet (``kueue-es manifests`` installs them so: the first replica that serves sets it)."""
    return {"caBundle": base64.b64encode(ca_pem).decode()} if ca_pem else {}


@dataclass(frozen=True)
class CertBundle:
    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes

    def write(self, directory: str | Path) -> tuple[Path, Path, Path]:
        """``ca.crt``, ``tls.crt``, ``tls.key`` in ``directory`` (the layout of a kubernetes.io/tls Secret)."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        paths = (d / "ca.crt", d / "tls.crt", d / "tls.key")
        for path, data in zip(paths, (self.ca_pem, self.cert_pem, self.key_pem), strict=True):
            path.write_bytes(data)
        paths[2].chmod(0o600)
        return paths

    @classmethod
    def read(cls, directory: str | Path) -> CertBundle:
        d = Path(directory)
        return cls((d / "ca.crt").read_bytes(), (d / "tls.crt").read_bytes(), (d / "tls.key").read_bytes())


def self_signed(hosts: list[str], *, days: int = 3650, now: datetime.datetime | None = None) -> CertBundle:
    """A new CA and a certificate it signs for ``hosts`` (DNS names or IP addresses)."""
    now = now or datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kueue-es-webhook-ca")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=days))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = []
    for h in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            sans.append(x509.DNSName(h))
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0] if hosts else "kueue-es")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    return CertBundle(
        ca_pem=ca.public_bytes(pem),
        cert_pem=cert.public_bytes(pem),
        key_pem=key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
    )
