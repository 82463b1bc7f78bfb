from __future__ import annotations

import pytest

from ems.config import DEFAULT_DATABASE_URL, Settings
from ems.exceptions import InvalidSetting


def test_defaults() -> None:
    s = Settings.from_env({})
    assert s.database_url == DEFAULT_DATABASE_URL
    assert s.allocator == "redis"
    assert s.redis_prefix == "ems:ems:"


def test_from_env() -> None:
    s = Settings.from_env(
        {
            "EMS_DATABASE_URL": "mysql+pymysql://u@h:1/other",
            "EMS_REDIS_URL": "redis://h:2/3",
            "EMS_ALLOCATOR": "mysql",
            "EMS_GAP_TIMEOUT": "2.5",
        }
    )
    assert (s.database_name, s.redis_url, s.allocator, s.gap_timeout) == (
        "other",
        "redis://h:2/3",
        "mysql",
        2.5,
    )
    assert s.redis_prefix == "ems:other:"


@pytest.mark.parametrize(
    "env",
    [{"EMS_ALLOCATOR": "zookeeper"}, {"EMS_GAP_TIMEOUT": "soon"}, {"EMS_GAP_TIMEOUT": "-1"}],
)
def test_bad_settings(env: dict[str, str]) -> None:
    with pytest.raises(InvalidSetting):
        Settings.from_env(env)


def test_send_timeout() -> None:
    """45 s by default (a failover under Sentinel's defaults, with room); 0 is one
    attempt; a negative, infinite or unparsable value is refused, naming the variable."""
    assert Settings.from_env({}).send_timeout == 45.0
    assert Settings.from_env({"EMS_SEND_TIMEOUT": "2.5"}).send_timeout == 2.5
    assert Settings.from_env({"EMS_SEND_TIMEOUT": "0"}).send_timeout == 0
    for bad in ("-1", "inf", "nan", "soon", "off"):
        with pytest.raises(InvalidSetting, match="EMS_SEND_TIMEOUT"):
            Settings.from_env({"EMS_SEND_TIMEOUT": bad})
    with pytest.raises(InvalidSetting, match="EMS_SEND_TIMEOUT"):
        Settings(send_timeout=-0.5)


def test_jdbc_jar_from_env() -> None:
    from ems.config import DEFAULT_JDBC_JAR

    assert Settings.from_env({}).jdbc_jar == DEFAULT_JDBC_JAR
    assert Settings.from_env({"EMS_JDBC_JAR": "/opt/mysql.jar"}).jdbc_jar == "/opt/mysql.jar"


def test_alarm_webhook_url() -> None:
    assert Settings.from_env({}).alarm_webhook_url is None
    url = "https://hooks.example/ems"
    assert Settings.from_env({"EMS_ALARM_WEBHOOK_URL": url}).alarm_webhook_url == url
    with pytest.raises(InvalidSetting):
        Settings.from_env({"EMS_ALARM_WEBHOOK_URL": "hooks.example/ems"})


def test_admin_settings_default_to_safe() -> None:
    s = Settings.from_env({})
    assert s.admin_secret_key is None
    assert (s.admin_read_only, s.admin_hide_bodies) == (False, False)
    assert (s.admin_trusted_header, s.admin_trusted_roles) == (None, ())


def test_admin_settings_from_env() -> None:
    s = Settings.from_env(
        {
            "EMS_ADMIN_SECRET_KEY": "k" * 40,
            "EMS_ADMIN_READ_ONLY": "yes",
            "EMS_ADMIN_HIDE_BODIES": "1",
            "EMS_ADMIN_TRUSTED_HEADER": "X-Forwarded-Groups",
            "EMS_ADMIN_TRUSTED_ROLES": " ops=operator, sre = admin ,",
        }
    )
    assert s.admin_secret_key == "k" * 40
    assert (s.admin_read_only, s.admin_hide_bodies) == (True, True)
    assert s.admin_trusted_header == "X-Forwarded-Groups"
    assert s.admin_trusted_roles == (("ops", "operator"), ("sre", "admin"))
    assert "k" * 40 not in repr(s)
    for off in ("", "0", "false", "No", "OFF"):
        assert Settings.from_env({"EMS_ADMIN_READ_ONLY": off}).admin_read_only is False


@pytest.mark.parametrize(
    "env",
    [
        {"EMS_ADMIN_READ_ONLY": "maybe"},
        {"EMS_ADMIN_HIDE_BODIES": "2"},
        {"EMS_ADMIN_TRUSTED_HEADER": "X_Groups", "EMS_ADMIN_TRUSTED_ROLES": "a=viewer"},
        {"EMS_ADMIN_TRUSTED_HEADER": "X Groups", "EMS_ADMIN_TRUSTED_ROLES": "a=viewer"},
        {"EMS_ADMIN_TRUSTED_HEADER": "X-Groups", "EMS_ADMIN_TRUSTED_ROLES": "ops=root"},
        {"EMS_ADMIN_TRUSTED_HEADER": "X-Groups", "EMS_ADMIN_TRUSTED_ROLES": "ops"},
        {"EMS_ADMIN_TRUSTED_HEADER": "X-Groups", "EMS_ADMIN_TRUSTED_ROLES": "=admin"},
        {"EMS_ADMIN_TRUSTED_HEADER": "X-Groups", "EMS_ADMIN_TRUSTED_ROLES": "a=admin,a=viewer"},
        {"EMS_ADMIN_TRUSTED_HEADER": "X-Groups"},
        {"EMS_ADMIN_TRUSTED_ROLES": "ops=operator"},
    ],
)
def test_bad_admin_settings(env: dict[str, str]) -> None:
    with pytest.raises(InvalidSetting):
        Settings.from_env(env)


def test_bad_admin_settings_in_code() -> None:
    with pytest.raises(InvalidSetting):
        Settings(admin_read_only="yes")  # type: ignore[arg-type]
    with pytest.raises(InvalidSetting):
        Settings(admin_trusted_header="X-G", admin_trusted_roles=(("g", "superuser"),))


@pytest.mark.parametrize(
    ("given", "used"),
    [
        ("mysql://u:pw@h:3306/db", "mysql+pymysql://u:pw@h:3306/db"),
        ("mariadb://u@h/db?charset=utf8mb4", "mysql+pymysql://u@h/db?charset=utf8mb4"),
        ("MySQL://u@h/db", "mysql+pymysql://u@h/db"),
        ("mariadb+pymysql://u@h/db", "mysql+pymysql://u@h/db"),
        ("mysql+pymysql://u@h/db", "mysql+pymysql://u@h/db"),
        ("mysql://u:pw@h1:3306,h2:3307/db", "mysql+pymysql://u:pw@h1:3306,h2:3307/db"),
    ],
)
def test_mysql_and_mariadb_urls_mean_pymysql(given: str, used: str) -> None:
    """What most people write (mysql://, mariadb://) is what ems can serve: PyMySQL. Left
    as given, SQLAlchemy would look for MySQLdb, which ems does not install."""
    for settings in (Settings(database_url=given), Settings.from_env({"EMS_DATABASE_URL": given})):
        assert settings.database_url == used
        assert settings.database_name == "db"
        assert all(node.startswith("mysql+pymysql://") for node in settings.database_nodes)
    cluster = Settings(database_url="mariadb://u:pw@h1,h2:3307/db")
    assert cluster.database_nodes == (
        "mysql+pymysql://u:pw@h1:3306/db",
        "mysql+pymysql://u:pw@h2:3307/db",
    )


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://u:hunter2@h/db",
        "mysql+mysqldb://u:hunter2@h/db",
        "mysql+asyncmy://u:hunter2@h/db",
        "mysql+mysqlconnector://u:hunter2@h/db",
        "mariadb+mariadbconnector://u:hunter2@h/db",
        "sqlite:///tmp/db",
        "h:3306/db",
        "",
    ],
)
def test_database_urls_ems_cannot_serve_are_refused_when_settings_are_made(url: str) -> None:
    for make in (
        lambda: Settings(database_url=url),
        lambda: Settings.from_env({"EMS_DATABASE_URL": url}),
    ):
        with pytest.raises(InvalidSetting, match="EMS_DATABASE_URL") as caught:
            make()
        assert "hunter2" not in str(caught.value)  # a refused URL's password is not echoed


def test_the_metrics_address_is_an_ip_or_a_host_name() -> None:
    assert Settings.from_env({}).metrics_addr == "0.0.0.0"
    assert Settings.from_env({"EMS_METRICS_ADDR": " 127.0.0.1 "}).metrics_addr == "127.0.0.1"
    assert Settings.from_env({"EMS_METRICS_ADDR": "::1"}).metrics_addr == "::1"
    assert Settings.from_env({"EMS_METRICS_ADDR": "metrics.internal"}).metrics_addr == (
        "metrics.internal"
    )
    for bad in ("1.2.3.4:9100", "http://x", "a b", "-host", "x" * 300):
        with pytest.raises(InvalidSetting, match="EMS_METRICS_ADDR must be an IP address"):
            Settings.from_env({"EMS_METRICS_ADDR": bad})


def test_exporter_settings_from_env() -> None:
    s = Settings.from_env({})
    assert (s.exporter_port, s.exporter_cache) == (9308, 5.0)
    s = Settings.from_env({"EMS_EXPORTER_PORT": "9400", "EMS_EXPORTER_CACHE": "0"})
    assert (s.exporter_port, s.exporter_cache) == (9400, 0)
    for env in (
        {"EMS_EXPORTER_PORT": "65536"},
        {"EMS_EXPORTER_PORT": "9.5"},
        {"EMS_EXPORTER_CACHE": "-1"},
        {"EMS_EXPORTER_CACHE": "3601"},
    ):
        with pytest.raises(InvalidSetting, match=next(iter(env))):
            Settings.from_env(env)
