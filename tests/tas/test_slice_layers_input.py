"""Slice layers (``podsetSliceRequiredTopologyConstraints``) as they come in: a Workload's field, checked with its
path; the pod-template annotation; v1beta1, which has no such field; the generated CRD schema."""

from __future__ import annotations

import pytest

from connectors.k8s.crds import object_schema
from connectors.k8s.resources import KUEUE_RESOURCES
from events import objects as o
from events.errors import InvalidInput
from events.manifests import load_text
from projections.workloads import topology_request_from_annotations

LAYERS = "kueue.x-k8s.io/podset-slice-required-topology-constraints"


def _workload(api: str, topology_request: str) -> str:
    return f"""
apiVersion: {api}
kind: Workload
metadata: {{name: w, namespace: team}}
spec:
  queueName: q
  podSets:
  - name: main
    count: 8
    topologyRequest: {topology_request}
    template:
      spec:
        containers: [{{name: c, resources: {{requests: {{cpu: "1"}}}}}}]
"""


def test_layers_decode_outer_to_inner() -> None:
    wl = load_text(_workload("kueue.x-k8s.io/v1beta2", "{required: block, podsetSliceRequiredTopologyConstraints: "
                             "[{topology: rack, size: 4}, {topology: kubernetes.io/hostname, size: 2}]}")).objects[0]
    assert isinstance(wl, o.Workload)
    tr = wl.spec.pod_sets[0].topology_request
    assert tr is not None
    assert tr.podset_slice_required_topology_constraints == (
        o.PodSetSliceRequiredTopologyConstraint(topology="rack", size=4),
        o.PodSetSliceRequiredTopologyConstraint(topology="kubernetes.io/hostname", size=2))


@pytest.mark.parametrize(("layers", "message"), [
    ("[{topology: rack, size: 0}]", "podsetSliceRequiredTopologyConstraints[0].size`: Invalid value: 0: must be "
                                    "greater than 0"),
    ("[{topology: rack, size: 4}, {size: 2}]", "podsetSliceRequiredTopologyConstraints[1].topology` is required"),
    ("[{topology: " + "x" * 64 + ", size: 2}]",
     "podsetSliceRequiredTopologyConstraints[0].topology` must be at most 63 characters"),
    ("[{topology: a, size: 8}, {topology: b, size: 4}, {topology: c, size: 2}, {topology: d, size: 1}]",
     "podsetSliceRequiredTopologyConstraints` must have at most 3 items, has 4"),
    ("[{topology: rack, size: two}]", "podsetSliceRequiredTopologyConstraints[0].size`: expected `int`, got `str`"),
])
def test_bad_layers_are_named_with_their_field(layers: str, message: str) -> None:
    with pytest.raises(InvalidInput) as err:
        load_text(_workload("kueue.x-k8s.io/v1beta2", f"{{required: block, podsetSliceRequiredTopologyConstraints: "
                                                       f"{layers}}}"), "wl.yaml")
    assert str(err.value).startswith("wl.yaml: document 1 (Workload w): field `spec.podSets[0].topologyRequest.")
    assert str(err.value).endswith(message)


def test_v1beta1_has_no_layers() -> None:
    wl = load_text(_workload("kueue.x-k8s.io/v1beta1", "{required: block, podsetSliceRequiredTopologyConstraints: "
                             "[{topology: rack, size: 0}]}")).objects[0]
    assert isinstance(wl, o.Workload)
    tr = wl.spec.pod_sets[0].topology_request
    assert tr == o.PodSetTopologyRequest(required="block")


def test_annotation_form() -> None:
    tr = topology_request_from_annotations({
        "kueue.x-k8s.io/podset-required-topology": "block",
        LAYERS: '[{"topology":"rack","size":4},{"topology":"kubernetes.io/hostname","size":2}]'})
    assert tr == o.PodSetTopologyRequest(required="block", podset_slice_required_topology_constraints=(
        o.PodSetSliceRequiredTopologyConstraint(topology="rack", size=4),
        o.PodSetSliceRequiredTopologyConstraint(topology="kubernetes.io/hostname", size=2)))
    # slice-only: the layers alone make a request
    only = topology_request_from_annotations({LAYERS: '[{"topology":"rack","size":2}]'})
    assert only is not None and only.required is None and len(only.podset_slice_required_topology_constraints) == 1


@pytest.mark.parametrize("text", ["not json", "[]", '[{"topology":"rack","size":0}]', '{"topology":"rack"}',
                                  '[{"topology":"a","size":1},{"topology":"b","size":1},{"topology":"c","size":1},'
                                  '{"topology":"d","size":1}]'])
def test_a_malformed_annotation_is_no_request(text: str) -> None:
    # Kueue's job webhook rejects these; a template stored with one still folds, asking for nothing
    assert topology_request_from_annotations({LAYERS: text}) is None


def test_crd_schema_carries_the_field() -> None:
    wl = next(r for r in KUEUE_RESOURCES if r.kind == "Workload")
    tr = object_schema(wl)["properties"]["spec"]["properties"]["podSets"]["items"]["properties"]["topologyRequest"]
    layers = tr["properties"]["podsetSliceRequiredTopologyConstraints"]
    assert layers["type"] == "array"
    assert layers["items"]["properties"] == {"topology": {"type": "string"}, "size": {"type": "integer",
                                                                                  "format": "int32"}}
