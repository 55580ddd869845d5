"""Bad input never gets past the door half-way: any damage to a valid manifest is either refused with an error
naming the source and the document, or accepted as objects the whole pipeline takes.

The corpus is the scheduler scenarios' ``objects`` (every kind, TAS, admission checks, ProvisioningRequests).
One object is damaged at a random place: a field removed, a value replaced by one of another type or shape, a
field added. Accepted objects then go where imported objects go: through the log's codec (decoded lazily, as
a replay reads them) into the fold, which must agree with a fold of the objects themselves, and through the
scheduler until it settles (``kueue-es schedule``'s path). An exception there would be a poison event: once
in the log, every replay would stop at it.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from fixtures.damage import KEYS, damage, dump
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events import schema as ev
from events.codec import decode_batch, encode_batch
from events.errors import InvalidInput
from events.manifests import load_text
from kueue_es.scheduler import settle
from kueue_es.statefile import load_state
from projections.cluster import ClusterState
from projections.snapshot import digest

SCENARIOS = sorted((Path(__file__).resolve().parents[1] / "scheduler" / "scenarios").glob("*.yaml"))
SOURCE = "fuzz.yaml"


def _corpus() -> list[list[dict[str, Any]]]:
    out = []
    for path in SCENARIOS:
        objects = (yaml.safe_load(path.read_text()) or {}).get("objects") or []
        if objects:
            out.append(objects)
    return out


CORPUS = _corpus()


@st.composite
def damaged(draw: st.DrawFn) -> list[dict[str, Any]]:
    objects = list(draw(st.sampled_from(CORPUS)))
    target = draw(st.integers(0, len(objects) - 1))
    objects[target] = damage(draw, objects[target], KEYS | st.sampled_from(["status", "spec", "metadata"]))
    return objects


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(damaged())
def test_damage_is_refused_naming_the_document_or_taken_whole(objects: list[dict[str, Any]]) -> None:
    text = dump(objects)
    if text is None:
        return
    try:
        manifest = load_text(text, SOURCE)
    except InvalidInput as exc:  # the command line prints it on one line (tests/cli/test_cli_errors.py)
        assert str(exc).startswith(f"{SOURCE}: document "), str(exc)
        return

    # through the log's codec, decoded lazily as a replay decodes, into the fold
    t = 1_704_067_200_000
    events = [ev.ObjectUpserted(time=t, key=obj.key, uid=obj.metadata.uid or obj.key, obj=obj)
              for obj in manifest.objects]
    direct, replayed = ClusterState(), ClusterState()
    for r in decode_batch(encode_batch(events), 0, None, 0, lazy=False):
        direct.apply(r)
    for r in decode_batch(encode_batch(events), 0, None, 0, lazy=True):
        replayed.apply(r)
    assert digest(replayed) == digest(direct)

    # and through the scheduler, as `kueue-es schedule -f` takes the file
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / SOURCE
        path.write_text(text)
        try:
            loaded = load_state(str(path))
        except InvalidInput:  # e.g. an object given twice once its name was damaged into another's
            return
    settle(loaded.state, loaded.config, loaded.now, max_batches=50)


@pytest.mark.parametrize("objects", CORPUS[:3], ids=[p.stem for p in SCENARIOS[:3]])
def test_the_corpus_itself_is_taken(objects: list[dict[str, Any]]) -> None:
    assert load_text(yaml.safe_dump_all(objects), SOURCE).objects
