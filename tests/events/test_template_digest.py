"""The digest of a pod set's whole template (:mod:`events.template_digest`): equal for templates Kueue's
``equality.Semantic`` holds equal, different where a field the fold's view leaves out differs, the same in every
process; and every path that turns a Workload into an event stamps it."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from connectors.k8s.mirror import Mirror
from connectors.k8s.resources import BY_KIND
from connectors.k8s.watch import Watcher
from events import objects as o
from events.filelog import FileLog
from events.manifests import load_text
from events.template_digest import template_digest
from kueue_es.statefile import ObjectFolder
from projections.cluster import ClusterState

REPO = Path(__file__).resolve().parents[2]

BASE: dict[str, Any] = {
    "metadata": {"labels": {"app": "train", "team": "a"}},
    "spec": {
        "serviceAccountName": "trainer",
        "containers": [{"name": "c", "image": "img", "args": ["--epochs", "3"], "env": [{"name": "A", "value": "1"}],
                        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "1Gi"}}}],
        "volumes": [{"name": "data", "emptyDir": {"sizeLimit": "1Gi"}}],
    },
}


def _with(path: list[Any], value: Any) -> dict[str, Any]:
    t = copy.deepcopy(BASE)
    node: Any = t
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    return t


def _reordered(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _reordered(node[k]) for k in reversed(list(node))}
    if isinstance(node, list):
        return [_reordered(v) for v in node]
    return node


def test_equal_as_kueue_compares_templates() -> None:
    d = template_digest(BASE)
    assert len(d) == 32 and int(d, 16) >= 0
    assert template_digest(_reordered(BASE)) == d  # key order
    assert template_digest(_with(["spec", "initContainers"], [])) == d  # an empty list is no list
    assert template_digest(_with(["spec", "nodeSelector"], {})) == d  # an empty map is no map
    assert template_digest(_with(["spec", "hostname"], None)) == d  # null is absent
    assert template_digest(_with(["metadata", "creationTimestamp"], None)) == d  # as the apiserver writes it
    assert template_digest(_with(["spec", "securityContext"], {"runAsUser": None})) == d  # empty once nulls drop
    # quantities by value
    assert template_digest(_with(["spec", "containers", 0, "resources", "requests", "cpu"], "1000m")) == d
    assert template_digest(_with(["spec", "containers", 0, "resources", "requests", "cpu"], 1)) == d
    assert template_digest(_with(["spec", "containers", 0, "resources", "limits", "memory"], "1024Mi")) == d
    assert template_digest(_with(["spec", "volumes", 0, "emptyDir", "sizeLimit"], "1073741824")) == d
    # what a producer stamped is never part of the template
    assert template_digest(_with(["kueueEsDigest"], "0" * 32)) == d


@pytest.mark.parametrize(("path", "value"), [
    (["spec", "containers", 0, "args"], ["--epochs", "4"]),
    (["spec", "containers", 0, "command"], ["python"]),
    (["spec", "containers", 0, "env"], [{"name": "A", "value": "2"}]),
    (["spec", "containers", 0, "volumeMounts", 0, "mountPath"], "/other"),
    (["spec", "volumes"], [{"name": "data", "persistentVolumeClaim": {"claimName": "pvc"}}]),
    (["spec", "volumes", 0, "emptyDir", "sizeLimit"], "2Gi"),
    (["spec", "serviceAccountName"], "other"),
    (["spec", "topologySpreadConstraints"], [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]),
    (["spec", "automountServiceAccountToken"], False),  # a pointer: false is not absent
    (["spec", "containers", 0, "resources", "requests", "cpu"], "1001m"),
    (["metadata", "labels", "team"], "b"),
])
def test_different_where_the_templates_differ(path: list[Any], value: Any) -> None:
    assert template_digest(_with(path, value)) != template_digest(BASE)


_CHILD = """
import json, sys
from events.template_digest import template_digest
print(template_digest(json.loads(sys.argv[1])))
"""


def test_the_same_in_every_process() -> None:
    """No dependence on the string hash seed (nor on dict order: keys are sorted)."""
    wide = _with(["metadata", "annotations"], {f"k{i}": str(i) for i in range(50)})
    expected = template_digest(wide)
    text = msgspec.json.encode(wide).decode()
    for seed in ("0", "1", "4242"):
        res = subprocess.run([sys.executable, "-c", _CHILD, text], env={**os.environ, "PYTHONHASHSEED": seed},
                             capture_output=True, text=True, timeout=60, cwd=REPO)
        assert res.returncode == 0, res.stderr
        assert res.stdout.strip() == expected, seed


# --- every producer stamps it ------------------------------------------------------------------------------------


def _workload(templates: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "w", "namespace": "team", "uid": "u", "resourceVersion": "1",
                         "creationTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {"queueName": "lq", "podSets": [{"name": f"ps{i}", "count": 1, "template": t}
                                                     for i, t in enumerate(templates)]}}


TWO = [BASE, _with(["spec", "containers", 0, "args"], ["--epochs", "4"])]
WANT = [template_digest(t) for t in TWO]


def _digests(obj: Any) -> list[str | None]:
    assert isinstance(obj, o.Workload)
    return [ps.template.digest for ps in obj.spec.pod_sets]


def test_the_watch_stamps_the_workloads_it_decodes() -> None:
    async def emit(events: Any) -> None:
        return None

    watcher = Watcher(None, Mirror(ClusterState()), emit)  # type: ignore[arg-type]  # decoding needs no client
    obj = watcher._decode(BY_KIND["Workload"], msgspec.json.encode(_workload(TWO)))
    assert _digests(obj) == WANT
    # the upsert it emits carries them
    event = watcher._upsert(BY_KIND["Workload"], obj, 0)  # type: ignore[arg-type]
    assert event is not None and _digests(event.obj) == WANT


def test_manifests_stamp_the_workloads_they_load() -> None:
    """What ``kueue-es schedule``, the scenario tests and ``kueue-es import`` read."""
    manifest = load_text(msgspec.yaml.encode(_workload(TWO)).decode())
    assert _digests(manifest.objects[0]) == WANT


def test_an_object_folder_stamps_the_workloads_it_folds() -> None:
    folder = ObjectFolder(0)
    folder.put(_workload(TWO))
    assert [t.digest for t in folder.state.pod_templates["team/w"]] == WANT


def test_import_appends_the_workloads_stamped(tmp_path: Path) -> None:
    src = tmp_path / "wl.yaml"
    src.write_bytes(msgspec.yaml.encode(_workload(TWO)))
    log_dir = tmp_path / "log"
    res = subprocess.run([sys.executable, "-m", "kueue_es", "import", "-f", str(src), "--log", str(log_dir)],
                         capture_output=True, text=True, timeout=120, cwd=REPO)
    assert res.returncode == 0, res.stderr
    log = FileLog.open(log_dir, readonly=True)
    events = [r.event for batch in log.scan() for r in batch]
    assert _digests(events[-1].obj) == WANT
