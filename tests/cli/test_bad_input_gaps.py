"""Bad input the CLI once mishandled: an endless file read forever, a Kueue Configuration's unknown fields taken
in silence. Each is refused with exit code 2 and one line naming the file and the field, appending nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from clihelp import FIXTURES, Result, kueue_es, log_size, one_line_error

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


def _schedule_under(tmp_path: Path, body: str) -> tuple[Path, Result]:
    cfg = tmp_path / "kueue.yaml"
    cfg.write_text(f"apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n{body}")
    return cfg, kueue_es("schedule", "-f", CLUSTER, "--config", cfg)


def test_a_configuration_s_unknown_fields_are_refused_as_kueue_s_strict_decoder_refuses_them(tmp_path: Path) -> None:
    """Kueue decodes its configuration file strictly and does not start on a field its Configuration has not:
    every one is named, in the document's order, as its decoder names them."""
    cfg, r = _schedule_under(tmp_path, "waitForPodsReady:\n  timeout: 5m\n  timeoutt: 6m\nresources:\n"
                                       "  transformations:\n  - input: a.io/x\n    outputz: {}\nfairShare: {}\n")
    assert r.code == 2
    assert one_line_error(r) == (
        f'kueue-es: error: {cfg}: Configuration: strict decoding error: unknown field "waitForPodsReady.timeoutt", '
        'unknown field "resources.transformations[0].outputz", unknown field "fairShare"')


@pytest.mark.parametrize("body", [
    # Kueue's own fields kueue-es does not read, v1beta2's and v1beta1's: taken
    "webhook: {port: 9443}\nleaderElection: {leaderElect: true, resourceName: c1f6bfd2.kueue.x-k8s.io}\n"
    "metrics: {bindAddress: ':8443', enableClusterQueueResources: true}\nhealth: {healthProbeBindAddress: ':8081'}\n"
    "internalCertManagement: {enable: false}\nclientConnection: {qps: 50, burst: 100}\n"
    "controller: {groupKindConcurrency: {Job.batch: 5}}\nmanagedJobsNamespaceSelector:\n"
    "  matchExpressions: [{key: kubernetes.io/metadata.name, operator: NotIn, values: [kube-system]}]\n",
    "integrations:\n  frameworks: [batch/job]\n  podOptions: {namespaceSelector: {matchLabels: {a: b}}}\n"
    "queueVisibility: {updateIntervalSeconds: 5, clusterQueues: {maxCount: 10}}\nfairSharing: {enable: true}\n",
])
def test_kueue_s_own_fields_are_taken_whether_or_not_kueue_es_reads_them(tmp_path: Path, body: str) -> None:
    assert _schedule_under(tmp_path, body)[1].code == 0
