"""Per-node filtering and scoring of hostname leaves, and the exclusion counts Kueue appends to a not-fit message.

When the lowest level is the hostname a leaf is one node, and the leaves are filtered (Kueue's ``matchNode``);
below another lowest level the same filter runs on each node under TASNodeFeasibilityForAllLevels
(:mod:`.pernode`): an untolerated NoSchedule/NoExecute taint excludes a node first, then a nodeSelector mismatch,
then a required node affinity mismatch. Tolerations are the pod set's plus the flavor's. Under
TASRespectNodeAffinityPreferred a node is also scored by the pod set's preferred node affinity. The standard
Kubernetes rules decide toleration and node-selector-term matching.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from events import objects as o
from kueue_es.scheduler.tas.request import PodSetRequest
from projections.topology import FlavorSnapshot

_ENC = msgspec.msgpack.Encoder()


def tolerates(t: o.Toleration, taint: o.Taint) -> bool:
    """Kubernetes' ``Toleration.ToleratesTaint``."""
    if t.effect and t.effect != taint.effect:
        return False
    if t.key and t.key != taint.key:
        return False
    if t.operator in ("", "Equal"):
        return t.value == taint.value
    return t.operator == "Exists"


def untolerated_taint(taints: list[o.Taint], tolerations: tuple[o.Toleration, ...]) -> o.Taint | None:
    """The first NoSchedule/NoExecute taint none of ``tolerations`` tolerates (PreferNoSchedule is ignored)."""
    for taint in taints:
        if taint.effect not in ("NoSchedule", "NoExecute"):
            continue
        if not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def taint_string(t: o.Taint) -> str:
    """Kubernetes' ``Taint.ToString``: ``key=value:Effect``, or ``key:Effect`` without a value."""
    return f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}"


def _requirement_matches(req: o.NodeSelectorRequirement, value: str | None) -> bool:
    match req.operator:
        case "In":
            return value is not None and value in req.values
        case "NotIn":
            return value is None or value not in req.values
        case "Exists":
            return value is not None
        case "DoesNotExist":
            return value is None
        case "Gt" | "Lt":
            if value is None or len(req.values) != 1:
                return False
            try:
                a, b = int(value), int(req.values[0])
            except ValueError:
                return False
            return a > b if req.operator == "Gt" else a < b
    return False


def _term_matches(term: o.NodeSelectorTerm, node: o.Node) -> bool:
    """All of a non-empty term's requirements hold for ``node`` (its labels, and its name for ``matchFields``)."""
    labels = node.metadata.labels
    name = node.metadata.name
    return all(_requirement_matches(r, labels.get(r.key)) for r in term.match_expressions) and all(
        _requirement_matches(r, name if r.key == "metadata.name" else None) for r in term.match_fields)


def _empty(term: o.NodeSelectorTerm) -> bool:
    return not term.match_expressions and not term.match_fields


def affinity_matches(terms: tuple[o.NodeSelectorTerm, ...], node: o.Node) -> bool:
    """Required node affinity: terms are ORed, a term's requirements ANDed; an empty term matches nothing."""
    return any(not _empty(term) and _term_matches(term, node) for term in terms)


def scoring_terms(req: PodSetRequest) -> tuple[o.PreferredSchedulingTerm, ...]:
    """The pod set's preferred node-affinity terms that can score (a weight, a non-empty preference)."""
    return tuple(t for t in req.preferred_terms if t.weight and not _empty(t.preference))


def node_score(terms: tuple[o.PreferredSchedulingTerm, ...], node: o.Node) -> int:
    """Kubernetes' ``PreferredSchedulingTerms.Score``: the summed weights of the terms ``node`` matches."""
    return sum(t.weight for t in terms if _term_matches(t.preference, node))


def preferred_scores(snap: FlavorSnapshot, req: PodSetRequest) -> list[int] | None:
    """Leaf index -> the summed weights of the pod set's preferred node-affinity terms its node matches
    (Kubernetes' ``PreferredSchedulingTerms.Score``: a term of weight 0 or with an empty preference counts for
    nothing). None when no leaf scores: the lowest level is not the hostname (a leaf is then no node, and Kueue
    looks at no node), or no term matches a node. Memoised on the tree per list of terms."""
    tree = snap.tree
    terms = scoring_terms(req)
    if not tree.hostname_lowest or not terms:
        return None
    key = b"preferred" + _ENC.encode(terms)
    if key in tree._masks:
        return tree._masks[key]
    scores = [node_score(terms, node) for node in tree.leaf_node]
    found = scores if any(scores) else None
    if len(tree._masks) > 1024:
        tree._masks.clear()
    tree._masks[key] = found
    return found


Exclusion = tuple[str, str]
"""Why a node is excluded: ("taint", "key=value:Effect"), ("nodeSelector", ""), ("affinity", "") or, under
SchedulerLibraryIntegration, ("library", "") whatever the reason (:mod:`.library`), or, under
KueueDRADeviceFeasibility, ("dra", "") for a node whose devices cannot serve the pod's claims (:mod:`.devices`)."""


def excluded_leaves(snap: FlavorSnapshot, req: PodSetRequest) -> dict[int, Exclusion]:
    """Leaf index -> why that node cannot take the pod set; empty unless the lowest level is the hostname.
    Memoised on the tree per (selector, tolerations, affinity), which repeat across workloads of one job kind."""
    tree = snap.tree
    if not tree.hostname_lowest:
        return {}
    if not tree.has_taints and not req.node_selector and req.affinity_terms is None:
        return {}
    key = _ENC.encode((req.node_selector, req.tolerations, snap.tolerations, req.affinity_terms))
    found = tree._masks.get(key)
    if found is not None:
        return found
    out = excluded_nodes(tree.leaf_node, req, req.tolerations + snap.tolerations)
    if len(tree._masks) > 1024:
        tree._masks.clear()
    tree._masks[key] = out
    return out


def excluded_nodes(nodes: Sequence[o.Node], req: PodSetRequest,
                   tolerations: tuple[o.Toleration, ...]) -> dict[int, Exclusion]:
    """Index in ``nodes`` -> why that node cannot take the pod set (Kueue's ``matchNode``, in its order: an
    untolerated taint, then the nodeSelector, then the required node affinity)."""
    out: dict[int, Exclusion] = {}
    for i, node in enumerate(nodes):
        if node.spec.taints:
            taint = untolerated_taint(node.spec.taints, tolerations)
            if taint is not None:
                out[i] = ("taint", taint_string(taint))
                continue
        labels = node.metadata.labels
        if req.node_selector and any(labels.get(k) != v for k, v in req.node_selector):
            out[i] = ("nodeSelector", "")
            continue
        if req.affinity_terms is not None and not affinity_matches(req.affinity_terms, node):
            out[i] = ("affinity", "")
    return out


class Exclusions:
    """Kueue's ExclusionStats: how many leaves each reason excluded, and how many leaves there were."""

    __slots__ = ("total", "node_selector", "affinity", "topology_domain", "taints", "resources", "library", "dra")

    def __init__(self, total: int) -> None:
        self.total = total
        self.node_selector = 0
        self.affinity = 0
        self.topology_domain = 0
        self.taints: dict[str, int] = {}
        self.resources: dict[str, int] = {}
        self.library = 0
        self.dra = 0

    def record(self, why: Exclusion) -> None:
        kind, detail = why
        if kind == "taint":
            self.taints[detail] = self.taints.get(detail, 0) + 1
        elif kind == "nodeSelector":
            self.node_selector += 1
        elif kind == "affinity":
            self.affinity += 1
        elif kind == "library":
            self.library += 1
        elif kind == "dra":
            self.dra += 1

    def any(self) -> bool:
        return bool(self.node_selector or self.affinity or self.topology_domain or self.taints or self.resources
                    or self.library or self.dra)

    def suffix(self) -> str:
        """``. Total nodes: N; excluded: a: 1, b: 2`` (reasons string-sorted), or "" without exclusions."""
        if not self.any():
            return ""
        reasons = []
        if self.node_selector:
            reasons.append(f"nodeSelector: {self.node_selector}")
        if self.affinity:
            reasons.append(f"affinity: {self.affinity}")
        if self.topology_domain:
            reasons.append(f"topologyDomain: {self.topology_domain}")
        if self.library:
            reasons.append(f"schedulerLibraryNoFit: {self.library}")
        if self.dra:
            reasons.append(f"draNoFit: {self.dra}")
        reasons += [f"taint {go_quote(t)}: {n}" for t, n in self.taints.items()]
        reasons += [f"resource {go_quote(r)}: {n}" for r, n in self.resources.items()]
        return f". Total nodes: {self.total}; excluded: {', '.join(sorted(reasons))}"


def go_quote(s: str) -> str:
    """Go's ``%q`` for the strings that appear here (label keys, values, resource and topology names)."""
    out = ['"']
    for ch in s:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)
