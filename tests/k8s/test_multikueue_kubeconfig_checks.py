"""Kueue's refusal of a MultiKueueCluster kubeconfig unsafe to use (reason ``InsecureKubeConfig``): what is
refused, in Kueue's words, and what is taken."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fixtures import fastyaml

from connectors.k8s.kubeconfig_checks import insecure_reason, trusted_server


def kubeconfig(cluster: dict[str, Any] | None = None, user: dict[str, Any] | None = None, *,
               others: tuple[dict[str, Any], ...] = ()) -> bytes:
    """A kubeconfig whose current context is cluster ``w`` (a server by name, its CA inline) and user ``u`` (a
    bearer token), each given ``cluster`` / ``user`` over that; ``others``: more clusters."""
    return fastyaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "w", "cluster": {"server": "https://worker.example:6443",
                                               "certificate-authority-data": "Q0E=", **(cluster or {})}}, *others],
        "users": [{"name": "u", "user": {"token": "t", **(user or {})}}],
        "contexts": [{"name": "c", "context": {"cluster": "w", "user": "u"}}]}).encode()


@pytest.mark.parametrize("source", [
    kubeconfig(),
    kubeconfig(user={"token": None, "client-certificate-data": "Y2VydA==", "client-key-data": "a2V5"}),
    kubeconfig({"server": "https://10.0.0.7:6443"}),
    kubeconfig({"server": "https://[fd00::7]:6443"}),
    kubeconfig({"server": "https://Worker.EXAMPLE"}),
    kubeconfig({"server": "http://worker.example:8080"}),
], ids=["token", "client-certificate-data", "ipv4", "ipv6", "uppercase", "http"])
def test_a_kubeconfig_with_its_ca_inline_and_a_token_or_certificate_is_taken(source: bytes) -> None:
    assert insecure_reason(source) == ""


@pytest.mark.parametrize(("source", "why"), [
    (kubeconfig(user={"tokenFile": "/var/run/token"}), "tokenFile is not allowed"),
    (kubeconfig({"insecure-skip-tls-verify": True}), "insecure TLS verification is not allowed for cluster w"),
    (kubeconfig({"certificate-authority-data": None, "certificate-authority": "/etc/ca.crt"}),
     "certificate-authority file paths are not allowed, use certificate-authority-data for cluster w"),
    (kubeconfig(others=({"name": "x", "cluster": {"certificate-authority-data": "Q0E="}},)),
     "server URL is required for cluster x"),
    (kubeconfig({"server": "worker.example:6443"}), "untrusted server endpoint"),
    (kubeconfig({"server": "https://worker_1.example"}), "untrusted server endpoint"),
    (kubeconfig({"server": "https://worker.example:https"}), "untrusted server endpoint"),
    (kubeconfig({"server": "https://[fd00::7:6443"}), "untrusted server endpoint"),
    (kubeconfig(user={"token": None, "username": "admin", "password": "secret"}), "basic auth is not allowed"),
    (kubeconfig(user={"exec": {"command": "aws", "apiVersion": "client.authentication.k8s.io/v1",
                               "interactiveMode": "Never"}}), "exec plugins are not allowed"),
    (kubeconfig(user={"exec": {"command": "aws", "apiVersion": "client.authentication.k8s.io/v1beta1"}}),
     "exec plugins are not allowed"),
    (kubeconfig(user={"auth-provider": {"name": "oidc"}}), "auth providers are not allowed"),
], ids=["token-file", "insecure-skip-tls-verify", "ca-file", "no-server", "no-scheme", "bad-host", "bad-port",
        "unclosed-ipv6", "basic-auth", "exec", "exec-v1beta1-interactive-defaulted", "auth-provider"])
def test_an_unsafe_kubeconfig_is_refused_in_kueues_words(source: bytes, why: str) -> None:
    """Every cluster and user of the file is checked for token files, skipped TLS verification, CA file paths and
    missing servers; the current context's server and user for an untrusted endpoint, basic auth and plugins."""
    assert insecure_reason(source) == why


def test_every_cluster_is_checked_not_only_the_current_one() -> None:
    other = {"name": "old", "cluster": {"server": "https://old.example", "insecure-skip-tls-verify": True}}
    assert insecure_reason(kubeconfig(others=(other,))) == "insecure TLS verification is not allowed for cluster old"


def test_two_entries_of_one_name_do_not_parse_as_kubernetes_loader_fails_them() -> None:
    """Kubernetes' loader refuses a list naming one cluster, user or context twice, so Kueue refuses the file
    whichever of the two is unsafe (here the first skips TLS verification, the last is safe)."""
    insecure = {"name": "w", "cluster": {"server": "https://old.example", "insecure-skip-tls-verify": True}}
    source = fastyaml.safe_load(kubeconfig())
    source["clusters"].insert(0, insecure)
    assert insecure_reason(fastyaml.safe_dump(source).encode()) == (
        "failed to parse kubeconfig(apiconfig): error converting *[]NamedCluster into *map[string]*api.Cluster: "
        'duplicate name "w" in list')
    source = fastyaml.safe_load(kubeconfig())
    source["users"].append({"name": "u", "user": {"token": "t2"}})
    assert insecure_reason(fastyaml.safe_dump(source).encode()) == (
        "failed to parse kubeconfig(apiconfig): error converting *[]NamedAuthInfo into *map[string]*api.AuthInfo: "
        'duplicate name "u" in list')


def test_a_kubeconfig_that_is_no_kubeconfig_is_refused_naming_what_is_wrong() -> None:
    assert insecure_reason(b"- a\n- list\n") == "failed to parse kubeconfig(apiconfig): not a map"
    assert insecure_reason(b"clusters: {w: {}}\n") == "failed to parse kubeconfig(apiconfig): clusters: not a list"
    assert insecure_reason(b"users: [{name: u, user: token}]\n") == (
        "failed to parse kubeconfig(apiconfig): users[0]: not a map with a user map")
    assert insecure_reason(b"clusters: [\n").startswith("failed to parse kubeconfig(apiconfig): ")


NO_CONFIG = ("invalid configuration: no configuration has been provided, try setting KUBERNETES_MASTER environment "
             "variable")


def current(name: str, context: dict[str, Any] | None = None) -> bytes:
    """:func:`kubeconfig` with the current context ``name``, and context ``c`` being ``context`` when given."""
    doc = fastyaml.safe_load(kubeconfig())
    doc["current-context"] = name
    if context is not None:
        doc["contexts"][0]["context"] = context
    return fastyaml.safe_dump(doc).encode()


@pytest.mark.parametrize("source", [
    b"",
    current(""),
    current("c", {"cluster": "gone", "user": "u"}),
    current("c", {"user": "u"}),
], ids=["empty-file", "no-current-context", "unknown-cluster", "context-names-no-cluster"])
def test_a_current_context_resolving_to_no_cluster_is_refused_as_kubernetes_client_library_does(
        source: bytes) -> None:
    """Kueue builds a client config from the file before its last checks, and its client library refuses a
    current context that resolves to no cluster, a missing cluster alone being "no configuration"."""
    assert insecure_reason(source) == NO_CONFIG


def test_a_current_context_the_file_does_not_hold_is_named_with_the_cluster_it_lacks() -> None:
    assert insecure_reason(current("other")) == (
        "invalid configuration: [context was not found for specified context: other, cluster has no server "
        "defined]")


def test_a_missing_current_context_is_refused_even_where_the_unnamed_cluster_stands_in() -> None:
    """A context the file does not hold resolves to the cluster of no name: held, Kubernetes' library still
    refuses the missing context, alone."""
    unnamed = {"name": "", "cluster": {"server": "https://worker.example", "certificate-authority-data": "Q0E="}}
    doc = fastyaml.safe_load(current("other"))
    doc["clusters"].append(unnamed)
    assert insecure_reason(fastyaml.safe_dump(doc).encode()) == "invalid configuration: context was not found for specified context: other"


def test_a_host_is_trusted_as_kueues_url_parsing_finds_it() -> None:
    """The host is an IP address or a DNS-1123 subdomain once lowercased; user info and a numeric port are not
    part of it; ``[::1]`` without a port is no address (the brackets stay on the host)."""
    assert trusted_server("https://user:pw@worker.example:443")
    assert trusted_server("https://::1")
    assert not trusted_server("https://[::1]")
    assert not trusted_server("https://[fe80::1%25eth0]:6443")
    assert not trusted_server("https://[::1") and not trusted_server("https://[worker]:6443")
    assert not trusted_server("localhost:6443") and not trusted_server("")


INVALID = "invalid configuration: "


@pytest.mark.parametrize(("user", "why"), [
    ({"username": "admin"}, "more than one authentication method found for u; found [token basicAuth], only one is "
                            "allowed"),
    ({"token": None, "client-certificate-data": "Y2VydA=="},
     "client-key-data or client-key must be specified for u to use the clientCert authentication method."),
    ({"token": None, "client-certificate-data": "Y2VydA==", "client-certificate": "/no/such/cert",
      "client-key-data": "a2V5"},
     "[client-cert-data and client-cert are both specified for u. client-cert-data will override., unable to read "
     "client-cert /no/such/cert for u due to open /no/such/cert: no such file or directory]"),
    ({"token": None, "client-certificate-data": "Y2VydA==", "client-key": "/no/such/key", "client-key-data": "a2V5"},
     "[client-key-data and client-key are both specified for u; client-key-data will override, unable to read "
     "client-key /no/such/key for u due to open /no/such/key: no such file or directory]"),
    ({"exec": {"apiVersion": "client.authentication.k8s.io/v1", "env": [{"value": "x"}]}},
     "[command must be specified for u to use exec authentication plugin, env variable name must be specified for "
     "u to use exec authentication plugin, interactiveMode must be specified for u to use exec authentication "
     "plugin]"),
    ({"exec": {"command": "aws", "apiVersion": "client.authentication.k8s.io/v1", "interactiveMode": "Sometimes"},
      "auth-provider": {"name": "oidc"}},
     '[authProvider cannot be provided in combination with an exec plugin for u, invalid interactiveMode for u: '
     '"Sometimes"]'),
    ({"as-groups": ["admins"]}, "requesting uid, groups or user-extra for u without impersonating a user"),
], ids=["token-and-basic-auth", "cert-without-key", "cert-twice-and-unreadable", "key-twice-and-unreadable",
        "exec-incomplete", "exec-with-auth-provider", "impersonation-without-user"])
def test_the_current_users_credentials_are_refused_in_kubernetes_client_librarys_words(
        user: dict[str, Any], why: str) -> None:
    """Kueue builds a client config before its own last checks: its client library's refusal of the current user
    comes first, reported as InsecureKubeConfig too."""
    assert insecure_reason(kubeconfig(user=user)) == INVALID + why


def test_a_client_certificate_file_that_opens_is_taken_by_the_library(tmp_path: Path) -> None:
    """The library opens the files where the client runs: ones that open are taken; one that does not is named with
    Go's words for why (here a path through a file, which not even root can open)."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.write_text("cert")
    key.write_text("key")
    user = {"token": None, "client-certificate": str(cert), "client-key": str(key)}
    assert insecure_reason(kubeconfig(user=user)) == ""
    inside = f"{key}/inside"
    assert insecure_reason(kubeconfig(user={**user, "client-key": inside})) == (
        f"{INVALID}unable to read client-key {inside} for u due to open {inside}: not a directory")


def test_only_the_current_contexts_user_and_cluster_are_checked_by_the_library() -> None:
    doc = fastyaml.safe_load(kubeconfig())
    doc["users"].append({"name": "other", "user": {"token": "t", "username": "admin"}})
    doc["clusters"].append({"name": "x", "cluster": {"server": "https://x.example", "certificate-authority-data": "Q0E=",
                                                      "proxy-url": "ftp://proxy"}})
    assert insecure_reason(fastyaml.safe_dump(doc).encode()) == ""


@pytest.mark.parametrize(("proxy", "why"), [
    ("http://proxy.example:3128", ""),
    ("HTTPS://proxy.example", ""),
    ("socks5://proxy.example:1080", ""),
    ("http://proxy.example/?q=%zz", ""),
    ("ftp://proxy.example", 'unsupported scheme "ftp", must be http, https, or socks5'),
    ("proxy.example:3128", 'unsupported scheme "proxy.example", must be http, https, or socks5'),
    ("//proxy.example:3128", 'unsupported scheme "", must be http, https, or socks5'),
    ("http://proxy.example:port", "could not parse: http://proxy.example:port"),
    ("http://[fd00::1", "could not parse: http://[fd00::1"),
    ("http://proxy.example/%zz", "could not parse: http://proxy.example/%zz"),
    ("1proxy:3128", "could not parse: 1proxy:3128"),
    (":3128", "could not parse: :3128"),
], ids=["http", "uppercase-scheme", "socks5", "raw-query", "ftp", "host-port", "no-scheme", "bad-port",
        "unclosed-ipv6", "bad-escape", "colon-in-first-segment", "leading-colon"])
def test_the_current_clusters_proxy_url_is_checked_as_kubernetes_client_library_does(proxy: str, why: str) -> None:
    source = kubeconfig({"proxy-url": proxy})
    assert insecure_reason(source) == (f"{INVALID}invalid 'proxy-url' \"{proxy}\" for cluster \"w\": {why}" if why
                                       else "")


def test_several_library_errors_are_one_bracketed_list_in_its_order() -> None:
    """The user's errors, then the cluster's; a context the file does not hold resolves to no user and no cluster
    (not to a context of no name), so only the missing context and cluster are named then."""
    source = kubeconfig({"proxy-url": "ftp://p"}, {"username": "admin"})
    assert insecure_reason(source) == (
        f"{INVALID}[more than one authentication method found for u; found [token basicAuth], only one is allowed, "
        'invalid \'proxy-url\' "ftp://p" for cluster "w": unsupported scheme "ftp", must be http, https, or socks5]')
    doc = fastyaml.safe_load(source)
    doc["current-context"] = "gone"
    doc["contexts"].append({"name": "", "context": {"cluster": "w", "user": "u"}})
    assert insecure_reason(fastyaml.safe_dump(doc).encode()) == (
        f"{INVALID}[context was not found for specified context: gone, cluster has no server defined]")
