"""Bad input the CLI once mishandled: an endless file read forever, a Kueue Configuration's unknown fields taken
in silence. Each is refused with exit code 2 and one line naming the file and the field, appending nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from clihelp import FIXTURES, Result, kueue_es, log_size, one_line_error

from events.field_errors import CEL_NOT_CHECKED

CLUSTER = FIXTURES / "cluster.yaml"
TOO_LARGE = ("a document larger than 3145728 bytes (3 MiB, the apiserver's default request body limit): no "
             "Kubernetes object is that large")


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "log"
    assert kueue_es("import", "-f", CLUSTER, "--log", path).code == 0
    return path


def test_an_endless_input_is_refused_not_read_forever(log: Path, tmp_path: Path) -> None:
    before = log_size(log)
    r = kueue_es("import", "-f", CLUSTER, "-f", "/dev/zero", "--log", log)
    assert r.code == 2 and one_line_error(r) == f"kueue-es: error: /dev/zero: line 1: {TOO_LARGE}"
    r = kueue_es("import", "-f", "-", "--log", log, stdin="kind: x\n---\n" + "a" * (4 << 20))
    assert r.code == 2 and one_line_error(r) == f"kueue-es: error: <stdin>: line 2: {TOO_LARGE}"
    assert log_size(log) == before
    r = kueue_es("import", "-f", "/dev/zero", "--log", tmp_path / "new-log")
    assert r.code == 2 and not (tmp_path / "new-log").exists()
    r = kueue_es("schedule", "-f", CLUSTER, "--config", "/dev/zero")
    assert r.code == 2 and one_line_error(r) == f"kueue-es: error: /dev/zero: line 1: {TOO_LARGE}"


def _schedule_under(tmp_path: Path, body: str, version: str = "v1beta2") -> tuple[Path, Result]:
    cfg = tmp_path / "kueue.yaml"
    cfg.write_text(f"apiVersion: config.kueue.x-k8s.io/{version}\nkind: Configuration\n{body}")
    return cfg, kueue_es("schedule", "-f", CLUSTER, "--config", cfg)


def test_a_configuration_s_unknown_fields_are_refused_as_kueue_s_strict_decoder_refuses_them(tmp_path: Path) -> None:
    """Kueue decodes its configuration file strictly and does not start on a field its Configuration has not:
    every one is named, in the order its decoder meets them (each object's keys sorted), as it names them."""
    cfg, r = _schedule_under(tmp_path, "waitForPodsReady:\n  timeout: 5m\n  timeoutt: 6m\nresources:\n"
                                       "  transformations:\n  - input: a.io/x\n    outputz: {}\nfairShare: {}\n")
    assert r.code == 2
    assert one_line_error(r) == (
        f'kueue-es: error: {cfg}: Configuration: strict decoding error: unknown field "fairShare", '
        'unknown field "resources.transformations[0].outputz", unknown field "waitForPodsReady.timeoutt"')


V1BETA1_ONLY = ("integrations:\n  frameworks: [batch/job]\n  podOptions: {namespaceSelector: {matchLabels: {a: b}}}\n"
                "queueVisibility: {updateIntervalSeconds: 5, clusterQueues: {maxCount: 10}}\nfairSharing: {enable: true}\n"
                "waitForPodsReady: {enable: true, timeout: 5m}\n")
V1BETA2_ONLY = ("multiKueue:\n  singleClusterPreemptionTimeout: 1m\n  clusterProfile: {accessProviders: []}\n"
                "resources:\n  quotaCheckStrategy: IgnoreUndeclared\n  deviceClassMappings:\n"
                "  - {name: gpu, deviceClassNames: [gpu.example.com], sources: []}\n"
                "metrics: {customLabels: [{name: team, sourceKind: LocalQueue}]}\n")


@pytest.mark.parametrize(("body", "version"), [
    # Kueue's own fields kueue-es does not read, of both versions: taken
    ("webhook: {port: 9443}\nleaderElection: {leaderElect: true, resourceName: c1f6bfd2.kueue.x-k8s.io}\n"
     "metrics: {bindAddress: ':8443', enableClusterQueueResources: true}\nhealth: {healthProbeBindAddress: ':8081'}\n"
     "internalCertManagement: {enable: false}\nclientConnection: {qps: 50, burst: 100}\n"
     "controller: {groupKindConcurrency: {Job.batch: 5}}\nmanagedJobsNamespaceSelector:\n"
     "  matchExpressions: [{key: kubernetes.io/metadata.name, operator: NotIn, values: [kube-system, kueue-system]}]\n",
     "v1beta2"),
    (V1BETA1_ONLY, "v1beta1"),  # the deprecated stanzas and switches v1beta2 dropped, in the version that has them
    (V1BETA2_ONLY, "v1beta2"),  # the fields v1beta1 never got, in the version that has them
])
def test_kueue_s_own_fields_are_taken_whether_or_not_kueue_es_reads_them(tmp_path: Path, body: str,
                                                                        version: str) -> None:
    assert _schedule_under(tmp_path, body, version)[1].code == 0


@pytest.mark.parametrize(("body", "version", "unknown"), [
    (V1BETA1_ONLY, "v1beta2", ("fairSharing.enable", "integrations.podOptions", "queueVisibility",
                               "waitForPodsReady.enable")),
    (V1BETA2_ONLY, "v1beta1", ("metrics.customLabels[0].sourceKind", "multiKueue.clusterProfile",
                               "multiKueue.singleClusterPreemptionTimeout",
                               "resources.deviceClassMappings[0].sources", "resources.quotaCheckStrategy")),
])
def test_a_field_only_the_other_version_has_is_refused(tmp_path: Path, body: str, version: str,
                                                      unknown: tuple[str, ...]) -> None:
    """Kueue decodes its file as the version its apiVersion names: a field v1beta2 removed (or v1beta1 never had)
    is as unknown as a misspelt one, every one named (each object's keys in sorted order, as Kueue's decoder
    meets them)."""
    cfg, r = _schedule_under(tmp_path, body, version)
    assert r.code == 2
    assert one_line_error(r) == (f"kueue-es: error: {cfg}: Configuration: strict decoding error: "
                                 + ", ".join(f'unknown field "{path}"' for path in unknown))


@pytest.mark.parametrize(("body", "version", "error"), [
    ("clientConnection: {qps: 50, burst: '100'}\n", "v1beta2",
     "Configuration: field `clientConnection.burst`: Expected `int | null`, got `str`"),
    ("leaderElection: {leaderElect: true, leaseDuration: soon}\n", "v1beta2",
     "field `leaderElection.leaseDuration`: invalid duration 'soon'"),
    ("queueVisibility: {updateIntervalSeconds: five}\n", "v1beta1",
     "Configuration: field `queueVisibility.updateIntervalSeconds`: Expected `int | null`, got `str`"),
])
def test_a_wrong_typed_value_in_a_field_kueue_es_does_not_read_is_refused(tmp_path: Path, body: str, version: str,
                                                                         error: str) -> None:
    """Kueue's decoder refuses a value of the wrong type in any field, and Kueue does not start."""
    cfg, r = _schedule_under(tmp_path, body, version)
    assert r.code == 2 and one_line_error(r) == f"kueue-es: error: {cfg}: {error}"


@pytest.mark.parametrize("body", ["fairSharing: {}\n", "fairSharing: {preemptionStrategies: []}\n",
                                  "fairSharing: {preemptionStrategies: null}\n"])
def test_fair_sharing_without_preemption_strategies_is_refused_as_the_newest_kueue_refuses_it(
        tmp_path: Path, body: str) -> None:
    """The newest Kueue's validateFairSharing requires the list (its v1beta2 defaulting fills none); a v1beta1
    ``enable: true`` without one is given the two-step list by the conversion first, and starts."""
    cfg, r = _schedule_under(tmp_path, body)
    assert r.code == 2 and one_line_error(r) == (
        f"kueue-es: error: {cfg}: field `fairSharing.preemptionStrategies`: Required value: must be specified")
    _, r = _schedule_under(tmp_path, "fairSharing: {enable: true}\n", "v1beta1")
    assert r.code == 0, r


@pytest.mark.parametrize(("body", "shown"), [
    ("fairSharing: {preemptionStrategies: [Never]}\n", '{"Never"}'),
    ("fairSharing: {preemptionStrategies: [LessThanInitialShare, LessThanOrEqualToFinalShare]}\n",
     '{"LessThanInitialShare", "LessThanOrEqualToFinalShare"}'),
])
def test_an_unsupported_list_of_preemption_strategies_is_refused_in_kueue_s_words(
        tmp_path: Path, body: str, shown: str) -> None:
    """Kueue's validateFairSharing says field.NotSupported: the list as Go prints it, then the three lists it takes
    (each joined with commas); under v1beta1 too, as Kueue validates the v1beta2 object it converts to."""
    supported = ('"LessThanOrEqualToFinalShare", "LessThanInitialShare", '
                 '"LessThanOrEqualToFinalShare,LessThanInitialShare"')
    for version, text in (("v1beta2", body), ("v1beta1", body.replace("{preemptionStrategies", "{enable: true, "
                                                                                        "preemptionStrategies"))):
        cfg, r = _schedule_under(tmp_path, text, version)
        assert r.code == 2 and one_line_error(r) == (
            f"kueue-es: error: {cfg}: field `fairSharing.preemptionStrategies`: Unsupported value: "
            f"[]v1beta2.PreemptionStrategy{shown}: supported values: {supported}")


@pytest.mark.parametrize(("doc", "error"), [
    ("kind: Workload\nmetadata: {name: w, namespace: ns}\nspec:\n  podSets: [{name: main, count: 1, "
     "template: {spec: {containers: [{name: c}]}}}]\nstatus:\n  admissionChecks: [{name: ac, state: Bogus, "
     "lastTransitionTime: '2024-01-01T00:00:00Z'}]\n",
     'Workload w): field `status.admissionChecks[0].state`: Unsupported value: "Bogus": supported values: '
     '"Pending", "Ready", "Retry", "Rejected"'),
    ("kind: ClusterQueue\nmetadata: {name: cq}\nspec:\n  admissionScope: {}\n",
     f"ClusterQueue cq): [field `spec.admissionScope.admissionMode`: Required value, {CEL_NOT_CHECKED}]"),
    ("kind: WorkloadPriorityClass\nmetadata: {name: p}\ndescription: d\n",
     "WorkloadPriorityClass p): field `value`: Required value"),
    ("kind: Workload\nmetadata: {name: w, namespace: ns}\nspec:\n  priority: 2147483648\n  podSets: [{name: "
     "main, count: 1, template: {spec: {containers: [{name: c}]}}}]\n",
     "Workload w): field `spec.priority`: Invalid value: 2147483648: Checked value must be of type integer "
     "with format int32 in spec.priority"),
])
def test_a_value_outside_kueue_s_crd_enums_or_limits_is_refused(log: Path, doc: str, error: str) -> None:
    """An admission check's state, a ClusterQueue's admission mode, a WorkloadPriorityClass's value, a
    priority past int32: what Kueue's CRD refuses (events.crd_markers), where kueue-es once stored a typo that
    then stalled or changed admission."""
    before = log_size(log)
    r = kueue_es("import", "-f", "-", "--log", log, stdin="apiVersion: kueue.x-k8s.io/v1beta2\n" + doc)
    assert r.code == 2 and one_line_error(r) == f"kueue-es: error: <stdin>: document 1 ({error}", r.err
    assert log_size(log) == before
