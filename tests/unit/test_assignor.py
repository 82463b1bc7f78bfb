"""Properties of the partition assignor, in the manner of Kafka's sticky assignor tests:
validity, balance, stickiness, minimal movement, no swaps, idempotence, determinism, and
randomized rounds where every round starts from the previous round's result."""

from __future__ import annotations

import itertools
import random
import time
from collections import Counter
from collections.abc import Collection, Mapping

from hypothesis import given
from hypothesis import strategies as st

from ems.coordination import Move, assign, moves

POOL = [f"m{i:02d}" for i in range(16)]

Scenario = tuple[dict[int, str], set[str], set[int]]


@st.composite
def scenarios(draw: st.DrawFn, max_members: int = 12, max_partitions: int = 60) -> Scenario:
    """An arbitrary previous assignment (dead members, deleted partitions) and a new world."""
    previous = draw(
        st.dictionaries(st.integers(0, 100), st.sampled_from(POOL), max_size=max_partitions)
    )
    members = draw(st.sets(st.sampled_from(POOL), max_size=max_members))
    partitions = draw(st.sets(st.integers(0, 80), max_size=max_partitions))
    return previous, members, partitions


@st.composite
def balanced(draw: st.DrawFn, min_members: int = 1) -> Scenario:
    """A valid, balanced assignment that assign() did not produce: partitions dealt round
    robin, in a random order, over the members in a random order."""
    members = draw(st.sets(st.sampled_from(POOL), min_size=min_members, max_size=12))
    partitions = draw(st.sets(st.integers(0, 200), max_size=80))
    order = draw(st.permutations(sorted(members)))
    dealt = draw(st.permutations(sorted(partitions)))
    previous = {p: order[i % len(order)] for i, p in enumerate(dealt)}
    return previous, members, partitions


# -- oracles -------------------------------------------------------------------------------


def counts(result: Mapping[int, str], members: Collection[str]) -> Counter[str]:
    """Partitions per member, zeros included."""
    out = Counter(dict.fromkeys(members, 0))
    out.update(result.values())
    return out


def retained(
    previous: Mapping[int, str], members: Collection[str], partitions: Collection[int]
) -> dict[str, set[int]]:
    """Member -> the partitions it owned before that still exist."""
    out: dict[str, set[int]] = {m: set() for m in members}
    for p, m in previous.items():
        if m in out and p in partitions:
            out[m].add(p)
    return out


def moved(
    previous: Mapping[int, str], result: Mapping[int, str], members: Collection[str]
) -> set[int]:
    """Partitions taken away from a live previous owner."""
    return {p for p, m in result.items() if previous.get(p) in members and previous[p] != m}


def min_moves(
    previous: Mapping[int, str], members: Collection[str], partitions: Collection[int]
) -> int:
    """Fewest partitions any balanced assignment must take from live owners: pair the
    biggest holdings with the biggest quotas."""
    held = sorted((len(s) for s in retained(previous, members, partitions).values()), reverse=True)
    q, r = divmod(len(partitions), len(members))
    return sum(max(0, c - (q + (i < r))) for i, c in enumerate(held))


def brute_min_moves(
    previous: Mapping[int, str], members: Collection[str], partitions: Collection[int]
) -> int:
    """The same minimum by trying every assignment (tiny inputs only)."""
    ms, ps = sorted(members), sorted(partitions)
    best = len(ps)
    for owners in itertools.product(ms, repeat=len(ps)):
        result = dict(zip(ps, owners, strict=True))
        per = counts(result, ms).values()
        if max(per, default=0) - min(per, default=0) <= 1:
            best = min(best, len(moved(previous, result, members)))
    return best


def assert_valid(
    result: Mapping[int, str], members: Collection[str], partitions: Collection[int]
) -> None:
    assert set(result) == set(partitions)
    assert set(result.values()) <= set(members)


def assert_balanced(result: Mapping[int, str], members: Collection[str]) -> None:
    per = counts(result, members).values()
    assert max(per) - min(per) <= 1


def assert_sticky(
    previous: Mapping[int, str],
    result: Mapping[int, str],
    members: Collection[str],
    partitions: Collection[int],
) -> None:
    """A member at or under its quota keeps all it had; one above keeps only old partitions."""
    after: dict[str, set[int]] = {m: set() for m in members}
    for p, m in result.items():
        after[m].add(p)
    for m, before in retained(previous, members, partitions).items():
        if len(before) <= len(after[m]):
            assert before <= after[m], m
        else:
            assert after[m] <= before, m


def assert_no_swaps(
    previous: Mapping[int, str], result: Mapping[int, str], members: Collection[str]
) -> None:
    plan = moves(previous, result, members)
    pairs = {(mv.source, mv.target) for mv in plan if mv.source is not None}
    assert not any((b, a) in pairs for a, b in pairs)
    givers = {mv.source for mv in plan}
    assert givers.isdisjoint(mv.target for mv in plan)


def assert_all(
    previous: Mapping[int, str],
    result: Mapping[int, str],
    members: Collection[str],
    partitions: Collection[int],
) -> None:
    assert_valid(result, members, partitions)
    assert_balanced(result, members)
    assert_sticky(previous, result, members, partitions)
    assert_no_swaps(previous, result, members)
    assert len(moved(previous, result, members)) == min_moves(previous, members, partitions)


# -- assign: properties ----------------------------------------------------------------------


@given(scenarios().filter(lambda case: bool(case[1])))
def test_valid(case: Scenario) -> None:
    previous, members, partitions = case
    assert_valid(assign(previous, members, partitions), members, partitions)


@given(st.dictionaries(st.integers(0, 50), st.sampled_from(POOL)), st.sets(st.integers(0, 50)))
def test_no_members_no_assignment(previous: dict[int, str], partitions: set[int]) -> None:
    assert assign(previous, [], partitions) == {}


@given(scenarios().filter(lambda case: bool(case[1])))
def test_balanced(case: Scenario) -> None:
    previous, members, partitions = case
    assert_balanced(assign(previous, members, partitions), members)


@given(scenarios())
def test_sticky(case: Scenario) -> None:
    previous, members, partitions = case
    assert_sticky(previous, assign(previous, members, partitions), members, partitions)


@given(scenarios().filter(lambda case: bool(case[1])))
def test_movement_is_minimal(case: Scenario) -> None:
    previous, members, partitions = case
    result = assign(previous, members, partitions)
    assert len(moved(previous, result, members)) == min_moves(previous, members, partitions)


@given(scenarios(max_members=3, max_partitions=6).filter(lambda case: bool(case[1])))
def test_movement_matches_exhaustive_search(case: Scenario) -> None:
    previous, members, partitions = case
    result = assign(previous, members, partitions)
    assert len(moved(previous, result, members)) == brute_min_moves(previous, members, partitions)


@given(scenarios().filter(lambda case: bool(case[1])))
def test_extra_partition_goes_to_biggest_holders_then_smallest_id(case: Scenario) -> None:
    previous, members, partitions = case
    per = counts(assign(previous, members, partitions), members)
    held = {m: len(s) for m, s in retained(previous, members, partitions).items()}
    q = len(partitions) // len(members)
    extra = sorted((-held[m], m) for m in members if per[m] == q + 1)
    plain = sorted((-held[m], m) for m in members if per[m] == q)
    if extra and plain:
        assert extra[-1] < plain[0]


@given(scenarios())
def test_no_swaps(case: Scenario) -> None:
    previous, members, partitions = case
    assert_no_swaps(previous, assign(previous, members, partitions), members)


@given(scenarios())
def test_idempotent(case: Scenario) -> None:
    previous, members, partitions = case
    once = assign(previous, members, partitions)
    assert assign(once, members, partitions) == once
    assert moves(once, assign(once, members, partitions), members) == []


@given(balanced())
def test_valid_balanced_previous_is_kept(case: Scenario) -> None:
    previous, members, partitions = case
    assert assign(previous, members, partitions) == previous


@given(scenarios(), st.randoms(use_true_random=False))
def test_order_of_inputs_does_not_matter(case: Scenario, rnd: random.Random) -> None:
    previous, members, partitions = case
    items, ms, ps = list(previous.items()), sorted(members), sorted(partitions)
    for seq in (items, ms, ps):
        rnd.shuffle(seq)
    shuffled = assign(dict(items), ms + ms[:2], tuple(ps))  # duplicates count once
    expected = assign(previous, members, partitions)
    assert list(shuffled.items()) == list(expected.items())


@given(balanced(min_members=2), st.data())
def test_member_leaving_moves_only_its_partitions(case: Scenario, data: st.DataObject) -> None:
    previous, members, partitions = case
    gone = data.draw(st.sampled_from(sorted(members)))
    result = assign(previous, members - {gone}, partitions)
    changed = {p for p in partitions if result[p] != previous[p]}
    assert changed == {p for p, m in previous.items() if m == gone}
    assert_all(previous, result, members - {gone}, partitions)


@given(balanced(), st.sampled_from(POOL))
def test_member_joining_takes_only_its_quota_from_members_above_quota(
    case: Scenario, joiner: str
) -> None:
    previous, members, partitions = case
    live = members | {joiner}
    result = assign(previous, live, partitions)
    plan = moves(previous, result, live)
    if joiner in members:  # not a join: nothing changes
        assert plan == []
        return
    floor = len(partitions) // len(live)
    before, after = counts(previous, live), counts(result, live)
    assert {mv.target for mv in plan} <= {joiner}
    assert after[joiner] == len(plan) in (floor, floor + 1)
    for source in {mv.source for mv in plan}:
        assert source is not None and before[source] > floor


# -- moves ------------------------------------------------------------------------------


@given(
    st.dictionaries(st.integers(0, 40), st.sampled_from(POOL)),
    st.dictionaries(st.integers(0, 40), st.sampled_from(POOL)),
    st.sets(st.sampled_from(POOL)),
)
def test_moves_lists_exactly_the_changes(
    previous: dict[int, str], target: dict[int, str], live: set[str]
) -> None:
    plan = moves(previous, target, live)
    assert [mv.partition for mv in plan] == sorted(
        p for p in target if previous.get(p) != target[p]
    )
    for mv in plan:
        assert mv.target == target[mv.partition]
        owner = previous.get(mv.partition)
        assert mv.source == (owner if owner in live else None)
    applied = {p: previous[p] for p in target if p in previous}
    applied.update((mv.partition, mv.target) for mv in plan)
    assert applied == target


def test_moves_example() -> None:
    previous = {0: "a", 1: "a", 2: "b", 3: "gone"}
    target = {0: "a", 1: "c", 2: "b", 3: "c", 4: "c"}
    assert moves(previous, target, ["a", "b", "c"]) == [
        Move(partition=1, source="a", target="c"),
        Move(partition=3, source=None, target="c"),
        Move(partition=4, source=None, target="c"),
    ]


# -- examples -------------------------------------------------------------------------------


def test_initial_assignment_deals_blocks_by_member_id() -> None:
    assert assign({}, ["b", "a"], range(5)) == {0: "a", 1: "a", 2: "a", 3: "b", 4: "b"}


def test_fewer_partitions_than_members() -> None:
    result = assign({0: "c"}, ["a", "b", "c"], [0, 1])
    assert result == {0: "c", 1: "a"}


def test_over_quota_member_keeps_its_lowest_partitions() -> None:
    assert assign({0: "a", 1: "a", 2: "a", 3: "a"}, ["a", "b"], range(4)) == {
        0: "a",
        1: "a",
        2: "b",
        3: "b",
    }


# -- randomized rounds and scale --------------------------------------------------------------


def change_membership(
    rnd: random.Random, members: set[str], fresh: itertools.count[int]
) -> set[str]:
    """Up to six members leave and up to six join (at least one change), staying within 20-40."""
    while True:
        leaving = rnd.randint(0, min(6, len(members) - 20))
        joining = rnd.randint(0, min(6, 40 - len(members) + leaving))
        if leaving or joining:
            break
    gone = set(rnd.sample(sorted(members), leaving))
    return (members - gone) | {f"c{next(fresh):04d}" for _ in range(joining)}


def test_randomized_rounds() -> None:
    rnd = random.Random(20261122)
    fresh = itertools.count()
    members = {f"c{next(fresh):04d}" for _ in range(30)}
    partitions = set(range(rnd.randint(200, 400)))
    current = assign({}, members, partitions)
    assert_all({}, current, members, partitions)
    for round_no in range(100):
        members = change_membership(rnd, members, fresh)
        if round_no % 10 == 9:  # topics grow now and then
            partitions |= set(range(len(partitions), len(partitions) + rnd.randint(1, 30)))
        result = assign(current, members, partitions)
        assert_all(current, result, members, partitions)
        assert assign(result, members, partitions) == result
        current = result


def test_large_rounds_are_fast_and_minimal() -> None:
    members = [f"member-{i:04d}" for i in range(1000)]
    partitions = range(100_000)
    start = time.perf_counter()
    base = assign({}, members, partitions)
    left = assign(base, members[1:], partitions)
    back = assign(left, members, partitions)
    assert (time.perf_counter() - start) / 3 < 2.0
    assert len(moves(base, left, members[1:])) == 100
    assert len(moves(left, back, members)) == 100
    assert set(counts(back, members).values()) == {100}
