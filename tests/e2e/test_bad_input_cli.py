"""Bad input on the command line: a typed error and exit code 2, never a traceback, never
a hang, and nothing changed. Through click's CliRunner against the real servers."""

from __future__ import annotations

import pytest
from click.testing import CliRunner, Result

from ems import Consumer, Producer, TopicAdmin
from ems.cli.app import cli
from ems.config import Settings
from tests.integration.seeding import scalar

OVERFLOWING = ["999999d", "99999999999999999999w", "1e400s"]


def run(settings: Settings, *args: str) -> Result:
    return CliRunner().invoke(cli, list(args), obj=settings)


def refused(result: Result, match: str = "") -> None:
    """Exit code 2 with a message, and no exception escaped (CliRunner would hold it)."""
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert match in result.stderr, result.stderr


@pytest.fixture
def topic(settings: Settings) -> str:
    TopicAdmin(settings).create("t", 2)
    with Producer(settings) as producer:
        producer.send("t", "m0")
    with Consumer("g", "t", settings=settings, start="earliest") as consumer:
        consumer.ack(consumer.poll(timeout=5))
    return "t"


@pytest.mark.parametrize("age", OVERFLOWING)
@pytest.mark.parametrize(
    "command",
    [
        ["msg", "find", "t", "--since"],
        ["msg", "find", "t", "--until"],
        ["dlq", "list", "--since"],
        ["replay", "g", "--dry-run", "--since"],
        ["group", "reset-offsets", "g", "--dry-run", "--to-datetime"],
    ],
    ids=lambda c: " ".join(c[:2]) if isinstance(c, list) else c,
)
def test_datetimes_that_overflow_are_bad_input(
    settings: Settings, topic: str, command: list[str], age: str
) -> None:
    before = scalar(settings, "SELECT committed_offset FROM group_offset WHERE partition_no = 0")
    refused(run(settings, *command, age), "error: ")
    after = scalar(settings, "SELECT committed_offset FROM group_offset WHERE partition_no = 0")
    assert after == before


@pytest.mark.parametrize("value", ["inf", "nan", "-inf", "-1", "0", "1e308"])
@pytest.mark.parametrize(
    "command",
    [
        ["tail", "t", "--timeout"],
        ["group", "reset-offsets", "g", "--to-earliest", "--yes", "--timeout"],
        ["scheduler", "--once", "--interval", "purge-log="],
    ],
    ids=lambda c: " ".join(c[:2]) if isinstance(c, list) else c,
)
def test_timeouts_that_are_not_finite_positive_numbers_are_bad_input(
    settings: Settings, topic: str, command: list[str], value: str
) -> None:
    if command[-1].endswith("="):
        command = [*command[:-1], command[-1] + value]
    else:
        command = [*command, value]
    before = scalar(settings, "SELECT committed_offset FROM group_offset WHERE partition_no = 0")
    refused(run(settings, *command))
    assert scalar(settings, "SELECT committed_offset FROM group_offset WHERE partition_no = 0") == (
        before
    )


@pytest.mark.parametrize(
    "args",
    [
        ["produce", "t", "--key", "\udcff"],
        ["produce", "t", "--header", "h=\udcff"],
        ["dlq", "list", "--error", "\udcff"],
        ["msg", "find", "\udcff"],
        ["topic", "create", "x\udcff", "--partitions", "1"],
    ],
    ids=["key", "header", "dlq-error", "topic-name", "create"],
)
def test_arguments_that_are_not_unicode_are_bad_input(
    settings: Settings, topic: str, args: list[str]
) -> None:
    # What Python makes of the argument $'\xff': a lone surrogate. (Bodies come from
    # stdin as bytes.)
    refused(CliRunner().invoke(cli, args, obj=settings, input="b\n"), "Unicode")
    assert scalar(settings, "SELECT COUNT(*) FROM message") == 1
    assert scalar(settings, "SELECT COUNT(*) FROM topic") == 1


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("EMS_PURGE_CHUNK_ROWS", "0.5"),
        ("EMS_PURGE_CHUNK_ROWS", "0"),
        ("EMS_PURGE_CHUNK_ROWS", "inf"),
        ("EMS_GAP_TIMEOUT", "nan"),
        ("EMS_CONNECT_TIMEOUT", "inf"),
    ],
)
def test_bad_settings_stop_a_command_before_it_runs(
    settings: Settings, topic: str, monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv("EMS_DATABASE_URL", settings.database_url)
    monkeypatch.setenv(variable, value)
    result = CliRunner().invoke(cli, ["cleanup", "run", "purge-log", "--yes"])
    refused(result, variable)
