"""Option parsing of the Spark jobs (no Spark needed)."""

from __future__ import annotations

import datetime as dt

import pytest

from ems.exceptions import InvalidSetting
from spark.jdbc import jdbc_target
from spark.options import parse_conf, parse_crash_point, parse_duration, parse_timestamp


def test_durations() -> None:
    assert parse_duration("90s") == dt.timedelta(seconds=90)
    assert parse_duration("15m") == dt.timedelta(minutes=15)
    assert parse_duration("1.5h") == dt.timedelta(minutes=90)
    assert parse_duration("7d") == dt.timedelta(days=7)
    for bad in ("", "7", "0s", "-1d", "3y"):
        with pytest.raises(InvalidSetting):
            parse_duration(bad)


def test_timestamps_are_naive_utc() -> None:
    assert parse_timestamp("2026-11-20T12:00") == dt.datetime(2026, 11, 20, 12)
    assert parse_timestamp("2026-11-20T14:00+02:00") == dt.datetime(2026, 11, 20, 12)
    with pytest.raises(InvalidSetting):
        parse_timestamp("yesterday")


def test_crash_points_and_conf() -> None:
    assert parse_crash_point(None) is None
    assert parse_crash_point("archive") == ("archive", 0)
    assert parse_crash_point("delete:3") == ("delete", 3)
    with pytest.raises(InvalidSetting):
        parse_crash_point("lunch")
    assert parse_conf(["spark.executor.memory=4g", "a = b"]) == {
        "spark.executor.memory": "4g",
        "a": "b",
    }
    with pytest.raises(InvalidSetting):
        parse_conf(["novalue"])


def test_jdbc_url_keeps_the_mysql_dialect() -> None:
    target = jdbc_target("mysql+pymysql://ems:s3cret@db.internal:3307/queue")
    assert target.url.startswith("jdbc:mysql://db.internal:3307/queue?")
    assert "time_zone='+00:00'" in target.url
    assert target.properties() == {
        "user": "ems",
        "password": "s3cret",
        "driver": "org.mariadb.jdbc.Driver",
    }


def test_a_cluster_url_becomes_the_drivers_sequential_failover_list() -> None:
    target = jdbc_target("mysql+pymysql://ems:s3cret@db1:3306,db2:3307,db3/queue")
    assert target.url.startswith("jdbc:mysql:sequential://db1:3306,db2:3307,db3:3306/queue?")
    assert target.properties()["user"] == "ems"
