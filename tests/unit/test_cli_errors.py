"""The CLI's error mapping and pure helpers, through click's CliRunner: no servers needed
(an unreachable server is a refused connection on port 1)."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from ems import exceptions as ex
from ems.cli import cli
from ems.cli.common import table
from ems.cli.errors import EmsGroup
from ems.cli.stdin_lines import LineSplitter, Linger
from ems.exit_codes import exit_code_for

UNREACHABLE_DB = "mysql+pymysql://root@127.0.0.1:1/ems"

MAPPING = [
    (ex.InvalidInput, 2),
    (ex.InvalidName, 2),
    (ex.InvalidPartitionCount, 2),
    (ex.InvalidSetting, 2),
    (ex.BodyTooLarge, 2),
    (ex.NotFound, 2),
    (ex.UnknownTopic, 2),
    (ex.UnknownPartition, 2),
    (ex.AlreadyExists, 2),
    (ex.TopicExists, 2),
    (ex.ServerUnavailable, 3),
    (ex.DatabaseUnavailable, 3),
    (ex.RedisUnavailable, 3),
    (ex.EmsError, 1),
    (ex.StoreError, 1),
    (ex.LockConflict, 1),
    (ex.OffsetConflict, 1),
]


@pytest.mark.parametrize(("error", "code"), MAPPING)
def test_exit_code_for(error: type[ex.EmsError], code: int) -> None:
    assert exit_code_for(error("x")) == code


def _raising_group(error: BaseException) -> click.Group:
    @click.group(cls=EmsGroup)
    def root() -> None:
        pass

    @root.group()
    def sub() -> None:
        pass

    @sub.command()
    def boom() -> None:
        click.echo("started")
        raise error

    return root


@pytest.mark.parametrize(("error", "code"), MAPPING)
def test_group_prints_error_and_exits_with_mapped_code(error: type[ex.EmsError], code: int) -> None:
    result = CliRunner().invoke(_raising_group(error("it broke")), ["sub", "boom"])
    assert result.exit_code == code
    assert result.stdout == "started\n"
    assert result.stderr == "error: it broke\n"
    assert "Traceback" not in result.output


def test_group_default_message_is_the_docstring() -> None:
    result = CliRunner().invoke(_raising_group(ex.UnknownTopic()), ["sub", "boom"])
    assert result.stderr == "error: The topic does not exist.\n"


def test_group_lets_other_exceptions_through() -> None:
    result = CliRunner().invoke(_raising_group(RuntimeError("bug")), ["sub", "boom"])
    assert result.exit_code == 1
    assert isinstance(result.exception, RuntimeError)


@pytest.mark.parametrize(
    "args",
    [
        ["topic", "create", "bad/name", "--partitions", "1"],
        ["topic", "create", "ok", "--partitions", "0"],
        ["topic", "create", "ok", "--partitions", "4097"],
        ["topic", "create", "ok", "--partitions", "1", "--retention-hours", "0"],
    ],
)
def test_invalid_topic_input_exits_2_before_any_connection(args: list[str]) -> None:
    # The database URL points nowhere: reaching it would exit 3, not 2.
    result = CliRunner().invoke(cli, args, env={"EMS_DATABASE_URL": UNREACHABLE_DB})
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: ")


def test_invalid_setting_exits_2() -> None:
    result = CliRunner().invoke(cli, ["topic", "list"], env={"EMS_ALLOCATOR": "bogus"})
    assert result.exit_code == 2
    assert result.stderr.startswith("error: EMS_ALLOCATOR must be")


def test_unreachable_database_exits_3() -> None:
    result = CliRunner().invoke(cli, ["topic", "list"], env={"EMS_DATABASE_URL": UNREACHABLE_DB})
    assert result.exit_code == 3
    assert result.stderr.startswith("error: MySQL is unreachable")


@pytest.mark.parametrize(
    "args",
    [
        ["produce", "t", "--header", "no-equals-sign"],
        ["produce", "t", "--header", "=value"],
        ["tail", "t", "--max-messages", "0"],
        ["tail", "t", "--partition", "-1"],
        ["topic", "create", "t"],
        ["demo", "--producers", "0"],
        ["no-such-command"],
    ],
)
def test_usage_errors_exit_2(args: list[str]) -> None:
    result = CliRunner().invoke(cli, args, env={"EMS_DATABASE_URL": UNREACHABLE_DB})
    assert result.exit_code == 2
    assert "Usage:" in result.stderr


def test_lines_are_split_on_newlines_only_and_an_unfinished_one_is_kept() -> None:
    splitter = LineSplitter()
    assert splitter.feed(b"a\n b \r") == [b"a"]
    assert splitter.feed(b"\n\nc\td") == [b" b \r", b""]
    assert splitter.feed(b"e") == []
    assert splitter.feed(b"f\nla") == [b"c\tdef"]
    assert splitter.rest() == b"la"
    assert splitter.rest() == b""


def test_a_batch_is_due_when_full_or_when_its_oldest_line_lingered() -> None:
    waiting = Linger(size=3, linger=0.05)
    assert waiting.wait(10.0) is None and not waiting.due(10.0)
    waiting.add([b"a"], 10.0)
    waiting.add([b"b"], 10.04)
    assert not waiting.due(10.04) and waiting.wait(10.04) == pytest.approx(0.01)
    assert waiting.due(10.05) and waiting.take() == [b"a", b"b"]
    waiting.add([b"1", b"2", b"3", b"4"], 20.0)
    assert waiting.due(20.0)  # full: no linger
    assert waiting.take() == [b"1", b"2", b"3"]
    assert waiting.lines == [b"4"] and waiting.due(20.05)


def test_table_aligns_columns_and_shows_none_as_dash() -> None:
    text = table(("name", "n"), [["long-name", 1], ["x", None]])
    assert text.splitlines() == ["name       n", "long-name  1", "x          -"]
