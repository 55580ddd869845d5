"""A simulator scenario (Kueue's perf-generator format) damaged at a random place is either refused with an error
naming the file, or parsed: never another exception. The corpus is the bundled scenarios."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fixtures import fastyaml
from fixtures.damage import KEYS, damage
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events.errors import InvalidInput
from kueue_es.simulator.config import Scenario, parse

BUNDLED = sorted((Path(__file__).resolve().parents[2] / "kueue_es" / "simulator" / "scenarios").glob("*.yaml"))
CORPUS = [fastyaml.safe_load(p.read_text()) for p in BUNDLED]
SOURCE = "fuzz-scenario.yaml"


@st.composite
def _damaged(draw: st.DrawFn) -> dict[str, Any]:
    keys = KEYS | st.sampled_from(["count", "className", "nominalQuota", "topology", "levels", "workloadsSets"])
    return damage(draw, draw(st.sampled_from(CORPUS)), keys)


def test_the_corpus_parses() -> None:
    assert len(CORPUS) >= 4
    for doc in CORPUS:
        assert isinstance(parse(doc, SOURCE), Scenario)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_a_damaged_scenario_is_refused_naming_the_file_or_parsed(data: st.DataObject) -> None:
    damaged = data.draw(_damaged())
    try:
        scenario = parse(damaged, SOURCE)
    except InvalidInput as exc:
        assert str(exc).startswith(f"{SOURCE}: "), str(exc)
        return
    assert isinstance(scenario, Scenario)
