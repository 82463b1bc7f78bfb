"""Cluster database URLs and Sentinel Redis URLs: parsing, and the refusal of bad ones."""

from __future__ import annotations

import pytest

from ems.config import Settings
from ems.exceptions import InvalidSetting
from ems.offsets.redis_clients import resp_for
from ems.store.nodes import node_problem, settings_problems
from ems.urls import SentinelTarget, database_nodes, redacted, sentinel_target


def test_a_single_host_url_is_one_node_unchanged() -> None:
    url = "mysql+pymysql://u:p%40ss@db.example:3307/ems?charset=utf8mb4"
    assert database_nodes(url) == (url,)


def test_a_host_list_gives_one_url_per_node_in_order() -> None:
    url = "mysql+pymysql://u:secret@db1:3306,db2,[::1]:3308/ems?charset=utf8mb4"
    assert database_nodes(url) == (
        "mysql+pymysql://u:secret@db1:3306/ems?charset=utf8mb4",
        "mysql+pymysql://u:secret@db2:3306/ems?charset=utf8mb4",
        "mysql+pymysql://u:secret@[::1]:3308/ems?charset=utf8mb4",
    )


@pytest.mark.parametrize(
    "url",
    [
        "mysql+pymysql://root@db1:3306,,db3/ems",
        "mysql+pymysql://root@db1:3306,db2:x/ems",
        "mysql+pymysql://root@db1:3306,db2:70000/ems",
        "mysql+pymysql://root@db1:3306,db1:3306/ems",
    ],
)
def test_a_bad_host_list_is_refused_when_the_settings_are_made(url: str) -> None:
    with pytest.raises(InvalidSetting, match="EMS_DATABASE_URL"):
        Settings(database_url=url)


def test_settings_name_the_database_of_a_cluster_url() -> None:
    settings = Settings(database_url="mysql+pymysql://root@a:1,b:2,c:3/stream")
    assert settings.database_name == "stream"
    assert len(settings.database_nodes) == 3


def test_a_sentinel_url_names_sentinels_service_db_and_auth() -> None:
    url = "rediss+sentinel://app:s%3Acret@s1,s2:26380/ems-main/2?sentinel_password=x"
    assert sentinel_target(url) == SentinelTarget(
        sentinels=(("s1", 26379), ("s2", 26380)),
        service="ems-main",
        db=2,
        username="app",
        password="s:cret",
        sentinel_password="x",
        tls=True,
    )
    assert Settings(redis_url=url).redis_sentinel == sentinel_target(url)


def test_other_redis_urls_have_no_sentinel() -> None:
    assert sentinel_target("redis://127.0.0.1:6379/0") is None
    assert Settings().redis_sentinel is None


@pytest.mark.parametrize(
    "url",
    [
        "redis+sentinel://s1:26379",
        "redis+sentinel://s1:26379/",
        "redis+sentinel://s1:26379/ems/x",
        "redis+sentinel://s1:26379/ems/0/1",
        "redis+sentinel://s1:26379,/ems",
        "redis+sentinel://s1:26379/ems?master_password=x",
    ],
)
def test_a_bad_sentinel_url_is_refused(url: str) -> None:
    with pytest.raises(InvalidSetting, match="EMS_REDIS_URL"):
        Settings(redis_url=url)


def test_a_synced_primary_node_takes_writes() -> None:
    status = {"wsrep_ready": "ON", "wsrep_cluster_status": "Primary", "wsrep_local_state": "4"}
    assert node_problem(status) is None


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"wsrep_ready": "OFF"}, "not ready"),
        ({"wsrep_cluster_status": "non-Primary"}, "primary component"),
        ({"wsrep_local_state": "2"}, "not synced"),
        ({"wsrep_local_state": "1"}, "not synced"),
    ],
)
def test_a_node_out_of_the_primary_component_or_not_synced_is_passed_over(
    change: dict[str, str], why: str
) -> None:
    status = {"wsrep_ready": "ON", "wsrep_cluster_status": "Primary", "wsrep_local_state": "4"}
    problem = node_problem({**status, **change})
    assert problem is not None and why in problem


def test_settings_a_cluster_node_lacks_are_named_with_what_they_need() -> None:
    found = {"binlog_format": "MIXED", "innodb_autoinc_lock_mode": "1", "wsrep_on": "ON"}
    assert settings_problems(found) == [
        "binlog_format is MIXED, needs ROW",
        "innodb_autoinc_lock_mode is 1, needs 2",
    ]
    good = {"binlog_format": "row", "innodb_autoinc_lock_mode": "2", "wsrep_on": "ON"}
    assert settings_problems(good) == []


def test_the_producers_own_redis_client_serves_sentinel_urls_without_tls() -> None:
    plain = resp_for(Settings(redis_url="redis+sentinel://s1/ems/2"), timeout=1, retries=0)
    assert plain is not None and plain.locate is not None and plain.db == 2
    tls = Settings(redis_url="rediss+sentinel://s1/ems/2")
    assert resp_for(tls, timeout=1, retries=0) is None  # redis-py speaks TLS


def test_tls_options_of_a_sentinel_url_reach_the_sentinels_and_the_master() -> None:
    url = "rediss+sentinel://s1/ems/0?ssl_ca_certs=/etc/ca.pem&ssl_cert_reqs=required"
    target = sentinel_target(url)
    assert target is not None and target.tls
    assert dict(target.tls_options) == {"ssl_ca_certs": "/etc/ca.pem", "ssl_cert_reqs": "required"}
    with pytest.raises(InvalidSetting, match="ssl_ca_certs"):
        Settings(redis_url="redis+sentinel://s1/ems/0?ssl_ca_certs=/etc/ca.pem")  # not TLS


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
        ("redis://:pw@h:1/0", "redis://:***@h:1/0"),
        ("rediss://user:p%40w@h/0?ssl_cert_reqs=none", "rediss://user:***@h/0?ssl_cert_reqs=none"),
        ("redis://user@h/0", "redis://user@h/0"),
        ("unix://:pw@/run/redis.sock?db=1", "unix://:***@/run/redis.sock?db=1"),
        ("unix:///run/redis.sock?password=pw&db=1", "unix:///run/redis.sock?password=***&db=1"),
        (
            "redis+sentinel://:pw@s1,s2:26380/svc/0?sentinel_password=spw",
            "redis+sentinel://:***@s1,s2:26380/svc/0?sentinel_password=***",
        ),
        ("mysql+pymysql://u:pw@h1,h2/ems", "mysql+pymysql://u:***@h1,h2/ems"),
    ],
)
def test_a_url_is_shown_without_its_passwords(url: str, shown: str) -> None:
    assert redacted(url) == shown
