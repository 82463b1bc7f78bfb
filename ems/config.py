"""Settings: the only place that reads EMS_* environment variables."""

from __future__ import annotations

import ipaddress
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from functools import cached_property
from typing import Literal
from urllib.parse import urlsplit

from ems.exceptions import InvalidSetting
from ems.urls import SENTINEL_SCHEMES, SentinelTarget, database_nodes, sentinel_target

Allocator = Literal["redis", "mysql"]

DEFAULT_DATABASE_URL = "mysql+pymysql://root@127.0.0.1:3306/ems"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
#: Debian's libmariadb-java; MySQL Connector/J works the same.
DEFAULT_JDBC_JAR = "/usr/share/java/mariadb-java-client.jar"
#: The Redis URLs ems can serve: redis-py's plain TCP, TLS and unix sockets, and a
#: Sentinel-monitored service (ems.urls).
REDIS_SCHEMES = ("redis", "rediss", "unix", *SENTINEL_SCHEMES)
#: Longest duration a setting may give, in seconds (about 31 years): beyond any wait, and
#: far inside what a timedelta, a socket timeout or a SQL INTERVAL can hold.
MAX_SECONDS = 1e9
#: The admin console's roles, least to most privileged (ems.values.accounts.ROLES says the
#: same; a unit test holds them together: config sits beside values, not above it).
ADMIN_ROLES = ("viewer", "operator", "admin")
#: An HTTP header name the console may take a role from: letters, digits and dashes
#: (gunicorn drops headers with underscores, and so do most proxies).
_HEADER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,63}")
#: A group value of EMS_ADMIN_TRUSTED_ROLES: what the proxy puts in the header.
_GROUP_VALUE = re.compile(r"[A-Za-z0-9_.:@/+-]{1,128}")
#: Database URL schemes ems serves, all through PyMySQL: what people write for MySQL and
#: MariaDB (SQLAlchemy would take a bare mysql:// as MySQLdb, which ems does not install).
DATABASE_SCHEMES = ("mysql", "mariadb", "mysql+pymysql", "mariadb+pymysql")
DATABASE_DRIVER = "mysql+pymysql"
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("", "0", "false", "no", "off")


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
    "idle_transaction_timeout": Bound(
        "EMS_IDLE_TRANSACTION_TIMEOUT", 1, 3600, whole=True, zero=True
    ),
    "send_timeout": Bound("EMS_SEND_TIMEOUT", 0, MAX_SECONDS),
    "relay_interval": Bound("EMS_RELAY_INTERVAL", 0.001, MAX_SECONDS),
    "metadata_max_age": Bound("EMS_METADATA_MAX_AGE", 0.001, 3600),
    "max_delay": Bound("EMS_MAX_DELAY", 0.001, MAX_SECONDS),
    "audit_retention_days": Bound("EMS_AUDIT_RETENTION_DAYS", 1, 36_500, whole=True, zero=True),
    "connect_attempts": Bound("EMS_CONNECT_ATTEMPTS", 1, 100, whole=True),
    "pool_size": Bound("EMS_POOL_SIZE", 1, 1000, whole=True),
    "autoscale_interval": Bound("EMS_AUTOSCALE_INTERVAL", 0.001, MAX_SECONDS, zero=True),
    "kube_timeout": Bound("EMS_KUBE_TIMEOUT", 0.001, MAX_SECONDS),
    "purge_chunk_rows": Bound("EMS_PURGE_CHUNK_ROWS", 1, 1_000_000, whole=True),
    "purge_pause": Bound("EMS_PURGE_PAUSE", 0, 1000),
    "log_retention_days": Bound("EMS_LOG_RETENTION_DAYS", 0.001, 36_500),
    "stream_query_retention": Bound("EMS_STREAM_QUERY_RETENTION", 60, MAX_SECONDS, zero=True),
    "node_failback": Bound("EMS_NODE_FAILBACK", 0.001, MAX_SECONDS, zero=True),
    "admin_hsts_seconds": Bound(
        "EMS_ADMIN_HSTS_SECONDS", 1, 10 * 366 * 86_400, whole=True, zero=True
    ),
    "admin_workers": Bound("EMS_ADMIN_WORKERS", 1, 64, whole=True),
    "admin_threads": Bound("EMS_ADMIN_THREADS", 1, 256, whole=True),
    "admin_header_timeout": Bound("EMS_ADMIN_HEADER_TIMEOUT", 0.1, 3600),
    "admin_keepalive": Bound("EMS_ADMIN_KEEPALIVE", 1, 3600, whole=True),
    "exporter_port": Bound("EMS_EXPORTER_PORT", 1, 65535, whole=True, zero=True),
    "exporter_cache": Bound("EMS_EXPORTER_CACHE", 0.001, 3600, zero=True),
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
    #: Seconds one of ems's sessions may sit idle inside a transaction before MariaDB
    #: ends it (idle_transaction_timeout; 0: never): a process stalled mid-transaction (a
    #: cut link, a pause) otherwise keeps its row locks as long as its session lives, and
    #: the group's leader cannot move its partitions, nor another relay a topic's outbox.
    #: Every transaction, locking reads too. Below the lease TTL (default 10 s), so a
    #: stalled member's locks go before its lease does. MySQL has no such setting.
    idle_transaction_timeout: int = 5
    #: With a cluster URL, a process that moved off the first node looks for it again
    #: this often (seconds; 0: never), so every process comes back to one writer node.
    node_failback: float = 30.0
    #: Seconds a send (Producer.send / send_batch, sync and asyncio) keeps retrying
    #: through a lost Redis master, a lost database node or a server taking no writes
    #: before it raises SendTimeout; 0: one attempt. Like Kafka's delivery.timeout.ms (120
    #: s there): a little above a failover under Redis Sentinel's defaults (30 s
    #: down-after-milliseconds, then the vote and the promotion, a few seconds more),
    #: which also covers Galera's eviction of a silent node (evs.inactive_timeout 15 s).
    send_timeout: float = 45.0
    #: Seconds between the passes of a producer's outbox relay, which moves the messages
    #: of committed transactional sends into their topics. A commit through SQLAlchemy
    #: wakes it at once; a plain PyMySQL commit is seen within this interval.
    relay_interval: float = 0.2
    #: Seconds a producer uses what it looked up about a topic (its id, partitions,
    #: maximum body) before looking it up again on its next send, as Kafka's
    #: metadata.max.age.ms: a topic alter reaches every producer within this long. A
    #: topic delete keeps the deleted topic's row (fenced) at least this long, so that no
    #: producer still holds its id once the row goes.
    metadata_max_age: float = 30.0
    #: Longest delay a scheduled send (delay= or deliver_at=) may ask for, in seconds:
    #: 7 days by default (RocketMQ's timer messages allow 3, SQS 15 minutes). A message
    #: waits in message_outbox until its time, outside its topic's retention.
    max_delay: float = 604_800.0
    #: Days the audit trail (admin_audit) keeps an entry; the purge-log job deletes older
    #: ones in chunks. 0 keeps every entry.
    audit_retention_days: int = 90
    #: Attempts against an unreachable server before a typed error is raised.
    connect_attempts: int = 3
    #: Connections the store's pool keeps (it opens up to twice as many more under load).
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
    #: Seconds (7 days) after which the purge-log job deletes the recorded position of a
    #: named streaming query's partition that has not been committed since: a dropped
    #: query's. 0 keeps them until `ems spark queries drop`.
    stream_query_retention: float = 604_800.0
    #: The admin console signs its session cookies and CSRF tokens with this; it refuses
    #: to start without one of at least 32 characters. Never shown in a repr.
    admin_secret_key: str | None = field(default=None, repr=False)
    #: The console offers no change at all (every mutation is refused, whatever the role).
    admin_read_only: bool = False
    #: The console shows no message bodies, keys or headers to any role.
    admin_hide_bodies: bool = False
    #: A header set by a trusted reverse proxy that names the caller's group; None: off.
    admin_trusted_header: str | None = None
    #: Group value of that header -> role; a value not listed gets no access.
    admin_trusted_roles: tuple[tuple[str, str], ...] = ()
    #: Peers (addresses or networks, or "*": any) whose X-Forwarded-For and
    #: X-Forwarded-Proto the console believes: the client address the sign-in throttle
    #: counts, and https. Others' forwarded headers are ignored.
    admin_forwarded_allow_ips: tuple[str, ...] = ("127.0.0.1", "::1")
    #: The session cookie is always Secure (for a console only ever reached over https).
    admin_secure_cookies: bool = False
    #: max-age of the Strict-Transport-Security header every answer carries; 0: none.
    admin_hsts_seconds: int = 0
    #: gunicorn worker processes of `ems admin serve`, and threads in each.
    admin_workers: int = 2
    admin_threads: int = 8
    #: Seconds a client has to send a whole request head (and a body the console buffers)
    #: before its connection is closed; until then it holds no thread.
    admin_header_timeout: float = 10.0
    #: Seconds an idle kept-alive connection stays open.
    admin_keepalive: int = 5
    #: Address every /metrics endpoint (consumers, `ems consume`, `ems worker`, the scheduler)
    #: listens on: all interfaces by default, for a Prometheus on another host; 127.0.0.1 keeps
    #: them to this machine.
    metrics_addr: str = "0.0.0.0"
    #: Port of `ems exporter`'s /metrics (0 picks a free one).
    exporter_port: int = 9308
    #: Seconds a lag exporter (`ems exporter`, `ems scheduler --lag-metrics`) answers
    #: scrapes from its last read of the database: many scrapers cost one read per this
    #: long (0: read on every scrape).
    exporter_cache: float = 5.0

    def __post_init__(self) -> None:
        """Every numeric setting is checked once, however the Settings were made: a
        value out of its range is refused with the setting's name, never carried into a
        loop bound, a LIMIT or a timedelta."""
        for item in fields(self):
            bound = BOUNDS.get(item.name)
            if bound is not None:
                bound.check(getattr(self, item.name))
        scheme = urlsplit(self.redis_url).scheme if isinstance(self.redis_url, str) else None
        if scheme not in REDIS_SCHEMES:
            raise InvalidSetting(
                f"EMS_REDIS_URL must be a redis://, rediss:// (TLS), unix:// or "
                f"redis+sentinel:// URL, not {self.redis_url!r}"
            )
        if not isinstance(self.database_url, str):
            raise InvalidSetting(f"EMS_DATABASE_URL must be text, not {self.database_url!r}")
        object.__setattr__(self, "database_url", database_url(self.database_url))
        # Parsed once here, so a malformed host list fails when the settings are made.
        _ = self.database_nodes, self.redis_sentinel
        check_address(self.metrics_addr, "EMS_METRICS_ADDR")
        self._check_admin()

    def _check_admin(self) -> None:
        for name in ("admin_read_only", "admin_hide_bodies", "admin_secure_cookies"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidSetting(f"EMS_{name.upper()} must be true or false")
        key = self.admin_secret_key
        if key is not None and not isinstance(key, str):
            raise InvalidSetting("EMS_ADMIN_SECRET_KEY must be text")
        check_forwarded_allow_ips(self.admin_forwarded_allow_ips)
        header, roles = self.admin_trusted_header, self.admin_trusted_roles
        if header is not None and not _HEADER_NAME.fullmatch(header):
            raise InvalidSetting(
                "EMS_ADMIN_TRUSTED_HEADER must be a header name (letters, digits and dashes, "
                f"at most 64), not {header!r}"
            )
        groups = [group for group, _ in roles]
        for group, role in roles:
            if not _GROUP_VALUE.fullmatch(group) or role not in ADMIN_ROLES:
                raise InvalidSetting(
                    f"EMS_ADMIN_TRUSTED_ROLES maps group values to roles "
                    f"({', '.join(ADMIN_ROLES)}), not {group!r} to {role!r}"
                )
        if len(set(groups)) != len(groups):
            raise InvalidSetting("EMS_ADMIN_TRUSTED_ROLES names a group value twice")
        if (header is None) != (not roles):
            raise InvalidSetting(
                "EMS_ADMIN_TRUSTED_HEADER and EMS_ADMIN_TRUSTED_ROLES go together: set both "
                "(the header, and which of its values get which role) or neither"
            )

    @cached_property
    def database_nodes(self) -> tuple[str, ...]:
        """One URL per node of the database: one, or the nodes of a cluster in the order
        ems tries them."""
        return database_nodes(self.database_url)

    @cached_property
    def redis_sentinel(self) -> SentinelTarget | None:
        """The Sentinel service behind a redis+sentinel:// URL; None for one Redis."""
        return sentinel_target(self.redis_url)

    @cached_property
    def database_name(self) -> str:
        # Imported here: SQLAlchemy's import is a tenth of a second that a process which
        # never opens the database (`ems produce --help`) should not pay.
        from sqlalchemy.engine import make_url

        return make_url(self.database_nodes[0]).database or "ems"

    @cached_property
    def redis_prefix(self) -> str:
        """Redis key namespace; one per database so two ems databases never share counters."""
        return f"ems:{self.database_name}:"

    @property
    def session_init(self) -> str:
        """The statement every ems session runs first: UTC, and on MariaDB the bound on
        idle transactions (a /*M! comment: MySQL skips it)."""
        init = "SET time_zone = '+00:00'"
        if self.idle_transaction_timeout:
            bound = f"idle_transaction_timeout = {self.idle_transaction_timeout}"
            init += f" /*M!100300 , {bound} */"
        return init

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
            admin_secret_key=env.get("EMS_ADMIN_SECRET_KEY") or None,
            admin_read_only=_flag(env, "EMS_ADMIN_READ_ONLY"),
            admin_hide_bodies=_flag(env, "EMS_ADMIN_HIDE_BODIES"),
            admin_trusted_header=(env.get("EMS_ADMIN_TRUSTED_HEADER") or "").strip() or None,
            admin_trusted_roles=trusted_roles(env.get("EMS_ADMIN_TRUSTED_ROLES", "")),
            admin_forwarded_allow_ips=forwarded_allow_ips(
                env.get("EMS_ADMIN_FORWARDED_ALLOW_IPS", "127.0.0.1,::1")
            ),
            admin_secure_cookies=_flag(env, "EMS_ADMIN_SECURE_COOKIES"),
            metrics_addr=(env.get("EMS_METRICS_ADDR") or "0.0.0.0").strip(),
            **values,  # type: ignore[arg-type]
        )


#: Every option of `ems worker` has a variable: this prefix and the option's name in
#: capitals (EMS_WORKER_GROUP, EMS_WORKER_BATCH_SIZE, ...; ems.worker.options lists them).
WORKER_PREFIX = "EMS_WORKER_"


def worker_environment(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The EMS_WORKER_* variables that are set (an empty one counts as unset), by option
    name: EMS_WORKER_BATCH_SIZE=100 gives {"batch_size": "100"}. The worker checks the
    names and the values."""
    env = os.environ if env is None else env
    return {
        name.removeprefix(WORKER_PREFIX).lower(): value.strip()
        for name, value in env.items()
        if name.startswith(WORKER_PREFIX) and value.strip()
    }


#: A host name: dot-separated labels of letters, digits and inner hyphens (RFC 1123).
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOSTNAME = re.compile(rf"(?=.{{1,253}}$){_LABEL}(?:\.{_LABEL})*")


def check_address(value: object, name: str) -> None:
    """InvalidSetting unless value is an IPv4 or IPv6 address or a host name."""
    if isinstance(value, str):
        try:
            ipaddress.ip_address(value)
            return
        except ValueError:
            if _HOSTNAME.fullmatch(value):
                return
    shown = value[:64] if isinstance(value, str) else value
    raise InvalidSetting(f"{name} must be an IP address or a host name, not {shown!r}")


def database_url(url: str) -> str:
    """The URL with its scheme as ems connects: mysql://, mariadb:// (and their +pymysql
    forms) become mysql+pymysql://, for one host or a cluster's list. Any other scheme or
    driver is refused here, naming the scheme only: the URL may hold a password."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in DATABASE_SCHEMES:
        given = repr(f"{scheme[:32]}://") if sep else "a URL without a scheme"
        raise InvalidSetting(
            "EMS_DATABASE_URL must be a mysql:// or mariadb:// URL "
            f"(mysql://USER:PASSWORD@HOST:PORT/DATABASE; ems connects with PyMySQL), not {given}"
        )
    return f"{DATABASE_DRIVER}://{rest}"


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


def _flag(env: Mapping[str, str], name: str) -> bool:
    raw = env.get(name, "").strip().lower()
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise InvalidSetting(f"{name} must be true or false (1/0, yes/no, on/off), not {raw!r}")


def trusted_roles(text: str) -> tuple[tuple[str, str], ...]:
    """Parse "ops=operator, sre=admin" as (("ops", "operator"), ("sre", "admin")); the values
    are checked by Settings."""
    pairs = []
    for item in text.split(","):
        if not item.strip():
            continue
        group, sep, role = item.partition("=")
        if not sep:
            raise InvalidSetting(
                f"EMS_ADMIN_TRUSTED_ROLES is a list of GROUP=ROLE, not {item.strip()!r}"
            )
        pairs.append((group.strip(), role.strip()))
    return tuple(pairs)


def forwarded_allow_ips(text: str) -> tuple[str, ...]:
    """Parse "10.0.0.0/8, 127.0.0.1" (or "*") into its items; checked by Settings."""
    return tuple(item.strip() for item in text.split(",") if item.strip())


def check_forwarded_allow_ips(items: object) -> None:
    """InvalidSetting unless items are addresses or networks, or "*" alone."""
    problem = "EMS_ADMIN_FORWARDED_ALLOW_IPS is a list of addresses or networks, or *"
    if not isinstance(items, tuple) or not all(isinstance(i, str) for i in items):
        raise InvalidSetting(f"{problem}, not {items!r}")
    if "*" in items:
        if len(items) > 1:
            raise InvalidSetting(f"{problem} alone, not {', '.join(items)!r}")
        return
    for item in items:
        try:
            ipaddress.ip_network(item, strict=False)
        except ValueError:
            raise InvalidSetting(f"{problem}, not {item!r}") from None
