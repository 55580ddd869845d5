"""The job labels and annotations copied onto the Workload a job integration makes (Kueue's
``integrations.labelKeysToCopy``, and under ``CustomMetricLabels`` what its ``sourceKind: Workload`` custom metric
labels read): the Configuration field, and the Workloads of a Job, a single Pod and a pod group. No cluster needed.
"""

from __future__ import annotations

from typing import Any

import pytest
from fixtures.jobs import NAME, UID, integration

from connectors.k8s import pod_group, pod_sync
from connectors.k8s.copied_metadata import ANNOTATIONS_MISMATCH, LABELS_MISMATCH, agreed, copied
from events import schema as ev
from events.errors import InvalidInput
from kueue_es.scheduler.config import KeysToCopy, load_config
from projections.cluster import ClusterState

QUEUE = "kueue.x-k8s.io/queue-name"
JOB_UID = "kueue.x-k8s.io/job-uid"
TEAM = {"name": "team", "sourceKind": "Workload", "trackedValues": ["a"]}  # no source key: the label ``team``
KIND = {"name": "kind", "sourceKind": "Workload", "sourceLabelKey": "example.com/kind", "trackedValues": ["x"]}
COST = {"name": "cost", "sourceKind": "LocalQueue", "sourceLabelKey": "cost"}  # not a Workload's: not copied
BUDGET_KEY = "example.com/budget"
BUDGET = {"name": "budget", "sourceKind": "Workload", "sourceAnnotationKey": BUDGET_KEY,
          "trackedValues": ["b"]}
METRIC_ANNOTATION = {"metrics": {"customLabels": [BUDGET]}}
GATE_ON = {"featureGates": {"CustomMetricLabels": True}}


def _document(**fields: Any) -> dict[str, Any]:
    return {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", **fields}


def _recorded(document: dict[str, Any]) -> tuple[ev.AnyEvent, ...]:
    return (ev.ConfigRecorded(time=1, document=document, writer="test", id="config-test"),)


def _state(**fields: Any) -> ClusterState:
    state = ClusterState()
    for i, e in enumerate(_recorded(_document(**fields)), start=1):
        state.apply(ev.Record(i, e))
    return state


# --- the Configuration field ------------------------------------------------------------------------------------


def test_label_keys_to_copy_is_read() -> None:
    cfg = load_config({"integrations": {"labelKeysToCopy": ["team", "example.com/kind", "team"]}})
    assert cfg.keys_to_copy == KeysToCopy(labels=("example.com/kind", "team"))
    assert load_config({"integrations": {"labelKeysToCopy": None}}).keys_to_copy == KeysToCopy()
    assert load_config({}).keys_to_copy == KeysToCopy()


@pytest.mark.parametrize(("value", "error"), [
    ("team", "field `integrations.labelKeysToCopy`: Expected `array | null`, got `str`"),
    ({"team": True}, "field `integrations.labelKeysToCopy`: Expected `array | null`, got `object`"),
    (["team", 3], "field `integrations.labelKeysToCopy[1]`: Expected `str`, got `int`"),
    (["team", "kueue.x-k8s.io/multikueue-origin"], "field `integrations.labelKeysToCopy[1]`: "
     "'kueue.x-k8s.io/multikueue-origin' is written by a Kueue controller and must not be copied onto a Workload"),
])
def test_a_bad_label_keys_to_copy_is_refused_naming_the_field(value: object, error: str) -> None:
    with pytest.raises(InvalidInput) as exc:
        load_config({"integrations": {"labelKeysToCopy": value}}, "cfg.yaml")
    assert str(exc.value) == f"cfg.yaml: Configuration: {error}"


def test_custom_metric_labels_of_workloads_add_their_sources_under_the_gate_only() -> None:
    both = {"customLabels": [TEAM, KIND, COST]}
    on = load_config({"integrations": {"labelKeysToCopy": ["team", "z"]}, "metrics": both, **GATE_ON})
    assert on.keys_to_copy == KeysToCopy(labels=("example.com/kind", "team", "z"))
    off = load_config({"integrations": {"labelKeysToCopy": ["z"]}, "metrics": both})
    assert off.keys_to_copy == KeysToCopy(labels=("z",))
    annotation = load_config({**METRIC_ANNOTATION, **GATE_ON})
    assert annotation.keys_to_copy == KeysToCopy(annotations=(BUDGET_KEY,))


def test_copied_and_agreed() -> None:
    assert copied(("a", "b"), {"a": "1", "c": "3"}) == {"a": "1"}
    assert agreed(("a", "b"), [{"a": "1"}, {"b": "2", "c": "3"}, {"a": "1"}], LABELS_MISMATCH) == {"a": "1", "b": "2"}
    with pytest.raises(ValueError, match=LABELS_MISMATCH) as exc:
        agreed(("a",), [{"a": "1"}, {}, {"a": "2"}], LABELS_MISMATCH)
    assert str(exc.value) == f"{LABELS_MISMATCH}: 'a': '1' != '2'", "Kueue's words, then the key and the values"


# --- a Job -------------------------------------------------------------------------------------------------------


def _raw_job(labels: dict[str, str], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": "train", "namespace": "ns", "uid": UID, "resourceVersion": "7",
                         "labels": {QUEUE: "lq", **labels}, "annotations": annotations or {}},
            "spec": {"parallelism": 1, "suspend": True, "template": {"spec": {"containers": [{"name": "c"}]}}}}


def test_a_jobs_workload_gets_the_listed_labels_it_has() -> None:
    jobs, _, _ = integration(before=_recorded(_document(
        integrations={"labelKeysToCopy": ["team", "absent", JOB_UID]})))
    body = jobs.workload_for(_raw_job({"team": "a", "other": "b", JOB_UID: "forged"}), NAME)
    assert body["metadata"]["labels"] == {"team": "a", JOB_UID: UID}, "Kueue's job-uid wins over a copied one"
    by_default, _, _ = integration()
    assert by_default.workload_for(_raw_job({"team": "a"}), NAME)["metadata"]["labels"] == {JOB_UID: UID}


def test_a_jobs_workload_gets_what_its_custom_metric_labels_read_under_the_gate_only() -> None:
    def made(gate: bool) -> dict[str, Any]:
        jobs, _, _ = integration(before=_recorded(_document(
            metrics={"customLabels": [TEAM, COST, BUDGET]}, featureGates={"CustomMetricLabels": gate})))
        return jobs.workload_for(_raw_job({"team": "a", "cost": "c"}, {BUDGET_KEY: "b", "other": "o"}),
                                 NAME)["metadata"]

    on, off = made(True), made(False)
    assert (on["labels"], on.get("annotations")) == ({"team": "a", JOB_UID: UID}, {BUDGET_KEY: "b"})
    assert (off["labels"], off.get("annotations")) == ({JOB_UID: UID}, None)


# --- a single Pod and a pod group --------------------------------------------------------------------------------


def _raw_pod(name: str, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None) -> dict:
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}",
                         "labels": {QUEUE: "lq", "kueue.x-k8s.io/pod-group-name": "g", **(labels or {})},
                         "annotations": {"kueue.x-k8s.io/pod-group-total-count": "2", **(annotations or {})}},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}


def test_a_pods_workload_gets_the_listed_labels_it_has() -> None:
    state = _state(integrations={"labelKeysToCopy": ["team"]}, **METRIC_ANNOTATION, **GATE_ON)
    body = pod_sync.workload_for(state, _raw_pod("p", {"team": "a", "other": "b"},
                                                 {BUDGET_KEY: "b"}), "pod-p-abcde")
    assert body["metadata"]["labels"] == {"team": "a", JOB_UID: "uid-p"}
    assert body["metadata"]["annotations"] == {BUDGET_KEY: "b"}


def test_a_groups_workload_gets_the_values_its_pods_agree_on() -> None:
    state = _state(integrations={"labelKeysToCopy": ["team", "zone"]}, **METRIC_ANNOTATION, **GATE_ON)
    body = pod_group.workload_for(state, [_raw_pod("p1", {"team": "a"}, {BUDGET_KEY: "b"}),
                                          _raw_pod("p2", {"team": "a", "zone": "z"})])
    assert body["metadata"]["labels"] == {"team": "a", "zone": "z"}, "a Pod without a key leaves it to the others"
    assert body["metadata"]["annotations"] == {"kueue.x-k8s.io/is-group-workload": "true",
                                               BUDGET_KEY: "b"}


def test_a_group_whose_pods_disagree_gets_no_workload() -> None:
    state = _state(integrations={"labelKeysToCopy": ["team"]}, **METRIC_ANNOTATION, **GATE_ON)
    with pytest.raises(ValueError, match=LABELS_MISMATCH):
        pod_group.workload_for(state, [_raw_pod("p1", {"team": "a"}), _raw_pod("p2", {"team": "b"})])
    disagreeing = [_raw_pod("p1", annotations={BUDGET_KEY: "b"}), _raw_pod("p2", annotations={BUDGET_KEY: "c"})]
    with pytest.raises(ValueError, match=ANNOTATIONS_MISMATCH):
        pod_group.workload_for(state, disagreeing)
    gate_off = pod_group.workload_for(_state(**METRIC_ANNOTATION), disagreeing)["metadata"]
    assert gate_off["annotations"] == {"kueue.x-k8s.io/is-group-workload": "true"}, "neither copied nor compared"
