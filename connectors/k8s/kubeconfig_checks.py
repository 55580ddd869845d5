"""Kueue's refusal of a MultiKueueCluster kubeconfig that is unsafe to use (``validateKubeconfig`` in its cluster
controller): the worker is then not connected, its ``Active`` condition False with reason ``InsecureKubeConfig``
and "load client config failed: <why>".

Kueue checks the kubeconfig as read, before building a client from it: no user may name a ``tokenFile``; no
cluster may skip TLS verification, name a ``certificate-authority`` file (``certificate-authority-data`` is the
way) or lack a ``server``; then, of what the current context resolves to, the server must be a URL whose host is
an IP address or a DNS-1123 subdomain (its port, if any, digits), and the user may not use basic auth, an exec
plugin or an auth provider. A bearer token and client certificate data are allowed. Kueue's
MultiKueueAllowInsecureKubeconfigs gate, which skipped the check, was locked off in v0.19 and is gone after it, so
the check always runs.

Where Kueue's client library fails to resolve the current context (none set, or naming a context, cluster or user
the file does not hold) Kueue reports that library's error under ``InsecureKubeConfig``; here those cases are left
to building the client, which fails them as ``ClientConnectionFailed`` with this side's error. Kueue walks the
users and clusters in map order, so of several offending ones which it names varies; here the first by name.
"""

from __future__ import annotations

import ipaddress
from typing import Any
from urllib.parse import urlsplit

import yaml

from events.labels import is_dns_subdomain

REASON = "InsecureKubeConfig"


class _Unparsable(Exception):
    pass


_GO_TYPES = {"clusters": "Cluster", "users": "AuthInfo", "contexts": "Context"}
"""A kubeconfig list -> the Go type Kubernetes' loader reads its entries into (named in its errors)."""


def _named(doc: dict[str, Any], field: str, inner: str) -> dict[str, dict[str, Any]]:
    """A kubeconfig's list ``field`` of ``{name, <inner>: {...}}`` entries as name -> the inner map. Two entries of
    one name do not parse: Kubernetes' loader fails the file (in its words, less the list it prints)."""
    entries = doc.get(field) or []
    if not isinstance(entries, list):
        raise _Unparsable(f"{field}: not a list")
    out: dict[str, dict[str, Any]] = {}
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get(inner) or {}, dict):
            raise _Unparsable(f"{field}[{i}]: not a map with a {inner} map")
        name = str(entry.get("name", ""))
        if name in out:
            go = _GO_TYPES[field]
            raise _Unparsable(f'error converting *[]Named{go} into *map[string]*api.{go}: duplicate name "{name}" '
                              f"in list")
        out[name] = entry.get(inner) or {}
    return out


def trusted_server(server: str) -> bool:
    """Kueue's ``isValidHostname`` of a lowercased server URL: its host (the URL's, without user info or port) an
    IP address or a DNS-1123 subdomain; a URL without a host (no ``scheme://``), whose port is not digits, or that
    does not parse (an unclosed or bad ``[`` address: Go's URL parser fails it too) is not trusted."""
    try:
        netloc = urlsplit(server.lower()).netloc.rpartition("@")[2]
    except ValueError:
        return False
    host, port = netloc, ""
    if netloc.startswith("["):
        inside, bracket, rest = netloc[1:].partition("]")
        if bracket and rest.startswith(":"):  # a bracketed address with a port: the address alone
            host, port = inside, rest[1:]
        elif rest:
            return False
    elif netloc.count(":") == 1:
        host, port = netloc.split(":")
    if port and not port.isdigit():
        return False
    if "%" not in host:  # an IPv6 zone is no address Kueue takes
        try:
            ipaddress.ip_address(host)
            return True
        except ValueError:
            pass
    return is_dns_subdomain(host)


def insecure_reason(kubeconfig: bytes) -> str:
    """Why Kueue refuses ``kubeconfig`` as unsafe (the module docstring's checks, Kueue's words), or ""."""
    try:
        doc = yaml.safe_load(kubeconfig.decode())
        if doc is None:
            return ""  # nothing to check: building the client fails it
        if not isinstance(doc, dict):
            raise _Unparsable("not a map")
        clusters, users = _named(doc, "clusters", "cluster"), _named(doc, "users", "user")
        contexts = _named(doc, "contexts", "context")
    except (yaml.YAMLError, UnicodeDecodeError, _Unparsable) as exc:
        return f"failed to parse kubeconfig(apiconfig): {exc}"
    for name in sorted(users):
        if users[name].get("tokenFile"):
            return "tokenFile is not allowed"
    for name in sorted(clusters):
        cluster = clusters[name]
        if cluster.get("insecure-skip-tls-verify") is True:
            return f"insecure TLS verification is not allowed for cluster {name}"
        if cluster.get("certificate-authority"):
            return f"certificate-authority file paths are not allowed, use certificate-authority-data for cluster {name}"
        if not cluster.get("server"):
            return f"server URL is required for cluster {name}"
    context = contexts.get(str(doc.get("current-context") or ""))
    cluster = clusters.get(str(context.get("cluster", ""))) if context is not None else None
    if context is None or cluster is None:
        return ""  # the current context resolves to no cluster: building the client fails it
    user = users.get(str(context.get("user", "")), {})
    if not trusted_server(str(cluster.get("server", ""))):
        return "untrusted server endpoint"
    if user.get("username") or user.get("password"):
        return "basic auth is not allowed"
    if user.get("exec") is not None:
        return "exec plugins are not allowed"
    if user.get("auth-provider") is not None:
        return "auth providers are not allowed"
    return ""
