"""MultiKueue's objects at the edges: Kueue's CRD bounds, each refusal naming the object and the field, and the
v1beta1 MultiKueueCluster (``spec.kubeConfig``) read as v1beta2 (``spec.clusterSource.kubeConfig``) and back."""

from __future__ import annotations

import pytest
from fixtures import fastyaml

from events import conversion
from events import objects as o
from events.errors import InvalidInput
from events.manifests import load_text


def _load(doc: dict) -> o.KObject:
    return load_text(fastyaml.safe_dump(doc), "mk.yaml").objects[0]


def _cluster(spec: dict, version: str = "v1beta2") -> dict:
    return {"apiVersion": f"kueue.x-k8s.io/{version}", "kind": "MultiKueueCluster", "metadata": {"name": "w1"},
            "spec": spec}


def test_a_cluster_and_a_config_load() -> None:
    cluster = _load(_cluster({"clusterSource": {"kubeConfig": {"location": "w1-secret"}}}))
    assert isinstance(cluster, o.MultiKueueCluster)
    assert cluster.spec.cluster_source.kube_config == o.MultiKueueKubeConfig(location="w1-secret",
                                                                             location_type="Secret")
    config = _load({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueConfig", "metadata": {"name": "c"},
                    "spec": {"clusters": ["w1", "w2"]}})
    assert isinstance(config, o.MultiKueueConfig) and config.spec.clusters == ["w1", "w2"]


@pytest.mark.parametrize(("doc", "error"), [
    (_cluster({"clusterSource": {}}), "field `spec.clusterSource`: exactly one of kubeConfig or clusterProfileRef"),
    (_cluster({"clusterSource": {"kubeConfig": {"location": "s"}, "clusterProfileRef": {"name": "p"}}}),
     "field `spec.clusterSource`: exactly one"),
    (_cluster({"clusterSource": {"kubeConfig": {"location": ""}}}),
     "field `spec.clusterSource.kubeConfig.location` must be 1 to 256 characters"),
    (_cluster({"clusterSource": {"kubeConfig": {"location": "s", "locationType": "Url"}}}),
     "field `spec.clusterSource.kubeConfig.locationType`: must be Secret or Path"),
    ({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueConfig", "metadata": {"name": "c"},
      "spec": {"clusters": []}}, "field `spec.clusters` must have 1 to 20 items"),
    ({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueConfig", "metadata": {"name": "c"},
      "spec": {"clusters": ["a", "a"]}}, 'field `spec.clusters[1]`: Duplicate value: "a"'),
    ({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueConfig", "metadata": {"name": "c"},
      "spec": {"clusters": ["a", "b", "a", "a", "b"]}},  # as kube-apiserver v1.36 lists a list-set's repeats
     '[field `spec.clusters[2]`: Duplicate value: "a", field `spec.clusters[4]`: Duplicate value: "b"]'),
    ({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueConfig", "metadata": {"name": "c"},
      "spec": {"clusters": ["a"], "quotaManagement": "Sometimes"}}, "field `spec.quotaManagement`"),
])
def test_refusals_name_the_object_and_the_field(doc: dict, error: str) -> None:
    with pytest.raises(InvalidInput, match="mk.yaml") as exc:
        _load(doc)
    assert error in str(exc.value)


def test_a_v1beta1_cluster_reads_as_v1beta2_and_back() -> None:
    v1 = _cluster({"kubeConfig": {"location": "w1-secret", "locationType": "Secret"}}, "v1beta1")
    loaded = _load(v1)
    assert loaded.spec.cluster_source.kube_config.location == "w1-secret"  # type: ignore[attr-defined]
    v2 = conversion.convert(v1, conversion.V1BETA2)
    assert v2["spec"] == {"clusterSource": {"kubeConfig": {"location": "w1-secret", "locationType": "Secret"}}}
    assert conversion.convert(v2, conversion.V1BETA1)["spec"] == v1["spec"]


def test_a_cluster_profile_cluster_keeps_its_reference_through_v1beta1() -> None:
    """Kueue's v1beta1 MultiKueueCluster carries ``spec.clusterProfileRef`` beside ``spec.kubeConfig`` only so that no
    data is lost between versions: v1beta2's ``clusterSource.clusterProfileRef`` goes there and comes back, and a
    v1beta1 object with an empty kubeconfig location names no kubeconfig in v1beta2."""
    v2 = _cluster({"clusterSource": {"clusterProfileRef": {"name": "p"}}})
    v1 = conversion.convert(v2, conversion.V1BETA1)
    assert v1["spec"]["clusterProfileRef"] == {"name": "p"} and "clusterSource" not in v1["spec"]
    assert conversion.convert(v1, conversion.V1BETA2)["spec"] == v2["spec"]
    both = _cluster({"kubeConfig": {"location": "", "locationType": "Secret"}, "clusterProfileRef": {"name": "p"}},
                    "v1beta1")
    assert conversion.convert(both, conversion.V1BETA2)["spec"] == {"clusterSource": {"clusterProfileRef": {"name": "p"}}}
