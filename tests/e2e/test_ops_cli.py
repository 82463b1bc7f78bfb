"""`ems msg`, `ems trace` and `ems dlq` through click's CliRunner against the real
servers (one subprocess run checks the installed entry point)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from typing import Any

import pytest
from click.testing import CliRunner, Result

from ems import TopicAdmin
from ems.cli.app import cli
from ems.config import Settings
from ems.store import Store
from tests import sql as db
from tests.integration.seeding import dead_letters_of, execute, publish, scalar, snapshot

BAD = (b"bad-0", b"bad-1")


def run(settings: Settings, *args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), obj=settings, input=input)


def ok(settings: Settings, *args: str, input: str | None = None) -> str:
    result = run(settings, *args, input=input)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return result.stdout


def ok_json(settings: Settings, *args: str) -> Any:
    return json.loads(ok(settings, *args, "--json"))


def assert_error(result: Result, code: int = 2, match: str = "") -> None:
    assert result.exit_code == code, (result.stdout, result.stderr)
    assert result.stderr.startswith("error: ") and match in result.stderr, result.stderr


@pytest.fixture
def topic(settings: Settings) -> str:
    TopicAdmin(settings).create("t", 2)
    return "t"


@pytest.fixture
def dead(settings: Settings, topic: str) -> list[int]:
    """Group g dead-lettered bad-0 and bad-1; ok-0..ok-2 were handled."""
    publish(settings, "t", [(f"k{i}", f"ok-{i}") for i in range(3)])
    publish(settings, "t", [(f"k-{b.decode()}", b.decode()) for b in BAD], origin="test")
    dead_letters_of(settings, "g", "t", lambda d: d.body in BAD, 2)
    return [d["id"] for d in ok_json(settings, "dlq", "list")["dead_letters"]]


# -- msg -----------------------------------------------------------------------------------


def test_msg_get_prints_a_safe_record_json_and_raw_bytes(settings: Settings, topic: str) -> None:
    (meta,) = publish(settings, "t", [("dev-1", "line one\n\x1b[2Jcleared?")], h="v")
    place = ("t", str(meta.partition), str(meta.offset))
    text = ok(settings, "msg", "get", *place)
    assert "key        dev-1" in text and 'headers    {"h":"v"}' in text
    assert "body       line one\\n\\x1b[2Jcleared?" in text and "\x1b" not in text
    record = ok_json(settings, "msg", "get", *place)
    assert (record["body"], record["body_encoding"]) == ("line one\n\x1b[2Jcleared?", "utf-8")
    assert record["offset"] == meta.offset and record["headers"] == {"h": "v"}
    by_id = ok_json(settings, "msg", "get", "--id", str(record["id"]))
    assert by_id == record
    raw = CliRunner().invoke(cli, ["msg", "get", *place, "--raw"], obj=settings)
    assert raw.stdout_bytes == b"line one\n\x1b[2Jcleared?"


def test_msg_find_by_key_shows_binary_as_base64_and_cuts_long_bodies(
    settings: Settings, topic: str
) -> None:
    publish(settings, "t", [("sensor", "x" * 500), ("other", "no"), ("sensor", b"\xff\x00")])
    found = ok_json(settings, "msg", "find", "t", "--key", "sensor", "--since", "1h")
    assert [(m["body"], m["body_encoding"]) for m in found["messages"]] == [
        ("x" * 500, "utf-8"),
        ("/wA=", "base64"),
    ]
    assert not found["more"]
    table = ok(settings, "msg", "find", "t", "--key", "sensor")
    assert "x" * 80 + "…[500 bytes in all]" in table and "base64:/wA=" in table
    assert " no" not in table
    publish(settings, "t", [(b"\x00\xff", "binary key")])
    binary = ok_json(settings, "msg", "find", "t", "--key", "AP8=", "--key-base64")
    assert [(m["key"], m["key_encoding"]) for m in binary["messages"]] == [("AP8=", "base64")]
    assert_error(run(settings, "msg", "find", "t", "--key", "%%", "--key-base64"))
    limited = ok_json(settings, "msg", "find", "t", "--limit", "1")
    assert len(limited["messages"]) == 1 and limited["more"]


def next_find(stderr: str) -> list[str] | None:
    """The arguments of the command the hint says to run next; None without a hint."""
    if not stderr:
        return None
    hint = re.search(r"continue with: ems (msg find .*)\)$", stderr.strip())
    assert hint, stderr
    return shlex.split(hint.group(1))


def test_msg_find_pages_on_past_messages_that_share_one_timestamp(
    settings: Settings, topic: str
) -> None:
    """More messages than --limit with one created_at: the hint's next command goes on
    after the last message shown, never back to the same rows."""
    placed = publish(settings, "t", [(None, f"m{i}") for i in range(8)])
    store = Store(settings)
    try:
        same = db.value(store, "SELECT MIN(created_at) FROM message")
        db.run(store, "UPDATE message SET created_at = :at", {"at": same})
    finally:
        store.close()
    seen: list[tuple[int, int]] = []
    args: list[str] | None = ["msg", "find", "t", "--limit", "3", "--since", "1000d"]
    pages = 0
    while args is not None:
        pages += 1
        assert pages <= 4, f"still paging after {seen}"
        result = run(settings, *args)
        assert result.exit_code == 0, (result.stdout, result.stderr)
        rows = result.stdout.splitlines()[1:]
        seen += [(int(line.split()[0]), int(line.split()[1])) for line in rows]
        args = next_find(result.stderr)
    assert pages == 3
    assert sorted(seen) == sorted((m.partition, m.offset) for m in placed)
    assert len(seen) == len(set(seen)) == 8

    first = ok_json(settings, "msg", "find", "t", "--limit", "5")
    rest = ok_json(
        settings, "msg", "find", "t", "--limit", "5", "--after-id", str(first["next_after_id"])
    )
    assert first["more"] and not rest["more"] and rest["next_after_id"] is None
    ids = [m["id"] for m in first["messages"] + rest["messages"]]
    assert sorted(ids) == ids and len(set(ids)) == 8


def test_msg_find_after_an_id_of_another_topic_or_none_is_bad_input(
    settings: Settings, topic: str
) -> None:
    TopicAdmin(settings).create("other", 1)
    (elsewhere,) = publish(settings, "other", [(None, "x")])
    publish(settings, "t", [(None, "y")])
    other_id = ok_json(settings, "msg", "find", "other")["messages"][0]["id"]
    assert_error(
        run(settings, "msg", "find", "t", "--after-id", str(other_id)), match="not a message of"
    )
    assert_error(run(settings, "msg", "find", "t", "--after-id", "999999"), match="999999")
    assert elsewhere.offset == 0


def test_msg_bad_input_exits_2_and_changes_nothing(settings: Settings, topic: str) -> None:
    publish(settings, "t", [("a", "x")])
    before = snapshot(settings)
    assert_error(run(settings, "msg", "get", "t", "7", "0"), match="no partition 7")
    assert_error(run(settings, "msg", "get", "t", "0", "99"), match="no message at offset 99")
    assert_error(run(settings, "msg", "get", "t", "0", "0", "--id", "1"), match="not both")
    assert_error(run(settings, "msg", "get", "nope", "0", "0"), match="unknown topic")
    assert_error(run(settings, "msg", "find", "t", "--since", "soon"), match="not a datetime")
    assert_error(run(settings, "msg", "find", "t", "--since", "1h", "--until", "2h"))
    assert snapshot(settings) == before


# -- trace ---------------------------------------------------------------------------------


def test_trace_reports_each_group_state(settings: Settings, dead: list[int]) -> None:
    letter = ok_json(settings, "dlq", "show", str(dead[0]))
    place = ("t", str(letter["partition"]), str(letter["offset"]))
    traced = ok_json(settings, "trace", *place)
    (g,) = traced["groups"]
    assert (g["group"], g["state"], g["log"]["attempts"]) == ("g", "dead", 2)
    assert g["dead_letters"][0]["id"] == dead[0]
    text = ok(settings, "trace", *place)
    assert "dead letter" in text and "ValueError: cannot handle bad-" in text
    assert_error(run(settings, "trace", "t", "0", "999"), match="never written")


# -- dlq -----------------------------------------------------------------------------------


def test_dlq_list_and_show(settings: Settings, dead: list[int]) -> None:
    listed = ok_json(settings, "dlq", "list", "--group", "g", "--error", "bad-1")["dead_letters"]
    assert [d["body"] for d in listed] == ["bad-1"]
    table = ok(settings, "dlq", "list")
    assert table.count("ValueError: cannot handle bad-") == 2
    shown = ok(settings, "dlq", "show", str(dead[0]))
    assert "group        g" in shown and 'headers      {"origin":"test"}' in shown
    assert_error(run(settings, "dlq", "show", "999999"), match="no dead letter")
    assert_error(run(settings, "dlq", "list", "--group", "nobody"), match="unknown group")


def test_dlq_show_prints_the_kept_traceback_escaped(settings: Settings, dead: list[int]) -> None:
    shown = ok(settings, "dlq", "show", str(dead[0])).splitlines()
    at = shown.index("traceback")
    kept = shown[at + 1 :]
    assert kept[0] == "  Traceback (most recent call last):"
    assert any(line.strip().startswith('raise ValueError(f"cannot handle') for line in kept)
    record = ok_json(settings, "dlq", "show", str(dead[0]))
    assert kept[-1] == f"  ValueError: cannot handle {record['body']}"
    assert record["last_traceback"].endswith(f"ValueError: cannot handle {record['body']}\n")
    listed = ok_json(settings, "dlq", "list")["dead_letters"]
    assert all("last_traceback" not in d for d in listed)  # a listing does not read them
    # What a handler's exception carries reaches the terminal escaped, line by line.
    hostile = "Traceback (most recent call last):\nValueError: \x1b[2J\x07gone\r\n"
    execute(
        settings, "UPDATE dead_message SET last_traceback = :t WHERE id = :i", t=hostile, i=dead[0]
    )
    shown = ok(settings, "dlq", "show", str(dead[0]))
    assert "\x1b" not in shown and "\x07" not in shown and "\r" not in shown
    assert "  ValueError: \\x1b[2J\\x07gone\\r" in shown.splitlines()
    execute(settings, "UPDATE dead_message SET last_traceback = NULL WHERE id = :i", i=dead[0])
    assert "traceback    -" in ok(settings, "dlq", "show", str(dead[0])).splitlines()


def test_dlq_resend_asks_first_and_publishes_once(settings: Settings, dead: list[int]) -> None:
    before = snapshot(settings)
    declined = run(settings, "dlq", "resend", str(dead[0]), input="n\n")
    assert declined.exit_code == 1 and snapshot(settings) == before
    dry = ok(settings, "dlq", "resend", "--group", "g", "--dry-run")
    assert dry.count("would publish to t") == 2 and snapshot(settings) == before
    out = ok(settings, "dlq", "resend", str(dead[0]), input="y\n")
    assert f"{dead[0]}: published to t" in out
    again = ok_json(settings, "dlq", "resend", "--all", "--yes")
    assert sorted(o["action"] for o in again) == ["published", "skipped"]
    assert scalar(settings, "SELECT COUNT(*) FROM message") == before["message"] + 2
    origin = scalar(
        settings,
        "SELECT JSON_VALUE(headers, '$.\"ems-origin-dead-id\"') FROM message "
        "ORDER BY id DESC LIMIT 1",
    )
    assert origin == str(dead[1])


def test_dlq_resend_to_group_requeues(settings: Settings, dead: list[int]) -> None:
    ok(settings, "dlq", "resend", str(dead[1]), "--to-group", "--yes")
    assert scalar(settings, "SELECT COUNT(*) FROM retry_message WHERE attempts = 0") == 1
    assert scalar(settings, "SELECT COUNT(resent_at) FROM dead_message") == 1


def test_dlq_purge(settings: Settings, dead: list[int]) -> None:
    before = snapshot(settings)
    assert_error(run(settings, "dlq", "purge", "--yes"), match="ask for all")
    assert_error(run(settings, "dlq", "purge", "999999", "--yes"), match="no dead letter")
    assert run(settings, "dlq", "purge", "--all", input="n\n").exit_code == 1
    assert ok(settings, "dlq", "purge", "--all", "--dry-run") == "would delete 2 dead letter(s)\n"
    assert snapshot(settings) == before
    assert ok(settings, "dlq", "purge", "--error", "bad-0", "--yes") == "deleted 1 dead letter(s)\n"
    remaining = ok_json(settings, "dlq", "list")["dead_letters"]
    assert [d["body"] for d in remaining] == ["bad-1"]


def test_dlq_list_through_the_entry_point(settings: Settings, dead: list[int]) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMS_")}
    env.update(EMS_DATABASE_URL=settings.database_url, EMS_REDIS_URL=settings.redis_url)
    result = subprocess.run(
        [sys.executable, "-m", "ems.cli", "dlq", "list", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    letters = json.loads(result.stdout)["dead_letters"]
    assert sorted(d["body"].encode() for d in letters) == sorted(BAD)
