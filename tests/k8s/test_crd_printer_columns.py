"""What ``kubectl get`` prints for each kueue.x-k8s.io kind: the CRDs carry Kueue's own printer columns (name,
type, JSONPath, priority, description) in both served versions, and no categories, as Kueue's CRDs do.

The table is Kueue's ``+kubebuilder:printcolumn`` markers on the root types of ``apis/kueue/v1beta2`` and
``apis/kueue/v1beta1``. A kind without markers has no ``additionalPrinterColumns`` at all (the apiserver then
shows its default Age column)."""

from __future__ import annotations

from typing import Any

import pytest

from connectors.k8s.crds import SERVED_VERSIONS, all_crds
from connectors.k8s.resources import KUEUE_RESOURCES

AGE = ("Age", "date", ".metadata.creationTimestamp", "Time this workload was created", 0)
PENDING = ("Pending Workloads", "integer", ".status.pendingWorkloads", "Number of pending workloads", 0)
UNFINISHED = "Number of admitted workloads that haven't finished yet"


def _cluster_queue(cohort_path: str) -> list[tuple[str, str, str, str, int]]:
    return [
        ("Cohort", "string", cohort_path, "Cohort that this ClusterQueue belongs to", 0),
        ("Strategy", "string", ".spec.queueingStrategy",
         "The queueing strategy used to prioritize workloads", 1),
        PENDING,
        ("Admitted Workloads", "integer", ".status.admittedWorkloads", UNFINISHED, 1),
    ]


_SAME_IN_BOTH: dict[str, list[tuple[str, str, str, str, int]]] = {
    "Workload": [
        ("Queue", "string", ".spec.queueName", "Name of the queue this workload was submitted to", 0),
        ("Reserved in", "string", ".status.admission.clusterQueue",
         "Name of the ClusterQueue where the workload is reserving quota", 0),
        ("Admitted", "string", ".status.conditions[?(@.type=='Admitted')].status", "Admission status", 0),
        ("Finished", "string", ".status.conditions[?(@.type=='Finished')].status", "Workload finished", 0),
        AGE,
    ],
    "LocalQueue": [  # no Age column in Kueue's
        ("ClusterQueue", "string", ".spec.clusterQueue", "Backing ClusterQueue", 0),
        PENDING,
        ("Admitted Workloads", "integer", ".status.admittedWorkloads", f"{UNFINISHED}.", 0),
    ],
    "WorkloadPriorityClass": [("Value", "integer", ".value", "Value of workloadPriorityClass's Priority", 0)],
    "MultiKueueCluster": [  # Kueue #4335
        ("Connected", "string", ".status.conditions[?(@.type=='Active')].status",
         "MultiKueueCluster is connected", 0),
        AGE,
    ],
}
EXPECTED: dict[tuple[str, str], list[tuple[str, str, str, str, int]]] = {
    **{(kind, v): rows for kind, rows in _SAME_IN_BOTH.items() for v in SERVED_VERSIONS},
    ("ClusterQueue", "v1beta2"): _cluster_queue(".spec.cohortName"),
    ("ClusterQueue", "v1beta1"): _cluster_queue(".spec.cohort"),
}
"""(name, type, JSONPath, description, priority) per kind and version; a kind absent here (ResourceFlavor,
Cohort, AdmissionCheck, Topology, ProvisioningRequestConfig, MultiKueueConfig) has none in Kueue's CRD."""


def _as_rows(columns: list[dict[str, Any]]) -> list[tuple[str, str, str, str, int]]:
    assert all(set(c) <= {"name", "type", "jsonPath", "description", "priority"} for c in columns), columns
    assert all(c.get("priority") != 0 for c in columns), "a zero priority is left out, as controller-gen does"
    return [(c["name"], c["type"], c["jsonPath"], c.get("description", ""), c.get("priority", 0))
            for c in columns]


@pytest.mark.parametrize("kind", [r.kind for r in KUEUE_RESOURCES])
@pytest.mark.parametrize("version", SERVED_VERSIONS)
def test_each_kind_prints_kueues_columns(kind: str, version: str) -> None:
    (served,) = [v for d in all_crds() if d["spec"]["names"]["kind"] == kind
                 for v in d["spec"]["versions"] if v["name"] == version]
    expected = EXPECTED.get((kind, version))
    if expected is None:
        assert "additionalPrinterColumns" not in served, f"{kind} {version}"
    else:
        assert _as_rows(served.get("additionalPrinterColumns", [])) == expected, f"{kind} {version}"


def test_no_kind_is_in_a_category() -> None:
    assert [d["spec"]["names"]["kind"] for d in all_crds() if "categories" in d["spec"]["names"]] == []
