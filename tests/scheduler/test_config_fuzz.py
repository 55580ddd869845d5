"""A Kueue Configuration damaged at a random place is either refused with an error naming the file (or, valid,
turns on a gate whose check refuses one of the objects, naming it), or taken whole: recorded in the state (where the fold reads the recorded document itself, e.g. waitForPodsReady and
Fair Sharing) and scheduled under until the scheduler settles, as ``kueue-es schedule --config`` does. The
corpus is every scheduler scenario that carries a ``config``, with its objects."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from fixtures import fastyaml
from fixtures.damage import KEYS, damage, dump
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events.errors import InvalidInput
from events.manifests import UNGATED, load_file
from kueue_es.scheduler import settle
from kueue_es.scheduler.config import load_config
from kueue_es.statefile import load_state

SCENARIOS = sorted((Path(__file__).resolve().parent / "scenarios").glob("*.yaml"))
CONFIG_KEYS = KEYS | st.sampled_from(["waitForPodsReady", "fairSharing", "admissionFairSharing", "featureGates",
                                      "resources", "objectRetentionPolicies", "timeout", "preemptionStrategies"])


def _corpus() -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    out = []
    for path in SCENARIOS:
        spec = fastyaml.safe_load(path.read_text()) or {}
        if spec.get("config") and spec.get("objects"):
            out.append((spec["config"], spec["objects"]))
    return out


CORPUS = _corpus()


@st.composite
def damaged(draw: st.DrawFn) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    config, objects = draw(st.sampled_from(CORPUS))
    return damage(draw, config, CONFIG_KEYS), objects


def test_the_corpus_has_configurations() -> None:
    assert len(CORPUS) >= 20


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(damaged())
def test_a_damaged_configuration_is_refused_naming_the_file_or_taken_whole(
        case: tuple[dict[str, Any], list[dict[str, Any]]]) -> None:
    config, objects = case
    config_text, objects_text = dump([config]), dump(objects)
    if config_text is None or objects_text is None:
        return
    with tempfile.TemporaryDirectory() as d:
        config_path, state_path = Path(d) / "config.yaml", Path(d) / "state.yaml"
        config_path.write_text(config_text)
        state_path.write_text(objects_text)
        try:
            loaded = load_state(str(state_path), str(config_path))
        except InvalidInput as exc:
            if str(config_path) not in str(exc):  # a valid configuration whose gates refuse an object that the
                # scenario's own one lets through: a check Kueue's webhooks make only under a gate
                load_config(load_file(str(config_path)).configs[0], str(config_path))
                assert load_file(str(state_path), checks=UNGATED).objects, str(exc)
                assert str(state_path) in str(exc), str(exc)
            return
    settle(loaded.state, loaded.config, loaded.now, max_batches=50)
