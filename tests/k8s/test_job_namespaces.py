"""Which namespaces' Jobs the Job integration manages: Kueue's ``managedJobsNamespaceSelector``, by default every
namespace but ``kube-system`` and Kueue's own, respected even for Jobs with a queue name (no cluster needed)."""

from __future__ import annotations

import pytest
from fixtures.jobs import integration, job, namespace, workload

from events import schema as ev
from events.errors import InvalidInput
from kueue_es.scheduler.config import DEFAULT, load_config
from projections.clusterqueues import selector_matches


def _config(**fields: object) -> ev.ConfigRecorded:
    return ev.ConfigRecorded(time=1, writer="test", id="c", document={
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", **fields})


def _managed(selector_of, name: str, **labels: str) -> bool:
    return selector_matches(selector_of.managed_jobs_selector, dict(namespace(name, **labels).metadata.labels))


def test_by_default_every_namespace_but_kube_system_and_kueues_own() -> None:
    assert _managed(DEFAULT, "team-a")
    assert not _managed(DEFAULT, "kube-system") and not _managed(DEFAULT, "kueue-system")
    moved = load_config({"namespace": "batch-admission"})
    assert _managed(moved, "kueue-system") and not _managed(moved, "batch-admission")


@pytest.mark.asyncio
async def test_a_job_in_a_namespace_the_selector_leaves_out_is_left_alone_until_the_namespace_is_labelled() -> None:
    selector = {"matchLabels": {"kueue-managed": "true"}}
    jobs, mirror, appended = integration(workload(count=1), job(parallelism=1, completions=1),
                                         before=(_config(managedJobsNamespaceSelector=selector),))
    await jobs.reconcile("ns/train")
    assert appended == [], "not managed: its Workload gets nothing (by default it would get WaitForStart)"
    mirror.dirty_jobs.clear()
    labelled = namespace("ns", **{"kueue-managed": "true"})
    mirror.apply(ev.Record(mirror.offset + 1, ev.ObjectUpserted(time=2, key=labelled.key, obj=labelled)))
    assert mirror.dirty_jobs == {"ns/train"}, "the namespace's change makes its Jobs dirty"
    await jobs.reconcile("ns/train")
    assert [type(e).__name__ for e in appended] == ["PodsReadyChanged"]


@pytest.mark.asyncio
async def test_a_job_whose_namespace_the_log_has_not_seen_is_skipped() -> None:
    jobs, mirror, appended = integration(workload(count=1), job(parallelism=1, completions=1))
    mirror.state.namespaces.pop("ns")
    await jobs.reconcile("ns/train")
    assert appended == []


@pytest.mark.asyncio
@pytest.mark.parametrize(("frameworks", "managed"), [(["pod"], False), (["batch/job", "pod"], True), ([], True)])
async def test_a_job_is_left_alone_unless_batch_job_is_among_the_frameworks(frameworks: list, managed: bool) -> None:
    """Kueue runs the Job reconciler only for a framework its Configuration lists (none listed: batch/job)."""
    jobs, _, appended = integration(workload(count=1), job(parallelism=1, completions=1),
                                    before=(_config(integrations={"frameworks": frameworks}),))
    await jobs.reconcile("ns/train")
    assert [type(e).__name__ for e in appended] == (["PodsReadyChanged"] if managed else [])


@pytest.mark.parametrize(("selector", "error"), [
    ({"matchExpressions": [{"key": "a", "operator": "Equals", "values": ["b"]}]},
     'field `managedJobsNamespaceSelector.matchExpressions[0].operator`: Invalid value: "Equals": not a valid '
     "selector operator"),
    ({"matchExpressions": [{"key": "a", "operator": "In"}]},
     "field `managedJobsNamespaceSelector.matchExpressions[0].values`: Required value: must be specified when "
     "`operator` is 'In' or 'NotIn'"),
    ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist", "values": ["b"]}]},
     "`managedJobsNamespaceSelector.matchExpressions[0].values`: Forbidden: may not be specified when `operator` is "
     "'Exists' or 'DoesNotExist'"),
    ({"matchLabels": ["a"]}, "field `managedJobsNamespaceSelector.matchLabels`: Expected `object`"),
])
def test_an_invalid_selector_is_refused_naming_the_field(selector: dict, error: str) -> None:
    with pytest.raises(InvalidInput, match=error.replace("[", r"\[").replace("]", r"\]")):
        load_config({"managedJobsNamespaceSelector": selector}, "kueue.yaml")
