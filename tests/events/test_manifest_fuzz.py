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

_odd_strings = st.sampled_from(["", "0", "-1", "1e400", "0.0001m", "1Gi", "100m", "NaN", "x" * 300, "a/b",
                                "True", "Never", "Any", "kueue.x-k8s.io/v1beta2", "2024-01-01T00:00:00Z",
                                "not-a-time", "-5s", "9" * 30])
_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(), st.text(max_size=8),
                     _odd_strings)
_values = st.recursive(_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)), max_leaves=6)


def _paths(node: Any, at: tuple = ()) -> list[tuple]:
    """Every place in ``node``: the path to it, as keys and indices."""
    out = [at]
    if isinstance(node, dict):
        for k in sorted(node, key=str):
            out += _paths(node[k], (*at, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*at, i))
    return out


_odd_ints = st.sampled_from([-1, 0, 1, 2**31, 2**53 + 1, 2**63 - 1, 2**63, 2**64, -(2**63)])


@st.composite
def damaged(draw: st.DrawFn) -> list[dict[str, Any]]:
    objects = yaml.safe_load(yaml.safe_dump(draw(st.sampled_from(CORPUS))))  # a deep copy
    pick = draw(st.randoms(use_true_random=False))  # every place as likely as any other, however deep
    target = pick.randrange(len(objects))
    path = pick.choice(_paths(objects[target])[1:] or [()])
    how = draw(st.sampled_from(["remove", "replace", "add", "tweak"]))
    parent: Any = objects[target]
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1] if path else None
    node = parent[last] if path else parent
    if how == "remove" and path:
        del parent[last]
    elif how == "tweak" and path and not isinstance(node, dict | list):
        # the same type, an odd value: what validation by type alone lets through
        if isinstance(node, bool):
            parent[last] = not node
        elif isinstance(node, int | float):
            parent[last] = draw(_odd_ints)
        else:
            parent[last] = draw(_odd_strings)
    elif how in ("replace", "tweak") and path:
        parent[last] = draw(_values)
    elif isinstance(node, dict):
        node[draw(st.text(min_size=1, max_size=12) | st.sampled_from(["status", "spec", "metadata"]))] = draw(_values)
    elif isinstance(node, list):
        node.append(draw(_values) if not node else draw(st.sampled_from(node)))
    elif path:
        parent[last] = draw(_values)
    return objects


def _yaml(objects: list[dict[str, Any]]) -> str | None:
    try:
        return yaml.safe_dump_all(objects, sort_keys=False)
    except yaml.YAMLError:  # a value PyYAML itself cannot write
        return None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(damaged())
def test_damage_is_refused_in_one_line_or_taken_whole(objects: list[dict[str, Any]]) -> None:
    text = _yaml(objects)
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
