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
refusal under ``InsecureKubeConfig`` too (:func:`library_reason`), "invalid configuration: " and its errors: a
current context that resolves to no cluster (none set, the file empty, a context the file does not hold, or one
naming a cluster it does not hold) is "no configuration has been provided, try setting KUBERNETES_MASTER
environment variable", or, the context itself missing, "[context was not found for specified context: <name>,
cluster has no server defined]"; the current user's credentials (:func:`user_errors`: two ways to authenticate, a
client certificate without its key or given twice, a certificate or key file that cannot be opened where
kueue-es runs, an exec plugin's missing parts, impersonation details without a user) and the current cluster's
``proxy-url`` (:func:`proxy_url_error`: one that does not parse, or a scheme not http, https or socks5) are
refused in its words, several errors as a bracketed list. Not modelled: an exec plugin's ``pluginPolicy`` (Kueue
refuses exec plugins anyway). Kueue walks the users and clusters in map order, so of several offending ones which
it names varies; here the first by name.
"""

from __future__ import annotations

import ipaddress
import os
import re
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
    refused = library_reason(current, contexts, clusters, users)
    if refused or cluster is None:
        return refused
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



def library_reason(current: str, contexts: dict[str, dict[str, Any]], clusters: dict[str, dict[str, Any]],
                   users: dict[str, dict[str, Any]]) -> str:
    """Kubernetes' client library's refusal of the file as it builds a client config for the current context
    (named ``current``), or "": its errors in its order — the context missing, the current user's
    (:func:`user_errors`), the current cluster's (none: "cluster has no server defined"; a bad ``proxy-url``) — a
    missing cluster alone reported as no configuration at all, several as a bracketed list, each once."""
    context = contexts.get(current) or {}
    errors = [f"context was not found for specified context: {current}"] if current and current not in contexts else []
    user_name = str(context.get("user") or "")
    errors += user_errors(user_name, users.get(user_name) or {})
    cluster_name = str(context.get("cluster") or "")
    cluster = clusters.get(cluster_name)
    if cluster is None:
        errors.append(EMPTY_CLUSTER)
    elif cluster.get("proxy-url"):
        proxy = str(cluster["proxy-url"])
        why = proxy_url_error(proxy)
        if why:
            errors.append(f"invalid 'proxy-url' {_go_quote(proxy)} for cluster {_go_quote(cluster_name)}: {why}")
    if errors == [EMPTY_CLUSTER]:
        errors = [NO_CONFIG]
    errors = list(dict.fromkeys(errors))
    if len(errors) > 1:
        return f"invalid configuration: [{', '.join(errors)}]"
    return f"invalid configuration: {errors[0]}" if errors else ""


EXEC_INTERACTIVE_MODES = ("Never", "IfAvailable", "Always")
EXEC_DEFAULTED_VERSIONS = ("client.authentication.k8s.io/v1beta1", "client.authentication.k8s.io/v1alpha1")
"""An exec plugin of these versions without an ``interactiveMode`` is given ``IfAvailable`` as the file loads."""


def user_errors(name: str, user: dict[str, Any]) -> list[str]:
    """Kubernetes' client library's complaints about the current user ``name`` (its ``validateAuthInfo``, in its
    order and words): a client certificate given both inline and as a file, or its key so, or without a key, or a
    certificate or key file it cannot open; an exec plugin's missing command, apiVersion, environment names or
    interactive mode (or one with an auth provider beside it); two ways to authenticate (a token and basic auth);
    impersonation details without a user to impersonate."""
    errors: list[str] = []
    cert, cert_data = str(user.get("client-certificate") or ""), user.get("client-certificate-data")
    key, key_data = str(user.get("client-key") or ""), user.get("client-key-data")
    if cert or cert_data:
        if cert and cert_data:
            errors.append(f"client-cert-data and client-cert are both specified for {name}. client-cert-data will "
                          "override.")
        if key and key_data:
            errors.append(f"client-key-data and client-key are both specified for {name}; client-key-data will "
                          "override")
        if not key and not key_data:
            errors.append(f"client-key-data or client-key must be specified for {name} to use the clientCert "
                          "authentication method.")
        for what, path in (("client-cert", cert), ("client-key", key)):
            why = _unopenable(path) if path else ""
            if why:
                errors.append(f"unable to read {what} {path} for {name} due to {why}")
    plugin = user.get("exec")
    if isinstance(plugin, dict):
        errors += _exec_errors(name, plugin, user.get("auth-provider") is not None)
    methods = [m for m, used in (("token", user.get("token")), ("basicAuth", user.get("username") or user.get(
        "password"))) if used]
    if len(methods) > 1:
        errors.append(f"more than one authentication method found for {name}; found [{' '.join(methods)}], only one "
                      "is allowed")
    if (user.get("as-uid") or user.get("as-groups") or user.get("as-user-extra")) and not user.get("as"):
        errors.append(f"requesting uid, groups or user-extra for {name} without impersonating a user")
    return errors


def _exec_errors(name: str, plugin: dict[str, Any], auth_provider: bool) -> list[str]:
    errors = [f"authProvider cannot be provided in combination with an exec plugin for {name}"] if auth_provider else []
    suffix = f"for {name} to use exec authentication plugin"
    if not plugin.get("command"):
        errors.append(f"command must be specified {suffix}")
    version = str(plugin.get("apiVersion") or "")
    if not version:
        errors.append(f"apiVersion must be specified {suffix}")
    for env in plugin.get("env") or []:
        if not (isinstance(env, dict) and env.get("name")):
            errors.append(f"env variable name must be specified {suffix}")
    mode = str(plugin.get("interactiveMode") or "")
    if not mode and version not in EXEC_DEFAULTED_VERSIONS:
        errors.append(f"interactiveMode must be specified {suffix}")
    elif mode and mode not in EXEC_INTERACTIVE_MODES:
        errors.append(f"invalid interactiveMode for {name}: {_go_quote(mode)}")
    return errors


def open_error(path: str, exc: OSError) -> str:
    """Go's words for a failed open of ``path``: ``open <path>: <why>``, the errno's text in lower case."""
    why = os.strerror(exc.errno) if exc.errno else str(exc)
    return f"open {path}: {why[:1].lower()}{why[1:]}"


def _unopenable(path: str) -> str:
    """Go's words for why ``path`` cannot be opened for reading (:func:`open_error`), or "" when it can: the
    library opens the files a kubeconfig names where the client runs, here."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        return open_error(path, exc)
    os.close(fd)
    return ""


PROXY_SCHEMES = ("http", "https", "socks5")


def proxy_url_error(proxy: str) -> str:
    """Why Kubernetes' client library refuses a cluster's ``proxy-url``, in its words, or "": one Go's URL parser
    cannot parse (control characters, a leading colon, a colon in a scheme-less first segment, a bad
    percent-escape, a bracketed host left open, a port not digits) or whose scheme, lowercased, is not http, https
    or socks5."""
    scheme = _go_url_scheme(proxy)
    if scheme is None:
        return f"could not parse: {proxy}"
    if scheme not in PROXY_SCHEMES:
        return f"unsupported scheme {_go_quote(scheme)}, must be http, https, or socks5"
    return ""


_SCHEME_FIRST = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_SCHEME_REST = _SCHEME_FIRST | frozenset("0123456789+-.")
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


def _go_url_scheme(raw: str) -> str | None:
    """The lowercased scheme Go's ``url.Parse`` finds in ``raw`` ("" for none), or None when it fails it."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in raw):
        return None
    main, _, fragment = raw.partition("#")
    if _BAD_ESCAPE.search(main.partition("?")[0]) or _BAD_ESCAPE.search(fragment):  # a query is kept as written
        return None
    scheme, rest = "", raw
    head, colon, tail = raw.partition(":")
    if colon and (head == "" or (head[0] in _SCHEME_FIRST and all(c in _SCHEME_REST for c in head))):
        if not head:
            return None  # "missing protocol scheme"
        scheme, rest = head.lower(), tail
    rest = rest.partition("#")[0].partition("?")[0]
    if not scheme and ":" in rest.partition("/")[0]:
        return None  # "first path segment in URL cannot contain colon"
    if rest.startswith("//"):
        authority = rest[2:].partition("/")[0].rpartition("@")[2]
        if authority.startswith("["):
            inside, bracket, after = authority[1:].partition("]")
            if not bracket or (after and not (after.startswith(":") and after[1:].isdigit() or after == ":")):
                return None
        elif ":" in authority:
            port = authority.rpartition(":")[2]
            if port and not (port.isascii() and port.isdigit()):
                return None
    return scheme


def _go_quote(value: str) -> str:
    """Go's ``%q`` of a printable string."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
