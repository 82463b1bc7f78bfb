"""The derived state of a message in a group, and the pure parts of dead-letter resends."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ems.ops import trace as t
from ems.ops.dead_letters import ORIGIN_HEADERS, origin_headers, split_resent
from ems.store.dead_letters import like_pattern, where
from ems.values.rows import CompactionCover, DeadLetter, DeadLetterFilter, LogRow, RetryRow

T0 = dt.datetime(2026, 11, 22, 10, 0)


def log(state: str, attempts: int = 1) -> LogRow:
    return LogRow(
        group_id=1,
        client_id="c1",
        state=state,  # type: ignore[arg-type]
        attempts=attempts,
        error=None if state == "done" else "boom",
        started_at=T0,
        finished_at=None if state == "start" else T0,
        updated_at=T0,
    )


RETRY = RetryRow(group_id=1, attempts=1, due_at=T0, last_error="boom", created_at=T0)
COVER = CompactionCover(id=7, status="done", cutoff=T0, group_ids=(), deleted_rows=10)


def dead(resent: dt.datetime | None = None, dead_id: int = 3) -> DeadLetter:
    return DeadLetter(
        id=dead_id,
        group_id=1,
        group="g",
        topic_id=1,
        topic="t",
        partition=0,
        offset=5,
        message_id=9,
        key=b"k",
        headers={"h": "v"},
        body=b"x",
        body_size=1,
        attempts=2,
        last_error="boom",
        created_at=T0,
        resent_at=resent,
    )


def state(**kw: object) -> str:
    evidence = t.Evidence(**{"mode": "cluster", "offset": 5, "cursor": 6, **kw})  # type: ignore[arg-type]
    return t.group_state(evidence)[0]


@pytest.mark.parametrize(
    ("kw", "expected"),
    [
        ({"mode": "broadcast", "log": log("done")}, t.NOT_TRACKED),
        ({"cursor": 5}, t.PENDING),
        ({"cursor": 0}, t.PENDING),
        ({"cursor": None}, t.PENDING),
        ({"log": log("start")}, t.IN_FLIGHT),
        ({"log": log("start", 2), "retry": RETRY}, t.IN_FLIGHT),  # a redelivery in flight
        ({"log": log("done")}, t.DONE),
        ({"log": log("done"), "cursor": 3}, t.PENDING),  # the cursor was moved back
        ({"log": log("retry"), "retry": RETRY}, t.RETRYING),
        ({"log": log("retry"), "ordered": True}, t.RETRYING),  # retried in place
        ({"log": log("dead", 2), "dead": (dead(),)}, t.DEAD),
        ({"dead": (dead(),)}, t.DEAD),  # the dead log row was compacted
        ({"log": log("dead", 2), "dead": (dead(T0),)}, t.DEAD),  # resent to the topic
        ({"log": log("dead", 2), "dead": (dead(T0),), "retry": RETRY}, t.RETRYING),
        ({"log": log("done"), "dead": (dead(T0),)}, t.DONE),  # resent to the group, handled
        ({}, t.CONSUMED),
        ({"compaction": COVER}, t.ARCHIVED),
        ({"before_start": True, "compaction": COVER}, t.NOT_DELIVERED),
        ({"purged": True, "cursor": 2}, t.PURGED_UNDELIVERED),
        ({"purged": True, "log": log("done")}, t.DONE),
    ],
)
def test_states(kw: dict[str, object], expected: str) -> None:
    assert state(**kw) == expected


logs = st.one_of(st.none(), st.sampled_from(["start", "done", "retry", "dead"]).map(log))


@given(
    mode=st.sampled_from(["cluster", "broadcast"]),
    ordered=st.booleans(),
    offset=st.integers(0, 20),
    cursor=st.one_of(st.none(), st.integers(0, 20)),
    log_row=logs,
    retry=st.one_of(st.none(), st.just(RETRY)),
    dead_rows=st.lists(st.one_of(st.none(), st.just(T0)).map(dead), max_size=2),
    purged=st.booleans(),
    compaction=st.one_of(st.none(), st.just(COVER)),
    before_start=st.booleans(),
)
def test_every_combination_has_exactly_one_known_state_with_a_note(
    mode: str,
    ordered: bool,
    offset: int,
    cursor: int | None,
    log_row: LogRow | None,
    retry: RetryRow | None,
    dead_rows: list[DeadLetter],
    purged: bool,
    compaction: CompactionCover | None,
    before_start: bool,
) -> None:
    evidence = t.Evidence(
        mode=mode,
        ordered=ordered,
        offset=offset,
        cursor=cursor,
        log=log_row,
        retry=retry,
        dead=tuple(dead_rows),
        purged=purged,
        compaction=compaction,
        before_start=before_start,
    )
    found, note = t.group_state(evidence)
    assert found in t.STATES and note
    if mode == "broadcast":
        assert found == t.NOT_TRACKED
    elif log_row is not None and log_row.state == "start":
        assert found == t.IN_FLIGHT
    elif retry is not None:
        assert found == t.RETRYING
    if found in (t.ARCHIVED, t.CONSUMED, t.NOT_DELIVERED):
        # Only a cursor past the offset, with nothing else recorded, leaves this open.
        assert cursor is not None and offset < cursor and log_row is None and not dead_rows


def test_origin_headers_keep_the_letter_s_own_and_name_where_it_came_from() -> None:
    letter = dead()
    headers = origin_headers(letter)
    assert headers["h"] == "v"
    assert {k: headers[k] for k in ORIGIN_HEADERS} == {
        "ems-origin-topic": "t",
        "ems-origin-partition": "0",
        "ems-origin-offset": "5",
        "ems-origin-group": "g",
        "ems-origin-attempts": "2",
        "ems-origin-dead-id": "3",
    }


def test_a_resent_letter_is_skipped_unless_forced() -> None:
    fresh, old = dead(dead_id=1), dead(T0, dead_id=2)
    assert split_resent([fresh, old], force=False) == ([fresh], [old])
    assert split_resent([fresh, old], force=True) == ([fresh, old], [])


def test_filters_become_one_condition_with_literal_wildcards() -> None:
    assert like_pattern("50%_a\\b") == "%50\\%\\_a\\\\b%"
    sql, params = where(DeadLetterFilter(group_ids=(1, 2), error="x", resent=False, after_id=4))
    assert (
        sql
        == "d.id > %s AND d.group_id IN (%s, %s) AND d.last_error LIKE %s AND d.resent_at IS NULL"
    )
    assert params == (4, 1, 2, "%x%")
    assert where(DeadLetterFilter(group_ids=()))[0].endswith("FALSE")


def test_retry_notes_tell_a_failure_from_a_replay_and_a_resend() -> None:
    def note(row: RetryRow) -> str:
        return t.group_state(t.Evidence(mode="cluster", offset=5, cursor=6, retry=row))[1]

    assert note(RETRY).startswith("attempt 1 failed (boom)")
    replayed = RetryRow(group_id=1, attempts=2, due_at=T0, last_error=None, created_at=T0)
    assert note(replayed).startswith("queued for redelivery (replay)")
    resent = RetryRow(group_id=1, attempts=0, due_at=T0, last_error="resent", created_at=T0)
    assert note(resent).startswith("queued again (resent)")
