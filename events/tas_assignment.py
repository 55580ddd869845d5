"""Kueue's ``topologyAssignment`` wire forms: the logical list of domains <-> v1beta2 slices (<-> v1beta1 domains).

A placement is a list of leaf domains ``{values (one per level), count}`` in placement order. v1beta2 stores it
as slices so that the status of a workload spread over 10^5 nodes stays small: within a slice, each level's
values are one ``universal`` value or ``prefix + roots[i] + suffix`` per domain, and the pod counts are one
``universal`` count or one per domain. The domains are the slices concatenated in order.

:func:`encode` chooses the shape Kueue does with TASAssignmentsEncodingByHostnamePrefix on (its default since
0.19), so what kueue-es writes looks like what Kueue writes:

* the *single* form: one slice, each level's common prefix and suffix taken out, universals where all equal;
* the *hostname-prefix* form (hostname is the lowest level, more than one domain): consecutive domains whose
  hostnames share a reusable prefix — one ending at a ``-`` that is not the last character and that at least
  two hostnames start with — form their own slice. The deepest prefix that keeps to 1000 slices is used;
  when none does, all domains form one run. Runs are cut every 100000 domains.
* the prefix form is kept when it has at most one slice or when there are more domains than one slice may
  hold; otherwise the single form is used only if its JSON is strictly smaller.

With the gate off (``by_hostname_prefix=False``) Kueue always writes the single form, whatever the number of
domains: one slice for a non-empty assignment (beyond 100000 domains the API then refuses it), none for an empty
one. The domains are the same either way; only their wire form differs.

Order is never changed: ``decode(encode(levels, domains)) == domains``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from functools import lru_cache
from itertools import chain, compress
from operator import ne
from os.path import commonprefix

import msgspec

from events import objects as o
from events.errors import InvalidInput

HOSTNAME_LEVEL = "kubernetes.io/hostname"
MAX_LEVELS = 16
MAX_SLICES = 1_000
"""MaxItems of ``topologyAssignment.slices``."""
MAX_DOMAINS_PER_SLICE = 100_000
"""MaxItems of ``roots`` and of ``podCounts.individual``: a slice holds at most this many domains."""

_JSON = msgspec.json.Encoder()


# --- decoding ------------------------------------------------------------------------------------------------


def decode(ta: o.TopologyAssignment) -> list[o.TopologyDomainAssignment]:
    """The domains of ``ta``, in order. Raises :class:`InvalidInput` if the slices are inconsistent."""
    validate(ta)
    out: list[o.TopologyDomainAssignment] = []
    for sl in ta.slices:
        n = sl.domain_count
        columns = [_level_values(v, n) for v in sl.values_per_level]
        pc = sl.pod_counts
        counts = pc.individual if pc.universal is None else [pc.universal] * n
        out.extend(o.TopologyDomainAssignment(values=list(values), count=count)
                   for values, count in zip(zip(*columns, strict=True), counts, strict=True))
    return out


def _level_values(v: o.TopologyAssignmentSliceLevelValues, n: int) -> list[str]:
    if v.universal is not None:
        return [v.universal] * n
    ind = v.individual
    assert ind is not None  # validate() checked
    prefix, suffix = ind.prefix or "", ind.suffix or ""
    if not prefix and not suffix:
        return ind.roots
    return [prefix + r + suffix for r in ind.roots]


def validate(ta: o.TopologyAssignment, where: str = "", path: str = "topologyAssignment") -> None:
    """The structural rules of Kueue's v1beta2 API (lengths, exactly-one-of, counts >= 1, limits): the first one
    broken is refused (:func:`errors` names every one).

    ``where`` names the object and ``path`` the assignment's field path, for the error message."""
    problem = next(_problems(ta), None)
    if problem is not None:
        field, message = problem
        raise InvalidInput(f"{where + ': ' if where else ''}field `{path}{field}`: {message}")


def errors(ta: o.TopologyAssignment, path: str = "topologyAssignment") -> list[str]:
    """Every structural rule of :func:`validate` ``ta`` breaks, in order, as field errors at ``path``."""
    return [f"field `{path}{field}`: {message}" for field, message in _problems(ta)]


LEVELS_RULE = "valuesPerLevel must have the same length as the number of levels in this TopologyAssignment"
POD_COUNTS_RULE = "podCounts.individual must have length equal to domainCount"
ROOTS_RULE = ("valuesPerLevel.individual, if set, must have roots of length equal to domainCount of this "
              "TopologyAssignmentSlice")
"""The CEL rules of Kueue's TopologyAssignment (its slices' values one per level) and TopologyAssignmentSlice (its
pod counts and each level's roots one per domain), in the CRD's words: the apiserver names the object holding the
rule (``Invalid value: "object"``), once whichever of its items break it."""


def _problems(ta: o.TopologyAssignment) -> Iterator[tuple[str, str]]:
    levels = len(ta.levels)
    if not 1 <= levels <= MAX_LEVELS:
        yield ".levels", f"must have 1 to {MAX_LEVELS} items, has {levels}"
    if len(ta.slices) > MAX_SLICES:
        yield ".slices", f"must have at most {MAX_SLICES} items, has {len(ta.slices)}"
    if any(len(sl.values_per_level) != levels for sl in ta.slices):
        yield "", f'Invalid value: "object": {LEVELS_RULE}'
    for i, sl in enumerate(ta.slices):
        at = f".slices[{i}]"
        n = sl.domain_count
        if not 1 <= n <= MAX_DOMAINS_PER_SLICE:
            yield f"{at}.domainCount", f"must be between 1 and {MAX_DOMAINS_PER_SLICE}, is {n}"
        pc = sl.pod_counts
        if pc.individual and len(pc.individual) != n:
            yield at, f'Invalid value: "object": {POD_COUNTS_RULE}'
        if any(v.individual is not None and len(v.individual.roots) != n for v in sl.values_per_level):
            yield at, f'Invalid value: "object": {ROOTS_RULE}'
        for j, v in enumerate(sl.values_per_level):
            if (v.universal is None) == (v.individual is None):
                yield f"{at}.valuesPerLevel[{j}]", "exactly one of universal, individual must be set"
        if (pc.universal is None) == (not pc.individual):
            yield f"{at}.podCounts", "exactly one of universal, individual must be set"
        if pc.universal is not None and pc.universal < 1:
            yield f"{at}.podCounts.universal", f"must be >= 1, is {pc.universal}"
        if pc.individual and min(pc.individual) < 1:
            yield from ((f"{at}.podCounts.individual[{k}]", f"must be >= 1, is {c}")
                        for k, c in enumerate(pc.individual) if c < 1)


# --- encoding ------------------------------------------------------------------------------------------------


def encode(levels: list[str], domains: Sequence[o.TopologyDomainAssignment], *,
           by_hostname_prefix: bool = True) -> o.TopologyAssignment:
    """The v1beta2 form Kueue would write for ``domains`` (each with one value per level and count >= 1), under
    TASAssignmentsEncodingByHostnamePrefix as ``by_hostname_prefix`` says (Kueue's default: on).

    Linear in the number of domains (times the number of ``-`` in a hostname)."""
    levels = list(levels)
    domains = list(domains)
    if not by_hostname_prefix:
        return o.TopologyAssignment(levels=levels, slices=[_slice(levels, domains)] if domains else [])
    by_prefix = _hostname_prefix_form(levels, domains)
    if len(by_prefix) <= 1 or len(domains) > MAX_DOMAINS_PER_SLICE:
        return o.TopologyAssignment(levels=levels, slices=by_prefix)
    single = [_slice(levels, domains)]
    if len(_JSON.encode(single)) < len(_JSON.encode(by_prefix)):
        return o.TopologyAssignment(levels=levels, slices=single)
    return o.TopologyAssignment(levels=levels, slices=by_prefix)


def _slice(levels: list[str], domains: list[o.TopologyDomainAssignment]) -> o.TopologyAssignmentSlice:
    """One slice holding ``domains``, compacted as far as the form allows."""
    values_per_level = [_compact([d.values[j] for d in domains]) for j in range(len(levels))]
    counts = [d.count for d in domains]
    if counts.count(counts[0]) == len(counts):
        pod_counts = o.TopologyAssignmentSlicePodCounts(universal=counts[0])
    else:
        pod_counts = o.TopologyAssignmentSlicePodCounts(individual=counts)
    return o.TopologyAssignmentSlice(domain_count=len(domains), values_per_level=values_per_level,
                                     pod_counts=pod_counts)


def _compact(values: list[str]) -> o.TopologyAssignmentSliceLevelValues:
    first = values[0]
    if values.count(first) == len(values):
        return o.TopologyAssignmentSliceLevelValues(universal=first)
    prefix = commonprefix(values)
    suffix = commonprefix([v[::-1] for v in values])[::-1]
    shortest = min(map(len, values))
    if len(prefix) + len(suffix) > shortest:
        # They would overlap in the shortest value ("ababa", "aba"): the prefix gives way.
        prefix = prefix[: shortest - len(suffix)]
    p, s = len(prefix), len(suffix)
    if s:
        roots = [v[p : len(v) - s] for v in values]
    elif p:
        roots = [v[p:] for v in values]
    else:
        roots = values
    return o.TopologyAssignmentSliceLevelValues(individual=o.TopologyAssignmentSliceLevelIndividualValues(
        prefix=prefix or None, suffix=suffix or None, roots=roots))


def _hostname_prefix_form(levels: list[str], domains: list[o.TopologyDomainAssignment]) -> list[o.TopologyAssignmentSlice]:
    n = len(domains)
    runs = None
    if n > 1 and levels and levels[-1] == HOSTNAME_LEVEL:
        runs = _hostname_prefix_runs([d.values[-1] for d in domains])
    if runs is None:
        runs = [(0, n)] if n else []
    slices = []
    for start, end in runs:
        for chunk in range(start, end, MAX_DOMAINS_PER_SLICE):
            slices.append(_slice(levels, domains[chunk : min(end, chunk + MAX_DOMAINS_PER_SLICE)]))
    return slices


def _hostname_prefix_runs(hostnames: list[str]) -> list[tuple[int, int]] | None:
    """``[start, end)`` of each run of consecutive hostnames with the same grouping key, at the deepest prefix
    depth whose runs make at most MAX_SLICES slices; None when no depth does.

    A hostname's candidates are its prefixes ending at a ``-`` (not its last character), shortest first; a
    candidate is reusable when at least two hostnames have it. At depth d a hostname's key is its longest
    reusable candidate among its first d, or "" if none is. A hostname that shares a longer candidate with
    another shares all the shorter ones too, so its reusable candidates are its first r: at depth d its key is
    candidate min(d, r). Depths beyond the largest r give the same keys as that r, so the search starts there.
    """
    candidates = list(map(_candidates, hostnames))
    seen = Counter(chain.from_iterable(candidates))
    reusable = []
    for mine in candidates:
        r = 0
        for p in mine:
            if seen[p] < 2:
                break
            r += 1
        reusable.append(r)
    n = len(hostnames)
    deepest = [c[r - 1] if r else "" for c, r in zip(candidates, reusable, strict=True)]
    for depth in range(max(reusable), 0, -1):
        keys = [c[depth - 1] if r > depth else top for c, r, top in zip(candidates, reusable, deepest, strict=True)]
        bounds = [0, *compress(range(1, n), map(ne, keys[1:], keys[:-1])), n]
        runs = list(zip(bounds, bounds[1:], strict=False))
        if len(runs) <= MAX_SLICES and sum(-(-(e - s) // MAX_DOMAINS_PER_SLICE) for s, e in runs) <= MAX_SLICES:
            return runs
    return None


@lru_cache(maxsize=1 << 16)
def _candidates(hostname: str) -> tuple[str, ...]:
    """The prefixes of ``hostname`` that end at a ``-`` other than its last character, shortest first.

    Cached: a cluster's node names recur in every assignment on it, and this is most of the encoder's time."""
    parts = hostname.split("-")
    out, prefix = [], ""
    for part in parts[:-1]:
        prefix += part + "-"
        out.append(prefix)
    if out and not parts[-1]:
        out.pop()  # that "-" was the last character
    return tuple(out)


# --- v1beta1 -------------------------------------------------------------------------------------------------


def from_v1beta1(ta: o.TopologyAssignmentV1Beta1, where: str = "", path: str = "topologyAssignment", *,
                 by_hostname_prefix: bool = True) -> o.TopologyAssignment:
    """v1beta1 ``{levels, domains}`` -> v1beta2, as Kueue's conversion does (through :func:`encode`, under the
    encoding gate as ``by_hostname_prefix`` says)."""
    validate_v1beta1(ta, where, path)
    return encode(ta.levels, ta.domains, by_hostname_prefix=by_hostname_prefix)


def to_v1beta1(ta: o.TopologyAssignment) -> o.TopologyAssignmentV1Beta1:
    return o.TopologyAssignmentV1Beta1(levels=list(ta.levels), domains=decode(ta))


def validate_v1beta1(ta: o.TopologyAssignmentV1Beta1, where: str = "", path: str = "topologyAssignment") -> None:
    levels = len(ta.levels)
    problem: tuple[str, str] | None = None
    if not 1 <= levels <= MAX_LEVELS:
        problem = ".levels", f"must have 1 to {MAX_LEVELS} items, has {levels}"
    else:
        for k, d in enumerate(ta.domains):
            if len(d.values) != levels:
                problem = f".domains[{k}].values", f"must have one value per level ({levels}), has {len(d.values)}"
                break
            if d.count < 1:
                problem = f".domains[{k}].count", f"must be >= 1, is {d.count}"
                break
    if problem is not None:
        raise InvalidInput(f"{where + ': ' if where else ''}field `{path}{problem[0]}`: {problem[1]}")
