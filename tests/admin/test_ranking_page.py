"""The busiest topics of the last hour or day: ranked by the difference of the watermark
captures, at most 100, partial windows said so, and a bad window a 400."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from flask.testing import FlaskClient

from ems.store import Store
from tests import sql as db
from tests.admin.conftest import bearer
from tests.integration import seed, seed_browse

_ROW = re.compile(r'<a class="topic" href="[^"]+">([^<]*)</a>')


@pytest.fixture
def viewer(tokens: dict[str, str]) -> dict[str, str]:
    return bearer(tokens["viewer"])


def _now(store: Store) -> dt.datetime:
    return seed.sql(store, "SELECT NOW(6)")[0][0]  # type: ignore[no-any-return]


def test_topics_ranked_by_the_chosen_window(
    client: FlaskClient, store: Store, viewer: dict[str, str]
) -> None:
    now = _now(store)
    quiet = store.topics.create("quiet", 1, 24, 1024)
    busy_day = store.topics.create("busy-day", 1, 24, 1024)
    busy_hour = store.topics.create("busy-hour", 1, 24, 1024)
    # Watermarks at now - 2 days, now - 2 h, now - 10 min and now.
    marks = {quiet: (0, 1, 2, 3), busy_day: (0, 900, 950, 960), busy_hour: (0, 10, 20, 400)}
    ages = (dt.timedelta(days=2), dt.timedelta(hours=2), dt.timedelta(minutes=10), dt.timedelta())
    rows = [
        (now - age, topic.id, 0, mark)
        for topic, values in marks.items()
        for age, mark in zip(ages, values, strict=True)
    ]
    db.run_many(
        store,
        "INSERT INTO topic_watermark (captured_at, topic_id, partition_no, high_watermark) "
        "VALUES (%s, %s, %s, %s)",
        rows,
    )
    hour = client.get("/ranking?window=hour", headers=viewer).get_data(as_text=True)
    assert _ROW.findall(hour) == ["busy-hour", "busy-day", "quiet"]
    day = client.get("/ranking?window=day", headers=viewer).get_data(as_text=True)
    assert _ROW.findall(day) == ["busy-day", "busy-hour", "quiet"]
    found = client.get("/api/v1/ranking?window=day", headers=viewer).get_json()
    assert [t["topic"] for t in found["topics"]] == ["busy-day", "busy-hour", "quiet"]
    assert found["topics"][0]["last_day"]["messages"] == 960
    assert found["topics"][0]["last_hour"]["messages"] == 60  # 960 now - 900 two hours ago
    assert found["topics"][0]["last_day"]["complete"] is True


def test_before_two_captures_there_is_nothing_to_rank(
    client: FlaskClient, store: Store, viewer: dict[str, str]
) -> None:
    store.topics.create("t", 1, 24, 1024)
    page = client.get("/ranking", headers=viewer).get_data(as_text=True)
    assert "No watermark capture yet" in page
    topic = store.topics.create("u", 2, 24, 1024)
    seed_browse.series_watermarks(store, topic, 2, 3, 60, _now(store))
    page = client.get("/ranking?window=day", headers=viewer).get_data(as_text=True)
    assert "over 2 min only" in page  # the captures cover 2 minutes of the day


@pytest.mark.parametrize("window", ["week", "", "HOUR", "x" * 500])
def test_a_bad_window_is_a_400(client: FlaskClient, viewer: dict[str, str], window: str) -> None:
    for path in ("/ranking", "/api/v1/ranking"):
        response = client.get(f"{path}?window={window}", headers=viewer)
        assert response.status_code == 400
        assert "window must be hour or day" in response.get_data(as_text=True)
        assert "x" * 100 not in response.get_data(as_text=True)
