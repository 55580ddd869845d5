"""User errors give one line on stderr and exit code 2 (bad input, bad flags) or 1 (a damaged log, a missing
workload); never a traceback, and a failed import leaves the log exactly as it was."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import msgspec
import pytest
from clihelp import FIXTURES, Result, append, kueue_es, log_size, one_line_error

from events import objects as o
from events import schema as ev
from events.filelog import HEADER, FileLog, scan_frames
from projections import snapshot

CLUSTER = FIXTURES / "cluster.yaml"
SEG0 = "00000000000000000000.seg"

GOOD_DOC = """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: fine
"""

WORKLOAD = GOOD_DOC + "---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: Workload\nmetadata:\n  name: w\n  namespace: team\n"
"""A good document, then the head of Workload ``team/w``: a case adds the rest of it."""

BAD_INPUTS = {
    "malformed-yaml": (
        GOOD_DOC + "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: [oops}\n",
        ["document 2", "line 8", "malformed YAML"],
    ),
    "unknown-kind": (
        GOOD_DOC + "---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: ok\n---\n"
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Gizmo\nmetadata:\n  name: g\n",
        ["document 3", "field `kind`", "unknown kind 'Gizmo'"],
    ),
    "missing-name": (
        GOOD_DOC + "---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata:\n  namespace: a\n"
        "spec:\n  clusterQueue: cq\n",
        ["document 2", "field `metadata.name` is required"],
    ),
    "missing-nested-field": (
        GOOD_DOC + textwrap.dedent("""\
            ---
            apiVersion: kueue.x-k8s.io/v1beta2
            kind: ClusterQueue
            metadata:
              name: cq
            spec:
              resourceGroups:
              - coveredResources: [cpu]
                flavors:
                - name: fine
            """),
        ["document 2", "(ClusterQueue cq)", "field `spec.resourceGroups[0].flavors[0].resources` is required"],
    ),
    "bad-quantity": (
        WORKLOAD + textwrap.dedent("""\
            spec:
              queueName: lq
              podSets:
              - name: main
                count: 1
                template:
                  spec:
                    containers:
                    - name: c
                      resources:
                        requests:
                          cpu: two
            """),
        ["document 2", "(Workload w)", "field `spec.podSets[0].template.spec.containers[0].resources: cpu`",
         "invalid quantity 'two'"],
    ),
    "bad-slice-layer": (
        WORKLOAD + textwrap.dedent("""\
            spec:
              queueName: lq
              podSets:
              - name: main
                count: 8
                topologyRequest:
                  required: cloud.com/block
                  podsetSliceRequiredTopologyConstraints:
                  - {topology: cloud.com/rack, size: 4}
                  - {topology: kubernetes.io/hostname, size: 0}
                template:
                  spec:
                    containers:
                    - name: c
            """),
        ["document 2", "(Workload w)",
         "field `spec.podSets[0].topologyRequest.podsetSliceRequiredTopologyConstraints[1].size`: Invalid value: 0: "
         "must be greater than 0"],
    ),
    "reclaimable-pods-count": (
        WORKLOAD + "spec:\n  queueName: lq\n  podSets:\n  - name: main\n    count: 2\n    template: {spec: {containers: [{name: c}]}}\n"
        "status:\n  reclaimablePods: [{name: main, count: 3}]\n",
        ["document 2", "(Workload w)",
         "field `status.reclaimablePods[main].count`: Invalid value: 3: should be less or equal to 2"],
    ),
    "reclaimable-pods-name": (
        WORKLOAD + "spec:\n  queueName: lq\n  podSets:\n  - name: main\n    count: 2\n    template: {spec: {containers: [{name: c}]}}\n"
        "status:\n  reclaimablePods: [{name: workers, count: 1}]\n",
        ["document 2", "(Workload w)",
         'field `status.reclaimablePods[workers].name`: Unsupported value: "workers": supported values: "main"'],
    ),
    "integer-beyond-64-bits": (
        WORKLOAD + "spec:\n  queueName: lq\n  priority: 18446744073709551616\n  podSets:\n  - name: main\n    count: 1\n"
        "    template: {spec: {containers: [{name: c}]}}\n",
        ["document 2", "(Workload w)", "field `spec.priority`: 18446744073709551616 is out of range (at most 64 bits)"],
    ),
    "integer-as-a-string-beyond-64-bits": (  # converted to an integer of any size: the log's codec could not take it
        WORKLOAD + "spec:\n  queueName: lq\n  podSets:\n  - name: main\n    count: '999999999999999999999999999999'\n"
        "    template: {spec: {containers: [{name: c}]}}\n",
        ["document 2", "(Workload w)",
         "field `spec.podSets[0].count`: 999999999999999999999999999999 is out of range (at most 64 bits)"],
    ),
    "bad-request-beside-a-limit": (
        WORKLOAD + "spec:\n  queueName: lq\n  podSets:\n  - name: main\n    count: 1\n    template: {spec: {containers: "
        "[{name: c, resources: {requests: {cpu: NaN}, limits: {cpu: '1'}}}]}}\n",
        ["document 2", "(Workload w)", "field `spec.podSets[0].template.spec.containers[0].resources: cpu`",
         "invalid quantity 'NaN'"],
    ),
    "bad-admission-usage": (
        WORKLOAD + "spec:\n  queueName: lq\n  podSets:\n  - name: main\n    count: 1\n    template: {spec: {containers: [{name: c}]}}\n"
        "status:\n  admission:\n    clusterQueue: cq\n    podSetAssignments:\n    - name: main\n"
        "      flavors: {cpu: fine}\n      resourceUsage: {cpu: lots}\n",
        ["document 2", "(Workload w)", "field `status.admission.podSetAssignments[0].resourceUsage.cpu`",
         "invalid quantity 'lots'"],
    ),
    "bad-node-allocatable": (
        GOOD_DOC + "---\napiVersion: v1\nkind: Node\nmetadata:\n  name: n1\nstatus:\n  allocatable: {cpu: four}\n",
        ["document 2", "(Node n1)", "field `status.allocatable.cpu`", "invalid quantity 'four'"],
    ),
    "kind-null": (
        GOOD_DOC + "---\napiVersion: v1\nkind: null\nmetadata:\n  name: x\n",
        ["document 2", "field `kind` is required"],
    ),
    "limit-range-type": (
        GOOD_DOC + "---\napiVersion: v1\nkind: LimitRange\nmetadata:\n  name: lr\n  namespace: team\nspec:\n"
        "  limits:\n  - type: Container\n  - type: Node\n    max: {cpu: '1'}\n",
        ["document 2", "(LimitRange lr)", "field `spec.limits[1].type`: must be Pod, Container or PersistentVolumeClaim"],
    ),
    "limit-range-quantity": (
        GOOD_DOC + "---\napiVersion: v1\nkind: LimitRange\nmetadata:\n  name: lr\n  namespace: team\nspec:\n"
        "  limits:\n  - type: Container\n    defaultRequest: {memory: lots}\n",
        ["document 2", "(LimitRange lr)", "field `spec.limits[0].defaultRequest.memory`", "invalid quantity 'lots'"],
    ),
    "limit-range-min-above-max": (
        GOOD_DOC + "---\napiVersion: v1\nkind: LimitRange\nmetadata:\n  name: lr\n  namespace: team\nspec:\n"
        "  limits:\n  - type: Pod\n    max: {cpu: 500m}\n    min: {cpu: '1'}\n",
        ["document 2", "(LimitRange lr)", "field `spec.limits[0].min.cpu`: 1 is greater than max 500m"],
    ),
    "runtime-class-overhead": (
        GOOD_DOC + "---\napiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata:\n  name: kata\nhandler: kata\n"
        "overhead:\n  podFixed: {cpu: -1}\n",
        ["document 2", "(RuntimeClass kata)", "field `overhead.podFixed.cpu`: must not be negative"],
    ),
    "runtime-class-handler": (
        GOOD_DOC + "---\napiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata:\n  name: kata\n",
        ["document 2", "(RuntimeClass kata)", "field `handler` is required"],
    ),
    "runtime-class-api-version": (
        GOOD_DOC + "---\napiVersion: v1\nkind: RuntimeClass\nmetadata:\n  name: kata\nhandler: kata\n",
        ["document 2", "field `apiVersion`: RuntimeClass must be node.k8s.io/v1, not 'v1'"],
    ),
    "bad-overhead": (
        GOOD_DOC + "---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: Workload\nmetadata:\n  name: w\n  namespace: t\n"
        "spec:\n  queueName: lq\n  podSets:\n  - name: main\n    template:\n      spec:\n        overhead: {cpu: x}\n"
        "        containers: [{name: c}]\n",
        ["document 2", "(Workload w)", "field `spec.podSets[0].template.spec.overhead.cpu`", "invalid quantity 'x'"],
    ),
    "max-execution-time-below-1": (
        WORKLOAD + textwrap.dedent("""\
            spec:
              queueName: lq
              maximumExecutionTimeSeconds: 0
              podSets:
              - name: main
                count: 1
                template:
                  spec:
                    containers:
                    - name: c
            """),
        ["document 2", "(Workload w)", "field `spec.maximumExecutionTimeSeconds` must be >= 1, not 0"],
    ),
    "bad-timestamp": (
        GOOD_DOC + "---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: n\n  creationTimestamp: yesterday\n",
        ["document 2", "field `metadata.creationTimestamp`", "not an RFC 3339 time"],
    ),
    "bad-node-ready-time": (  # how long a node has not been Ready is read off it (TASReplaceNodeOnPodTermination)
        GOOD_DOC + "---\napiVersion: v1\nkind: Node\nmetadata:\n  name: n1\nstatus:\n  conditions:\n"
        "  - type: Ready\n    status: 'False'\n    lastTransitionTime: a while ago\n",
        ["document 2", "(Node n1)", "field `status.conditions[0].lastTransitionTime`", "not an RFC 3339 time"],
    ),
    "wrong-type": (
        GOOD_DOC + "---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: WorkloadPriorityClass\nmetadata:\n  name: p\n"
        "value: high\n",
        ["document 2", "field `value`", "expected `int`, got `str`"],
    ),
    "reserved-resource": (  # Kueue's Workload webhook keeps `pods` for itself
        GOOD_DOC + "---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: Workload\nmetadata:\n  name: w\n  namespace: t\n"
        "spec:\n  queueName: lq\n  podSets:\n  - name: main\n    template:\n      spec:\n"
        "        containers: [{name: c, resources: {limits: {pods: 1}}}]\n",
        ["document 2", "(Workload w)", "field `spec.podSets[0].template.spec.containers[0].resources.limits[pods]`",
         'Invalid value: "pods": the key is reserved for internal kueue use'],
    ),
    "tas-flavor-without-node-labels": (  # a CEL rule of Kueue's ResourceFlavor CRD
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata:\n  name: tas\nspec:\n"
        "  topologyName: default\n",
        ["document 1", "(ResourceFlavor tas)", 'field `spec`: Invalid value: "object": at least one '
         "nodeLabel is required when topology is set"],
    ),
    "name-not-a-subdomain": (  # the apiserver stores no object by such a name
        GOOD_DOC + "---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata:\n  name: Team_A\n",
        ["document 2", "(ClusterQueue Team_A)", 'field `metadata.name`: Invalid value: "Team_A": a lowercase RFC 1123 '
         "subdomain must consist of lower case alphanumeric characters, '-' or '.'"],
    ),
    "namespace-name-not-a-label": (  # a dot is fine in a subdomain, not in a Namespace's name
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team.a\n",
        ["document 1", "(Namespace team.a)", 'field `metadata.name`: Invalid value: "team.a": a lowercase RFC 1123 '
         "label must consist of lower case alphanumeric characters or '-'"],
    ),
    "namespace-not-a-label": (
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata:\n  name: lq\n  namespace: Team\n"
        "spec:\n  clusterQueue: cq\n",
        ["document 1", "(LocalQueue lq)", 'field `metadata.namespace`: Invalid value: "Team"'],
    ),
    "name-too-long": (
        f"apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata:\n  name: {'a' * 254}\n",
        ["document 1", "field `metadata.name`: must be no more than 253 characters"],
    ),
}


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "log"
    assert kueue_es("import", "-f", CLUSTER, "--log", path).code == 0
    return path


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_is_one_line_naming_file_document_and_field_and_appends_nothing(
    log: Path, tmp_path: Path, case: str
) -> None:
    text, expected = BAD_INPUTS[case]
    bad = tmp_path / f"{case}.yaml"
    bad.write_text(text)
    before = log_size(log)
    r = kueue_es("import", "-f", CLUSTER, "-f", bad, "--log", log)  # a good file first: still nothing appended
    assert r.code == 2
    line = one_line_error(r)
    assert str(bad) in line
    for part in expected:
        assert part in line, line
    assert r.out == ""
    assert log_size(log) == before


def test_bad_input_creates_no_log(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: v1\nkind: Gizmo\nmetadata:\n  name: x\n")
    r = kueue_es("import", "-f", bad, "--log", tmp_path / "new-log")
    assert r.code == 2 and "unknown kind" in one_line_error(r)
    assert not (tmp_path / "new-log").exists()


SLICED = """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata:
  name: sliced
  namespace: team
  annotations: {kueue.x-k8s.io/priority-boost: lots}
spec:
  queueName: lq-a
  podSets:
  - name: main
    count: 2
    topologyRequest: {required: rack, podSetSliceSize: 2}
    template:
      spec:
        containers: [{name: c, resources: {requests: {cpu: '1'}}}]
"""


def test_import_checks_the_gated_rules_under_the_configuration_the_log_records(log: Path, tmp_path: Path) -> None:
    """As the watch: the Configuration in force at the log's end decides the checks Kueue makes under a gate
    (here a slice size without a slice topology, TASValidateWorkloadSliceSize; a priority boost that is not an
    int32, PriorityBoost); a log that records none, or a log yet to be made, is checked under Kueue's defaults."""
    sliced = tmp_path / "sliced.yaml"
    sliced.write_text(SLICED)
    r = kueue_es("import", "-f", sliced, "--log", log)
    assert r.code == 2 and "(Workload sliced): field `spec.podSets[0].topologyRequest.podSetSliceSize`" in (
        one_line_error(r))
    fresh = kueue_es("import", "-f", sliced, "--log", tmp_path / "new-log")
    assert fresh.code == 2 and "podSetSliceSize" in one_line_error(fresh)
    assert not (tmp_path / "new-log").exists()

    def record(gates: dict[str, bool], time: int) -> None:
        append(log, [ev.ConfigRecorded(time=time, writer="test", id=f"config-{time}", document={
            "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "featureGates": gates})])

    record({"TASValidateWorkloadSliceSize": False, "PriorityBoost": True}, 1)
    before = log_size(log)
    r = kueue_es("import", "-f", sliced, "--log", log)
    assert r.code == 2 and "(Workload sliced): field `metadata.annotations[kueue.x-k8s.io/priority-boost]`" in (
        one_line_error(r))
    assert log_size(log) == before
    record({"TASValidateWorkloadSliceSize": False}, 2)
    assert kueue_es("import", "-f", sliced, "--log", log).code == 0


def test_import_refuses_an_empty_priority_boost_under_the_gate_in_kueues_words(log: Path, tmp_path: Path) -> None:
    """Kueue's "empty string priority-boost": under PriorityBoost an empty annotation is refused (Kueue asks for an
    explicit "0"), though the scheduler would read it as no boost; gate off, it is not looked at."""
    empty = tmp_path / "empty.yaml"
    empty.write_text(SLICED.replace("name: sliced", "name: unboosted").replace("lots", "''")
                     .replace("    topologyRequest: {required: rack, podSetSliceSize: 2}\n", ""))
    append(log, [ev.ConfigRecorded(time=1, writer="test", id="config-1", document={
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "featureGates": {"PriorityBoost": True}})])
    before = log_size(log)
    r = kueue_es("import", "-f", empty, "--log", log)
    assert r.code == 2 and one_line_error(r).endswith(
        '(Workload unboosted): field `metadata.annotations[kueue.x-k8s.io/priority-boost]`: Invalid value: "": must '
        'be a valid signed integer; use "0" explicitly, empty string is not allowed'), one_line_error(r)
    assert log_size(log) == before
    assert kueue_es("import", "-f", empty, "--log", tmp_path / "new-log").code == 0, "gate off (its default)"


def test_unreadable_input_file(log: Path, tmp_path: Path) -> None:
    r = kueue_es("import", "-f", tmp_path / "missing.yaml", "--log", log)
    assert r.code == 2
    assert "missing.yaml: cannot read" in one_line_error(r)


@pytest.mark.parametrize("args, expected", [
    (["replay"], "the following arguments are required: --log"),
    (["replay", "--log", "L", "--to", "-3"], "argument --to: not an offset: '-3'"),
    (["replay", "--log", "L", "--at", "noon"], "argument --at: not an RFC 3339 time: 'noon'"),
    (["replay", "--log", "L", "--to", "3", "--at", "2024-05-01T00:00:00Z"], "not allowed with argument --to"),
    (["replay", "--log", "L", "-o", "xml"], "argument -o/--output: invalid choice: 'xml'"),
    (["audit", "--log", "L", "ns/w", "--cluster-queue", "cq"], "not allowed with argument"),
    (["audit", "--log", "L", "--since", "2024-13-01T00:00:00Z"], "argument --since: not an RFC 3339 time"),
    (["audit", "--log", "L", "--since", "2024-05-02T00:00:00Z", "--until", "2024-05-01T00:00:00Z"],
     "--since 2024-05-02T00:00:00.000Z is after --until 2024-05-01T00:00:00.000Z"),
    (["audit", "--log", "L", "--cluster-queue", ""], "argument --cluster-queue: not an object name: ''"),
    (["audit", "--log", "L", "ns/w/x"], "argument NAMESPACE/WORKLOAD: not an object key: 'ns/w/x'"),
    (["audit", "--log", "L", "/w"], "argument NAMESPACE/WORKLOAD: not an object key: '/w'"),
    (["audit", "--log", "L", "ns/"], "argument NAMESPACE/WORKLOAD: not an object key: 'ns/'"),
    (["audit", "--log", "L", "w", "-n", ""], "argument -n/--namespace: not a namespace: ''"),
    (["audit", "--log", "L", "w", "-n", "a/b"], "argument -n/--namespace: not a namespace: 'a/b'"),
    (["explain", "--log", "L", "w"], "argument NAMESPACE/NAME: not an object key: 'w'"),
    (["pending", "--log", "L", "--cluster-queue", "a/b"], "argument --cluster-queue: not an object name: 'a/b'"),
    (["pending", "--log", "L", "--local-queue", "lq"], "argument --local-queue: not an object key: 'lq'"),
    (["import", "--log", "L"], "the following arguments are required: -f/--filename"),
    (["replay", "--log", "L", "--bogus"], "unrecognized arguments: --bogus"),
    (["run", "--instance-id", ""], "argument --instance-id: empty name: ''"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
    ([], "a command is required"),
    (["log"], "a log command is required"),
])
def test_cli_misuse_is_one_line_and_exit_code_2(args: list[str], expected: str) -> None:
    r = kueue_es(*args)
    assert r.code == 2
    assert expected in one_line_error(r)


def test_missing_log_is_a_user_error(tmp_path: Path) -> None:
    for cmd in (["replay"], ["audit"], ["log", "inspect"]):
        r = kueue_es(*cmd, "--log", tmp_path / "nope")
        assert r.code == 2
        assert one_line_error(r) == f"kueue-es: error: --log {tmp_path / 'nope'}: no such log"


def test_help_exits_0() -> None:
    r = kueue_es("replay", "--help")
    assert r.code == 0 and "--quarantine" in r.out and "--save-snapshot" in r.out


def _damage_mid_file(log: Path) -> tuple[int, int]:
    seg = log / SEG0
    data = bytearray(seg.read_bytes())
    frames, _ = scan_frames(seg, bytes(data), 0)
    victim = frames[1]
    data[victim.position + HEADER.size + victim.length // 2] ^= 0x20
    seg.write_bytes(bytes(data))
    return victim.base, victim.position


def test_flipped_byte_is_reported_by_every_reader_with_exit_code_1(log: Path) -> None:
    append(log, [ev.ClockTicked(time=1)])
    append(log, [ev.ClockTicked(time=2)])
    offset, position = _damage_mid_file(log)
    assert offset == 11
    for cmd in (["replay"], ["audit"], ["log", "inspect"], ["replay", "--quarantine"]):
        r = kueue_es(*cmd, "--log", log)
        assert r.code == 1, (cmd, r.err)
        line = one_line_error(r)
        assert f"corrupt record in segment {SEG0} at byte {position} (log offset {offset})" in line, line
    # importing more would need the writer, which refuses a damaged log rather than truncating it
    size = (log / SEG0).stat().st_size
    r = kueue_es("import", "-f", CLUSTER, "--log", log)
    assert r.code == 1 and "corrupt record" in one_line_error(r)
    assert (log / SEG0).stat().st_size == size


def test_undecodable_event_stops_replay_unless_quarantined(log: Path) -> None:
    import events.filelog as fl

    future = msgspec.msgpack.encode({"type": "EventFromTheFuture", "time": 7})
    real = fl.encode_batch
    fl.encode_batch = lambda events: msgspec.msgpack.encode([msgspec.Raw(future)])
    try:
        append(log, [ev.ClockTicked(time=0)])  # offset 11, written by a "newer version"
    finally:
        fl.encode_batch = real
    append(log, [ev.ClockTicked(time=1_714_600_000_000)])  # 12

    r = kueue_es("replay", "--log", log)
    assert r.code == 1
    assert "cannot decode event at log offset 11" in one_line_error(r) and "--quarantine" in r.err

    q = kueue_es("replay", "--log", log, "--quarantine", "-o", "json")
    assert q.code == 0
    data = json.loads(q.out)
    assert data["offset"] == 12
    assert [x["offset"] for x in data["quarantined"]] == [11]
    assert "EventFromTheFuture" in data["quarantined"][0]["error"]
    assert "set aside 1 undecodable or invalid event(s) at offset(s) 11" in one_line_error(q)
    text = kueue_es("replay", "--log", log, "--quarantine").out
    assert "QUARANTINED OFFSET" in text

    inspect = json.loads(kueue_es("log", "inspect", "--log", log, "-o", "json").out)
    assert inspect["byType"]["EventFromTheFuture"] == 1


def _nan_usage() -> o.KObject:
    """A workload with quota reserved whose admission charges ``cpu: NaN``: what ``import`` now refuses, written
    by a producer that did not check it. The fold meets the NaN after it has begun to book the workload."""
    return msgspec.convert({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": "odd", "namespace": "team-a", "uid": "odd"},
        "spec": {"queueName": "lq-a", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}]},
        "status": {
            "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "",
                            "lastTransitionTime": "2024-05-01T10:00:05Z"}],
            "admission": {"clusterQueue": "cq-a", "podSetAssignments": [{
                "name": "main", "count": 1, "flavors": {"cpu": "on-demand"}, "resourceUsage": {"cpu": "NaN"}}]},
        },
    }, o.KueueObject)


def test_an_invalid_quantity_in_the_log_stops_the_fold_naming_its_offset(log: Path) -> None:
    """The fold stops at the event with one line naming it, lazily decoded or not, instead of a traceback."""
    wl = _nan_usage()
    append(log, [ev.ObjectUpserted(time=1_714_600_000_000, key=wl.key, uid="odd", obj=wl)])  # offset 11
    for command in (["replay"], ["replay", "--no-checkpoints"], ["explain", "team-a/odd"]):
        r = kueue_es(*command, "--log", log)
        assert r.code == 1, r.err
        line = one_line_error(r)
        assert "the event at log offset 11 holds an invalid object: invalid quantity 'NaN'" in line, command
        assert "replay --quarantine" in line


def test_an_upsert_filed_under_another_key_stops_the_fold_naming_its_offset(log: Path) -> None:
    """The fold keys a workload by the envelope in some tables and by its object in others: an envelope built by
    hand with another key would file one workload under two names. It is refused like any invalid object."""
    wl = msgspec.convert({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": "wl", "namespace": "team-a", "uid": "wl"},
        "spec": {"queueName": "lq-a", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}]},
    }, o.KueueObject)
    append(log, [ev.ObjectUpserted(time=1_714_600_000_000, key="team-b/wl", uid="wl", obj=wl)])  # offset 11
    r = kueue_es("replay", "--log", log)
    assert r.code == 1, r.err
    assert ("the event at log offset 11 holds an invalid object: Workload 'team-a/wl' is upserted under key "
            "'team-b/wl'") in one_line_error(r)
    r = kueue_es("replay", "--log", log, "--quarantine", "-o", "json")  # decoded in full, and set aside
    assert r.code == 0, r.err
    assert [(q["offset"], q["error"]) for q in json.loads(r.out)["quarantined"]] == [
        (11, "Workload 'team-a/wl' is upserted under key 'team-b/wl' (the key must be namespace/name)")]
    assert "team-b/wl" not in r.out.replace("under key 'team-b/wl'", "")


def test_a_misfiled_object_of_another_kind_is_refused_too(log: Path) -> None:
    lq = msgspec.convert({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                          "metadata": {"name": "lq-x", "namespace": "team-a"}, "spec": {"clusterQueue": "cq-a"}},
                         o.KueueObject)
    append(log, [ev.ObjectUpserted(time=1_714_600_000_000, key="lq-x", obj=lq)])  # offset 11
    r = kueue_es("replay", "--log", log)
    assert r.code == 1, r.err
    assert "LocalQueue 'team-a/lq-x' is upserted under key 'lq-x'" in one_line_error(r)


def test_replay_quarantine_sets_an_invalid_event_aside_and_folds_the_rest_as_if_it_were_not_there(
    log: Path, tmp_path: Path,
) -> None:
    """The fold had already begun to book the workload when it met the NaN, so the event cannot simply be
    skipped: the state must be that of the same log with a harmless event in its place."""
    clean = tmp_path / "clean"
    assert kueue_es("import", "-f", CLUSTER, "--log", clean).code == 0
    append(log, [ev.ObjectUpserted(time=1_714_600_000_000, key="team-a/odd", uid="odd", obj=_nan_usage())])  # 11
    append(clean, [ev.ClockTicked(time=1_714_600_000_000)])  # 11
    for path in (log, clean):
        append(path, [ev.ClockTicked(time=1_714_600_000_001)])  # 12

    r = kueue_es("replay", "--log", log, "--quarantine", "--save-snapshot", tmp_path / "set-aside.snap",
                 "-o", "json")
    assert r.code == 0, r.err
    assert "set aside 1 undecodable or invalid event(s) at offset(s) 11" in one_line_error(r)
    assert [(q["offset"], q["error"]) for q in json.loads(r.out)["quarantined"]] == [(11, "invalid quantity 'NaN'")]
    assert kueue_es("replay", "--log", clean, "--save-snapshot", tmp_path / "clean.snap").code == 0
    assert snapshot.digest(snapshot.load(tmp_path / "set-aside.snap")) == snapshot.digest(
        snapshot.load(tmp_path / "clean.snap"))


def test_import_while_another_writer_holds_the_log(log: Path) -> None:
    writer = FileLog.open(log)
    try:
        r = kueue_es("import", "-f", CLUSTER, "--log", log)
    finally:
        writer.close_sync()
    assert r.code == 2
    assert "is locked by another writer" in one_line_error(r)


def test_bad_snapshot_and_snapshot_misuse(log: Path, tmp_path: Path) -> None:
    junk = tmp_path / "junk.snap"
    junk.write_bytes(b"not a snapshot")
    r = kueue_es("replay", "--log", log, "--snapshot", junk)
    assert r.code == 2 and "not a kueue-es snapshot" in one_line_error(r)
    r = kueue_es("replay", "--log", log, "--snapshot", tmp_path / "none.snap")
    assert r.code == 2 and "cannot read" in one_line_error(r)
    r = kueue_es("replay", "--log", log, "--at", "2024-05-01T10:00:00Z", "--save-snapshot", tmp_path / "s")
    assert r.code == 2 and "--save-snapshot cannot be combined with --at" in one_line_error(r)
    snap = tmp_path / "late.snap"
    assert kueue_es("replay", "--log", log, "--save-snapshot", snap).code == 0
    r = kueue_es("replay", "--log", log, "--snapshot", snap, "--to", "3")
    assert r.code == 2 and "before the snapshot's offset 10" in one_line_error(r)
    other = tmp_path / "other"
    append(other, [ev.ClockTicked(time=1)])
    r = kueue_es("replay", "--log", other, "--snapshot", snap)
    assert r.code == 2 and "belongs to another log" in one_line_error(r)


def test_torn_tail_is_reported_by_inspect_and_cut_by_the_next_writer(log: Path) -> None:
    append(log, [ev.ClockTicked(time=1), ev.ClockTicked(time=2)])  # offsets 11, 12 in one frame
    seg = log / SEG0
    frames, _ = scan_frames(seg, seg.read_bytes(), 0)
    last = frames[-1]
    cut = last.position + HEADER.size + 3
    with open(seg, "r+b") as f:
        f.truncate(cut)
    data = json.loads(kueue_es("log", "inspect", "--log", log, "-o", "json").out)
    assert data["events"] == 11 and data["tornTailBytes"] == HEADER.size + 3
    assert f"Torn tail: {HEADER.size + 3} bytes" in kueue_es("log", "inspect", "--log", log).out
    assert kueue_es("import", "-f", CLUSTER, "--log", log, "--time", "2024-05-02T00:00:00Z").code == 0
    data = json.loads(kueue_es("log", "inspect", "--log", log, "-o", "json").out)
    # the 8 undated objects get new events at the new time; the 3 dated ones are unchanged
    assert data["events"] == 19 and "tornTailBytes" not in data


def _schedule_under(tmp_path: Path, stanza: str) -> tuple[Path, Result]:
    """``kueue-es schedule`` of the cluster fixture under a Configuration holding ``stanza``."""
    cfg = tmp_path / "kueue.yaml"
    cfg.write_text(f"apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n{stanza}")
    return cfg, kueue_es("schedule", "-f", CLUSTER, "--config", cfg)


def test_unknown_feature_gate_is_refused_as_kueue_refuses_to_start(tmp_path: Path) -> None:
    cfg, r = _schedule_under(tmp_path, "featureGates:\n  TASBalancedPlacement: true\n  TASBalancedPlacment: true\n")
    assert r.code == 2
    assert one_line_error(r) == (f"kueue-es: error: {cfg}: field `featureGates`: Invalid value: "
                                 'map[string]bool{"TASBalancedPlacement":true, "TASBalancedPlacment":true}: '
                                 "unrecognized feature gate: TASBalancedPlacment")


def test_a_gate_set_to_a_string_is_refused_as_kueues_decoder_refuses_it(tmp_path: Path) -> None:
    cfg, r = _schedule_under(tmp_path, 'featureGates:\n  TASBalancedPlacement: "true"\n')
    assert r.code == 2
    assert one_line_error(r) == (f"kueue-es: error: {cfg}: field `featureGates.TASBalancedPlacement`: Expected `bool`, "
                                 "got `str` ('true')")


_RESOURCES_REFUSED = [
    ("  transformations:\n  - input: nvidia.com/mig-1g.5gb\n    strategy: Drop\n",
     'field `resources.transformations[0].strategy`: Unsupported value: "Drop": supported values: "Retain", "Replace"'),
    ("  transformations:\n  - input: a.io/x\n  - input: a.io/x\n    strategy: Replace\n",
     "field `resources.transformations[1].input`: Duplicate value: a.io/x"),
    ("  transformations:\n  - input: a.io/x\n    outputs: {b.io/y: lots}\n",
     "Configuration: field `resources.transformations[0].outputs.b.io/y`: invalid quantity 'lots'"),  # decoding
    ("  quotaCheckStrategy: IgnoreUndeclared\n  excludeResourcePrefixes: [a.io/]\n",
     'field `resources.quotaCheckStrategy`: Invalid value: "IgnoreUndeclared": excludeResourcePrefixes is '
     "not allowed when quotaCheckStrategy is IgnoreUndeclared"),
]
_AFS_REFUSED = [  # before, these were taken and the scheduler raised on them at its first cycle, on every start
    ("  usageHalfLifeTime: -1h\n", "field `admissionFairSharing.usageHalfLifeTime`: Invalid value: -1h0m0s: must be "
     "greater than or equal to 0"),
    ("  usageSamplingInterval: '30'\n",
     "field `admissionFairSharing.usageSamplingInterval`: invalid duration '30' (missing unit)"),
    ("  usageSamplingInterval: 1.2.3s\n",
     "field `admissionFairSharing.usageSamplingInterval`: invalid duration '1.2.3s' (missing unit)"),
    ("  resourceWeights: {cpu: -1, memory: 0.5}\n", "field `admissionFairSharing.resourceWeights[cpu]`: Invalid value: "
     'map[v1.ResourceName]float64{"cpu":-1, "memory":0.5}: must be greater than or equal to 0'),
]


@pytest.mark.parametrize(("stanza", "error"), [
    *((f"resources:\n{body}", error) for body, error in _RESOURCES_REFUSED),
    *((f"admissionFairSharing:\n{body}", error) for body, error in _AFS_REFUSED),
    ("metrics:\n  enableClusterQueueResources: 3\n",
     "Configuration: field `metrics.enableClusterQueueResources`: Expected `bool`, got `int`"),
    ("integrations:\n  frameworks: [batch/job, pod, batch/job]\n",
     'field `integrations.frameworks[2]`: Duplicate value: "batch/job"'),
    ("integrations:\n  frameworks: [batch/job]\n  externalFrameworks: [Job.v1.batch]\n",
     'field `integrations.externalFrameworks[0]`: Duplicate value: "Job.v1.batch"'),
    ("multiKueue:\n  workerLostTimeout: -1m\n  gcInterval: -1h\n",  # every error, in Kueue's order, on one line
     "[field `multiKueue.gcInterval`: Invalid value: -1h0m0s: must be greater than or equal to 0, "
     "field `multiKueue.workerLostTimeout`: Invalid value: -1m0s: must be greater than or equal to 0]"),
    ("multiKueue:\n  clusterProfile:\n    accessProviders: [{name: a, execConfig: {command: c, apiVersion: v}}]\n",
     "field `multiKueue.clusterProfile.accessProviders.execConfig.interactiveMode`: Required value: must be specified"),
])
def test_a_configuration_stanza_kueue_refuses_is_refused_naming_the_field(tmp_path: Path, stanza: str,
                                                                          error: str) -> None:
    cfg, r = _schedule_under(tmp_path, stanza)
    assert r.code == 2
    assert one_line_error(r) == f"kueue-es: error: {cfg}: {error}"


def test_an_alpha_gate_turned_on_is_accepted_without_a_warning_as_every_gate_is_modelled(tmp_path: Path) -> None:
    cfg, r = _schedule_under(tmp_path, "featureGates:\n  MultiKueueOrchestratedPreemption: true\n"
                                       "  PartialAdmission: false\n  TASBalancedPlacement: false\n")
    assert r.code == 0
    assert "warning" not in r.err, r.err  # the warning for a gate modelled only at its default: gates.ignored_note


def test_save_snapshot_replaces_a_snapshot_but_no_other_file(log: Path, tmp_path: Path) -> None:
    manifest = tmp_path / "objects.yaml"
    manifest.write_bytes(CLUSTER.read_bytes())
    r = kueue_es("replay", "--log", log, "--save-snapshot", manifest)
    assert r.code == 2
    assert "the file exists and is not a kueue-es snapshot; not overwritten" in one_line_error(r)
    assert manifest.read_bytes() == CLUSTER.read_bytes()
    snap = tmp_path / "state.snap"
    assert kueue_es("replay", "--log", log, "--to", "3", "--save-snapshot", snap).code == 0
    first = snap.read_bytes()
    assert kueue_es("replay", "--log", log, "--save-snapshot", snap).code == 0, "a snapshot is replaced"
    assert snap.read_bytes() != first


@pytest.mark.parametrize("args", [["replay", "--log", "L", "--bogus"], ["log", "inspect", "--log", "L", "--bogus"],
                                  ["manifests", "crds", "--bogus"], ["audit", "--log", "L", "ns/w", "extra"]])
def test_an_unknown_flag_is_named_by_its_subcommand(args: list[str]) -> None:
    """As kubectl points at ``kubectl get --help``: the subcommand's own help lists the flags it takes."""
    r = kueue_es(*args)
    command = " ".join(a for a in args if a in ("replay", "log", "inspect", "manifests", "audit"))
    assert r.code == 2
    assert one_line_error(r).startswith(f"kueue-es {command}: error: unrecognized arguments: ")
    assert one_line_error(r).endswith(f"(see 'kueue-es {command} --help')")


READERS = [["replay"], ["audit", "ns/w"], ["metrics"], ["log", "inspect"], ["log", "verify"], ["explain", "ns/w"],
           ["pending", "--cluster-queue", "cq"]]


@pytest.mark.parametrize("command", READERS)
def test_a_directory_that_holds_no_log_is_not_read_as_an_empty_one(command: list[str], tmp_path: Path) -> None:
    """``--log .`` from the wrong directory used to show an empty state, as if that were the log's."""
    (tmp_path / "notes.txt").write_text("mine")
    r = kueue_es(*command, "--log", tmp_path)
    assert r.code == 2 and r.out == ""
    assert one_line_error(r) == (f"kueue-es: error: --log {tmp_path}: not a log directory (it holds files, but no "
                                 "segment *.seg)")
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_a_log_directory_that_cannot_be_listed_is_a_user_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Unreadable (``chmod 000``, as any user but root finds it): one line naming the flag, exit code 2."""
    from kueue_es.cli import main

    def refuse(self: Path):  # type: ignore[no-untyped-def]
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "iterdir", refuse)
    assert main(["replay", "--log", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"kueue-es: error: --log {tmp_path}: cannot read: Permission denied\n"


@pytest.mark.parametrize("command", READERS)
def test_a_segment_that_cannot_be_read_is_a_user_error(command: list[str], tmp_path: Path) -> None:
    """Named by flag and segment with exit code 2, as a missing log is, not ``PATH: Is a directory`` with 1."""
    (tmp_path / SEG0).mkdir()
    r = kueue_es(*command, "--log", tmp_path)
    assert r.code == 2 and r.out == ""
    assert one_line_error(r) == f"kueue-es: error: --log {tmp_path}: cannot read segment {SEG0}: not a file"


def test_a_segment_without_read_permission_is_a_user_error(log: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """``chmod 000`` on a segment, as any user but root finds it."""
    import os

    from kueue_es.cli import main

    monkeypatch.setattr(os, "access", lambda p, mode: not str(p).endswith(".seg"))
    assert main(["audit", "--log", str(log), "team-a/train-1"]) == 2
    assert capsys.readouterr().err == f"kueue-es: error: --log {log}: cannot read segment {SEG0}: permission denied\n"


def test_import_makes_no_log_among_other_files(tmp_path: Path) -> None:
    """``import --log .`` from the wrong directory used to put segments and a LOCK file among the user's files."""
    (tmp_path / "notes.txt").write_text("mine")
    r = kueue_es("import", "-f", CLUSTER, "--log", tmp_path)
    assert r.code == 2 and r.out == ""
    assert one_line_error(r) == (f"kueue-es: error: --log {tmp_path}: not a log directory (it holds files, but no "
                                 "segment *.seg)")
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_run_makes_no_log_among_other_files(tmp_path: Path) -> None:
    """As ``import``: ``run --log DIR`` on a directory of the user's files is refused before anything starts."""
    (tmp_path / "notes.txt").write_text("mine")
    r = kueue_es("run", "--log", tmp_path)
    assert r.code == 2 and r.out == ""
    assert one_line_error(r) == (f"kueue-es: error: --log {tmp_path}: not a log directory (it holds files, but no "
                                 "segment *.seg)")
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


@pytest.mark.parametrize("beside", [["LOCK"], ["lost+found/"], [".gitkeep"], [".snapshot/", "LOCK"]])
def test_a_log_directory_holding_only_its_lock_or_a_fresh_volumes_content_is_an_empty_log(
        tmp_path: Path, beside: list[str]) -> None:
    """A fresh volume mounted as the log's directory holds ``lost+found``; a kept empty folder, a dotfile."""
    for name in beside:
        if name.endswith("/"):
            (tmp_path / name).mkdir()
        else:
            (tmp_path / name).write_text("")
    assert kueue_es("log", "inspect", "--log", tmp_path).code == 0
    assert kueue_es("import", "-f", CLUSTER, "--log", tmp_path).code == 0


@pytest.mark.parametrize(("args", "expected"), [
    (["-n", "team-b"], "-n team-b goes with a WORKLOAD given without its namespace; here it would be ignored"),
    (["--cluster-queue", "cq-a", "-n", "team-b"],
     "-n team-b goes with a WORKLOAD given without its namespace; here it would be ignored"),
    (["team-a/train-1", "-n", "team-b"],
     "-n team-b goes with a WORKLOAD given without its namespace; team-a/train-1 names its own"),
])
def test_audit_refuses_a_namespace_it_would_ignore(log: Path, args: list[str], expected: str) -> None:
    """As ``explain -f ... --no-checkpoints`` is refused: a flag the command would drop is misuse. ``audit -n team-b``
    printed every namespace's steps, ``audit team-a/train-1 -n team-b`` those of team-a."""
    r = kueue_es("audit", "--log", log, *args)
    assert (r.code, r.out) == (2, "")
    assert one_line_error(r) == f"kueue-es: error: {expected}"
    assert kueue_es("audit", "--log", log, "train-1", "-n", "team-a").code == 0


def test_replay_of_nothing_says_the_state_is_empty(log: Path, tmp_path: Path) -> None:
    """Not ``state at offset -1, time 1970-01-01T00:00:00Z``: no event was folded, so there is neither."""
    (tmp_path / "empty").mkdir()
    for args in (["--log", tmp_path / "empty"], ["--log", log, "--at", "1960-01-01T00:00:00Z"]):
        r = kueue_es("replay", *args)
        assert r.code == 0 and r.out.splitlines()[0] == f"Log {args[1]}: empty state (no event folded)"
