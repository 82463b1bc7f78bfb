"""Settings: the only place that reads EMS_* environment variables."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from functools import cached_property
from typing import Literal
from urllib.parse import urlsplit

from sqlalchemy.engine import make_url

from ems.exceptions import InvalidSetting

Allocator = Literal["redis", "mysql"]

DEFAULT_DATABASE_URL = "mysql+pymysql://root@127.0.0.1:3306/ems"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
#: Debian's libmariadb-java; MySQL Connector/J works the same.
DEFAULT_JDBC_JAR = "/usr/share/java/mariadb-java-client.jar"
#: The Redis URLs ems can serve (redis-py's): plain TCP, TLS and unix sockets.
REDIS_SCHEMES = ("redis", "rediss", "unix")
#: Longest duration a setting may give, in seconds (about 31 years): beyond any wait, and
#: far inside what a timedelta, a socket timeout or a SQL INTERVAL can hold.
MAX_SECONDS = 1e9


@dataclass(frozen=True)
class Bound:
    """The values a numeric setting takes: whole or not, and its range."""

    env: str
    low: float
    high: float
    whole: bool = False
    #: 0 is allowed too (it turns the setting's work off or flat out).
    zero: bool = False

    def check(self, value: object) -> None:
        kind = "a whole number" if self.whole else "a number"
        ok = isinstance(value, int) if self.whole else isinstance(value, int | float)
        if isinstance(value, bool) or not ok:
            raise InvalidSetting(f"{self.env} must be {kind}, not {value!r}")
        number = float(value)  # type: ignore[arg-type]
        if number == 0 and self.zero:
            return
        if not (math.isfinite(number) and self.low <= number <= self.high):
            zero = " (or 0)" if self.zero else ""
            raise InvalidSetting(
                f"{self.env} must be {kind} from {self.low:g} to {self.high:g}{zero}, not {value!r}"
            )


#: Every numeric setting's range, by field name (Settings checks itself against it).
BOUNDS = {
    "gap_timeout": Bound("EMS_GAP_TIMEOUT", 0.001, MAX_SECONDS),
    "connect_timeout": Bound("EMS_CONNECT_TIMEOUT", 0.001, MAX_SECONDS),
    "read_timeout": Bound("EMS_READ_TIMEOUT", 0.001, MAX_SECONDS),
    "write_timeout": Bound("EMS_WRITE_TIMEOUT", 0.001, MAX_SECONDS),
    "connect_attempts": Bound("EMS_CONNECT_ATTEMPTS", 1, 100, whole=True),
    "pool_size": Bound("EMS_POOL_SIZE", 1, 1000, whole=True),
    "autoscale_interval": Bound("EMS_AUTOSCALE_INTERVAL", 0.001, MAX_SECONDS, zero=True),
    "kube_timeout": Bound("EMS_KUBE_TIMEOUT", 0.001, MAX_SECONDS),
    "purge_chunk_rows": Bound("EMS_PURGE_CHUNK_ROWS", 1, 1_000_000, whole=True),
    "purge_pause": Bound("EMS_PURGE_PAUSE", 0, 1000),
    "log_retention_days": Bound("EMS_LOG_RETENTION_DAYS", 0.001, 36_500),
}


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
    #: 13x faster at 4.92x idle p99, the same day (docs/benchmark-notes.md, "Purge").
    purge_chunk_rows: int = 50
    #: After each transaction of a message purge, rest this many times as long as the work
    #: since the last rest took: most of the server stays with publishers while a purge
    #: runs (0: purge flat out).
    purge_pause: float = 10.0
    #: The purge-log job deletes done and dead consumption-log rows older than this.
    log_retention_days: float = 7.0

    def __post_init__(self) -> None:
        """Every numeric setting is checked once, however the Settings were made: a
        value out of its range is refused with the setting's name, never carried into a
        loop bound, a LIMIT or a timedelta."""
        for field in fields(self):
            bound = BOUNDS.get(field.name)
            if bound is not None:
                bound.check(getattr(self, field.name))
        scheme = urlsplit(self.redis_url).scheme if isinstance(self.redis_url, str) else None
        if scheme not in REDIS_SCHEMES:
            raise InvalidSetting(
                f"EMS_REDIS_URL must be a redis://, rediss:// (TLS) or unix:// URL, "
                f"not {self.redis_url!r}"
            )

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
        values = {name: _number(env, bound) for name, bound in BOUNDS.items() if bound.env in env}
        return cls(
            database_url=env.get("EMS_DATABASE_URL", DEFAULT_DATABASE_URL),
            redis_url=env.get("EMS_REDIS_URL", DEFAULT_REDIS_URL),
            allocator=allocator,  # type: ignore[arg-type]
            jdbc_jar=env.get("EMS_JDBC_JAR") or DEFAULT_JDBC_JAR,
            kubeconfig=env.get("EMS_KUBECONFIG") or None,
            alarm_webhook_url=_url(env, "EMS_ALARM_WEBHOOK_URL"),
            **values,  # type: ignore[arg-type]
        )


def _number(env: Mapping[str, str], bound: Bound) -> int | float:
    """The variable as its setting's type; the range is checked by Settings itself."""
    raw = env[bound.env].strip()
    if bound.zero and raw == "off":
        return 0
    try:
        return int(raw) if bound.whole else float(raw)
    except ValueError:
        kind = "a whole number" if bound.whole else "a number"
        raise InvalidSetting(f"{bound.env} must be {kind}, not {raw!r}") from None


def _url(env: Mapping[str, str], name: str) -> str | None:
    raw = env.get(name) or None
    if raw is not None and not raw.startswith(("http://", "https://")):
        raise InvalidSetting(f"{name} must be an http:// or https:// URL, not {raw!r}")
    return raw
