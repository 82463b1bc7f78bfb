"""The autoscaling page and its API: each group with a policy, its policy and replica
range, its live members and latest decisions (newest first); groups without a policy
left out; keyset pages by group then topic; bad input a 400; texts escaped."""

from __future__ import annotations

import html
import re

import pytest
from flask.testing import FlaskClient
from markupsafe import escape

from ems.autoscale.admin import set_policy
from ems.store import Store
from ems.types import GroupInfo
from tests.admin.conftest import bearer
from tests.integration import seed
from tests.json_times import is_json_time

_NEXT = re.compile(r'<a class="next" rel="next" href="([^"]+)"')


def _member(store: Store, group: GroupInfo, client_id: str, seconds_left: int) -> None:
    seed.sql(
        store,
        "INSERT INTO consumer_client (client_id, group_id, host, pid, lease_expires_at, "
        "cpu_percent, load_rate, reported_at) "
        "VALUES (%s, %s, 'host-1', 42, NOW(6) + INTERVAL %s SECOND, 55.5, 800, NOW(6))",
        (client_id, group.id, seconds_left),
    )


def _decision(
    store: Store, group: GroupInfo, current: int, desired: int, reason: str, minutes_ago: int
) -> None:
    seed.sql(
        store,
        "INSERT INTO autoscale_decision (group_id, leader_epoch, decided_at, current_replicas, "
        "desired_replicas, applied, backend, reason, error) "
        "VALUES (%s, 1, NOW(6) - INTERVAL %s MINUTE, %s, %s, 1, 'log', %s, NULL)",
        (group.id, minutes_ago, current, desired, reason),
    )


@pytest.fixture
def scaled(store: Store) -> dict[str, GroupInfo]:
    """billing (policy 2..6 on 4 partitions, two live members and one expired, two
    decisions), shipping (policy, nothing else) and idle (no policy)."""
    orders = store.topics.create("orders", 4, 24, 1024)
    billing = seed.group(store, "billing", orders)
    shipping = seed.group(store, "shipping", orders)
    seed.group(store, "idle", orders)
    set_policy(
        store, "billing", "orders", {"min_replicas": 2, "max_replicas": 6, "target_load": 500.0}
    )
    set_policy(store, "shipping", "orders", {"lag_threshold": 10_000})
    _member(store, billing, "b-1", 10)
    _member(store, billing, "b-2", 10)
    _member(store, billing, "b-old", -60)
    _decision(store, billing, 1, 2, "load 900/s over target 500/s", 30)
    _decision(store, billing, 2, 3, '<script>alert(1)</script>"><svg onload=alert(1)>', 5)
    return {"billing": billing, "shipping": shipping}


def test_each_group_with_a_policy_with_members_and_decisions(
    client: FlaskClient, tokens: dict[str, str], scaled: dict[str, GroupInfo]
) -> None:
    viewer = bearer(tokens["viewer"])
    found = client.get("/api/v1/autoscale", headers=viewer).get_json()
    assert found["next_after"] is None
    assert [(s["group"], s["topic"]) for s in found["items"]] == [
        ("billing", "orders"),
        ("shipping", "orders"),
    ]
    billing = found["items"][0]
    assert billing["policy"]["min_replicas"] == 2 and billing["policy"]["max_replicas"] == 6
    assert billing["policy"]["target_load"] == 500.0
    assert billing["replica_range"] == [2, 4]  # capped at the partitions
    assert billing["live_members"] == 2
    assert [m["live"] for m in billing["members"]] == [True, True, False]
    decisions = billing["decisions"]
    assert [(d["current_replicas"], d["desired_replicas"]) for d in decisions] == [(2, 3), (1, 2)]
    assert is_json_time(decisions[0]["decided_at"])
    assert found["items"][1]["decisions"] == [] and found["items"][1]["live_members"] == 0

    page = client.get("/autoscale", headers=viewer).get_data(as_text=True)
    assert "idle" not in page
    assert "2 live" in page and "(1 with an expired lease)" in page
    assert "2 to 6" in page and "(on 4 partitions: 2 to 4)" in page
    assert "1 → 2" in page and "2 → 3" in page
    assert page.index("2 → 3") < page.index("1 → 2")  # newest first
    assert "lag 10000 messages" in page and "No decisions yet." in page
    assert " UTC" in page
    hostile = '<script>alert(1)</script>"><svg onload=alert(1)>'
    assert hostile not in page and str(escape(hostile)) in page


def test_pages_by_group_then_topic(
    client: FlaskClient, store: Store, tokens: dict[str, str]
) -> None:
    viewer = bearer(tokens["viewer"])
    topics = [store.topics.create(name, 2, 24, 1024) for name in ("a-topic", "b-topic")]
    made = []
    for name in ("g1", "g2", "g3"):
        for topic in topics:
            seed.group(store, name, topic)
            set_policy(store, name, topic.name, {})
            made.append((name, topic.name))
    seen: list[tuple[str, str]] = []
    path: str | None = "/api/v1/autoscale?limit=4"
    while path is not None:
        found = client.get(path, headers=viewer).get_json()
        seen += [(s["group"], s["topic"]) for s in found["items"]]
        path = (
            None
            if found["next_after"] is None
            else (f"/api/v1/autoscale?limit=4&after={found['next_after']}")
        )
    assert seen == made
    prefixed = client.get("/api/v1/autoscale?prefix=g2", headers=viewer).get_json()
    assert [(s["group"], s["topic"]) for s in prefixed["items"]] == made[2:4]

    link: str | None = "/autoscale?limit=2"
    pages = 0
    while link is not None:
        text = client.get(link, headers=viewer).get_data(as_text=True)
        pages += 1
        found_link = _NEXT.search(text)
        link = html.unescape(found_link.group(1)) if found_link else None
    assert pages == 3


@pytest.mark.parametrize(
    "query",
    [
        "after=nogroup",
        "after=a/b/c",
        "after=%20/x",
        "limit=0",
        "limit=21",  # 20 groups of 5 decisions: at most 100 rows
        "limit=101",
        "limit=x",
        "prefix=" + "p" * 129,
    ],
)
def test_bad_parameters_are_a_400(client: FlaskClient, tokens: dict[str, str], query: str) -> None:
    for path in ("/api/v1/autoscale", "/autoscale"):
        response = client.get(f"{path}?{query}", headers=bearer(tokens["viewer"]))
        assert response.status_code == 400, (path, query)


def test_no_policy_yet(client: FlaskClient, tokens: dict[str, str]) -> None:
    page = client.get("/autoscale", headers=bearer(tokens["viewer"])).get_data(as_text=True)
    assert "No groups with an autoscaling policy." in page
