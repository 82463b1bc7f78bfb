"""`ems spark queries [NAME]` and `ems spark queries drop NAME` end to end: the skipped
offsets beside the lag, a drop that asks first, and refusals that change nothing."""

from __future__ import annotations

import json

import pytest

from ems.config import Settings
from ems.store import Store
from tests.e2e.test_cli import Cli, assert_clean_error
from tests.integration import seed


@pytest.fixture
def cli(settings: Settings) -> Cli:
    return Cli(settings)


@pytest.fixture
def recorded(store: Store) -> None:
    topic = store.topics.create("readings", 2, 24, 1024)
    seed.messages(store, topic, 0, range(5), age_hours=1)
    rows = [(topic.id, 0, 3), (topic.id, 1, 0)]
    store.stream_queries.record("windows", rows, {(topic.id, 0): 2})
    store.stream_queries.record("archive", [(topic.id, 0, 5)])


def _queries(cli: Cli) -> list[str]:
    return [q["query"] for q in json.loads(cli.ok("spark", "queries", "--json"))]


@pytest.mark.usefixtures("recorded")
def test_queries_show_the_offsets_skipped_beside_the_lag(cli: Cli) -> None:
    text = cli.ok("spark", "queries", "windows")
    lines = text.splitlines()
    assert lines[1].split() == ["topic", "partition", "committed", "high", "lag", "skipped"]
    assert lines[2].split() == ["readings", "0", "3", "5", "2", "2"]
    assert lines[-1].split() == ["total", "2", "2"]
    (shown,) = json.loads(cli.ok("spark", "queries", "--json", "windows"))
    assert shown["skipped_offsets"] == 2
    assert [p["skipped_offsets"] for p in shown["partitions"]] == [2, 0]
    assert _queries(cli) == ["archive", "windows"]
    assert "drop" in cli.ok("spark", "queries", "--help")


@pytest.mark.usefixtures("recorded")
def test_drop_asks_first_and_refuses_bad_input(cli: Cli) -> None:
    declined = cli.run("spark", "queries", "drop", "windows", input="n\n")
    assert declined.returncode == 1 and "Drop the recorded positions" in declined.stderr
    assert _queries(cli) == ["archive", "windows"]
    assert_clean_error(cli.run("spark", "queries", "drop", "nobody", "--yes"), 2)
    assert_clean_error(cli.run("spark", "queries", "drop", "a b", "--yes"), 2)
    assert _queries(cli) == ["archive", "windows"]

    out = cli.ok("spark", "queries", "drop", "windows", "--yes")
    assert out == "dropped streaming query windows: 2 partition positions\n"
    assert _queries(cli) == ["archive"]
    assert_clean_error(cli.run("spark", "queries", "windows"), 2)
    done = json.loads(cli.ok("spark", "queries", "drop", "archive", "--yes", "--json"))
    assert done == {"query": "archive", "partitions": 1}
    assert "no streaming query has recorded a position" in cli.ok("spark", "queries")
