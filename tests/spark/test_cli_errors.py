"""`ems spark ...` with bad input or a missing piece: a clear error and exit code before
any Spark work starts, and nothing deleted."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from ems.cli import cli
from ems.config import Settings
from tests.spark.conftest import execute
from tests.spark.test_compact_job import CUTOFF, live_ids, seed

COMPACT = ["spark", "compact", "--cutoff", CUTOFF.isoformat()]


def invoke(settings: Settings, args: list[str], tmp_path: Path) -> tuple[int, str]:
    extra = ["--archive-root", str(tmp_path)] if "compact" in args else ["--output", str(tmp_path)]
    result = CliRunner().invoke(cli, [*args, *extra], obj=settings)
    return result.exit_code, result.output


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["spark", "compact", "--cutoff", "2099-01-01"], 2, "is in the future"),
        (["spark", "compact", "--older-than", "7x"], 2, "is not a duration"),
        (["spark", "compact"], 2, "exactly one of a cutoff time and an age"),
        ([*COMPACT, "--group", "nobody"], 2, "unknown consumer group 'nobody'"),
        ([*COMPACT, "--topic", "no.such.topic"], 2, "has no consumer groups"),
        ([*COMPACT, "--every", "1h"], 2, "needs an age (--older-than), not a cutoff"),
        (["spark", "compact", "--older-than", "7d", "--every", "1x"], 2, "is not a duration"),
    ],
)
def test_bad_input(
    settings: Settings, tmp_path: Path, args: list[str], code: int, message: str
) -> None:
    seeded = seed(settings)
    exit_code, output = invoke(settings, args, tmp_path)
    assert (exit_code, message in output) == (code, True), output
    assert output.startswith("error: ")
    assert live_ids(settings) == set(seeded["rows"])
    assert execute(settings, "SELECT COUNT(*) FROM compaction_run") == [(0,)]


def test_missing_jdbc_jar(settings: Settings, tmp_path: Path) -> None:
    seeded = seed(settings)
    broken = settings.with_(jdbc_jar=str(tmp_path / "nope.jar"))
    exit_code, output = invoke(broken, COMPACT, tmp_path / "archive")
    assert exit_code == 3
    assert "JDBC driver jar" in output and "libmariadb-java" in output
    assert live_ids(settings) == set(seeded["rows"])


def test_missing_java(settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seeded = seed(settings)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    exit_code, output = invoke(settings, ["spark", "lag-report"], tmp_path / "out")
    assert exit_code == 3
    assert "has no bin/java" in output
    exit_code, output = invoke(settings, COMPACT, tmp_path / "archive")
    assert exit_code == 3
    assert live_ids(settings) == set(seeded["rows"])


def test_unreachable_database(tmp_path: Path) -> None:
    down = Settings(database_url="mysql+pymysql://root@127.0.0.1:1/ems", connect_timeout=1)
    for args in (COMPACT, ["spark", "lag-report"]):
        exit_code, output = invoke(down, args, tmp_path)
        assert exit_code == 3
        assert "MySQL is unreachable" in output


def test_unknown_group_in_lag_report(settings: Settings, tmp_path: Path) -> None:
    exit_code, output = invoke(settings, ["spark", "lag-report", "--group", "ghost"], tmp_path)
    assert exit_code == 2
    assert "unknown consumer group 'ghost'" in output
    assert execute(settings, "SELECT COUNT(*) FROM lag_report_run") == [(0,)]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--older-than", "7x"], "is not a duration"),
        (["--cutoff", "yesterday"], "is not an ISO 8601 time"),
        (["--cutoff", CUTOFF.isoformat(), "--every", "1h"], "needs an age"),
    ],
)
def test_spark_submit_bad_input(
    settings: Settings,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    """The spark-submit entry point answers bad options with the CLI's error and exit code,
    not a traceback, and deletes nothing."""
    from spark.jobs import compact

    seeded = seed(settings)
    monkeypatch.setenv("EMS_DATABASE_URL", settings.database_url)
    assert compact.main([*argv, "--archive-root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err, err
    assert live_ids(settings) == set(seeded["rows"])
