"""Settings: the only place that reads EMS_* environment variables."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Literal

from sqlalchemy.engine import make_url

from ems.exceptions import InvalidSetting

Allocator = Literal["redis", "mysql"]

DEFAULT_DATABASE_URL = "mysql+pymysql://root@127.0.0.1:3306/ems"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
#: Debian's libmariadb-java; MySQL Connector/J works the same.
DEFAULT_JDBC_JAR = "/usr/share/java/mariadb-java-client.jar"


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Connection and tuning settings shared by producers, readers and the CLI."""

    database_url: str = DEFAULT_DATABASE_URL
    redis_url: str = DEFAULT_REDIS_URL
    #: Offset allocator: "redis" (INCRBY ranges) or "mysql" (partition_head rows).
    allocator: Allocator = "redis"
    #: A hole in a partition older than this many seconds is filled with a tombstone.
    gap_timeout: float = 5.0
    #: Seconds to wait for a TCP connection to MySQL or Redis.
    connect_timeout: float = 3.0
    #: Seconds a MySQL read or write may wait on the socket before the connection counts as
    #: lost (DatabaseUnavailable): a server that stops answering never blocks a caller for
    #: minutes. Longer than any statement ems issues takes on a healthy server.
    read_timeout: float = 60.0
    write_timeout: float = 60.0
    #: Attempts against an unreachable server before a typed error is raised.
    connect_attempts: int = 3
    #: Connection pool size per engine.
    pool_size: int = 5
    #: JDBC driver jar the Spark jobs read MySQL with.
    jdbc_jar: str = DEFAULT_JDBC_JAR
    #: Seconds between a group leader's autoscaling decisions; 0 turns them off.
    autoscale_interval: float = 30.0
    #: Kubeconfig file of the kubernetes scale backend; None uses the in-cluster config.
    kubeconfig: str | None = None
    #: Seconds one Kubernetes API request may take.
    kube_timeout: float = 2.0
    #: URL the alarm scan POSTs alarm notices to (JSON); None sends none.
    alarm_webhook_url: str | None = None
    #: Most rows one DELETE of a cleanup job removes; a message purge's round takes about
    #: this many rows over the topic's partitions (at least 50 from each) and commits each
    #: partition's range on its own when they are this small.
    #: 50 by default, with purge_pause 10: the retention purge then works about a tenth of
    #: the time in short transactions, and publish p99 during a 1M-row purge was 1.65-1.94x
    #: idle (about 2,000 rows/s, twice the publishing rate); 1,000 rows and pause 1 purged
    #: 13x faster at 4.92x idle p99, the same day (README, "Cleanup scheduler").
    purge_chunk_rows: int = 50
    #: After each transaction of a message purge, rest this many times as long as the work
    #: since the last rest took: most of the server stays with publishers while a purge
    #: runs (0: purge flat out).
    purge_pause: float = 10.0
    #: The purge-log job deletes done and dead consumption-log rows older than this.
    log_retention_days: float = 7.0

    @cached_property
    def database_name(self) -> str:
        return make_url(self.database_url).database or "ems"

    @cached_property
    def redis_prefix(self) -> str:
        """Redis key namespace; one per database so two ems databases never share counters."""
        return f"ems:{self.database_name}:"

    def with_(self, **changes: object) -> Settings:
        return replace(self, **changes)  # type: ignore[arg-type]

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        allocator = env.get("EMS_ALLOCATOR", "redis")
        if allocator not in ("redis", "mysql"):
            raise InvalidSetting(f"EMS_ALLOCATOR must be 'redis' or 'mysql', not {allocator!r}")
        return cls(
            database_url=env.get("EMS_DATABASE_URL", DEFAULT_DATABASE_URL),
            redis_url=env.get("EMS_REDIS_URL", DEFAULT_REDIS_URL),
            allocator=allocator,  # type: ignore[arg-type]
            gap_timeout=_float(env, "EMS_GAP_TIMEOUT", 5.0),
            connect_timeout=_float(env, "EMS_CONNECT_TIMEOUT", 3.0),
            read_timeout=_float(env, "EMS_READ_TIMEOUT", Settings.read_timeout),
            write_timeout=_float(env, "EMS_WRITE_TIMEOUT", Settings.write_timeout),
            jdbc_jar=env.get("EMS_JDBC_JAR") or DEFAULT_JDBC_JAR,
            autoscale_interval=_interval(env, "EMS_AUTOSCALE_INTERVAL", 30.0),
            kubeconfig=env.get("EMS_KUBECONFIG") or None,
            kube_timeout=_float(env, "EMS_KUBE_TIMEOUT", 2.0),
            alarm_webhook_url=_url(env, "EMS_ALARM_WEBHOOK_URL"),
            purge_chunk_rows=int(_float(env, "EMS_PURGE_CHUNK_ROWS", Settings.purge_chunk_rows)),
            purge_pause=_float(env, "EMS_PURGE_PAUSE", Settings.purge_pause, allow_zero=True),
            log_retention_days=_float(env, "EMS_LOG_RETENTION_DAYS", 7.0),
        )


def _url(env: Mapping[str, str], name: str) -> str | None:
    raw = env.get(name) or None
    if raw is not None and not raw.startswith(("http://", "https://")):
        raise InvalidSetting(f"{name} must be an http:// or https:// URL, not {raw!r}")
    return raw


def _float(env: Mapping[str, str], name: str, default: float, *, allow_zero: bool = False) -> float:
    raw = env.get(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise InvalidSetting(f"{name} must be a number, not {raw!r}") from None
    if value < 0 or (value == 0 and not allow_zero):
        raise InvalidSetting(f"{name} must be positive, not {raw!r}")
    return value


def _interval(env: Mapping[str, str], name: str, default: float) -> float:
    """Seconds between runs of a periodic task; 0 turns the task off."""
    if env.get(name, "").strip() in ("0", "0.0", "off"):
        return 0.0
    return _float(env, name, default)
