"""How `ems consume` prints deliveries and `ems group describe` prints a group (pure)."""

from __future__ import annotations

import base64
import datetime as dt
import json

import pytest
from click.testing import CliRunner

from ems.cli import cli
from ems.cli.groups import leader_line, report, spans
from ems.cli.render import json_line, json_record, render_bytes, text_line
from ems.groups import (
    GroupDescription,
    LeaderDescription,
    MemberDescription,
    PartitionDescription,
)
from ems.types import Delivery

UNREACHABLE_DB = "mysql+pymysql://root@127.0.0.1:1/ems"
AT = dt.datetime(2026, 11, 22, 1, 2, 3, 456000)


def delivery(body: bytes, key: bytes | None = b"k") -> Delivery:
    return Delivery(
        topic="t",
        partition=2,
        offset=17,
        key=key,
        headers={"unit": "C"},
        body=body,
        timestamp=AT,
        attempt=1,
        message_id=99,
    )


@pytest.mark.parametrize(
    ("body", "shown"),
    [
        (b"hello", "hello"),
        (b"", ""),
        ('{"t": 21.5, "city": "Zürich"}'.encode(), '{"t": 21.5, "city": "Zürich"}'),
        (b"two\nlines\tand\r\x1b[0m", "two\\nlines\\tand\\r\\x1b[0m"),
        (b"\x7f", "\\x7f"),
        (b"\xff\x00\x01", "base64:/wAB"),
        (b"\xc3", "base64:ww=="),  # a cut UTF-8 sequence is not text
    ],
)
def test_render_bytes_text_escaped_binary_as_base64(body: bytes, shown: str) -> None:
    assert render_bytes(body) == shown


def test_render_bytes_cuts_long_bodies_with_a_marker() -> None:
    assert render_bytes(b"x" * 25, 10) == "x" * 10 + "…[+15 chars]"
    assert render_bytes(b"x" * 10, 10) == "x" * 10
    assert render_bytes("é".encode() * 12, 10) == "é" * 10 + "…[+2 chars]"
    assert render_bytes(b"x" * 5000, 0) == "x" * 5000
    binary = bytes(range(256)) * 4
    shown = render_bytes(binary, 16)
    assert shown == "base64:" + base64.b64encode(binary[:12]).decode() + "…[+1012 bytes]"
    assert render_bytes(binary, 0) == "base64:" + base64.b64encode(binary).decode()


def test_text_line_is_one_tab_separated_line() -> None:
    assert text_line(delivery(b"a\nb")) == "2\t17\tk\ta\\nb"
    assert text_line(delivery(b"v", key=None)) == "2\t17\t-\tv"
    assert text_line(delivery(b"v", key=b"\xfe")) == "2\t17\tbase64:/g==\tv"
    assert text_line(delivery(b"abcdef"), 3) == "2\t17\tk\tabc…[+3 chars]"


def test_json_line_is_exact() -> None:
    record = json.loads(json_line(delivery(b"x" * 3000 + b"\n")))
    assert record == {
        "topic": "t",
        "partition": 2,
        "offset": 17,
        "key": "k",
        "key_encoding": "utf-8",
        "headers": {"unit": "C"},
        "body": "x" * 3000 + "\n",
        "body_encoding": "utf-8",
        "timestamp": "2026-11-22T01:02:03.456000Z",
        "attempt": 1,
    }
    assert "\n" not in json_line(delivery(b"a\nb"))
    binary = json_record(delivery(b"\xff\xfe", key=None))
    assert (binary["body"], binary["body_encoding"]) == ("//4=", "base64")
    assert (binary["key"], binary["key_encoding"]) == (None, None)


def test_spans_folds_runs() -> None:
    assert spans([]) == "-"
    assert spans([3]) == "3"
    assert spans([0, 1, 2, 3, 7, 9, 10]) == "0-3,7,9-10"
    assert spans([5, 4, 1]) == "1,4-5"


EXPIRES = dt.datetime(2026, 11, 22, 1, 0, 10, tzinfo=dt.UTC)


def description(*, live: bool) -> GroupDescription:
    leader = LeaderDescription(
        client_id="c1", epoch=3, lease_expires_at=EXPIRES, seconds_left=8.25, live=live
    )
    members = (
        MemberDescription(
            client_id="c1",
            host="10.0.0.1",
            pid=42,
            lease_expires_at=EXPIRES,
            seconds_left=8.25,
            live=True,
            partitions=(0, 1),
        ),
    )
    partitions = tuple(
        PartitionDescription(
            partition=p,
            owner="c1",
            owner_live=live,
            state="assigned",
            generation=2,
            committed_offset=c,
            high_watermark=h,
            lag=h - c,
        )
        for p, c, h in ((0, 4, 6), (1, 3, 3))
    )
    return GroupDescription(
        group="svc",
        topic="readings",
        mode="cluster",
        start_position="earliest",
        ordered=False,
        retry_ladder="10s 1m",
        max_attempts=5,
        ack_timeout_seconds=60,
        generation=2,
        leader=leader,
        members=members if live else (),
        partitions=partitions,
        total_lag=2,
    )


def test_report_of_a_group_with_a_live_member() -> None:
    lines = report(description(live=True)).splitlines()
    assert lines[:3] == [
        "group svc on topic readings: cluster, unordered, generation 2",
        "start earliest; retry ladder 10s 1m; max attempts 5; ack timeout 60s",
        "leader: c1 (epoch 3, lease until 2026-11-22 01:00:10+00:00, 8.2s left)",
    ]
    assert lines[4].split() == [
        "client",
        "host",
        "pid",
        "lease",
        "expires",
        "seconds",
        "left",
        "lease",
        "partitions",
    ]
    assert lines[5].split() == [
        "c1",
        "10.0.0.1",
        "42",
        "2026-11-22",
        "01:00:10+00:00",
        "8.2",
        "live",
        "0-1",
    ]
    assert [line.split() for line in lines[7:-1]] == [
        ["partition", "owner", "state", "generation", "committed", "high", "watermark", "lag"],
        ["0", "c1", "assigned", "2", "4", "6", "2"],
        ["1", "c1", "assigned", "2", "3", "3", "0"],
        ["total", "7", "9", "2"],
    ]
    assert lines[-1] == (
        "beside the lag: 0 waiting in the retry table, 0 dead letters not resent; "
        "oldest unconsumed message: -"
    )


def test_report_after_the_members_left() -> None:
    lines = report(description(live=False)).splitlines()
    assert lines[2] == "leader: none (last c1, epoch 3, lease ended 2026-11-22 01:00:10+00:00)"
    assert lines[4] == "members: none"
    assert lines[7].split()[:3] == ["0", "c1", "(gone)"]


def test_leader_line_without_a_leader() -> None:
    assert leader_line(None) == "leader: none"


@pytest.mark.parametrize(
    "args",
    [
        ["group", "describe", "bad/name"],
        ["consume", "t", "--group", "bad/name"],
        ["consume", "bad/topic", "--group", "g"],
    ],
)
def test_bad_names_exit_2_before_any_connection(args: list[str]) -> None:
    # The database URL points nowhere: reaching it would exit 3, not 2.
    result = CliRunner().invoke(cli, args, env={"EMS_DATABASE_URL": UNREACHABLE_DB})
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: ") and "must match" in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["consume", "t"],
        ["consume", "t", "--group", "g", "--max-messages", "0"],
        ["consume", "t", "--group", "g", "--max-body", "-1"],
        ["group", "describe"],
    ],
)
def test_consume_and_group_usage_errors_exit_2(args: list[str]) -> None:
    result = CliRunner().invoke(cli, args, env={"EMS_DATABASE_URL": UNREACHABLE_DB})
    assert result.exit_code == 2
    assert "Usage:" in result.stderr


def test_nothing_a_terminal_acts_on_gets_through_and_escapes_cannot_be_forged() -> None:
    """C1 controls (0x9b is a one-byte CSI), direction overrides and zero-width characters
    are escaped too, and a literal backslash is doubled, so a body cannot print a line
    that looks like an escaped one."""
    shown = render_bytes("a\x9b31mb\u202ec\u200bd\\x1b".encode())
    assert shown == "a\\x9b31mb\\u202ec\\u200bd\\\\x1b"
    assert shown.isprintable()
