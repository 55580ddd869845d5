"""A clock (``projections.deadlines.DueIndex``) answers what a plain ``key -> time`` dict answers, whenever it
is first read in order and however its entries move afterwards."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from projections.deadlines import DueIndex

KEYS = st.sampled_from(["a", "b", "c", "d", "e"])
OPS = st.lists(st.one_of(
    st.tuples(st.just("set"), KEYS, st.one_of(st.none(), st.integers(0, 20))),
    st.tuples(st.just("read"), KEYS, st.integers(-1, 21)),
), max_size=60)


@settings(max_examples=300, deadline=None)  # no per-example timing: workers share the CPUs
@given(OPS)
def test_a_clock_is_a_dict_kept_in_time_order(ops) -> None:
    clock, model = DueIndex(), {}
    for op, key, value in ops:
        if op == "set":
            clock.set(key, value)
            if value is None:
                model.pop(key, None)
            else:
                model[key] = value
        else:
            assert clock.due(value) == [k for t, k in sorted((t, k) for k, t in model.items()) if t <= value]
            assert list(clock.ordered()) == sorted((t, k) for k, t in model.items())
            assert clock.first() == (min(model.values()) if model else None)
        assert clock.at == model and len(clock) == len(model)
        assert (key in clock) == (key in model) and clock.get(key) == model.get(key)
