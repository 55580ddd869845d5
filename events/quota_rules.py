"""The rules of a ClusterQueue's and a Cohort's resource groups, as lists of field errors (``field `path`:
problem``) for the caller to refuse together, the way the apiserver and Kueue's webhooks report every rule an object
breaks in one message.

Two layers, as Kubernetes has them: the CRD's schema (:func:`schema_errors`: quantities that parse, list entries
unique by name, each flavor listing as many resources as its group covers), which the apiserver checks first,
refusing an object that fails it without calling a webhook; then Kueue's webhook (:func:`webhook_errors`), in the
webhook's order. The projections need part of each (a flavor in one group only, its resources the covered ones in
their order, quotas not negative): the watch holds a stored object to that part only (``full=False``), Kueue's
controllers acting on whatever is stored. None of this runs in the fold.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from events import objects as o
from events.field_errors import go_quote
from events.labels import label_key_problems
from events.quantity import QuantityError, parse_quantity

MAX_TOTAL = 256
"""Kueue's webhook: at most this many flavors, and this many covered resources, across a ClusterQueue's groups."""
MAX_COMBINATIONS = 512
"""Kueue's webhook: at most this many (flavor, resource) quotas in one resource group of a ClusterQueue."""
MAX_GROUPS = 16
"""The CRD's ``maxItems`` on a ClusterQueue's and a Cohort's ``resourceGroups``."""
MAX_GROUP_ITEMS = 64
"""The CRD's ``maxItems`` on a group's ``coveredResources`` and ``flavors``, and on a flavor's ``resources`` (each
with ``minItems`` 1)."""
LIMITS = (("nominalQuota", "nominal_quota"), ("borrowingLimit", "borrowing_limit"), ("lendingLimit", "lending_limit"))


def quantity_problem(q: object, *, negative: bool = False) -> str | None:
    """Why ``q`` is not a quantity (or, unless ``negative``, is a negative one); None when it is fine."""
    try:
        value = parse_quantity(q)  # type: ignore[arg-type]
    except QuantityError as exc:
        return str(exc)
    return "must not be negative" if value < 0 and not negative else None


QUANTITY_PATTERN = (r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
                    r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$")
"""The ``pattern`` Kueue's CRDs (controller-gen) give a ``resource.Quantity`` written as a string."""


def quantity_error(at: str, q: object, *, negative: bool = False) -> str | None:
    """The field error of a ``resource.Quantity`` field ``at`` holding ``q`` that :func:`quantity_problem` refuses,
    or None: for a string off the CRD's :data:`QUANTITY_PATTERN`, in kube-apiserver's words (v1.36, refusing a CRD
    with the pattern); else in kueue-es's. (A string the pattern refuses and kueue-es reads, `` 1``, is let
    through as before: the watch folds it.)"""
    problem = quantity_problem(q, negative=negative)
    if problem is None:
        return None
    if isinstance(q, str) and re.fullmatch(QUANTITY_PATTERN, q) is None:
        return f"field `{at}`: Invalid value: {go_quote(q)}: {at} in body should match '{QUANTITY_PATTERN}'"
    return f"field `{at}`: {problem}"


def resource_weight_quantity_errors(weights: Mapping[str, object]) -> list[str]:
    """Each of a flavor's ``resourceWeights`` that is no quantity (Kueue's CRD types them
    ``resource.Quantity``), by resource name. Not a shape the fold needs: a stored one (kueue-es's CRD has no
    quantity pattern) is folded, weighing 1 (:func:`projections.fair_share.flavor_weights`), and an update
    that leaves it as it was keeps it (:func:`events.crd_markers.ratcheted`)."""
    return [error for r in sorted(weights)
            if (error := quantity_error(f"spec.resourceWeights[{r}]", weights[r], negative=True))]


def go_map(name: str) -> str:
    """A list entry keyed by ``name`` as the apiserver prints it in a list-map's duplicate error."""
    return 'map[string]interface {}{"name":"' + name + '"}'


def schema_errors(groups: Sequence[o.ResourceGroup], *, full: bool = True) -> list[str]:
    """What the CRD's schema refuses in ``groups``, every one, as the apiserver lists them: first its schema pass,
    here in the object's order (the apiserver's follows Go's map order, which varies) (a quota off the quantity
    pattern or that is no quantity; ``full`` only, as the projections fold the rest, which a CRD
    without the bounds kept: a list longer than its ``maxItems``, a covered resource, flavor or quota list left
    empty, below its ``minItems``); then its list maps (a flavor named twice in a group, a resource twice in a
    flavor). Its CEL rule, a flavor listing as many resources as the group covers, is :func:`count_errors`."""
    most = MAX_GROUPS if full else None
    items = MAX_GROUP_ITEMS if full else None
    errors = _too_many("spec.resourceGroups", groups, most)
    duplicates: list[str] = []
    for g, rg in enumerate(groups):
        for name, listed in (("coveredResources", rg.covered_resources), ("flavors", rg.flavors)):
            errors += _bounds(f"spec.resourceGroups[{g}].{name}", listed, items)
        flavors: set[str] = set()
        for f, fq in enumerate(rg.flavors):
            at = f"spec.resourceGroups[{g}].flavors[{f}]"
            errors += _bounds(f"{at}.resources", fq.resources, items)
            if fq.name in flavors:
                duplicates.append(f"field `{at}`: Duplicate value: {go_map(fq.name)}")
            flavors.add(fq.name)
            resources: set[str] = set()
            for r, rq in enumerate(fq.resources):
                if rq.name in resources:
                    duplicates.append(f"field `{at}.resources[{r}]`: Duplicate value: {go_map(rq.name)}")
                resources.add(rq.name)
                for name, attr in LIMITS:
                    q = getattr(rq, attr)
                    error = None if q is None else quantity_error(f"{at}.resources[{r}].{name}", q, negative=True)
                    if error is not None:
                        errors.append(error)
    return errors + duplicates


def _bounds(at: str, items: Sequence[object], most: int | None) -> list[str]:
    """A group's list past its ``maxItems`` or, under the same bound's check (``most`` not None), empty: below its
    ``minItems`` of 1, worded as kube-apiserver (v1.36) words a CRD's ``minItems``."""
    if most is not None and not items:
        return [f"field `{at}`: Invalid value: 0: {at} in body should have at least 1 items"]
    return _too_many(at, items, most)


def _too_many(at: str, items: Sequence[object], most: int | None) -> list[str]:
    """A list past its CRD's ``maxItems`` (None: not checked), in the apiserver's words."""
    if most is None or len(items) <= most:
        return []
    return [f"field `{at}`: Too many: {len(items)}: must have at most {most} items"]


def borrowing_errors(groups: Sequence[o.ResourceGroup], cohort: str) -> list[str]:
    """The ClusterQueue spec's CEL rule: no borrowing limit without a cohort (checked on the spec, before the
    rules of the groups below it)."""
    if cohort or all(rq.borrowing_limit is None for rg in groups for fq in rg.flavors for rq in fq.resources):
        return []
    return ['field `spec`: Invalid value: "object": borrowingLimit must be nil when cohort is empty']


def count_errors(groups: Sequence[o.ResourceGroup]) -> list[str]:
    """The ResourceGroup CEL rule: every flavor lists as many resources as the group covers."""
    return [f'field `spec.resourceGroups[{g}]`: Invalid value: "object": flavors must have the same number of '
            "resources as the coveredResources"
            for g, rg in enumerate(groups) if any(len(fq.resources) != len(rg.covered_resources) for fq in rg.flavors)]


def webhook_errors(groups: Sequence[o.ResourceGroup], *, parent: str, cohort: bool, full: bool = True) -> list[str]:
    """The rules of Kueue's webhook ``groups`` break (taken to pass :func:`schema_errors`), in its order: per group,
    its covered resources (well named, each in one group), then per flavor its quotas (named as the covered
    resources, in order; not negative; limits only under a ``parent``, a ClusterQueue's cohort or a Cohort's
    parent; a ClusterQueue lending at most its nominal quota) and its name (in one group only). ``full=False``:
    only those the projections need."""
    errors: list[str] = []
    covered: set[str] = set()
    flavors: set[str] = set()
    for g, rg in enumerate(groups):
        for j, name in enumerate(rg.covered_resources):
            at = f"spec.resourceGroups[{g}].coveredResources[{j}]"
            # Kueue's validateResourceName: one field.Invalid per fault IsQualifiedName finds, with the name
            errors += [f"field `{at}`: Invalid value: {go_quote(name)}: {problem}"
                       for problem in (label_key_problems(name) if full else ())]
            if name in covered and full:
                errors.append(f'field `{at}`: Duplicate value: "{name}"')
            covered.add(name)
        for f, fq in enumerate(rg.flavors):
            at_f = f"spec.resourceGroups[{g}].flavors[{f}]"
            for r, (rq, name) in enumerate(zip(fq.resources, rg.covered_resources, strict=False)):
                errors += _quota_errors(rq, name, f"{at_f}.resources[{r}]", parent=parent, cohort=cohort, full=full)
            if fq.name in flavors:
                errors.append(f'field `{at_f}.name`: Duplicate value: "{fq.name}"')
            flavors.add(fq.name)
    return errors


def _quota_errors(rq: o.ResourceQuota, covered: str, at: str, *, parent: str, cohort: bool, full: bool) -> list[str]:
    errors = []
    if rq.name != covered:
        errors.append(f'field `{at}.name`: Invalid value: "{rq.name}": must match the name in coveredResources')
    negative = "must be greater than or equal to 0"
    if parse_quantity(rq.nominal_quota) < 0:
        errors.append(f'field `{at}.nominalQuota`: Invalid value: "{rq.nominal_quota}": {negative}')
    unparented = f"must be nil when {'parent' if cohort else 'cohort'} is empty"
    if rq.borrowing_limit is not None:
        if full and not parent:
            errors.append(f'field `{at}.borrowingLimit`: Invalid value: "{rq.borrowing_limit}": {unparented}')
        if parse_quantity(rq.borrowing_limit) < 0:
            errors.append(f'field `{at}.borrowingLimit`: Invalid value: "{rq.borrowing_limit}": {negative}')
    lend = rq.lending_limit
    if lend is not None:
        if parse_quantity(lend) < 0:
            errors.append(f'field `{at}.lendingLimit`: Invalid value: "{lend}": {negative}')
        if full and not parent:
            errors.append(f'field `{at}.lendingLimit`: Invalid value: "{lend}": {unparented}')
        if full and not cohort and parse_quantity(lend) > parse_quantity(rq.nominal_quota):
            errors.append(f'field `{at}.lendingLimit`: Invalid value: "{lend}": must be less than or equal to the '
                          "nominalQuota")
    return errors


def total_errors(groups: Sequence[o.ResourceGroup]) -> list[str]:
    """Kueue's webhook limits on a ClusterQueue's size (after its other spec rules): at most 256 flavors and 256
    covered resources across its groups, and 512 flavor-resource combinations in any one group."""
    errors = []
    for what, total in (("flavors", sum(len(rg.flavors) for rg in groups)),
                        ("covered resources", sum(len(rg.covered_resources) for rg in groups))):
        if total > MAX_TOTAL:
            errors.append(f"field `spec.resourceGroups`: Invalid value: {total}: total number of {what} across all "
                          f"resourceGroups must be ≤ {MAX_TOTAL}, got {total}")
    for g, rg in enumerate(groups):
        combinations = sum(len(fq.resources) for fq in rg.flavors)
        if combinations > MAX_COMBINATIONS:
            errors.append(f"field `spec.resourceGroups[{g}]`: Invalid value: {combinations}: number of "
                          f"flavor-resource combinations in a resourceGroup must be ≤ {MAX_COMBINATIONS}, got "
                          f"{combinations}")
    return errors
