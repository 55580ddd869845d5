"""topologyAssignment wire forms: v1beta2 slices (Kueue's encoder and its choice rule), v1beta1 domains.

Golden cases (``tas_assignment_golden.yaml``) pin the exact shapes Kueue writes; properties show that any list of
domains survives encode -> JSON -> decode unchanged and within the API's limits; large generated cases cover
the slice limits and the hostname-prefix back-off; bad assignments are refused naming the field.
"""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
import pytest
from fixtures import fastyaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events import objects as o
from events import tas_assignment as tas
from events.errors import InvalidInput
from events.manifests import load_text

HOST = tas.HOSTNAME_LEVEL
GOLDEN = fastyaml.safe_load((Path(__file__).parent / "tas_assignment_golden.yaml").read_text())


def dom(*values: str, count: int = 1) -> o.TopologyDomainAssignment:
    return o.TopologyDomainAssignment(values=list(values), count=count)


def wire(ta: o.TopologyAssignment) -> dict:
    return msgspec.to_builtins(ta)


def view(levels: list[str], v1beta2: dict) -> o.TopologyAssignment:
    return msgspec.convert({"levels": levels, **v1beta2}, o.TopologyAssignment)


# --- golden cases ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", GOLDEN, ids=[c["name"] for c in GOLDEN])
def test_golden(case: dict) -> None:
    domains = msgspec.convert(case["domains"], list[o.TopologyDomainAssignment])
    expected = view(case["levels"], case["v1beta2"])
    assert tas.decode(expected) == domains
    if not case.get("decodeOnly"):
        got = tas.encode(case["levels"], domains)
        assert got == expected, fastyaml.safe_dump(wire(got), sort_keys=False)
        on_the_wire = {"levels": case["levels"], **case["v1beta2"]}
        if not on_the_wire["slices"]:
            del on_the_wire["slices"]  # empty: omitted, as Kueue's omitempty does
        assert wire(got) == on_the_wire


def _pools(pools: int, nodes: int, fmt: str = "pool{p:04d}-longlonglongname-node-{n}") -> list[o.TopologyDomainAssignment]:
    return [dom(fmt.format(p=p, n=n)) for p in range(pools) for n in range(nodes)]


def test_hostname_prefix_form_uses_up_to_1000_slices() -> None:
    domains = _pools(1000, 20)
    ta = tas.encode([HOST], domains)
    assert len(ta.slices) == 1000
    assert ta.slices[7].values_per_level[0].individual.prefix == "pool0007-longlonglongname-node-"
    assert [s.domain_count for s in ta.slices] == [20] * 1000
    assert tas.decode(ta) == domains


def test_more_pools_than_slices_fall_back_to_one_run() -> None:
    # 1001 pools: every prefix depth makes 1001 runs, so all domains form one slice.
    domains = _pools(1001, 20)
    ta = tas.encode([HOST], domains)
    assert len(ta.slices) == 1
    assert ta.slices[0].values_per_level[0].individual.prefix == "pool"
    assert tas.decode(ta) == domains


def test_prefix_depth_backs_off_until_the_runs_fit() -> None:
    # 1200 pools in two regions: pool-level keys make 1200 runs; region-level keys ("r1-") make 2.
    domains = [dom(f"r{r}-pool{p:03d}-node-{n}") for r in (1, 2) for p in range(600) for n in range(10)]
    ta = tas.encode([HOST], domains)
    assert [s.values_per_level[0].individual.prefix for s in ta.slices] == ["r1-pool", "r2-pool"]
    assert [s.domain_count for s in ta.slices] == [6000, 6000]
    assert tas.decode(ta) == domains


def test_alternating_pools_are_one_slice_at_1001_domains() -> None:
    # Kueue's fallback case: a-x-NNNN / b-y-NNNN alternate, so no depth gives <= 1000 runs.
    domains = [dom(f"{'a-x' if i % 2 == 0 else 'b-y'}-{i:04d}") for i in range(1001)]
    ta = tas.encode([HOST], domains)
    assert len(ta.slices) == 1 and tas.decode(ta) == domains
    # and its back-off case: a-x- / a-y- alternate, the shallower "a-" makes one run.
    domains = [dom(f"a-{'x' if i % 2 == 0 else 'y'}-{i:04d}") for i in range(1001)]
    ta = tas.encode([HOST], domains)
    assert len(ta.slices) == 1 and ta.slices[0].values_per_level[0].individual.prefix == "a-"


def test_over_100000_hostnames_are_cut_into_slices_of_100000() -> None:
    # As Kueue's 2000 pools x 100 nodes, halved: too many pools for pool-level slices, so the key backs off to
    # "gke-cluster-pool-", one run of all domains, cut at 100000 (and the single form is not an option).
    domains = [dom(f"gke-cluster-pool-{p:04d}-{p:08x}-{n:04x}") for p in range(1001) for n in range(100)]
    ta = tas.encode([HOST], domains)
    assert [s.domain_count for s in ta.slices] == [100_000, 100]
    assert [s.values_per_level[0].individual.prefix for s in ta.slices] == ["gke-cluster-pool-0", "gke-cluster-pool-1000-000003e8-00"]
    assert tas.decode(ta) == domains


def test_over_100000_racks_are_cut_into_slices_of_100000() -> None:
    domains = [dom("block-1", f"rack-{i}", count=1 + i % 2) for i in range(100_001)]
    ta = tas.encode(["block", "rack"], domains)
    assert [s.domain_count for s in ta.slices] == [100_000, 1]
    assert ta.slices[1].values_per_level == [o.TopologyAssignmentSliceLevelValues(universal="block-1"),
                                             o.TopologyAssignmentSliceLevelValues(universal="rack-100000")]
    assert tas.decode(ta) == domains


# --- properties ------------------------------------------------------------------------------------------------

_PREFIXES = ["", "pool-a-", "pool-b-node-", "gke-c-pool-a-hash1-", "ip-10-24-34-", "rack-", "a-", "-"]
_SUFFIXES = ["", ".us-west-2.compute.internal", "-x", "a"]
_value = st.builds(lambda p, r, s: p + r + s, st.sampled_from(_PREFIXES),
                   st.text(alphabet="ab-019.", max_size=6), st.sampled_from(_SUFFIXES))
_LEVELS = [[HOST], ["block", "rack"], ["zone", "block", HOST], ["rack"]]


@st.composite
def assignments(draw) -> tuple[list[str], list[o.TopologyDomainAssignment]]:
    if draw(st.booleans()):
        return draw(node_pools())
    levels = draw(st.sampled_from(_LEVELS))
    n = draw(st.integers(0, 60))
    same_count = draw(st.booleans())
    counts = st.just(draw(st.integers(1, 4))) if same_count else st.integers(1, 4)
    # few distinct values per level so that universals, shared prefixes and runs all occur
    pools = [draw(st.lists(_value, min_size=1, max_size=draw(st.integers(1, 8)))) for _ in levels]
    domains = [o.TopologyDomainAssignment(values=[draw(st.sampled_from(pool)) for pool in pools],
                                          count=draw(counts)) for _ in range(n)]
    return levels, domains


@st.composite
def node_pools(draw) -> tuple[list[str], list[o.TopologyDomainAssignment]]:
    """Hostnames in node pools (``<cluster>-<pool>-<hash>-<node>``), pools mostly contiguous: the shape the
    hostname-prefix form is for."""
    cluster = draw(st.sampled_from(["gke-c-", "aks-", "ip-10-24-", ""]))
    pools = draw(st.lists(st.text(alphabet="abc12", min_size=1, max_size=3), min_size=1, max_size=5, unique=True))
    hostnames = []
    for pool in pools:
        nodes, group = draw(st.integers(1, 30)), draw(st.sampled_from(["x", "hash1", ""]))
        hostnames += [f"{cluster}{pool}-{group}-node-{i:03d}" for i in range(nodes)]
    if draw(st.booleans()):
        hostnames = draw(st.permutations(hostnames))
    counts = st.integers(1, 3) if draw(st.booleans()) else st.just(1)
    return [HOST], [o.TopologyDomainAssignment(values=[h], count=draw(counts)) for h in hostnames]


PROPS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPS
@given(assignments())
def test_decode_of_encode_is_identity(case) -> None:
    levels, domains = case
    ta = tas.encode(levels, domains)
    tas.validate(ta)
    assert ta.levels == levels
    assert tas.decode(ta) == domains
    # through the wire and back, as a status write and a watch would carry it
    again = msgspec.json.decode(msgspec.json.encode(ta), type=o.TopologyAssignment)
    assert again == ta and tas.decode(again) == domains


@PROPS
@given(assignments())
def test_v1beta1_round_trip(case) -> None:
    levels, domains = case
    v1 = o.TopologyAssignmentV1Beta1(levels=levels, domains=domains)
    v2 = tas.from_v1beta1(v1)
    assert v2 == tas.encode(levels, domains)
    assert tas.to_v1beta1(v2) == v1


@PROPS
@given(assignments())
def test_the_choice_is_the_prefix_form_unless_one_slice_is_smaller(case) -> None:
    levels, domains = case
    ta = tas.encode(levels, domains)
    if not domains:
        assert ta.slices == []
        return
    single = tas.encode(levels[:-1] + ["not-hostname"], domains) if levels[-1] == HOST else ta
    assert len(single.slices) == 1  # non-hostname levels are never split below 100000 domains
    if len(ta.slices) > 1:
        assert len(msgspec.json.encode(ta.slices)) <= len(msgspec.json.encode(single.slices))


# --- TASAssignmentsEncodingByHostnamePrefix off ---------------------------------------------------------------


def test_gate_off_writes_one_compact_slice_whatever_the_pools() -> None:
    domains = _pools(3, 20)
    assert len(tas.encode([HOST], domains).slices) == 3
    ta = tas.encode([HOST], domains, by_hostname_prefix=False)
    (only,) = ta.slices
    assert only.domain_count == 60
    assert only.values_per_level[0].individual.prefix == "pool000"
    assert only.pod_counts.universal == 1
    assert tas.decode(ta) == domains


def test_gate_off_over_100000_domains_is_one_slice_the_api_refuses() -> None:
    # Kueue's single form is not cut: the slice breaks the API's limit, so the status write is refused.
    domains = [dom(f"node-{i}") for i in range(tas.MAX_DOMAINS_PER_SLICE + 1)]
    ta = tas.encode([HOST], domains, by_hostname_prefix=False)
    assert [s.domain_count for s in ta.slices] == [tas.MAX_DOMAINS_PER_SLICE + 1]
    with pytest.raises(InvalidInput, match=r"slices\[0\]\.domainCount"):
        tas.validate(ta)


@PROPS
@given(assignments())
def test_gate_off_decode_of_encode_is_identity_in_at_most_one_slice(case) -> None:
    levels, domains = case
    ta = tas.encode(levels, domains, by_hostname_prefix=False)
    tas.validate(ta)
    assert len(ta.slices) == (1 if domains else 0)
    assert tas.decode(ta) == domains
    # the single form: what a topology without the hostname level always gets below 100000 domains
    assert ta.slices == tas.encode(levels[:-1] + ["not-hostname"], domains).slices
    v1 = o.TopologyAssignmentV1Beta1(levels=levels, domains=domains)
    assert tas.from_v1beta1(v1, by_hostname_prefix=False) == ta
    assert tas.to_v1beta1(ta) == v1


# --- v1beta1 input and output ----------------------------------------------------------------------------------

_WORKLOAD = """
apiVersion: kueue.x-k8s.io/{version}
kind: Workload
metadata: {{name: w, namespace: ns}}
spec:
  podSets: [{{name: main, count: 3}}]
status:
  unhealthyNodes: [{{name: node-2}}]
  admission:
    clusterQueue: cq
    podSetAssignments:
    - name: main
      delayedTopologyRequest: Ready
      topologyAssignment:
{assignment}
"""


def workload(version: str, assignment: str) -> str:
    return _WORKLOAD.format(version=version, assignment="\n".join(" " * 8 + line for line in assignment.splitlines()))


V1BETA1 = """levels: [kubernetes.io/hostname]
domains:
- {values: [node-1], count: 2}
- {values: [node-2], count: 1}"""


def test_manifests_take_a_v1beta1_workload_with_domains() -> None:
    (wl,) = load_text(workload("v1beta1", V1BETA1)).objects
    psa = wl.status.admission.pod_set_assignments[0]
    assert psa.delayed_topology_request == "Ready"
    assert wl.status.unhealthy_nodes == [o.UnhealthyNode(name="node-2")]
    assert wire(psa.topology_assignment) == {
        "levels": [HOST],
        "slices": [{"domainCount": 2, "valuesPerLevel": [{"individual": {"prefix": "node-", "roots": ["1", "2"]}}],
                    "podCounts": {"individual": [2, 1]}}]}
    assert tas.decode(psa.topology_assignment) == [dom("node-1", count=2), dom("node-2", count=1)]
    back = tas.to_v1beta1(psa.topology_assignment)
    assert msgspec.to_builtins(back) == fastyaml.safe_load(V1BETA1)


def test_manifests_take_the_same_workload_as_v1beta2() -> None:
    (v1,) = load_text(workload("v1beta1", V1BETA1)).objects
    v2_text = fastyaml.safe_dump(wire(v1.status.admission.pod_set_assignments[0].topology_assignment))
    (v2,) = load_text(workload("v1beta2", v2_text)).objects
    assert v2.status == v1.status


@pytest.mark.parametrize(("version", "assignment", "field", "message"), [
    ("v1beta1", "levels: [a]\ndomains:\n- {values: [x], count: 0}", "domains[0].count", "must be >= 1"),
    ("v1beta1", "levels: [a, b]\ndomains:\n- {values: [x], count: 1}", "domains[0].values",
     "must have one value per level (2), has 1"),
    ("v1beta1", "levels: []\ndomains:\n- {values: [], count: 1}", "levels", "must have 1 to 16 items"),
    ("v1beta1", "levels: [a]\ndomains:\n- {values: [x], count: two}", "domains[0].count", "expected `int`"),
    ("v1beta1", "domains:\n- {values: [x], count: 1}", "levels", "is required"),
    ("v1beta2", V1BETA1, "domains", "is the kueue.x-k8s.io/v1beta1 form"),
    ("v1beta2", "levels: [a]\nslices:\n- {domainCount: 0, valuesPerLevel: [{universal: x}], podCounts: {universal: 1}}",
     "slices[0].domainCount", "must be between 1 and 100000"),
    ("v1beta2", "levels: [a, b]\nslices:\n- {domainCount: 1, valuesPerLevel: [{universal: x}], podCounts: {universal: 1}}",
     "", 'Invalid value: "object": valuesPerLevel must have the same length as the number of levels in this '
     "TopologyAssignment"),
    ("v1beta2", "levels: [a]\nslices:\n- {domainCount: 1, valuesPerLevel: [{}], podCounts: {universal: 1}}",
     "slices[0].valuesPerLevel[0]", "exactly one of universal, individual must be set"),
    ("v1beta2", "levels: [a]\nslices:\n- {domainCount: 1, valuesPerLevel: [{universal: x, individual: {roots: [x]}}], "
     "podCounts: {universal: 1}}", "slices[0].valuesPerLevel[0]", "exactly one of universal, individual"),
    ("v1beta2", "levels: [a]\nslices:\n- {domainCount: 2, valuesPerLevel: [{individual: {prefix: p, roots: [x]}}], "
     "podCounts: {universal: 1}}", "slices[0]", "valuesPerLevel.individual, if set, must have roots of length equal to "
     "domainCount of this TopologyAssignmentSlice"),
    ("v1beta2", "levels: [a]\nslices:\n- {domainCount: 1, valuesPerLevel: [{universal: x}], podCounts: {}}",
     "slices[0].podCounts", "exactly one of universal, individual must be set"),
    ("v1beta2", "levels: [a]\nslices:\n- {domainCount: 1, valuesPerLevel: [{universal: x}], podCounts: {universal: 0}}",
     "slices[0].podCounts.universal", "must be >= 1, is 0"),
    ("v1beta2", "levels: [a]\nslices:\n- {domainCount: 2, valuesPerLevel: [{universal: x}], podCounts: {individual: [1]}}",
     "slices[0]", 'Invalid value: "object": podCounts.individual must have length equal to domainCount'),
    ("v1beta2", "levels: [a]\nslices:\n- {domainCount: 2, valuesPerLevel: [{universal: x}], podCounts: {individual: [1, -1]}}",
     "slices[0].podCounts.individual[1]", "must be >= 1, is -1"),
    ("v1beta2", "levels: [a]\nslices:\n- {domainCount: 1, valuesPerLevel: [{universal: 7}], podCounts: {universal: 1}}",
     "slices[0].valuesPerLevel[0].universal", "got `int`"),
])
def test_bad_assignments_are_refused_naming_the_field(version: str, assignment: str, field: str, message: str) -> None:
    with pytest.raises(InvalidInput) as err:
        load_text(workload(version, assignment))
    text = str(err.value)
    assert text.startswith("<input>: document 1 (Workload w): "), text
    at = "status.admission.podSetAssignments[0].topologyAssignment" + (f".{field}" if field else "")
    assert f"field `{at}`" in text, text
    assert message in text, text


def test_slice_limit_is_checked() -> None:
    one = {"domainCount": 1, "valuesPerLevel": [{"universal": "x"}], "podCounts": {"universal": 1}}
    ta = view(["a"], {"slices": [one] * 1001})
    with pytest.raises(InvalidInput, match=r"^Workload ns/w: field `x.topologyAssignment.slices`: must have at most 1000"):
        tas.validate(ta, "Workload ns/w", "x.topologyAssignment")
    with pytest.raises(InvalidInput, match=r"^field `topologyAssignment.slices`"):
        tas.decode(ta)
    assert len(tas.decode(view(["a"], {"slices": [one] * 1000}))) == 1000


@pytest.mark.parametrize(("status", "field", "message"), [
    ("admission: {clusterQueue: cq, podSetAssignments: [{name: main, delayedTopologyRequest: Later}]}",
     "status.admission.podSetAssignments[0].delayedTopologyRequest", "must be Pending or Ready"),
    ("unhealthyNodes: [{name: ''}]", "status.unhealthyNodes[0].name", "must not be empty"),
    ("unhealthyNodes: [" + ", ".join(f"{{name: n{i}}}" for i in range(9)) + "]", "status.unhealthyNodes",
     "must have at most 8 items"),
])
def test_bad_tas_status_fields_are_refused(status: str, field: str, message: str) -> None:
    text = f"apiVersion: kueue.x-k8s.io/v1beta2\nkind: Workload\nmetadata: {{name: w, namespace: ns}}\n" \
           f"spec: {{podSets: [{{name: main}}]}}\nstatus: {{{status}}}\n"
    with pytest.raises(InvalidInput, match=rf"field `{re.escape(field)}`.*{message}"):
        load_text(text)
