"""`ems consume` and `ems group describe` end to end: the CLI runs in subprocesses against
the real MariaDB and Redis; messages are produced in-process."""

from __future__ import annotations

import base64
import json
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import replace

import pytest

from ems.config import Settings
from ems.exceptions import UnknownGroup
from ems.groups import GroupAdmin, GroupDescription
from ems.producer import Producer
from ems.topics import TopicAdmin
from ems.types import Record, RecordMetadata
from tests.e2e.test_cli import UNREACHABLE_DB, Cli, assert_clean_error
from tests.json_times import is_json_time

Row = tuple[int, int, str, str]


@pytest.fixture
def cli(settings: Settings) -> Cli:
    return Cli(settings)


def produce(settings: Settings, topic: str, records: Sequence[Record]) -> list[Row]:
    """Publish records; (partition, offset, key, body) as `ems consume` shows them."""
    with Producer(settings) as producer:
        placed: list[RecordMetadata] = producer.send_batch(topic, list(records))
    return [
        (m.partition, m.offset, "-" if r.key is None else str(r.key), str(r.body))
        for m, r in zip(placed, records, strict=True)
    ]


def texts(prefix: str, count: int, key: str | None = None) -> list[Record]:
    return [Record(f"{prefix} {i}", key=key) for i in range(count)]


def rows(output: str) -> list[Row]:
    parsed = []
    for line in output.splitlines():
        partition, offset, key, body = line.split("\t")
        parsed.append((int(partition), int(offset), key, body))
    return parsed


def assert_partition_order(got: Sequence[Row]) -> None:
    last: dict[int, int] = {}
    for partition, offset, _, _ in got:
        assert offset > last.get(partition, -1), f"p{partition} offset {offset} out of order"
        last[partition] = offset


def describe(settings: Settings, group: str) -> GroupDescription:
    with closing(GroupAdmin(settings)) as admin:
        [described] = admin.describe(group)
    return described


def wait_for(what: str, check: Callable[[], bool], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@contextmanager
def running(process: subprocess.Popen[str]) -> Iterator[subprocess.Popen[str]]:
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


# -- consume ---------------------------------------------------------------------------


def test_consume_from_beginning_then_resume_from_the_committed_cursor(
    cli: Cli, settings: Settings
) -> None:
    with closing(TopicAdmin(settings)) as admin:
        admin.create("orders", 3)
    first = produce(settings, "orders", texts("keyed", 5, key="project-7") + texts("free", 7))

    result = cli.run("consume", "orders", "--group", "billing", "--from-beginning", "-n", "12")
    assert result.returncode == 0, result.stderr
    got = rows(result.stdout)
    assert sorted(got) == sorted(first)
    assert_partition_order(got)
    assert result.stderr.startswith("consuming orders as cluster group billing, client ")
    assert result.stderr.endswith("consumed 12 messages from orders\n")

    later = produce(settings, "orders", texts("later", 4))
    again = cli.run("consume", "orders", "--group", "billing", "--max-messages", "4")
    assert again.returncode == 0, again.stderr
    assert sorted(rows(again.stdout)) == sorted(later)

    d = describe(settings, "billing")
    assert (d.mode, d.start_position, d.total_lag, d.members) == ("cluster", "earliest", 0, ())
    assert [p.committed_offset for p in d.partitions] == [p.high_watermark for p in d.partitions]
    assert sum(p.high_watermark for p in d.partitions) == 16


def test_consume_json_lines_and_unusual_bodies(cli: Cli, settings: Settings) -> None:
    with closing(TopicAdmin(settings)) as admin:
        admin.create("mixed", 1)
    bodies = [b'{"t": 21.5}', b"two\nlines", b"\xff\x00binary", b"", "Zürich".encode()]
    produce(settings, "mixed", [Record(b, key="k") for b in bodies])
    produce(settings, "mixed", [Record(b"x" * 30, headers={"unit": "C"})])

    out = cli.ok("consume", "mixed", "-g", "reader", "--from-beginning", "-n", "6", "--json")
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["offset"] for r in records] == list(range(6))
    decoded = [
        base64.b64decode(r["body"]) if r["body_encoding"] == "base64" else r["body"].encode()
        for r in records
    ]
    assert decoded == [*bodies, b"x" * 30]
    assert [r["body_encoding"] for r in records] == ["utf-8", "utf-8", "base64"] + ["utf-8"] * 3
    assert records[0]["key"] == "k" and records[5]["key"] is None
    assert records[5]["headers"] == {"unit": "C"}
    assert all(r["topic"] == "mixed" and r["attempt"] == 1 for r in records)
    assert all(is_json_time(r["timestamp"]) for r in records)

    text = cli.ok(
        "consume", "mixed", "-g", "viewer", "--from-beginning", "-n", "6", "--max-body", "8"
    )
    assert [line.split("\t", 3)[3] for line in text.splitlines()] == [
        '{"t": 21.5}'[:8] + "…[+3 chars]",
        "two\\nline…[+1 chars]",
        "base64:/wBiaW5h…[+2 bytes]",
        "",
        "Zürich",
        "x" * 8 + "…[+22 chars]",
    ]


def test_broadcast_members_each_get_every_message(cli: Cli, settings: Settings) -> None:
    with closing(TopicAdmin(settings)) as admin:
        admin.create("alerts", 2)
    sent = produce(settings, "alerts", texts("alert", 6))
    args = ("consume", "alerts", "-g", "screens", "--broadcast", "--from-beginning")
    with running(cli.popen(*args, "-n", "6")) as one, running(cli.popen(*args)) as two:
        assert two.stdout is not None
        followed = rows("".join(two.stdout.readline() for _ in sent))
        two.send_signal(signal.SIGINT)  # Ctrl-C: leave cleanly
        out_two, err_two = two.communicate(timeout=30)
        out_one, err_one = one.communicate(timeout=30)
    assert one.returncode == 0, err_one
    assert sorted(rows(out_one)) == sorted(sent)
    assert two.returncode == 0, err_two
    assert "Traceback" not in err_two and err_two.endswith("consumed 6 messages from alerts\n")
    assert (out_two, sorted(followed)) == ("", sorted(sent))
    d = describe(settings, "screens")
    assert (d.mode, d.leader, d.members, d.total_lag) == ("broadcast", None, (), None)
    assert [p.high_watermark for p in d.partitions] == [
        sum(1 for r in sent if r[0] == p) for p in (0, 1)
    ]


def test_closed_output_stops_without_acking_what_was_not_printed(
    cli: Cli, settings: Settings
) -> None:
    with closing(TopicAdmin(settings)) as admin:
        admin.create("feed", 1)
    produce(settings, "feed", texts("old", 3))
    with running(cli.popen("consume", "feed", "-g", "pager", "--from-beginning")) as reader:
        assert reader.stdout is not None and reader.stderr is not None
        assert [reader.stdout.readline() for _ in range(3)] == [
            f"0\t{i}\t-\told {i}\n" for i in range(3)
        ]
        wait_for("the batch to be committed", lambda: describe(settings, "pager").total_lag == 0)
        reader.stdout.close()  # like `| head -n 3`
        produce(settings, "feed", texts("new", 2))
        err = reader.stderr.read()
        assert reader.wait(timeout=30) == 1
    assert "Traceback" not in err
    assert err.endswith("error: output closed; unprinted messages will be delivered again\n")
    [partition] = describe(settings, "pager").partitions
    assert (partition.committed_offset, partition.high_watermark) == (3, 5)
    again = cli.ok("consume", "feed", "-g", "pager", "-n", "2")
    assert rows(again) == [(0, 3, "-", "new 0"), (0, 4, "-", "new 1")]


def test_consume_bad_input_exits_2_and_creates_nothing(cli: Cli, settings: Settings) -> None:
    with closing(TopicAdmin(settings)) as admin:
        admin.create("orders", 2)

    unknown = cli.run("consume", "nope", "--group", "g1")
    assert_clean_error(unknown, 2)
    assert unknown.stderr == "error: unknown topic 'nope'\n"

    bad_name = cli.run("consume", "orders", "--group", "no spaces")
    assert_clean_error(bad_name, 2)
    assert "group 'no spaces' must match" in bad_name.stderr

    with closing(GroupAdmin(settings)) as admin:
        for name in ("g1", "no-spaces"):
            with pytest.raises(UnknownGroup):
                admin.describe(name)

    produce(settings, "orders", texts("m", 2))
    cli.ok("consume", "orders", "--group", "g1", "--from-beginning", "-n", "2")
    before = describe(settings, "g1")
    conflict = cli.run("consume", "orders", "--group", "g1", "--broadcast")
    assert_clean_error(conflict, 2)
    assert conflict.stderr == (
        "error: group 'g1' on topic 'orders' exists and its mode is 'cluster', not 'broadcast'\n"
    )
    assert unchanged(describe(settings, "g1")) == unchanged(before)


def unchanged(d: GroupDescription) -> GroupDescription:
    """The description without the ticking lease clocks."""
    leader = d.leader and replace(d.leader, seconds_left=0.0)
    members = tuple(replace(m, seconds_left=0.0) for m in d.members)
    return replace(d, leader=leader, members=members)


@pytest.mark.parametrize("args", [("consume", "t", "--group", "g"), ("group", "describe", "g")])
def test_database_unreachable_exits_3(cli: Cli, args: tuple[str, ...]) -> None:
    result = cli.run(*args, env={"EMS_DATABASE_URL": UNREACHABLE_DB})
    assert_clean_error(result, 3)
    assert "MySQL is unreachable" in result.stderr


# -- group describe --------------------------------------------------------------------


def committed_and_lag(d: GroupDescription) -> list[tuple[int | None, int, int | None]]:
    return [(p.committed_offset, p.high_watermark, p.lag) for p in d.partitions]


def test_group_describe_with_a_live_consumer_and_after_it_leaves(
    cli: Cli, settings: Settings
) -> None:
    with closing(TopicAdmin(settings)) as admin:
        admin.create("readings", 3)
    sent = produce(settings, "readings", texts("r", 9))
    marks = {p: sum(1 for r in sent if r[0] == p) for p in range(3)}

    # Part consumed, nobody connected: lag is what is left.
    early = rows(cli.ok("consume", "readings", "-g", "store", "--from-beginning", "-n", "4"))
    idle = json.loads(cli.ok("group", "describe", "store", "--json"))
    assert len(idle) == 1 and idle[0]["members"] == []
    parts = idle[0]["partitions"]
    assert [p["high_watermark"] for p in parts] == [marks[0], marks[1], marks[2]]
    assert sum(p["committed_offset"] for p in parts) == 4
    assert all(p["lag"] == p["high_watermark"] - p["committed_offset"] for p in parts)
    assert idle[0]["total_lag"] == 5
    assert idle[0]["leader"]["live"] is False

    with running(cli.popen("consume", "readings", "-g", "store")) as live:
        assert live.stdout is not None
        # Lines arrive while the consumer runs: each one is flushed.
        first = rows("".join(live.stdout.readline() for _ in range(5)))
        wait_for("the consumer to join and catch up", lambda: caught_up(settings, 9))
        more = produce(settings, "readings", texts("new", 2))
        second = rows(live.stdout.readline() + live.stdout.readline())
        wait_for("the consumer to commit the new messages", lambda: caught_up(settings, 11))

        d = describe(settings, "store")
        [member] = d.members
        assert (member.pid, member.live, member.partitions) == (live.pid, True, (0, 1, 2))
        assert 0 < member.seconds_left <= 10
        assert d.leader is not None and d.leader.live
        assert d.leader.client_id == member.client_id
        assert all(p.owner == member.client_id and p.owner_live for p in d.partitions)
        assert all(p.state == "assigned" for p in d.partitions)

        text = cli.ok("group", "describe", "store").splitlines()
        assert text[0].startswith("group store on topic readings: cluster, unordered")
        assert text[2].startswith(f"leader: {member.client_id} (epoch {d.leader.epoch}, ")
        assert text[4].split()[:3] == ["client", "host", "pid"]
        assert text[5].split()[0] == member.client_id
        assert text[5].split()[-3:][1:] == ["live", "0-2"]
        table = [line.split() for line in text[7:-1]]
        assert table[-1] == ["total", "11", "11", "0"]
        assert text[-1].startswith("beside the lag: 0 waiting in the retry table, 0 dead")
        assert [r[1] for r in table[1:4]] == [member.client_id] * 3

        live.send_signal(signal.SIGTERM)
        _, err = live.communicate(timeout=30)
    assert live.returncode == 0, err
    assert "Traceback" not in err
    assert err.endswith("consumed 7 messages from readings\n")
    assert sorted(early + first + second) == sorted(sent + more)  # each exactly once

    after = describe(settings, "store")
    assert after.members == ()
    assert after.leader is not None and not after.leader.live
    final = [marks[p] + sum(1 for r in more if r[0] == p) for p in range(3)]
    assert committed_and_lag(after) == [(m, m, 0) for m in final]
    text = cli.ok("group", "describe", "store").splitlines()
    assert text[2].startswith(f"leader: none (last {member.client_id}, ")
    assert text[4] == "members: none"
    assert all(line.split()[2] == "(gone)" for line in text[7:10])


def caught_up(settings: Settings, total: int) -> bool:
    d = describe(settings, "store")
    committed = sum(p.committed_offset or 0 for p in d.partitions)
    return len(d.members) == 1 and d.total_lag == 0 and committed == total


def test_describe_unknown_group_exits_2(cli: Cli) -> None:
    result = cli.run("group", "describe", "nope")
    assert_clean_error(result, 2)
    assert result.stderr == "error: unknown group 'nope'\n"
