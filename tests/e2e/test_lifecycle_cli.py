"""`ems topic alter`, `ems topic delete` and `ems group delete` end to end: exit codes,
refusals that change nothing, and a delete killed half-way finished by running it again."""

from __future__ import annotations

import json
import signal
import subprocess
import time

import pytest

from ems.config import Settings
from ems.store import Store
from ems.topics import TopicAdmin
from tests.e2e.test_cli import Cli, assert_clean_error
from tests.integration import seed

#: Deletes in these tests wait this long for producers' look-ups of the topic to age.
QUICK = {"EMS_METADATA_MAX_AGE": "0.2", "EMS_PURGE_PAUSE": "0", "EMS_PURGE_CHUNK_ROWS": "5"}


@pytest.fixture
def cli(settings: Settings) -> Cli:
    return Cli(settings)


@pytest.fixture
def quick(cli: Cli) -> Cli:
    cli.env.update(QUICK)
    return cli


def _stored(store: Store, topic_id: int) -> int:
    return int(
        seed.sql(store, "SELECT COUNT(*) FROM message WHERE topic_id = %s", (topic_id,))[0][0]
    )


def test_alter_shows_the_new_settings_and_refuses_bad_input(quick: Cli) -> None:
    quick.ok("topic", "create", "t", "-p", "2")
    out = quick.ok("topic", "alter", "t", "--retention-hours", "12", "--max-body-bytes", "2048")
    assert out == "topic t: retention 12 hours, largest body 2048 bytes\n"
    listed = json.loads(quick.ok("topic", "list", "--json"))
    assert (listed[0]["retention_hours"], listed[0]["max_body_bytes"]) == (12, 2048)
    assert (
        json.loads(quick.ok("topic", "alter", "t", "--json", "--retention-hours", "3"))[
            "retention_hours"
        ]
        == 3
    )

    assert_clean_error(quick.run("topic", "alter", "t"), 2)
    assert_clean_error(quick.run("topic", "alter", "t", "--max-body-bytes", "0"), 2)
    assert_clean_error(quick.run("topic", "alter", "nope", "--retention-hours", "1"), 2)
    listed = json.loads(quick.ok("topic", "list", "--json"))
    assert (listed[0]["retention_hours"], listed[0]["max_body_bytes"]) == (3, 2048)


def test_delete_asks_first_and_refuses_live_members_unless_forced(
    quick: Cli, settings: Settings, store: Store
) -> None:
    quick.ok("topic", "create", "t", "-p", "2")
    quick.ok("produce", "t", input="a\nb\nc\n")
    aborted = quick.run("topic", "delete", "t", input="n\n")
    assert aborted.returncode == 1 and "Aborted" in aborted.stderr
    topic = TopicAdmin(settings, store=store).get("t")
    group = seed.group(store, "g", topic)
    store.leases.register(group.id, "alive", "host", 1, 60)

    refused = quick.run("topic", "delete", "t", "--yes")
    assert_clean_error(refused, 1)
    assert "g (1 live)" in refused.stderr
    assert _stored(store, topic.id) == 3

    out = quick.ok("topic", "delete", "t", "--force", input="y\n")
    assert out == "deleted topic t and 1 group(s) (g): " + out.rsplit(": ", 1)[1]
    assert _stored(store, topic.id) == 0
    assert json.loads(quick.ok("topic", "list", "--json")) == []
    assert_clean_error(quick.run("topic", "delete", "t", "--yes"), 2)


def test_group_delete_exit_codes_and_json(quick: Cli, settings: Settings, store: Store) -> None:
    quick.ok("topic", "create", "t", "-p", "1")
    topic = TopicAdmin(settings, store=store).get("t")
    group = seed.group(store, "g", topic)
    for o in range(12):
        seed.log(store, group, 0, o, state="done")
    assert_clean_error(quick.run("group", "delete", "nope", "--yes"), 2)
    store.leases.register(group.id, "alive", "host", 1, 60)
    refused = quick.run("group", "delete", "g", "--yes")
    assert_clean_error(refused, 1)
    assert "1 live member" in refused.stderr
    store.leases.delete("alive")

    done = json.loads(quick.ok("group", "delete", "g", "--yes", "--json"))

    assert done["rows"]["topic_group_log"] == 12
    assert done["statements"]["topic_group_log"] >= 12 // 5
    assert not done["resumed"]
    assert_clean_error(quick.run("group", "describe", "g"), 2)


def test_a_delete_killed_half_way_refuses_the_topic_and_is_finished_by_the_next(
    cli: Cli, settings: Settings, store: Store
) -> None:
    cli.ok("topic", "create", "t", "-p", "2")
    cli.ok("produce", "t", input="".join(f"{i}\n" for i in range(300)))
    topic = TopicAdmin(settings, store=store).get("t")
    slow = {**cli.env, "EMS_PURGE_CHUNK_ROWS": "1", "EMS_PURGE_PAUSE": "50"}
    deleting = subprocess.Popen(
        cli.command("topic", "delete", "t", "--yes"),
        env=slow,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        seed.wait_until(lambda: _stored(store, topic.id) < 290, timeout=30)
    finally:
        deleting.send_signal(signal.SIGKILL)
        deleting.communicate()
    left = _stored(store, topic.id)
    assert 0 < left < 300

    # Half-deleted: gone for its users, refused with a clear error, nothing stored.
    assert json.loads(cli.ok("topic", "list", "--json")) == []
    refused = cli.run("produce", "t", input="late\n")
    assert_clean_error(refused, 2)
    assert "being deleted" in refused.stderr
    assert _stored(store, topic.id) <= left

    began = time.monotonic()
    out = cli.run("topic", "delete", "t", "--yes", env=QUICK)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("finished deleting topic t")
    assert time.monotonic() - began < 30
    assert _stored(store, topic.id) == 0
    cli.ok("topic", "create", "t", "-p", "2")
    assert cli.ok("produce", "t", "--verbose", input="again\n") is not None
    assert seed.sql(store, "SELECT offset_no FROM message") == [(0,)]
