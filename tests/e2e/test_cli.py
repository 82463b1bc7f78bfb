"""The `ems` command line end to end: each test runs `python -m ems.cli` in a subprocess
against the real MariaDB and Redis, configured only through EMS_* variables."""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import closing
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import create_engine, text

from benchmarks.cpu import stat_fields
from ems import Producer
from ems.cli.app import cli as cli_app
from ems.config import Settings
from ems.offsets.reader import Reader
from ems.store import migrate
from ems.topics import TopicAdmin
from tests import forked
from tests.integration.seeding import scalar

UNREACHABLE_DB = "mysql+pymysql://root@127.0.0.1:1/ems"
UNREACHABLE_REDIS = "redis://127.0.0.1:1/0"
PROGRESS = re.compile(
    r"^\s*\d+\.\ds\s+publish\s+\d+ msg/s\s+consume\s+-?\d+ msg/s\s+lag [\w.-]+ \d+\s+"
    r"((handler-\d+|[\w.-]+)\[[\d,]*\]\s*)*(\(no members\))?$"
)


class Cli:
    """Runs the CLI in its own process with a clean EMS_* environment: one-shot commands
    forked from a warm interpreter, long-running ones (popen) in a fresh one."""

    def __init__(self, settings: Settings) -> None:
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("EMS_")}
        self.env.update(
            EMS_DATABASE_URL=settings.database_url,
            EMS_REDIS_URL=settings.redis_url,
            EMS_GAP_TIMEOUT="1",
        )

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "ems.cli", *args]

    def run(
        self,
        *args: str,
        input: str | None = None,
        timeout: float = 60,
        env: Mapping[str, str] | None = None,
        fresh: bool = False,
    ) -> subprocess.CompletedProcess[str]:
        """fresh: in a new interpreter, for a command that starts processes of its own."""
        environ = {**self.env, **(env or {})}
        if not fresh:
            return forked.run("ems.cli", args, env=environ, input=input, timeout=timeout)
        return subprocess.run(
            self.command(*args),
            input=input,
            env=environ,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def ok(self, *args: str, input: str | None = None) -> str:
        result = self.run(*args, input=input)
        assert result.returncode == 0, result.stderr
        return result.stdout

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.command(*args),
            env=self.env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            # As from a terminal: a suite started in the background (where a shell without
            # job control ignores SIGINT) would otherwise hand its children an ignored Ctrl-C.
            preexec_fn=_default_sigint,
        )


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture
def cli(settings: Settings) -> Cli:
    return Cli(settings)


def assert_clean_error(result: subprocess.CompletedProcess[str], code: int) -> None:
    assert result.returncode == code, (result.stdout, result.stderr)
    assert result.stderr.startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr


def stored_topics(cli: Cli) -> list[str]:
    return [t["name"] for t in json.loads(cli.ok("topic", "list", "--json"))]


def tail_lines(output: str) -> list[tuple[int, int, str, str]]:
    rows = []
    for line in output.splitlines():
        partition, offset, key, body = line.split("\t")
        rows.append((int(partition), int(offset), key, body))
    return rows


def assert_offset_order(rows: Sequence[tuple[int, int, str, str]]) -> None:
    last: dict[int, int] = {}
    for partition, offset, _, _ in rows:
        assert offset > last.get(partition, -1), f"p{partition} offset {offset} out of order"
        last[partition] = offset


# -- topics ------------------------------------------------------------------------------


def test_topic_create_if_not_exists_runs_twice_and_refuses_a_different_topic(cli: Cli) -> None:
    args = ("topic", "create", "orders", "--partitions", "3", "--if-not-exists")
    assert cli.ok(*args) == "created topic orders with 3 partitions\n"
    assert cli.ok(*args) == "topic orders exists with 3 partitions\n"
    again = cli.run("topic", "create", "orders", "--partitions", "3")
    assert_clean_error(again, 2)  # without the flag, as before
    other = cli.run("topic", "create", "orders", "--partitions", "4", "--if-not-exists")
    assert_clean_error(other, 2)
    assert "partitions=3 (asked 4)" in other.stderr
    assert stored_topics(cli) == ["orders"]


def test_topic_create_list_describe(cli: Cli) -> None:
    out = cli.ok(
        "topic",
        "create",
        "orders",
        "--partitions",
        "3",
        "--retention-hours",
        "24",
        "--max-body-bytes",
        "2048",
    )
    assert out == "created topic orders with 3 partitions\n"
    cli.ok("topic", "create", "audit", "--partitions", "1")

    listing = cli.ok("topic", "list").splitlines()
    assert listing[0].split() == [
        "name",
        "partitions",
        "retention",
        "hours",
        "max",
        "body",
        "bytes",
        "created",
    ]
    assert [line.split()[:4] for line in listing[1:]] == [
        ["audit", "1", "168", "1048576"],
        ["orders", "3", "24", "2048"],
    ]
    listed = json.loads(cli.ok("topic", "list", "--json"))
    assert [
        (t["name"], t["partitions"], t["retention_hours"], t["max_body_bytes"]) for t in listed
    ] == [("audit", 1, 168, 1048576), ("orders", 3, 24, 2048)]
    assert all(isinstance(t["created_at"], str) for t in listed)

    cli.ok("produce", "orders", input="a\nb\nc\nd\ne\n")
    described = cli.ok("topic", "describe", "orders").splitlines()
    assert described[0] == "topic orders: 3 partitions"
    rows = [line.split() for line in described[2:]]
    assert [r[0] for r in rows] == ["0", "1", "2", "total"]
    assert sum(int(r[3]) for r in rows[:3]) == 5
    assert rows[3] == ["total", "5", "-"]

    exact = [
        line.split() for line in cli.ok("topic", "describe", "orders", "--exact").splitlines()[2:]
    ]
    assert exact[3] == ["total", "5", "0"]

    info = json.loads(cli.ok("topic", "describe", "orders", "--json", "--exact"))
    assert info["name"] == "orders" and info["partitions"] == 3
    stats = info["partition_stats"]
    assert [s["partition"] for s in stats] == [0, 1, 2]
    assert sum(s["high_watermark"] for s in stats) == 5
    assert sum(s["messages"] for s in stats) == 5
    assert info["totals"] == {"messages": 5, "tombstones": 0}


def test_describe_empty_topic_shows_no_low_watermark(cli: Cli) -> None:
    cli.ok("topic", "create", "empty", "--partitions", "2")
    stats = json.loads(cli.ok("topic", "describe", "empty", "--json"))["partition_stats"]
    assert [(s["low_watermark"], s["high_watermark"]) for s in stats] == [(None, 0)] * 2
    rows = [line.split() for line in cli.ok("topic", "describe", "empty").splitlines()[2:]]
    assert rows[:2] == [["0", "-", "0", "0", "-"], ["1", "-", "0", "0", "-"]]


def test_create_existing_topic_exits_2(cli: Cli) -> None:
    cli.ok("topic", "create", "orders", "--partitions", "3")
    result = cli.run("topic", "create", "orders", "--partitions", "5")
    assert_clean_error(result, 2)
    assert result.stderr == "error: topic 'orders' already exists\n"
    assert json.loads(cli.ok("topic", "list", "--json"))[0]["partitions"] == 3


@pytest.mark.parametrize(
    ("name", "partitions", "message"),
    [
        ("bad/name", "1", "must match"),
        ("ok", "0", "partitions must be an integer from 1 to 4096"),
        ("ok", "5000", "partitions must be an integer from 1 to 4096"),
    ],
)
def test_invalid_topic_exits_2_and_creates_nothing(
    cli: Cli, name: str, partitions: str, message: str
) -> None:
    result = cli.run("topic", "create", name, "--partitions", partitions)
    assert_clean_error(result, 2)
    assert message in result.stderr
    assert stored_topics(cli) == []


def test_describe_unknown_topic_exits_2(cli: Cli) -> None:
    result = cli.run("topic", "describe", "nope")
    assert_clean_error(result, 2)
    assert "unknown topic 'nope'" in result.stderr


# -- produce and tail --------------------------------------------------------------------


def test_produce_verbose_then_tail_from_beginning(cli: Cli, settings: Settings) -> None:
    cli.ok("topic", "create", "events", "--partitions", "4")
    bodies = [f"event {i}" for i in range(20)] + ["tab\tinside", ""]
    result = cli.run("produce", "events", "--verbose", input="".join(b + "\n" for b in bodies))
    assert result.returncode == 0, result.stderr
    placed = [tuple(map(int, line.split())) for line in result.stdout.splitlines()]
    assert len(placed) == len(bodies)
    assert {p for p, _ in placed} == {0, 1, 2, 3}
    assert result.stderr == f"produced {len(bodies)} messages to events\n"

    out = cli.ok(
        "tail", "events", "--from-beginning", "--max-messages", str(len(bodies)), "--timeout", "30"
    )
    lines = out.splitlines()
    assert len(lines) == len(bodies)
    rows = [(int(p), int(o), k, b) for p, o, k, b in (line.split("\t", 3) for line in lines)]
    assert_offset_order(rows)
    where = {(p, o): body for p, o, _, body in rows}
    shown = [body.replace("\t", "\\t") for body in bodies]  # escaped: one column each
    assert where == {pos: body for pos, body in zip(placed, shown, strict=True)}
    assert {key for _, _, key, _ in rows} == {"-"}


def test_produce_with_key_and_headers(cli: Cli, settings: Settings) -> None:
    cli.ok("topic", "create", "keyed", "--partitions", "8")
    out = cli.ok(
        "produce",
        "keyed",
        "--key",
        "project-7",
        "--header",
        "source=cli",
        "--header",
        "expr=a=b",
        "--verbose",
        input="one\ntwo\nthree",
    )
    placed = [tuple(map(int, line.split())) for line in out.splitlines()]
    partition = placed[0][0]
    assert placed == [(partition, 0), (partition, 1), (partition, 2)]

    rows = tail_lines(cli.ok("tail", "keyed", "--from-beginning", "-n", "3", "--timeout", "30"))
    assert rows == [(partition, i, "project-7", b) for i, b in enumerate(["one", "two", "three"])]
    with closing(Reader(settings)) as reader:
        batch = reader.read_partition("keyed", partition, 0)
    assert [m.headers for m in batch.messages] == [{"source": "cli", "expr": "a=b"}] * 3


def test_produce_in_batches(cli: Cli, settings: Settings) -> None:
    cli.ok("topic", "create", "bulk", "--partitions", "2")
    result = cli.run("produce", "bulk", input="".join(f"{i}\n" for i in range(1234)))
    assert result.returncode == 0, result.stderr
    assert result.stderr == "produced 1234 messages to bulk\n"
    with closing(Reader(settings)) as reader:
        assert sum(reader.high_watermarks("bulk").values()) == 1234


def stored_bodies(settings: Settings, topic: str) -> list[bytes]:
    with closing(Reader(settings)) as reader:
        bodies = [
            m.body
            for partition, high in reader.high_watermarks(topic).items()
            for m in reader.read_partition(topic, partition, 0, max(1, high)).messages
        ]
    return sorted(bodies)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_produce_sends_lines_as_they_arrive_and_flushes_on_a_signal(
    cli: Cli, settings: Settings, sig: signal.Signals, tmp_path: Path
) -> None:
    """`tail -F app.log | ems produce T`: a line is published soon after it arrives, not
    when 500 have, and Ctrl-C or SIGTERM sends what was read before it ends."""
    cli.ok("topic", "create", "live", "--partitions", "2")
    read_end, write_end = os.pipe()
    errors = tmp_path / "stderr"
    with open(read_end, "rb") as stdin, errors.open("w") as stderr:
        child = forked.spawn(
            "ems.cli", ["produce", "live"], env=cli.env, stdin=stdin, stderr=stderr
        )
    with open(write_end, "wb", buffering=0) as pipe:  # kept open: no end of input
        try:
            pipe.write(b"one\ntwo\nthree\n")
            deadline = time.monotonic() + 30
            while stored_bodies(settings, "live") != [b"one", b"three", b"two"]:
                assert child.poll() is None, errors.read_text()
                assert time.monotonic() < deadline, "lines held back while stdin stays open"
                time.sleep(0.05)
            # Lines in the pipe when the signal comes are read and sent; an unfinished
            # one is not (it is not a line yet) and is reported.
            pipe.write(b"four\nfive\nsi")
            child.send_signal(sig)
            code = child.wait(timeout=30)
        finally:
            child.kill()
    report = errors.read_text()
    assert code == 0, report
    assert "Traceback" not in report and "Aborted" not in report
    assert report.splitlines()[-2:] == [
        f"{sig.name}: an unfinished line (2 bytes, no newline yet) was not sent",
        f"produced 5 messages to live (stopped by {sig.name})",
    ]
    assert stored_bodies(settings, "live") == sorted([b"one", b"two", b"three", b"four", b"five"])


def test_tail_shows_bodies_safely_and_raw_bytes_on_request(cli: Cli, settings: Settings) -> None:
    """A body cannot act on the operator's terminal or break the columns; --raw writes
    the bytes for a pipe that wants them."""
    cli.ok("topic", "create", "odd", "--partitions", "1")
    bodies = [b"\x1b[2J\x1b]0;owned\x07red", b"a\tb\rc\nd", b"\xff\xfebinary", b"plain"]
    with Producer(settings) as producer:
        for body in bodies:
            producer.send("odd", body, key=b"k\x1b[0m")
    args = ("tail", "odd", "--from-beginning", "-n", "4", "--timeout", "30")
    out = cli.ok(*args)
    assert "\x1b" not in out and "\r" not in out
    assert [line.split("\t") for line in out.splitlines()] == [
        ["0", "0", "k\\x1b[0m", "\\x1b[2J\\x1b]0;owned\\x07red"],
        ["0", "1", "k\\x1b[0m", "a\\tb\\rc\\nd"],
        ["0", "2", "k\\x1b[0m", "base64:" + base64.b64encode(b"\xff\xfebinary").decode()],
        ["0", "3", "k\\x1b[0m", "plain"],
    ]
    raw = CliRunner().invoke(cli_app, [*args, "--raw"], obj=settings)
    assert raw.exit_code == 0, raw.stderr
    assert raw.stdout_bytes == b"".join(
        b"0\t%d\tk\x1b[0m\t%b\n" % (offset, body) for offset, body in enumerate(bodies)
    )


def test_tail_starts_at_the_end(cli: Cli) -> None:
    cli.ok("topic", "create", "live", "--partitions", "3")
    cli.ok("produce", "live", input="old 1\nold 2\nold 3\n")
    tail = cli.popen("tail", "live", "--max-messages", "2", "--timeout", "30")
    try:
        assert tail.stderr is not None
        started = tail.stderr.readline()  # printed once the start offsets are taken
        assert started.startswith("following live from the end: p0=")
        cli.ok("produce", "live", input="new 1\nnew 2\n")
        out, _ = tail.communicate(timeout=40)
    finally:
        tail.kill()
    assert tail.returncode == 0
    rows = tail_lines(out)
    assert sorted(body for *_, body in rows) == ["new 1", "new 2"]


def test_tail_one_partition_and_timeout(cli: Cli) -> None:
    cli.ok("topic", "create", "parts", "--partitions", "3")
    placed = [
        tuple(map(int, line.split()))
        for line in cli.ok("produce", "parts", "-v", input="a\nb\nc\nd\ne\nf\n").splitlines()
    ]
    started = time.monotonic()
    out = cli.ok("tail", "parts", "--from-beginning", "--partition", "1", "--timeout", "1.5")
    assert 1.5 <= time.monotonic() - started < 20
    rows = tail_lines(out)
    assert [(p, o) for p, o, *_ in rows] == sorted(pos for pos in placed if pos[0] == 1)

    result = cli.run("tail", "parts", "--partition", "3", "--timeout", "1")
    assert_clean_error(result, 2)
    assert "has no partition 3" in result.stderr


def test_produce_to_unknown_topic_exits_2(cli: Cli) -> None:
    result = cli.run("produce", "nope", input="x\n")
    assert_clean_error(result, 2)
    assert result.stderr == "error: unknown topic 'nope'\n"


def test_produce_body_too_large_exits_2(cli: Cli, settings: Settings) -> None:
    cli.ok("topic", "create", "small", "--partitions", "1", "--max-body-bytes", "10")
    result = cli.run("produce", "small", input="short\n" + "x" * 11 + "\n")
    assert_clean_error(result, 2)
    assert "exceeds the topic's max of 10" in result.stderr
    with closing(TopicAdmin(settings)) as admin:
        assert sum(s.messages for s in admin.describe("small")) == 0  # all or none


# -- unreachable servers ------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ("topic", "list"),
        ("topic", "describe", "t"),
        ("produce", "t"),
        ("tail", "t"),
        ("db", "current"),
        ("db", "create"),
        ("db", "upgrade"),
    ],
)
def test_database_unreachable_exits_3(cli: Cli, args: tuple[str, ...]) -> None:
    result = cli.run(*args, input="x\n", env={"EMS_DATABASE_URL": UNREACHABLE_DB})
    assert_clean_error(result, 3)
    assert "MySQL is unreachable" in result.stderr


def test_a_mysql_or_mariadb_url_works_as_most_people_write_it(cli: Cli, settings: Settings) -> None:
    cli.ok("topic", "create", "t", "--partitions", "1")
    for scheme in ("mysql", "mariadb"):
        url = scheme + "://" + settings.database_url.split("://", 1)[1]
        result = cli.run("topic", "list", env={"EMS_DATABASE_URL": url})
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines()[1].split()[0] == "t"


@pytest.mark.parametrize(
    "url",
    ["postgresql://ems:hunter2@127.0.0.1/ems", "mysql+mysqldb://ems:hunter2@127.0.0.1/ems"],
)
def test_a_database_url_ems_cannot_serve_exits_2(cli: Cli, url: str) -> None:
    result = cli.run("topic", "list", env={"EMS_DATABASE_URL": url})
    assert_clean_error(result, 2)
    assert "EMS_DATABASE_URL" in result.stderr and "mysql://" in result.stderr
    assert "hunter2" not in result.stderr


@pytest.mark.parametrize(
    "args", [("topic", "list"), ("produce", "t"), ("tail", "t"), ("db", "current")]
)
def test_a_database_that_does_not_exist_exits_2_and_says_to_create_it(
    cli: Cli, fresh_database: Settings, args: tuple[str, ...]
) -> None:
    started = time.monotonic()
    result = cli.run(*args, input="x\n", env={"EMS_DATABASE_URL": fresh_database.database_url})
    assert_clean_error(result, 2)
    assert f"database {fresh_database.database_name!r} does not exist" in result.stderr
    assert "ems db create" in result.stderr
    assert "unreachable" not in result.stderr
    assert time.monotonic() - started < 10  # refused at once, not retried as a lost server


def test_a_password_the_server_refuses_exits_2_at_once(cli: Cli, settings: Settings) -> None:
    url = settings.database_url.replace("root@", "root:wrong@")
    started = time.monotonic()
    result = cli.run("produce", "t", input="x\n", env={"EMS_DATABASE_URL": url})
    assert_clean_error(result, 2)
    assert "refused the user" in result.stderr and "unreachable" not in result.stderr
    assert "wrong" not in result.stderr  # the password is never shown
    assert time.monotonic() - started < 10  # refused at once, not waited for


def test_redis_unreachable_on_produce_exits_3(cli: Cli, settings: Settings) -> None:
    cli.ok("topic", "create", "t", "--partitions", "2")
    env = {"EMS_REDIS_URL": UNREACHABLE_REDIS, "EMS_SEND_TIMEOUT": "0"}  # one attempt
    result = cli.run("produce", "t", input="x\ny\n", env=env)
    assert_clean_error(result, 3)
    assert "Redis is unreachable" in result.stderr
    assert "EMS_SEND_TIMEOUT" in result.stderr
    with closing(TopicAdmin(settings)) as admin:
        assert sum(s.messages for s in admin.describe("t")) == 0


# -- db ------------------------------------------------------------------------------------


def test_db_current(cli: Cli, settings: Settings) -> None:
    head = migrate.head_revision(settings)
    assert head
    assert cli.ok("db", "current").splitlines() == [f"current: {head}", f"head:    {head}"]


@pytest.fixture
def fresh_database(settings: Settings) -> Iterator[Settings]:
    fresh = settings.with_(database_url=settings.database_url + "_fresh")
    engine = create_engine(settings.database_url.rsplit("/", 1)[0] + "/")
    drop = text(f"DROP DATABASE IF EXISTS `{fresh.database_name}`")
    with engine.connect() as conn:
        conn.execute(drop)
    yield fresh
    with engine.connect() as conn:
        conn.execute(drop)
    engine.dispose()


def test_db_create_and_upgrade(cli: Cli, fresh_database: Settings) -> None:
    env = {"EMS_DATABASE_URL": fresh_database.database_url}
    name = fresh_database.database_name

    def run(*args: str) -> str:
        result = cli.run(*args, env=env)
        assert result.returncode == 0, result.stderr
        return result.stdout

    assert run("db", "create") == f"database {name} created\n"
    assert run("db", "create") == f"database {name} already exists\n"
    assert run("db", "create", "--quiet") == ""
    unmigrated = cli.run("db", "current", env=env)
    assert unmigrated.returncode == 2, unmigrated
    assert unmigrated.stdout.splitlines()[0] == "current: (none)"
    assert unmigrated.stderr == (
        f"error: database {name} has no ems schema: run `ems db upgrade` to create it\n"
    )
    assert run("db", "upgrade", "--quiet") == ""
    head = migrate.head_revision(fresh_database)
    assert migrate.current_revision(fresh_database) == head
    assert run("db", "upgrade") == f"database {name} already at {head}\n"


# -- demo ----------------------------------------------------------------------------------


def stored_messages(settings: Settings, topic: str) -> int:
    with closing(TopicAdmin(settings)) as admin:
        return sum(s.messages for s in admin.describe(topic))


def check_readings(settings: Settings, topic: str, partitions: int) -> None:
    with closing(Reader(settings)) as reader:
        for partition in range(partitions):
            for message in reader.read_partition(topic, partition, 0, 20).messages:
                reading = json.loads(message.body)
                assert set(reading) == {"project_id", "device", "ts", "temperature"}
                assert message.key == str(reading["project_id"]).encode()
                assert 1 <= reading["project_id"] <= 10


def assert_stopped(settings: Settings, topic: str, lines: list[str]) -> None:
    """The last two lines: what was published, and that the group handled all of it."""
    done = re.fullmatch(rf"done: (\d+) messages to {re.escape(topic)} in .*", lines[-2])
    assert done, lines[-2:]
    count = stored_messages(settings, topic)
    assert count == int(done.group(1)) > 0
    assert lines[-1] == f"data-handlers: handled {count}, lag 0"
    time.sleep(1.0)
    assert stored_messages(settings, topic) == count, "a gateway outlived the demo"


@pytest.mark.slow
def test_demo_runs_the_pipeline_while_a_handler_joins_and_one_leaves(
    cli: Cli, settings: Settings
) -> None:
    started = time.monotonic()
    result = cli.run(
        "demo",
        "--duration",
        "9",
        "--topic",
        "iot.test",
        "--partitions",
        "4",
        "--producers",
        "2",
        "--projects",
        "10",
        "--batch",
        "20",
        # Paced, as gateways are: the run does not take the cores from the rest of
        # the suite, and the rates and handoffs it prints are the same story.
        "--rate",
        "400",
        timeout=90,
        fresh=True,
    )
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - started < 60
    lines = result.stdout.splitlines()
    assert lines[0] == "created topic iot.test with 4 partitions"
    events = [line for line in lines if line[:2] in ("+ ", "- ")]
    assert events == [
        "+ handler-3 joins data-handlers",
        "- handler-1 leaves data-handlers (SIGTERM: it commits and hands over)",
    ]
    progress = [line for line in lines[1:-2] if line not in events]
    assert len(progress) == 9
    assert all(PROGRESS.match(line) for line in progress), progress
    assert "handler-1[" in progress[0] and "handler-2[" in progress[0], progress[0]
    assert any(re.search(r"handler-3\[\d", line) for line in progress), progress  # it got some
    assert "handler-1[" not in progress[-1], progress  # it left; the others took over
    assert_stopped(settings, "iot.test", lines)
    check_readings(settings, "iot.test", 4)


def started_demo(cli: Cli, topic: str) -> subprocess.Popen[str]:
    """The demo on a new two-partition topic, once it printed its first progress line."""
    cli.ok("topic", "create", topic, "--partitions", "2")
    demo = cli.popen(
        "demo", "--duration", "0", "--topic", topic, "--producers", "2", "--rate", "400"
    )
    try:
        assert demo.stdout is not None
        assert demo.stdout.readline() == f"using topic {topic} (2 partitions)\n"
        assert PROGRESS.match(demo.stdout.readline())
    except BaseException:
        demo.kill()
        raise
    return demo


@pytest.mark.slow
def test_demo_stops_cleanly_on_ctrl_c(cli: Cli, settings: Settings) -> None:
    demo = started_demo(cli, "iot.ctrlc")
    try:
        demo.send_signal(signal.SIGINT)
        out, err = demo.communicate(timeout=30)
    finally:
        demo.kill()
    assert demo.returncode == 0, err
    assert "Traceback" not in err
    assert_stopped(settings, "iot.ctrlc", out.splitlines())


def _stat(pid: int | str) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state, ppid, ...); None once
    the process has ended."""
    try:
        return stat_fields(f"/proc/{pid}/stat")
    except OSError:
        return None


def descendants(pid: int) -> set[int]:
    """The processes below `pid`."""
    children: dict[int, list[int]] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        fields = _stat(entry)
        if fields is not None:
            children.setdefault(int(fields[1]), []).append(int(entry))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def running_pids(pids: set[int]) -> set[int]:
    return {pid for pid in pids if (fields := _stat(pid)) is not None and fields[0] != "Z"}


@pytest.mark.slow
def test_demo_killed_outright_leaves_no_process_behind(cli: Cli, settings: Settings) -> None:
    """SIGKILL of the demo sets no stop event: its gateways and handlers see their parent
    gone, stop publishing and leave the group."""
    demo = started_demo(cli, "iot.kill9")
    try:
        below = descendants(demo.pid)
        assert len(below) >= 4, below  # two gateways and the handlers, at least
    finally:
        demo.kill()
        demo.wait()
    deadline = time.monotonic() + 20
    while running_pids(below):
        assert time.monotonic() < deadline, f"outlived the demo: {running_pids(below)}"
        time.sleep(0.2)
    count = stored_messages(settings, "iot.kill9")
    time.sleep(1.0)
    assert stored_messages(settings, "iot.kill9") == count, "a gateway outlived the demo"
    described = json.loads(cli.ok("group", "describe", "data-handlers", "--json"))
    assert [d["members"] for d in described] == [[]], described  # they left, not expired


@pytest.mark.slow
@pytest.mark.parametrize(
    ("server", "url"),
    [("EMS_REDIS_URL", UNREACHABLE_REDIS), ("EMS_DATABASE_URL", UNREACHABLE_DB)],
    ids=["redis", "mysql"],
)
def test_demo_with_a_server_unreachable_changes_nothing(
    cli: Cli, settings: Settings, server: str, url: str
) -> None:
    """Both servers are checked before the demo creates its topic and group."""
    result = cli.run(
        "demo",
        "--duration",
        "20",
        "--topic",
        "iot.noredis",
        "--producers",
        "2",
        env={server: url, "EMS_SEND_TIMEOUT": "0"},
        fresh=True,
    )
    assert result.returncode == 3, result.stderr
    assert result.stderr.splitlines()[-1].startswith("error: ")
    assert "unreachable" in result.stderr.splitlines()[-1]
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    assert stored_topics(cli) == []
    assert scalar(settings, "SELECT COUNT(*) FROM consumer_group") == 0
