"""Kueue's internal-only gates (``gates.INTERNAL_ONLY``) switch how Kueue works inside, not what it decides or
writes. The cache-only ones (``gates.CACHE_ONLY``: TASCacheNodeMatchResults, TASCachingRemainingResources,
TASCacheTopologyTree, VectorizedResourceRequests) change how its TAS snapshot and scheduler keep what they compute;
WorkloadRequestUseMergePatch (``gates.PATCH_STYLE_ONLY``) changes whether a Workload's status goes out as a merge
patch or a server-side apply, not the status. kueue-es keeps no such cache and sends one kind of write, so it
models both settings alike: every TAS scenario decides the same with the cache gates off as on, every scenario
writes the same statuses with WorkloadRequestUseMergePatch on as off, and setting any of them away from its
default draws no warning that it is ignored."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixtures import fastyaml

from kueue_es.commands.schedule import schedule
from projections import gates

SCENARIOS = Path(__file__).parent / "scenarios"
RUN = sorted(p for p, spec in ((p, fastyaml.safe_load(p.read_text())) for p in SCENARIOS.glob("*.yaml"))
             if "cycles" in spec and "refused" not in spec)
"""The scenarios run as ``kueue-es schedule`` runs them (a timeline's steps are not)."""
TAS = [p for p in RUN if "tas" in p.stem]


def _run(spec: dict, tmp_path: Path, name: str, settings: dict[str, bool]) -> dict:
    state = tmp_path / f"{name}-state.yaml"
    state.write_text(fastyaml.safe_dump_all(spec["objects"]))
    config = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", **(spec.get("config") or {})}
    config["featureGates"] = {**config.get("featureGates", {}), **settings}
    config_file = tmp_path / f"{name}-config.yaml"
    config_file.write_text(fastyaml.safe_dump(config))
    return schedule(str(state), spec.get("cycles", 1), str(config_file))


def test_there_are_scenarios_to_compare() -> None:
    assert len(TAS) >= 10
    assert len(RUN) >= 50


@pytest.mark.parametrize("case", TAS, ids=[c.stem for c in TAS])
def test_a_tas_scenario_decides_alike_with_the_cache_gates_on_and_off(case: Path, tmp_path: Path) -> None:
    spec = fastyaml.safe_load(case.read_text())
    on = _run(spec, tmp_path, "on", dict.fromkeys(gates.CACHE_ONLY, True))
    off = _run(spec, tmp_path, "off", dict.fromkeys(gates.CACHE_ONLY, False))
    assert on == off
    assert on["items"], "the scenario decides something"


@pytest.mark.parametrize("case", RUN, ids=[c.stem for c in RUN])
def test_a_scenario_writes_alike_whichever_way_workload_statuses_are_patched(case: Path, tmp_path: Path) -> None:
    """The statuses compared are the ones the writer sends (``kueue-es schedule`` prints what it would write)."""
    spec = fastyaml.safe_load(case.read_text())
    merge = _run(spec, tmp_path, "merge", dict.fromkeys(gates.PATCH_STYLE_ONLY, True))
    apply = _run(spec, tmp_path, "apply", dict.fromkeys(gates.PATCH_STYLE_ONLY, False))
    assert merge == apply


@pytest.mark.parametrize("gate", sorted(gates.INTERNAL_ONLY))
def test_an_internal_gate_set_either_way_is_modelled_not_ignored(gate: str) -> None:
    default = gates.GATES[gate][1]
    for value in (default, not default):
        assert gates.errors({gate: value}) == []
        assert gates.ignored({gate: value}) == []
