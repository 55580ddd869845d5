"""``kueue-es manifests``: print what installs kueue-es in a cluster (CRDs, RBAC, Deployment, the webhook and
APIService registrations) as YAML."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import yaml

from events.labels import is_dns_label

PARTS = ("all", "crds", "rbac", "deployment")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "manifests",
        help="print the CRDs, RBAC and Deployment that install kueue-es (multi-document YAML)",
        description="Print the kueue.x-k8s.io CustomResourceDefinitions (generated from kueue-es's own object "
        "views: v1beta2 stored, v1beta1 served through kueue-es's conversion webhook), least-privilege RBAC for the "
        "connector, Kueue's user-facing ClusterRoles (kueue-batch-admin-role, kueue-batch-user-role), the "
        "webhook and visibility Services, a Deployment running `kueue-es run --kube`, and the webhook "
        "configurations and visibility APIServices it completes with its CA, as multi-document YAML for "
        "`kubectl apply -f -` (and `kubectl delete -f -`).",
    )
    p.add_argument("part", nargs="?", choices=PARTS, default="all", help="what to print (default all)")
    p.add_argument("--namespace", type=_namespace, default=None, metavar="NS",
                   help="namespace of the Deployment (default kueue-system)")
    p.add_argument("--image", type=_image, default=None, metavar="IMAGE", help="container image (default kueue-es:0.1.0)")
    p.add_argument("--log", default="", metavar="URL|PATH",
                   help="the log the Deployment uses (default the embedded log on its volume)")
    p.set_defaults(func=run)


def _namespace(text: str) -> str:
    """A namespace the apiserver would take (a DNS label): the manifests are to be applied as printed."""
    if not is_dns_label(text):
        raise argparse.ArgumentTypeError(f"not a namespace name: {text!r} (expected a DNS label, e.g. kueue-system)")
    return text


def _image(text: str) -> str:
    if not text or text != text.strip() or any(c.isspace() for c in text):
        raise argparse.ArgumentTypeError(f"not a container image: {text!r}")
    return text


def documents(part: str = "all", namespace: str | None = None, image: str | None = None,
              log: str = "") -> list[dict[str, Any]]:
    from connectors.k8s import manifests as m
    from connectors.k8s.crds import all_crds
    from connectors.k8s.user_roles import user_roles

    ns = namespace or m.DEFAULT_NAMESPACE
    match part:
        case "crds":
            return all_crds()
        case "rbac":
            return [m.namespace_object(ns), *m.rbac(ns), *user_roles()]
        case "deployment":
            return [m.deployment(ns, image=image or m.DEFAULT_IMAGE, log=log)]
        case _:
            return m.everything(ns, image=image or m.DEFAULT_IMAGE, log=log)


class _Dumper(yaml.SafeDumper):
    """No YAML anchors/aliases: manifests are read by people and by tools that do not expect them."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def render(docs: list[dict[str, Any]]) -> str:
    return yaml.dump_all(docs, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=120)


def run(args: argparse.Namespace) -> int:
    sys.stdout.write(render(documents(args.part, args.namespace, args.image, args.log)))
    return 0
