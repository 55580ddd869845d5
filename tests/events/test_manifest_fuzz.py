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
from fixtures import fastyaml
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
        objects = (fastyaml.safe_load(path.read_text()) or {}).get("objects") or []
        if objects:
            out.append(objects)
    return out


CORPUS = _corpus()

CONVERSION_CASES = Path(__file__).resolve().parents[1] / "k8s" / "conversion_cases.yaml"
V1BETA1 = [{"apiVersion": "kueue.x-k8s.io/v1beta1", **case["v1beta1"]}
           for case in fastyaml.safe_load(CONVERSION_CASES.read_text()) if "v1beta1" in case]
"""Kueue's v1beta1 objects (the conversion golden cases): ``import`` converts them to v1beta2 first."""


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


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_a_damaged_v1beta1_object_is_refused_naming_the_document_or_converted_and_folded(data: st.DataObject) -> None:
    doc = data.draw(st.sampled_from(V1BETA1))
    text = dump([damage(data.draw, doc, KEYS | st.sampled_from(["spec", "status", "cohort", "admissionChecks"]))])
    if text is None:
        return
    try:
        manifest = load_text(text, SOURCE)
    except InvalidInput as exc:
        assert str(exc).startswith(f"{SOURCE}: document 1"), str(exc)
        return
    state = ClusterState()
    events = [ev.ObjectUpserted(time=1_704_067_200_000, key=obj.key, uid=obj.key, obj=obj) for obj in manifest.objects]
    for r in decode_batch(encode_batch(events), 0, None, 0, lazy=True):
        state.apply(r)


def test_most_of_the_v1beta1_corpus_is_taken() -> None:
    """Some golden cases are fragments (a Workload without pod sets); the property needs whole objects too."""
    taken = 0
    for doc in V1BETA1:
        try:
            load_text(dump([doc]) or "", SOURCE)
            taken += 1
        except InvalidInput:
            pass
    assert taken >= len(V1BETA1) // 2 >= 10


@pytest.mark.parametrize("objects", CORPUS[:3], ids=[p.stem for p in SCENARIOS[:3]])
def test_the_corpus_itself_is_taken(objects: list[dict[str, Any]]) -> None:
    assert load_text(fastyaml.safe_dump_all(objects), SOURCE).objects
