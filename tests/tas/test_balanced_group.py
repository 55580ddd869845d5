"""The leader-aware steps of balanced placement for a pod-set group (:mod:`kueue_es.scheduler.tas.balanced_group`),
as Kueue runs them with one leader: greedy estimate, pruning, dynamic program and spread."""

from __future__ import annotations

from kueue_es.scheduler.tas.balanced_group import Caps, _clear, greedy, optimal, spread


def caps(p, s, pw, sw, ld) -> Caps:
    return Caps(list(p), list(s), list(pw), list(sw), list(ld))


def test_greedy_gives_the_leader_first_then_takes_the_plain_order() -> None:
    # domain 2 alone can take the leader: it counts its with-leader slices, then the roomiest of the others
    c = caps([10, 10, 8], [10, 10, 8], [0, 0, 8], [0, 0, 8], [0, 0, 1])
    assert greedy(c, 16, None) == (2, 2, 0)
    assert greedy(c, 29, None) is None
    assert greedy(caps([10], [10], [0], [0], [0]), 5, None) is None  # nobody can take the leader


def test_pruning_drops_small_domains_and_takes_the_leader_from_one_short_with_it() -> None:
    c = caps([12, 12, 5], [12, 12, 5], [11, 0, 4], [11, 0, 4], [1, 0, 1])
    for i in range(3):
        _clear(c, i, 12)
    assert c == caps([12, 12, 0], [12, 12, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0])


def test_the_program_must_place_the_leader() -> None:
    # the two roomiest domains would hold the slices with the least capacity, but neither takes the leader
    c = caps([10, 10, 9], [10, 10, 9], [0, 0, 8], [0, 0, 8], [0, 0, 1])
    assert sorted(optimal(c, 16, 1, range(3), None)) == [0, 2]


def test_the_leaders_domain_takes_the_leader_and_its_with_leader_room() -> None:
    c = caps([15, 15], [15, 15], [14, 14], [14, 14], [1, 1])
    assert spread([0, 1], c, 25, 12, None) == ({0: 13, 1: 12}, 0)
    # the leader's domain holds no more than the threshold with the leader: the rest goes to the other
    c = caps([15, 15], [15, 15], [12, 14], [12, 14], [1, 0])
    assert spread([0, 1], c, 25, 12, None) == ({0: 12, 1: 13}, 0)
    assert spread([0, 1], c, 28, 12, None) is None
