"""TASNodeFeasibilityForAllLevels (beta, on): node feasibility below a lowest level other than the hostname.

Kueue appends an internal hostname level (one leaf per node, by node name) to such a topology, so a domain holds
only the pods its nodes hold one by one: each node is filtered as a hostname leaf is (taints against the pod set's
and the flavor's tolerations, nodeSelector, required node affinity, :mod:`.nodes`) and counts the pods its free
capacity fits. The appended level is internal: a request cannot name it (``kubernetes.io/hostname`` stays an
unknown level on such a topology), slices default to the declared lowest level, and the assignment is published
rolled up to the declared levels, where usage is charged. Since the pods of an admitted workload are not tracked
to a node, its usage bounds the declared leaf as a whole: a declared leaf fits the smaller of what its feasible
nodes hold together and what its remaining capacity holds. Here the tree keeps its declared leaves and each leaf's
count is capped by its nodes' (:class:`NodeView`); descending to a node and rolling it back up gives the same
counts per declared leaf, so the placement is the one Kueue publishes. Within one workload's computation, the
nodes that descent picks for a pod set are charged for the pod sets after it (:func:`record_on_nodes`), as Kueue
keeps its leaf-level picks for the cycle beside the usage on the declared leaves; a pod-set group's are charged
to its declared leaves only (not modelled: the nodes its leader and workers took).

Gate off, the declared lowest level is the leaf and its summed capacity is checked as a whole, with no node
filter, as before v0.20.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from kueue_es.scheduler.tas.counts import limiting_resource
from kueue_es.scheduler.tas.devices import Devices
from kueue_es.scheduler.tas.nodes import Exclusion, Exclusions, excluded_nodes, node_score, scoring_terms
from kueue_es.scheduler.tas.request import Placement, PodSetRequest, TASOptions
from projections.tas_node_layer import NodeLayer
from projections.topology import FlavorSnapshot, fit_in_leaf

_ENC = msgspec.msgpack.Encoder()


class NodeView:
    """One request's view of the nodes of a flavor: why each excluded node is (``why``, by node index), how many
    pods each node fits (``fits``), and per declared leaf the pods its feasible nodes hold (``cap``)."""

    __slots__ = ("layer", "why", "fits", "cap", "per_pod", "taken")

    def __init__(self, layer: NodeLayer, why: Mapping[int, Exclusion], fits: Sequence[int], cap: list[int],
                 per_pod: tuple[tuple[str, int], ...], taken: Mapping[int, Mapping[str, int]] | None = None) -> None:
        self.layer = layer
        self.per_pod = per_pod
        self.taken = taken or {}
        """Node index -> what earlier pod sets of the workload took on it in this computation."""
        self.why = why
        self.fits = fits
        self.cap = cap

    def exclusions(self, leaf_why: Mapping[int, Exclusion | None]) -> Exclusions:
        """Kueue's exclusion statistics over nodes: each filtered node by its reason, each node of a leaf outside
        a replacement's domain (``leaf_why`` None) as topologyDomain, each other node fitting no pod by its
        limiting resource."""
        layer = self.layer
        stats = Exclusions(len(layer))
        for k in range(len(layer)):
            why = self.why.get(k)
            if why is not None:
                stats.record(why)
            elif layer.leaf[k] in leaf_why:
                stats.topology_domain += 1
            elif self.fits[k] == 0:
                r = limiting_resource(layer.free, k, self.per_pod, self.taken.get(k))
                if r:
                    stats.resources[r] = stats.resources.get(r, 0) + 1
        return stats

    def with_leader(self, leaf: int, per_pod: tuple[tuple[str, int], ...],
                    leader_per_pod: tuple[tuple[str, int], ...],
                    leader_why: Mapping[int, Exclusion] | None = None) -> int:
        """How many workers leaf ``leaf``'s feasible nodes hold once one of them holds the leader (Kueue's
        parent rule over node leaves: their sum less the smallest loss of a node that can take the leader), or -1
        when none can take it. The leader's nodes are those ``leader_why`` (its own filter, under
        TASLeaderPodSetFeasibility) does not exclude, else the workers' own; a node the workers' filter excludes
        loses them nothing."""
        layer = self.layer
        refused = self.why if leader_why is None else leader_why
        loss: int | None = None
        for k in range(layer.start[leaf], layer.end[leaf]):
            taken = self.taken.get(k, {})
            if k in refused or fit_in_leaf(layer.free, k, leader_per_pod, taken) == 0:
                continue
            if k in self.why:
                loss = 0
                continue
            both = dict(taken)
            for r, q in leader_per_pod:
                both[r] = both.get(r, 0) + q
            left = fit_in_leaf(layer.free, k, per_pod, both)
            loss = self.fits[k] - left if loss is None else min(loss, self.fits[k] - left)
        return -1 if loss is None else self.cap[leaf] - loss


def node_view(snap: FlavorSnapshot, req: PodSetRequest, per_pod: tuple[tuple[str, int], ...],
              assumed: Mapping[str, Mapping[str, int]] | None = None,
              devices: Devices | None = None) -> NodeView | None:
    """The request's :class:`NodeView`, or None when the lowest level is the hostname (leaves are nodes already).
    The node filter and the per-leaf caps are memoised on the shared node layer per (filter inputs, shape); the
    nodes earlier pod sets of the workload took in this computation (``assumed``, :func:`record_on_nodes`) hold
    that much less. Under KueueDRADeviceFeasibility (``devices``), a node whose devices cannot serve the pod set's
    claims is excluded too (:mod:`.devices`; not memoised on the layer, which outlives the cycle's devices)."""
    layer: NodeLayer | None = snap.nodes
    if layer is None:
        return None
    filtering = layer.has_taints or bool(req.node_selector) or req.affinity_terms is not None
    fkey = _ENC.encode((req.node_selector, req.tolerations, snap.tolerations, req.affinity_terms)) if filtering else b""
    memo = layer.memo
    if len(memo) > 1024:
        memo.clear()
    why = memo.get((b"why", fkey))
    if why is None:
        why = memo[(b"why", fkey)] = excluded_nodes(layer.nodes, req, req.tolerations + snap.tolerations) \
            if filtering else {}
    fits = layer.pods_fitting(per_pod)
    filtered = why
    if devices is not None and req.claims:
        why = devices.excluded(layer.nodes, req.claims, why)
    cap = memo.get((b"cap", fkey, per_pod)) if why is filtered else None
    if cap is None:
        cap = [sum(fits[k] for k in range(a, b) if k not in why) for a, b in zip(layer.start, layer.end, strict=True)]
        if why is filtered:
            memo[(b"cap", fkey, per_pod)] = cap
    taken = _taken(layer, assumed)
    if taken:
        fits, cap = list(fits), list(cap)
        for k in sorted(taken):
            fits[k] = fit_in_leaf(layer.free, k, per_pod, taken[k])
        for i in sorted({layer.leaf[k] for k in taken}):
            cap[i] = sum(fits[k] for k in range(layer.start[i], layer.end[i]) if k not in why)
    return NodeView(layer, why, fits, cap, per_pod, taken)


NODE_KEY = "\x00node/"
"""Prefix of an assumed-usage key naming a node (what an earlier pod set took on it in this computation); no
domain id starts with it."""


def _taken(layer: NodeLayer, assumed: Mapping[str, Mapping[str, int]] | None) -> dict[int, Mapping[str, int]]:
    if not assumed:
        return {}
    index = layer.index()
    out: dict[int, Mapping[str, int]] = {}
    for key in sorted(assumed):
        if key.startswith(NODE_KEY):
            k = index.get(key[len(NODE_KEY):])
            if k is not None:
                out[k] = assumed[key]
    return out


def record_on_nodes(snap: FlavorSnapshot, req: PodSetRequest, placement: Placement,
                    assumed: dict[str, dict[str, int]], options: TASOptions) -> bool:
    """Under TASNodeFeasibilityForAllLevels, on a topology without the hostname level, add to ``assumed`` the
    usage of ``placement`` on the nodes Kueue's descent below the declared leaves picks, and say whether it did.
    Kueue keeps these node-level picks within the cycle only, besides the usage on the declared domains (which the
    caller records), so a later pod set of the workload sees both the exact nodes taken and the domain shrunk. In
    each declared leaf, its nodes are taken in Kueue's order (preferred-affinity score descending when that gate is
    on, then pods fitting ascending, then name), each as full as the pods left need."""
    if not options.node_feasibility or snap.nodes is None or not placement.domains:
        return False
    per_pod = req.per_pod()
    shape = tuple(sorted(per_pod.items()))
    view = node_view(snap, req, shape, assumed, options.devices)
    assert view is not None
    layer, tree = view.layer, snap.tree
    terms = scoring_terms(req) if options.node_affinity_preferred else ()
    for values, count in placement.domains:
        leaf = tree.index[-1].get(",".join(values))
        if leaf is None:
            continue
        nodes = range(layer.start[leaf], layer.end[leaf])
        fits = {k: 0 if k in view.why else view.fits[k] for k in nodes}
        score = {k: node_score(terms, layer.nodes[k]) if terms and k not in view.why else 0 for k in nodes}
        left = count
        for k in sorted(nodes, key=lambda k: (-score[k], fits[k], k)):
            if left <= 0:
                break
            take = min(fits[k], left)
            if take <= 0:
                continue
            left -= take
            u = assumed.setdefault(NODE_KEY + layer.nodes[k].metadata.name, {})
            for r, v in per_pod.items():
                if v:
                    u[r] = u.get(r, 0) + v * take
    return True


def node_scores(view: NodeView, req: PodSetRequest) -> list[int] | None:
    """Per declared leaf, the preferred node-affinity scores of its feasible nodes summed (Kueue scores each node
    leaf and a parent sums its children), or None when no node scores."""
    terms = scoring_terms(req)
    if not terms:
        return None
    layer = view.layer
    per_node = [0 if k in view.why else node_score(terms, n) for k, n in enumerate(layer.nodes)]
    scores = [sum(per_node[a:b]) for a, b in zip(layer.start, layer.end, strict=True)]
    return scores if any(scores) else None
