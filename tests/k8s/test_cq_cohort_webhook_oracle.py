"""Kueue's own tests of its ClusterQueue and Cohort validation, as the oracle of kueue-es's answers.

Each case names the Kueue test it translates: ``pkg/webhooks/clusterqueue_webhook_test.go``
(``TestValidateClusterQueue`` and friends, the v1beta2 version of the file),
``pkg/webhooks/cohort_webhook_test.go`` (``TestValidateCohort``), and the apiserver-backed tables of
``test/integration/singlecluster/webhook/core/`` ``clusterqueue_test.go`` and ``cohort_test.go``, whose
``BeInvalidError`` (422: a rule of the CRD, checked by the apiserver before any webhook) and
``BeForbiddenError`` (403: Kueue's webhook refused) say whose rule refused the object. A unit case (Kueue's
webhook function alone) is asserted on the answer a client gets, the CRD's defaults applied and its rules
checked first, as the apiserver does; a Go field left at its zero value is left out (its ``omitempty``).
Where the integration tables predate v1beta2's larger bounds (16 flavors and resources per group, now 64),
the case crosses the bound of today.
"""

from __future__ import annotations

import copy
from typing import Any

import msgspec
import pytest

from connectors.k8s.validating import review
from events import quota_rules
from events.manifests import decode_object
from events.object_rules import cluster_queue_errors

V1B2 = "kueue.x-k8s.io/v1beta2"
QUALIFIED = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
             "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
             "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
"""apimachinery's ``IsQualifiedName`` words for a bad name part, which Kueue's ``validateResourceName`` and a
label selector's ``ValidateLabelName`` both report."""
AT = "spec.resourceGroups[0].flavors[0].resources[0]"


def _quotas(name: str, *quotas: tuple[str, ...]) -> dict[str, Any]:
    """Kueue's ``MakeFlavorQuotas(name).Resource(resource, nominal, borrowing, lending)``: an empty limit is
    left out."""
    out = []
    for resource, *limits in quotas:
        quota: dict[str, Any] = {"name": resource, "nominalQuota": limits[0] if limits else "1"}
        for key, value in zip(("borrowingLimit", "lendingLimit"), limits[1:], strict=False):
            if value:
                quota[key] = value
        out.append(quota)
    return {"name": name, "resources": out}


def _group(*flavors: dict[str, Any]) -> dict[str, Any]:
    """Kueue's ``ResourceGroup(flavors...)``: the covered resources are the first flavor's."""
    return {"coveredResources": [r["name"] for r in flavors[0]["resources"]], "flavors": list(flavors)}


def cq(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": V1B2, "kind": "ClusterQueue", "metadata": {"name": "cluster-queue"}, "spec": spec}


def cohort(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": V1B2, "kind": "Cohort", "metadata": {"name": "cohort"}, "spec": spec}


def _answer(doc: dict[str, Any], old: dict[str, Any] | None = None) -> dict[str, Any]:
    request: dict[str, Any] = {"uid": "u", "operation": "UPDATE" if old else "CREATE", "object": doc}
    if old is not None:
        request["oldObject"] = old
    body = msgspec.json.encode({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                                "request": request})
    return review(body, doc["kind"], {})["response"]


def _outcome(doc: dict[str, Any], old: dict[str, Any] | None = None) -> tuple[int, str] | None:
    """None when allowed; else the status code and its message (kueue-es's words for a webhook's 403, the
    apiserver's for a CRD's 422)."""
    response = _answer(doc, old)
    if response["allowed"]:
        return None
    return response["status"]["code"], response["status"]["message"]


def _forbidden(kind: str, *errors: str) -> tuple[int, str]:
    listed = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
    return 403, f"{kind} {'cluster-queue' if kind == 'ClusterQueue' else 'cohort'}: {listed}"


def _invalid(kind: str, *errors: str) -> tuple[int, str]:
    listed = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
    name = "cluster-queue" if kind == "ClusterQueue" else "cohort"
    return 422, f'{kind}.kueue.x-k8s.io "{name}" is invalid: {listed}'


# --- clusterqueue_webhook_test.go: TestValidateClusterQueue -------------------------------------------------

UNIT = [
    ("built-in resources with qualified names", cq(resourceGroups=[_group(_quotas("default", ("cpu",)))]),
     None),
    ("invalid resource name", cq(resourceGroups=[_group(_quotas("default", ("@cpu",)))]),
     _forbidden("ClusterQueue",
                'field `spec.resourceGroups[0].coveredResources[0]`: Invalid value: "@cpu": ' + QUALIFIED)),
    ("admissionChecks defined", cq(admissionChecksStrategy={"admissionChecks": [{"name": "ac1"}]}), None),
    ("in cohort", cq(cohortName="prod"), None),
    ("extended resources with qualified names",
     cq(resourceGroups=[_group(_quotas("default", ("example.com/gpu",)))]), None),
    ("flavor with qualified names", cq(resourceGroups=[_group(_quotas("x86", ("cpu",)))]), None),
    ("flavor quota with negative value", cq(resourceGroups=[_group(_quotas("x86", ("cpu", "-1")))]),
     _forbidden("ClusterQueue", f'field `{AT}.nominalQuota`: Invalid value: "-1": must be greater than or '
                "equal to 0")),
    ("flavor quota with zero value", cq(resourceGroups=[_group(_quotas("x86", ("cpu", "0")))]), None),
    ("flavor quota with borrowingLimit 0",
     cq(cohortName="cohort", resourceGroups=[_group(_quotas("x86", ("cpu", "1", "0")))]), None),
    ("flavor quota with negative borrowingLimit",
     cq(cohortName="cohort", resourceGroups=[_group(_quotas("x86", ("cpu", "1", "-1")))]),
     _forbidden("ClusterQueue", f'field `{AT}.borrowingLimit`: Invalid value: "-1": must be greater than or '
                "equal to 0")),
    ("flavor quota with lendingLimit 0",
     cq(cohortName="cohort", resourceGroups=[_group(_quotas("x86", ("cpu", "1", "", "0")))]), None),
    ("flavor quota with negative lendingLimit",
     cq(cohortName="cohort", resourceGroups=[_group(_quotas("x86", ("cpu", "1", "", "-1")))]),
     _forbidden("ClusterQueue", f'field `{AT}.lendingLimit`: Invalid value: "-1": must be greater than or '
                "equal to 0")),
    ("flavor quota with lendingLimit and empty cohort",
     cq(resourceGroups=[_group(_quotas("x86", ("cpu", "1", "", "1")))]),
     _forbidden("ClusterQueue", f'field `{AT}.lendingLimit`: Invalid value: "1": must be nil when cohort is '
                "empty")),
    ("flavor quota with lendingLimit greater than nominalQuota",
     cq(cohortName="cohort", resourceGroups=[_group(_quotas("x86", ("cpu", "1", "", "2")))]),
     _forbidden("ClusterQueue", f'field `{AT}.lendingLimit`: Invalid value: "2": must be less than or equal '
                "to the nominalQuota")),
    ("empty queueing strategy is supported", cq(), None),
    ("namespaceSelector with invalid labels",
     cq(namespaceSelector={"matchLabels": {"nospecialchars^=@": "bar"}}),
     _forbidden("ClusterQueue", 'field `spec.namespaceSelector.matchLabels`: Invalid value: '
                '"nospecialchars^=@": ' + QUALIFIED)),
    ("namespaceSelector with invalid expressions",
     cq(namespaceSelector={"matchExpressions": [{"key": "key", "operator": "In"}]}),
     _forbidden("ClusterQueue", "field `spec.namespaceSelector.matchExpressions[0].values`: Required value: "
                "must be specified when `operator` is 'In' or 'NotIn'")),
    ("multiple resource groups", cq(resourceGroups=[
        _group(_quotas("alpha", ("cpu", "0"), ("memory", "0")),
               _quotas("beta", ("cpu", "0"), ("memory", "0"))),
        _group(_quotas("gamma", ("example.com/gpu", "0")),
               _quotas("omega", ("example.com/gpu", "0")))]), None),
    ("resources in a flavor in different order", cq(resourceGroups=[{
        "coveredResources": ["cpu", "memory"],
        "flavors": [_quotas("alpha", ("cpu", "0"), ("memory", "0")),
                    _quotas("beta", ("memory", "0"), ("cpu", "0"))]}]),
     _forbidden("ClusterQueue",
                'field `spec.resourceGroups[0].flavors[1].resources[0].name`: Invalid value: "memory": must '
                "match the name in coveredResources",
                'field `spec.resourceGroups[0].flavors[1].resources[1].name`: Invalid value: "cpu": must '
                "match the name in coveredResources")),
    ("resource in more than one resource group", cq(resourceGroups=[
        _group(_quotas("alpha", ("cpu", "0"), ("memory", "0"))), _group(_quotas("beta", ("memory", "0")))]),
     _forbidden("ClusterQueue",
                'field `spec.resourceGroups[1].coveredResources[0]`: Duplicate value: "memory"')),
    ("flavor in more than one resource group", cq(resourceGroups=[
        _group(_quotas("alpha", ("cpu",)), _quotas("beta", ("cpu",))), _group(_quotas("beta", ("memory",)))]),
     _forbidden("ClusterQueue", 'field `spec.resourceGroups[1].flavors[0].name`: Duplicate value: "beta"')),
    ("valid preemption with borrowWithinCohort", cq(preemption={
        "reclaimWithinCohort": "LowerPriority",
        "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 10}}), None),
    ("existing cluster queue created with older Kueue version that has a nil borrowWithinCohort field",
     cq(preemption={"reclaimWithinCohort": "Never"}), None),
    ("flavorFungibility preference BorrowingOverPreemption with both TryNextFlavor is valid",
     cq(flavorFungibility={"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor",
                           "preference": "BorrowingOverPreemption"}), None),
    ("flavorFungibility preference PreemptionOverBorrowing with both TryNextFlavor is valid",
     cq(flavorFungibility={"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor",
                           "preference": "PreemptionOverBorrowing"}), None),
]


@pytest.mark.parametrize(("doc", "want"), [pytest.param(doc, want, id=name) for name, doc, want in UNIT])
def test_validate_cluster_queue(doc: dict[str, Any], want: tuple[int, str] | None) -> None:
    assert _outcome(doc) == want


def test_an_admission_check_on_a_flavor_the_queue_does_not_have_is_refused() -> None:
    """``admissionCheckStrategy defined`` (``MakeAdmissionCheckStrategyRule("ac1", "flavor1")`` on a queue
    without flavors): the test's version predates ``validateAdmissionCheckOnFlavors``, which the newest
    webhook runs on every create (``ValidateClusterQueue``), refusing ``flavor1`` as
    ``field.NotSupported``."""
    code, message = _outcome(cq(admissionChecksStrategy={"admissionChecks": [{"name": "ac1",
                                                                              "onFlavors": ["flavor1"]}]}))
    assert code == 403
    assert message.startswith('ClusterQueue cluster-queue: field '
                              '`spec.admissionChecksStrategy.admissionChecks[0].onFlavors[0]`: '
                              'Unsupported value: "flavor1"')


@pytest.mark.parametrize(("borrow", "preempt", "preference"), [
    pytest.param("TryNextFlavor", "MayStopSearch", "BorrowingOverPreemption",
                 id="flavorFungibility preference set but whenCanPreempt != TryNextFlavor"),
    pytest.param("MayStopSearch", "MayStopSearch", "BorrowingOverPreemption",
                 id="flavorFungibility preference set but whenCanBorrow != TryNextFlavor"),
    pytest.param("MayStopSearch", "TryNextFlavor", "PreemptionOverBorrowing",
                 id="flavorFungibility preference PreemptionOverBorrowing but "
                    "whenCanBorrow != TryNextFlavor"),
])
def test_a_flavor_preference_needs_both_policies_try_next_flavor(borrow: str, preempt: str,
                                                                 preference: str) -> None:
    """Kueue's webhook (``validateFlavorFungibility``) refuses it at ``spec.flavorFungibility.preference``,
    with the preference as the bad value, as its unit test wants; but the CRD's CEL rule on
    ``FlavorFungibility`` (``apis/kueue/v1beta2/clusterqueue_types.go``) refuses it first at the apiserver: a
    422 at ``spec.flavorFungibility``, and the webhook is never called."""
    doc = cq(flavorFungibility={"whenCanBorrow": borrow, "whenCanPreempt": preempt, "preference": preference})
    view = decode_object(cq(), "ClusterQueue cluster-queue")
    spec = msgspec.structs.replace(view.spec, flavor_fungibility=msgspec.structs.replace(
        view.spec.flavor_fungibility, when_can_borrow=borrow, when_can_preempt=preempt,
        preference=preference))
    assert cluster_queue_errors(spec) == [
        f'field `spec.flavorFungibility.preference`: Invalid value: "{preference}": '
        f'preference "{preference}" requires both whenCanBorrow and whenCanPreempt to be TryNextFlavor']
    assert _outcome(doc) == _invalid("ClusterQueue", 'spec.flavorFungibility: Invalid value: "object": '
                                     "preference can only be set when both whenCanBorrow and whenCanPreempt "
                                     "are TryNextFlavor")


# --- TestValidateClusterQueueUpdate, TestValidateTotal*, TestValidateFlavorResourceCombinations -------------


@pytest.mark.parametrize(("old", "new"), [
    pytest.param("StrictFIFO", "BestEffortFIFO", id="queueingStrategy can be updated"),
    pytest.param("BestEffortFIFO", "BestEffortFIFO", id="same queueingStrategy"),
])
def test_validate_cluster_queue_update(old: str, new: str) -> None:
    before = cq(queueingStrategy=old, resourceGroups=[_group(_quotas("x86", ("memory",)))])
    after = copy.deepcopy(before)
    after["spec"]["queueingStrategy"] = new
    assert _outcome(after, before) is None


def _groups(flavors: int, resources: int) -> list[Any]:
    names = [f"res{j:03d}" for j in range(resources)]
    return [msgspec.convert({"coveredResources": names, "flavors": [
        {"name": f"f{i:03d}", "resources": [{"name": r, "nominalQuota": "1"} for r in names]}
        for i in range(flavors)]}, quota_rules.o.ResourceGroup)]


@pytest.mark.parametrize(("flavors", "resources", "refused"), [
    pytest.param(10, 1, False, id="TestValidateTotalFlavors/within limit (10 flavors)"),
    pytest.param(256, 1, False, id="TestValidateTotalFlavors/At limit (256 flavors)"),
    pytest.param(257, 1, True, id="TestValidateTotalFlavors/over limit (257 flavors)"),
    pytest.param(1, 10, False, id="TestValidateTotalCoveredResources/within limit (10 covered resources)"),
    pytest.param(1, 256, False, id="TestValidateTotalCoveredResources/At limit (256 covered resources)"),
    pytest.param(1, 257, True, id="TestValidateTotalCoveredResources/over limit (257 covered resources)"),
    pytest.param(8, 64, False,
                 id="TestValidateFlavorResourceCombinations/at limit (8 flavors x 64 resources)"),
    pytest.param(9, 64, True,
                 id="TestValidateFlavorResourceCombinations/over limit (9 flavors x 64 resources)"),
])
def test_the_webhook_s_size_limits(flavors: int, resources: int, refused: bool) -> None:
    """Kueue's webhook alone (one group: through the apiserver the CRD's 64 items per list refuse most of
    these first)."""
    assert bool(quota_rules.total_errors(_groups(flavors, resources))) is refused


# --- cohort_webhook_test.go: TestValidateCohort -------------------------------------------------------------


def test_validate_cohort_lending_limit_without_a_parent() -> None:
    """``flavor quota with lendingLimit and empty parent``."""
    doc = cohort(resourceGroups=[_group(_quotas("x86", ("cpu", "1", "", "1")))])
    assert _outcome(doc) == _forbidden("Cohort", f'field `{AT}.lendingLimit`: Invalid value: "1": must be '
                                                 "nil when parent is empty")


# --- webhook/core/clusterqueue_test.go and cohort_test.go: whose rule refuses -------------------------------

MANY = 65
"""One past v1beta2's ``MaxItems=64`` on a group's flavors and a flavor's resources."""

INTEGRATION = [
    ("ClusterQueue/Should have non-negative borrowing limit",
     cq(cohortName="cohort", resourceGroups=[_group(_quotas("x86", ("cpu", "2", "-1")))]), 403),
    ("ClusterQueue/Should have non-negative quota value",
     cq(resourceGroups=[_group(_quotas("x86", ("cpu", "-1")))]), 403),
    ("ClusterQueue/Should have at least one flavor",
     cq(resourceGroups=[{"coveredResources": [], "flavors": []}]), 422),
    ("ClusterQueue/Should have at least one resource",
     cq(resourceGroups=[{"coveredResources": [], "flavors": [{"name": "foo", "resources": []}]}]), 422),
    ("ClusterQueue/Should have qualified flavor name",
     cq(resourceGroups=[_group(_quotas("invalid_name", ("cpu", "5")))]), 422),
    ("ClusterQueue/Should have qualified resource name",
     cq(resourceGroups=[_group(_quotas("x86", ("@cpu", "5")))]), 403),
    ("ClusterQueue/Should have valid resources quantity",
     cq(resourceGroups=[_group(_quotas("flavor", *[(f"r{i}",) for i in range(MANY)]))]), 422),
    ("ClusterQueue/Should have valid flavors quantity",
     cq(resourceGroups=[_group(*[_quotas(f"f{i}", ("cpu",)) for i in range(MANY)])]), 422),
    ("ClusterQueue/Should forbid clusterQueue creation with unqualified labelSelector",
     cq(namespaceSelector={"matchLabels": {"nospecialchars^=@": "bar"}}), 403),
    ("ClusterQueue/Should forbid to create clusterQueue with unknown clusterQueueingStrategy",
     cq(queueingStrategy="unknown"), 422),
    ("ClusterQueue/Should allow to create clusterQueue with empty preemption", cq(preemption={}), None),
    ("ClusterQueue/Should allow to create clusterQueue with preemption policies",
     cq(preemption={"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
        flavorFungibility={"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"}), None),
    ("ClusterQueue/Should forbid to create clusterQueue with unknown preemption.withinCohort",
     cq(preemption={"reclaimWithinCohort": "unknown"}), 422),
    ("ClusterQueue/Should forbid to create clusterQueue with unknown preemption.withinClusterQueue",
     cq(preemption={"withinClusterQueue": "unknown"}), 422),
    ("ClusterQueue/Should forbid to create clusterQueue with invalid cohort", cq(cohortName="@prod"), 422),
    ("ClusterQueue/Should forbid to create clusterQueue with flavor quota with borrowingLimit and empty "
     "cohort",
     cq(resourceGroups=[_group(_quotas("x86", ("cpu", "1", "1")))]), 422),
    ("ClusterQueue/Should forbid to create clusterQueue missing resources in a flavor",
     cq(resourceGroups=[{"coveredResources": ["cpu", "memory"],
                         "flavors": [_quotas("alpha", ("cpu", "0"))]}]), 422),
    ("ClusterQueue/Should forbid to create clusterQueue missing resources in a flavor (one too many)",
     cq(resourceGroups=[{"coveredResources": ["cpu"],
                         "flavors": [_quotas("alpha", ("cpu", "0"), ("memory", "0"))]}]),
     422),
    ("ClusterQueue/Should forbid to create clusterQueue missing resources in a flavor and mismatch",
     cq(resourceGroups=[{"coveredResources": ["blah"],
                         "flavors": [_quotas("alpha", ("cpu", "0"), ("memory", "0"))]}]),
     422),
    ("ClusterQueue/Should forbid to create clusterQueue missing with invalid preemption due to "
     "reclaimWithinCohort=Never, while borrowWithinCohort!=nil",
     cq(preemption={"reclaimWithinCohort": "Never", "borrowWithinCohort": {"policy": "LowerPriority"}}), 422),
    ("ClusterQueue/Should allow zero fair share weight", cq(fairSharing={"weight": "0"}), None),
    ("ClusterQueue/Should allow fractional weight", cq(fairSharing={"weight": "0.1"}), None),
    ("ClusterQueue/Should forbid negative weight", cq(fairSharing={"weight": "-1"}), 403),
    ("Cohort/Should allow valid parent name", cohort(parentName="prod"), None),
    ("Cohort/Should reject invalid parent name", cohort(parentName="@prod"), 422),
    ("Cohort/ResourceGroup should have at least one flavor", cohort(resourceGroups=[{"coveredResources": [],
                                                                                     "flavors": []}]), 422),
    ("Cohort/FlavorQuota should have at least one resource",
     cohort(resourceGroups=[{"coveredResources": [], "flavors": [{"name": "foo", "resources": []}]}]), 422),
    ("Cohort/Should reject invalid flavor name",
     cohort(resourceGroups=[_group(_quotas("@x86", ("cpu", "5")))]), 422),
    ("Cohort/Should allow valid resource name (@cpu: forbidden)",
     cohort(resourceGroups=[_group(_quotas("x86", ("@cpu", "5")))]), 403),
    ("Cohort/Should reject too many flavors in resource group",
     cohort(resourceGroups=[_group(*[_quotas(f"f{i}", ("cpu",)) for i in range(MANY)])]), 422),
    ("Cohort/Should reject too many resources in resource group",
     cohort(resourceGroups=[_group(_quotas("flavor", *[(f"cpu{i}",) for i in range(MANY)]))]), 422),
    ("Cohort/Should reject negative nominal quota",
     cohort(resourceGroups=[_group(_quotas("x86", ("cpu", "-1")))]), 403),
    ("Cohort/Should reject negative borrowing limit",
     cohort(resourceGroups=[_group(_quotas("x86", ("cpu", "1", "-1")))]), 403),
    ("Cohort/Should reject negative lending limit",
     cohort(resourceGroups=[_group(_quotas("x86", ("cpu", "1", "", "-1")))]), 403),
    ("Cohort/Should reject borrowingLimit when no parent",
     cohort(resourceGroups=[_group(_quotas("x86", ("cpu", "1", "1")))]), 403),
    ("Cohort/Should allow borrowingLimit 0 when parent exists",
     cohort(parentName="parent", resourceGroups=[_group(_quotas("x86", ("cpu", "1", "0")))]), None),
    ("Cohort/Should allow lending limit to exceed nominal quota",
     cohort(parentName="parent", resourceGroups=[_group(_quotas("x86", ("cpu", "3", "", "5")))]), None),
    ("Cohort/Should reject resources in a flavor in different order", cohort(resourceGroups=[{
        "coveredResources": ["cpu", "memory"],
        "flavors": [_quotas("alpha", ("cpu", "0"), ("memory", "0")),
                    _quotas("beta", ("memory", "0"), ("cpu", "0"))]}]),
     403),
    ("Cohort/Should reject missing resources in a flavor",
     cohort(resourceGroups=[{"coveredResources": ["cpu", "memory"],
                             "flavors": [_quotas("alpha", ("cpu", "0"))]}]),
     422),
    ("Cohort/Should reject resource not defined in resource group", cohort(resourceGroups=[
        {"coveredResources": ["cpu"], "flavors": [_quotas("alpha", ("cpu", "0"), ("memory", "0"))]}]), 422),
    ("Cohort/Should reject resource in more than one resource group", cohort(resourceGroups=[
        _group(_quotas("alpha", ("cpu", "0"), ("memory", "0"))), _group(_quotas("beta", ("memory", "0")))]),
     403),
    ("Cohort/Should reject flavor in more than one resource group", cohort(resourceGroups=[
        _group(_quotas("alpha", ("cpu",)), _quotas("beta", ("cpu",))), _group(_quotas("beta", ("memory",)))]),
     403),
    ("Cohort/Should allow zero FareSharing weight", cohort(fairSharing={"weight": "0"}), None),
    ("Cohort/Should forbid negative FareSharing weight", cohort(fairSharing={"weight": "-1"}), 403),
    ("Cohort/Should allow fractional FareSharing weight", cohort(fairSharing={"weight": "0.5"}), None),
]


@pytest.mark.parametrize(("doc", "code"),
                         [pytest.param(doc, code, id=name) for name, doc, code in INTEGRATION])
def test_whose_rule_refuses_it(doc: dict[str, Any], code: int | None) -> None:
    outcome = _outcome(doc)
    assert (outcome[0] if outcome else None) == code, outcome


def test_a_cohort_s_parent_may_change_but_not_to_a_bad_name() -> None:
    """``Updating a Cohort``: ``Should update parent``, ``Should reject invalid parent``."""
    before = cohort()
    assert _outcome(cohort(parentName="cohort2"), before) is None
    assert _outcome(cohort(parentName="@cohort2"), before)[0] == 422


def test_a_flavor_renamed_to_a_bad_name_is_refused_by_the_crd() -> None:
    """``Should have qualified flavor names when updating``."""
    before = cq(resourceGroups=[_group(_quotas("x86", ("memory",)))])
    after = copy.deepcopy(before)
    after["spec"]["resourceGroups"][0]["flavors"][0]["name"] = "@x86"
    assert _outcome(after, before)[0] == 422


# --- pkg/webhooks: validateFairSharing, validateCohort ------------------------------------------------------


@pytest.mark.parametrize("make", [cq, cohort], ids=["ClusterQueue", "Cohort"])
@pytest.mark.parametrize(("weight", "shown", "why"), [
    ("-1", "-1", "must be greater than or equal to 0"),
    ("1n", "1n", "When not 0, weight must be > 10e-9"),
    ("0.0000000005", "1n", "When not 0, weight must be > 10e-9"),
    # Quantity.String() keeps the format the weight was written in (binary, exponent), canonicalised
    ("-1Ki", "-1Ki", "must be greater than or equal to 0"),
    ("-2.0Mi", "-2Mi", "must be greater than or equal to 0"),
    ("-1.5Ki", "-1536", "must be greater than or equal to 0"),
    ("-0.5Ki", "-512", "must be greater than or equal to 0"),
    ("-1000", "-1k", "must be greater than or equal to 0"),
    ("-5e-1", "-500e-3", "must be greater than or equal to 0"),
    ("-15E2", "-1500", "must be greater than or equal to 0"),
    ("-1E3", "-1E3", "must be greater than or equal to 0"),  # taken for canonical by the parser: kept
    ("1e-9", "1e-9", "When not 0, weight must be > 10e-9"),
    ("5e-10", "1e-9", "When not 0, weight must be > 10e-9"),
])
def test_a_fair_sharing_weight_is_refused_at_fair_sharing_with_its_value(make: Any, weight: str, shown: str,
                                                                         why: str) -> None:
    """Kueue's ``validateFairSharing`` (shared by both webhooks) reports ``field.Invalid`` at the path it is
    given, ``spec.fairSharing``, with ``Weight.String()`` (the canonical quantity, rounded up to nano units)
    as the bad value: a negative weight as apimachinery's ``IsNegativeErrorMsg`` (no CRD rule bounds the
    weight, so the apiserver takes it and the webhook refuses it, 403: the integration tests' ``Should forbid
    negative weight``), one in (0, 1n] as collapsing to 0."""
    doc = make(fairSharing={"weight": weight})
    assert _outcome(doc) == _forbidden(doc["kind"],
                                       f'field `spec.fairSharing`: Invalid value: "{shown}": {why}')


def test_a_cohort_s_fair_sharing_comes_before_its_resource_groups() -> None:
    """``validateCohort`` checks the fair sharing weight first, then the resource groups (a ClusterQueue's
    webhook the other way round: ``validateClusterQueueSpec``)."""
    groups = [_group(_quotas("x86", ("cpu", "-1")))]
    nominal = f'field `{AT}.nominalQuota`: Invalid value: "-1": must be greater than or equal to 0'
    weight = 'field `spec.fairSharing`: Invalid value: "1n": When not 0, weight must be > 10e-9'
    assert _outcome(cohort(fairSharing={"weight": "1n"}, resourceGroups=groups)) == _forbidden(
        "Cohort", weight, nominal)
    assert _outcome(cq(fairSharing={"weight": "1n"}, resourceGroups=groups)) == _forbidden(
        "ClusterQueue", nominal, weight)


def test_reclaim_never_with_borrowing_preemption_is_the_crd_s_rule() -> None:
    """The CEL rule on ``ClusterQueuePreemption`` (``apis/kueue/v1beta2/clusterqueue_types.go``, and the
    generated CRD's ``x-kubernetes-validations``): a 422 at ``spec.preemption`` before Kueue's webhook, whose
    ``validatePreemption`` holds the same rule, is called. ``reclaimWithinCohort`` left out defaults to
    ``Never``."""
    want = _invalid("ClusterQueue", 'spec.preemption: Invalid value: "object": reclaimWithinCohort=Never and '
                    "borrowWithinCohort.Policy!=Never")
    assert _outcome(cq(preemption={"reclaimWithinCohort": "Never",
                                   "borrowWithinCohort": {"policy": "LowerPriority"}})) == want
    assert _outcome(cq(preemption={"borrowWithinCohort": {"policy": "LowerPriority"}})) == want
    assert _outcome(cq(preemption={"reclaimWithinCohort": "Never", "borrowWithinCohort": {}})) is None


# --- the CRD's markers on admissionChecksStrategy -----------------------------------------------------------


def _strategy(*rules: dict[str, Any], flavors: tuple[str, ...] = ("a",)) -> dict[str, Any]:
    return cq(resourceGroups=[_group(*[_quotas(f, ("cpu",)) for f in flavors])],
              admissionChecksStrategy={"admissionChecks": list(rules)})


def test_an_admission_checks_strategy_names_each_check_once_and_at_least_one() -> None:
    """``AdmissionChecksStrategy.admissionChecks`` is ``+required``, ``MinItems=1``, ``MaxItems=64``,
    ``listType=map`` keyed by ``name``; a rule's ``onFlavors`` ``listType=set``, ``MaxItems=64``
    (``apis/kueue/v1beta2/clusterqueue_types.go``): the apiserver refuses, 422."""
    at = "spec.admissionChecksStrategy.admissionChecks"
    assert _outcome(cq(admissionChecksStrategy={})) == _invalid("ClusterQueue", f"{at}: Required value",
                                                                NOT_CHECKED)
    assert _outcome(cq(admissionChecksStrategy={"admissionChecks": []})) == _invalid(
        "ClusterQueue", f"{at}: Invalid value: 0: {at} in body should have at least 1 items")
    assert _outcome(_strategy({"name": "ac"}, {"name": "ac"})) == _invalid(
        "ClusterQueue", f'{at}[1]: Duplicate value: {{"name":"ac"}}')
    assert _outcome(_strategy({"name": "ac", "onFlavors": ["a", "a"]})) == _invalid(
        "ClusterQueue", f'{at}[0].onFlavors[1]: Duplicate value: "a"')
    assert _outcome(_strategy(*[{"name": f"ac{i}"} for i in range(MANY)])) == _invalid(
        "ClusterQueue", f"{at}: Too many: 65: must have at most 64 items", NOT_CHECKED)
    assert _outcome(_strategy({"name": "ac", "onFlavors": [f"f{i}" for i in range(MANY)]})) == _invalid(
        "ClusterQueue", f"{at}[0].onFlavors: Too many: 65: must have at most 64 items",
        NOT_CHECKED)  # alone: no webhook
    assert _outcome(_strategy(*[{"name": f"ac{i}", "onFlavors": ["a"]} for i in range(MANY - 1)])) is None


# --- the CEL rules wait for the schema (apiextensions-apiserver's hasBlockingErr) -------------------------

NOT_CHECKED = ('<nil>: Invalid value: "null": some validation rules were not checked because the object was '
               "invalid; correct the existing errors to complete validation")
"""What the apiserver adds, at no field, where a schema error of a type that stops the CEL rules (an unknown
enum value, a required field left out, a list past its ``maxItems``, a string past its ``maxLength``, a wrong
type) keeps it from running them (``pkg/registry/customresource/strategy.go``, ``hasBlockingErr``)."""
RECLAIM = cq(preemption={"reclaimWithinCohort": "Never", "borrowWithinCohort": {"policy": "LowerPriority"}})
CHECKS = "spec.admissionChecksStrategy.admissionChecks"


@pytest.mark.parametrize(("strategy", "error"), [
    pytest.param({"admissionChecks": [{"name": f"ac{i}"} for i in range(MANY)]},
                 f"{CHECKS}: Too many: 65: must have at most 64 items", id="too-many"),
    pytest.param({}, f"{CHECKS}: Required value", id="required"),
])
def test_a_blocking_schema_error_stops_the_cel_rules(strategy: dict[str, Any], error: str) -> None:
    doc = copy.deepcopy(RECLAIM)
    doc["spec"]["admissionChecksStrategy"] = strategy
    assert _outcome(doc) == _invalid("ClusterQueue", error, NOT_CHECKED)


def test_an_unknown_enum_value_stops_the_cel_rules_with_the_apiserver_s_line() -> None:
    doc = copy.deepcopy(RECLAIM)
    doc["spec"]["queueingStrategy"] = "Random"
    assert _outcome(doc) == _invalid(
        "ClusterQueue", 'spec.queueingStrategy: Unsupported value: "Random": supported values: "StrictFIFO", '
        '"BestEffortFIFO"', NOT_CHECKED)


def test_a_blocking_schema_error_stops_the_resource_group_rules_too() -> None:
    """The borrowing limit without a cohort and a flavor's resource count (CEL rules of the spec and of a
    ResourceGroup) wait for the markers as the policies' rules do; a Cohort's count rule waits for its
    schema."""
    groups = [{"coveredResources": ["cpu", "memory"], "flavors": [_quotas("f", ("cpu", "1", "1"))]}]
    doc = cq(resourceGroups=groups, admissionChecksStrategy={})
    assert _outcome(doc) == _invalid("ClusterQueue", f"{CHECKS}: Required value", NOT_CHECKED)
    many = [{"coveredResources": [f"r{g}"], "flavors": [_quotas(f"f{g}", (f"r{g}",))]}
            for g in range(quota_rules.MAX_GROUPS + 1)]
    many[0]["coveredResources"].append("extra")
    error = "spec.resourceGroups: Too many: 17: must have at most 16 items"
    assert _outcome(cohort(resourceGroups=many)) == _invalid("Cohort", error, NOT_CHECKED)


def test_an_error_that_does_not_block_leaves_the_cel_rules_checked() -> None:
    doc = copy.deepcopy(RECLAIM)
    doc["spec"]["cohortName"] = "Bad_Name"
    _, message = _outcome(doc)
    assert "reclaimWithinCohort=Never" in message
    assert "not checked" not in message
