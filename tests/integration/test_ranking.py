"""Topic ranking against the real schema: volumes from the watermark captures, topics
missing from a capture, partial windows with their real span, one capture, the order (the
window's volume, then the other window's, then the name) and the limit."""

from __future__ import annotations

import datetime as dt

from ems.ops.ranking import Ranking, Volume, topic_ranking
from ems.store import Store
from tests.integration import seed

HOUR, DAY = dt.timedelta(hours=1), dt.timedelta(days=1)


def capture(store: Store, age: dt.timedelta, now: dt.datetime, totals: dict[str, int]) -> None:
    """One capture `age` before `now`: each named topic's partition 0 at its total."""
    ids = {t.name: t.id for t in store.topics.all()}
    for name, high in totals.items():
        seed.sql(
            store,
            "INSERT INTO topic_watermark (captured_at, topic_id, partition_no, high_watermark) "
            "VALUES (%s, %s, 0, %s)",
            (now - age, ids[name], high),
        )


def topics(store: Store, *names: str) -> dt.datetime:
    for name in names:
        store.topics.create(name, 1, 24, 1024)
    return store.maintenance.now()


def volumes(ranking: Ranking) -> dict[str, tuple[Volume | None, Volume | None]]:
    return {r.topic: (r.last_hour, r.last_day) for r in ranking.topics}


def test_volume_is_the_growth_since_the_baseline_and_a_missing_topic_counts_from_zero(
    store: Store,
) -> None:
    now = topics(store, "a", "b", "c")
    capture(store, DAY + HOUR, now, {"a": 200})
    capture(store, dt.timedelta(0), now, {"a": 500, "b": 40})
    ranking = topic_ranking(store)
    span = (DAY + HOUR).total_seconds()
    day = {n: v[1] for n, v in volumes(ranking).items()}
    assert day["a"] == Volume(messages=300, span_seconds=span, complete=True)
    assert day["b"] == Volume(messages=40, span_seconds=span, complete=True)
    assert day["c"] == Volume(messages=0, span_seconds=span, complete=True)


def test_a_short_history_is_marked_partial_with_its_real_span(store: Store) -> None:
    now = topics(store, "a")
    capture(store, dt.timedelta(minutes=10), now, {"a": 450})
    capture(store, dt.timedelta(0), now, {"a": 500})
    hour, day = volumes(topic_ranking(store))["a"]
    assert hour == day == Volume(messages=50, span_seconds=600, complete=False)


def test_one_capture_or_none_gives_no_volume(store: Store) -> None:
    now = topics(store, "a")
    empty = topic_ranking(store)
    assert (empty.newest_capture, volumes(empty)) == (None, {"a": (None, None)})
    assert topic_ranking(store, "hour", 10).topics == []  # the console lists nothing yet
    capture(store, dt.timedelta(0), now, {"a": 500})
    assert volumes(topic_ranking(store)) == {"a": (None, None)}


def test_the_window_ranks_first_then_the_other_window_then_the_name(store: Store) -> None:
    now = topics(store, "a", "b", "c", "d")
    capture(store, 2 * DAY, now, {"d": 0, "c": 50, "b": 50})
    capture(store, 2 * HOUR, now, {"d": 90, "c": 50, "b": 50})
    capture(store, dt.timedelta(0), now, {"d": 100, "c": 100, "b": 100, "a": 10})
    assert [r.topic for r in topic_ranking(store, "day").topics] == ["d", "b", "c", "a"]
    assert [r.topic for r in topic_ranking(store, "hour").topics] == ["b", "c", "d", "a"]
    top = topic_ranking(store, "hour", 2)
    assert [r.topic for r in top.topics] == ["b", "c"]
    assert top.capture_age_seconds is not None and top.capture_age_seconds >= 0
