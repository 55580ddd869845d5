"""The flavor assigner's quota messages: Kueue's quantities, and recorded ones read by value."""

from __future__ import annotations

import pytest

from events.quantity import format_quantity
from kueue_es.scheduler.quota_messages import canonical_message, over_capacity, unused_quota

G, KI = 10**9, 1024


def test_amounts_are_written_as_kueue_writes_them() -> None:
    assert unused_quota("memory", "default", G) == \
        "insufficient unused quota for memory in flavor default, 1G more needed"
    assert unused_quota("cpu", "spot", 1_000_000) == "insufficient unused quota for cpu in flavor spot, 1k more needed"
    assert unused_quota("cpu", "spot", 500) == "insufficient unused quota for cpu in flavor spot, 500m more needed"
    assert over_capacity("memory", "default", G, G, 1_500_000_000) == (
        "insufficient quota for memory in flavor default, previously considered podsets requests (1G) + current "
        "podset request (1G) > maximum capacity (1500M)")
    # the first pod set too: Kueue has one wording since it named the previously considered pod sets
    assert over_capacity("cpu", "default", 0, 6000, 4000) == (
        "insufficient quota for cpu in flavor default, previously considered podsets requests (0) + current "
        "podset request (6) > maximum capacity (4)")


# (old text, new text): messages as logs recorded before the change hold them, and as the scheduler writes them now
RECORDED = [
    (f"insufficient unused quota for memory in flavor default, {format_quantity('memory', G)} more needed",
     unused_quota("memory", "default", G)),
    (f"insufficient unused quota for cpu in flavor on-demand, {format_quantity('cpu', 10**6)} more needed",
     unused_quota("cpu", "on-demand", 10**6)),
    ("insufficient quota for memory in flavor a, previously considered podsets requests (1000000000) + current "
     "podset request (2000000000) > maximum capacity (1500000000)",
     over_capacity("memory", "a", G, 2 * G, 1_500_000_000)),
    # the older wording for a first pod set, with old and with Kueue's amounts
    ("insufficient quota for memory in flavor a, request > maximum capacity (2000000000 > 1500000000)",
     over_capacity("memory", "a", 0, 2 * G, 1_500_000_000)),
    ("insufficient quota for cpu in flavor a, request > maximum capacity (6 > 4)", over_capacity("cpu", "a", 0, 6000, 4000)),
]


@pytest.mark.parametrize(("old", "new"), RECORDED)
def test_recorded_amounts_read_as_what_the_scheduler_writes_now(old: str, new: str) -> None:
    assert old != new
    message = f"couldn't assign flavors to pod set main: {old}, flavor b doesn't match node affinity"
    assert canonical_message(message) == f"couldn't assign flavors to pod set main: {new}, flavor b doesn't match node affinity"
    assert canonical_message(new) == new


def test_several_reasons_in_one_message_each_read_by_value() -> None:
    old = ("couldn't assign flavors to pod set main: insufficient unused quota for memory in flavor a, 1000000000 "
           "more needed, insufficient unused quota for memory in flavor b, 2000 more needed; couldn't assign "
           "flavors to pod set workers: insufficient unused quota for cpu in flavor a, 1000 more needed. Pending "
           "the preemption of 2 workload(s)")
    assert canonical_message(old) == (
        f"couldn't assign flavors to pod set main: {unused_quota('memory', 'a', G)}, "
        f"{unused_quota('memory', 'b', 2000)}; couldn't assign flavors to pod set workers: "
        f"{unused_quota('cpu', 'a', 10**6)}. Pending the preemption of 2 workload(s)")


@pytest.mark.parametrize(("recorded", "rerun"), [
    # another amount, in either format
    ("insufficient unused quota for memory in flavor x, 1000000001 more needed", unused_quota("memory", "x", G)),
    ("insufficient unused quota for memory in flavor x, 2G more needed", unused_quota("memory", "x", G)),
    ("insufficient unused quota for cpu in flavor x, 1000m more needed", unused_quota("cpu", "x", 10**6)),
    # the same amount with anything else changed: flavor, resource, the words, what follows
    ("insufficient unused quota for memory in flavor y, 1000000000 more needed", unused_quota("memory", "x", G)),
    ("insufficient unused quota for storage in flavor x, 1000000000 more needed", unused_quota("memory", "x", G)),
    ("insufficient unused quota for memory in flavor x, 1000000000 more wanted", unused_quota("memory", "x", G)),
    ("insufficient quota for memory in flavor x, previously considered podsets requests (1000000000) + current "
     "podset request (1000) > maximum capacity (1500000000)", over_capacity("memory", "x", G, KI, 1_500_000_000)),
    ("insufficient quota for cpu in flavor x, request > maximum capacity (6 > 5)", over_capacity("cpu", "x", 0, 6000, 4000)),
    ("insufficient quota for cpu in flavor x, request > maximum capacity (7 > 4)", over_capacity("cpu", "x", 0, 6000, 4000)),
    ("insufficient quota for cpu in flavor x, request > maximum capacity (6 > 4)", over_capacity("cpu", "x", 1, 6000, 4000)),
    ("insufficient unused quota for memory in flavor x, 1000000000 more needed. Pending the preemption of 1 "
     "workload(s)", unused_quota("memory", "x", G)),
    # not a whole number of bytes: no amount the scheduler writes, so compared as written (not rounded up)
    ("insufficient unused quota for memory in flavor x, 1500m more needed", unused_quota("memory", "x", 2)),
])
def test_any_other_difference_stays_a_difference(recorded: str, rerun: str) -> None:
    assert canonical_message(recorded) != canonical_message(rerun)


def test_messages_without_quota_reasons_are_left_alone() -> None:
    for m in ("Quota reserved in ClusterQueue cq", "The workload is admitted", "",
              "couldn't assign flavors to pod set main: flavor a doesn't match node affinity"):
        assert canonical_message(m) == m
