"""Kueue's cache-only gates (``gates.CACHE_ONLY``: TASCacheNodeMatchResults, TASCachingRemainingResources,
TASCacheTopologyTree, VectorizedResourceRequests) switch how its TAS snapshot and scheduler keep what they compute,
not what they decide or write. kueue-es keeps no such cache, so it models both settings alike: every TAS scenario
decides the same with all of them off as with all of them on, and setting them away from their default draws no
warning that they are ignored."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kueue_es.commands.schedule import schedule
from projections import gates

SCENARIOS = Path(__file__).parent / "scenarios"
CASES = sorted(p for p in SCENARIOS.glob("*tas*.yaml") if "cycles" in yaml.safe_load(p.read_text())
               and "refused" not in yaml.safe_load(p.read_text()))


def _run(spec: dict, tmp_path: Path, name: str, cache_gates: bool) -> dict:
    state = tmp_path / f"{name}-state.yaml"
    state.write_text(yaml.safe_dump_all(spec["objects"]))
    config = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", **(spec.get("config") or {})}
    config["featureGates"] = {**config.get("featureGates", {}), **dict.fromkeys(gates.CACHE_ONLY, cache_gates)}
    config_file = tmp_path / f"{name}-config.yaml"
    config_file.write_text(yaml.safe_dump(config))
    return schedule(str(state), spec.get("cycles", 1), str(config_file))


def test_there_are_tas_scenarios_to_compare() -> None:
    assert len(CASES) >= 10


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_a_tas_scenario_decides_alike_with_the_cache_gates_on_and_off(case: Path, tmp_path: Path) -> None:
    spec = yaml.safe_load(case.read_text())
    on, off = _run(spec, tmp_path, "on", True), _run(spec, tmp_path, "off", False)
    assert on == off
    assert on["items"], "the scenario decides something"


@pytest.mark.parametrize("gate", sorted(gates.CACHE_ONLY))
def test_a_cache_gate_set_either_way_is_modelled_not_ignored(gate: str) -> None:
    default = gates.GATES[gate][1]
    for value in (default, not default):
        assert gates.errors({gate: value}) == []
        assert gates.ignored({gate: value}) == []
