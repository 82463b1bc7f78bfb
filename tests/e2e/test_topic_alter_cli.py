"""`ems topic alter NAME --partitions N` end to end, in a subprocess."""

from __future__ import annotations

import json

import pytest

from ems.config import Settings
from tests.e2e.test_cli import UNREACHABLE_DB, Cli, assert_clean_error


@pytest.fixture
def cli(settings: Settings) -> Cli:
    return Cli(settings)


def test_alter_adds_partitions_and_describe_shows_them(cli: Cli) -> None:
    cli.ok("topic", "create", "orders", "--partitions", "2")
    cli.ok("produce", "orders", "--key", "k", input="a\nb\n")
    assert cli.ok("topic", "alter", "orders", "--partitions", "5") == (
        "topic orders: 2 -> 5 partitions\n"
    )
    described = json.loads(cli.ok("topic", "describe", "orders", "--json"))
    assert described["partitions"] == 5
    assert [s["partition"] for s in described["partition_stats"]] == [0, 1, 2, 3, 4]
    out = json.loads(cli.ok("topic", "alter", "orders", "-p", "6", "--json"))
    assert (out["name"], out["partitions"], out["partitions_before"]) == ("orders", 6, 5)
    highs = {str(s["partition"]): s["high_watermark"] for s in described["partition_stats"]}
    assert out["watermarks"] == highs


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("orders", "--partitions", "2"), "only be added"),
        (("orders", "--partitions", "1"), "only be added"),
        (("orders", "--partitions", "0"), "partitions must be"),
        (("orders", "--partitions", "99999"), "partitions must be"),
        (("missing", "--partitions", "4"), "unknown topic"),
        (("bad name", "--partitions", "4"), "name"),
    ],
)
def test_alter_refusals_exit_2_and_change_nothing(
    cli: Cli, args: tuple[str, ...], message: str
) -> None:
    cli.ok("topic", "create", "orders", "--partitions", "2")
    result = cli.run("topic", "alter", *args)
    assert_clean_error(result, 2)
    assert message in result.stderr
    assert json.loads(cli.ok("topic", "describe", "orders", "--json"))["partitions"] == 2


def test_alter_bad_values_are_usage_errors(cli: Cli) -> None:
    for value in ("-3", "three", ""):
        result = cli.run("topic", "alter", "orders", "--partitions", value)
        assert result.returncode == 2
        assert "Traceback" not in result.stderr
    assert cli.run("topic", "alter", "orders").returncode == 2  # --partitions is required


def test_alter_without_the_database_exits_3(cli: Cli) -> None:
    result = cli.run(
        "topic", "alter", "orders", "--partitions", "4", env={"EMS_DATABASE_URL": UNREACHABLE_DB}
    )
    assert_clean_error(result, 3)
