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

Between the two, Kueue has its client library build a client config from the file, and reports that library's
refusal under ``InsecureKubeConfig`` too: a current context that resolves to no cluster (none set, the file empty,
a context the file does not hold, or one naming a cluster it does not hold) is "invalid configuration: no
configuration has been provided, try setting KUBERNETES_MASTER environment variable", or, the context itself
missing, "invalid configuration: [context was not found for specified context: <name>, cluster has no server
defined]" (:func:`unresolved_reason`). Not modelled of that library's checks: those of the current user's
credentials (two ways to authenticate, a certificate without its key, files it cannot open) and of a cluster's
``proxy-url``. Kueue walks the users and clusters in map order, so of several offending ones which it names
varies; here the first by name.
"""

from __future__ import annotations

import ipaddress
from typing import Any
from urllib.parse import urlsplit

import yaml

from events.labels import is_dns_subdomain

REASON = "InsecureKubeConfig"
EMPTY_CLUSTER = "cluster has no server defined"
"""Kubernetes' client library's word for a current context resolving to no cluster."""
NO_CONFIG = "no configuration has been provided, try setting KUBERNETES_MASTER environment variable"
"""What that library says instead when that is all that is wrong."""


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
        if doc is None:  # an empty file loads as a config holding nothing
            doc = {}
        if not isinstance(doc, dict):
            raise _Unparsable("not a map")
        clusters, users = _named(doc, "clusters", "cluster"), _named(doc, "users", "user")
        contexts = _named(doc, "contexts", "context")
    except (yaml.YAMLError, UnicodeDecodeError, _Unparsable) as exc:
        return f"failed to parse kubeconfig(apiconfig): {exc}"
    return _refused(doc, clusters, users, contexts)


def _refused(doc: dict[str, Any], clusters: dict[str, dict[str, Any]], users: dict[str, dict[str, Any]],
             contexts: dict[str, dict[str, Any]]) -> str:
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
    current = str(doc.get("current-context") or "")
    context = contexts.get(current) or {}
    cluster = clusters.get(str(context.get("cluster") or ""))
    unresolved = unresolved_reason(current, current in contexts, cluster is not None)
    if unresolved or cluster is None:
        return unresolved
    user = users.get(str(context.get("user") or ""), {})
    if not trusted_server(str(cluster.get("server", ""))):
        return "untrusted server endpoint"
    if user.get("username") or user.get("password"):
        return "basic auth is not allowed"
    if user.get("exec") is not None:
        return "exec plugins are not allowed"
    if user.get("auth-provider") is not None:
        return "auth providers are not allowed"
    return ""



def unresolved_reason(current: str, context_found: bool, cluster_found: bool) -> str:
    """Kubernetes' client library's refusal of the current context (named ``current``; ``context_found``: the file
    holds it) when it resolves to no cluster (``cluster_found`` False) or names a context the file does not hold,
    or "": a missing cluster alone is reported as no configuration at all, several errors as a bracketed list."""
    errors = [f"context was not found for specified context: {current}"] if current and not context_found else []
    errors += [] if cluster_found else [EMPTY_CLUSTER]
    if errors == [EMPTY_CLUSTER]:
        errors = [NO_CONFIG]
    if len(errors) > 1:
        return f"invalid configuration: [{', '.join(errors)}]"
    return f"invalid configuration: {errors[0]}" if errors else ""
