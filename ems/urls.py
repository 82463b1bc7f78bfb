"""The two URL forms beyond one server: a database URL naming the nodes of one cluster,
and a Redis URL naming the sentinels of one monitored service. Pure parsing; the store
and the Redis clients act on what it returns.

    mysql+pymysql://user:secret@db1:3306,db2:3306,db3:3306/ems?charset=utf8mb4
    redis+sentinel://:secret@s1:26379,s2:26379,s3:26379/ems/0
    rediss+sentinel://...   (TLS to the sentinels and to the master)

A database URL with one host is one node, unchanged. Every node of a cluster shares the
user, password, database and query; ems writes through one of them at a time, in the
order given (ems.store.nodes).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qs, unquote, urlsplit

from ems.exceptions import InvalidSetting

SENTINEL_SCHEMES = ("redis+sentinel", "rediss+sentinel")
DEFAULT_MYSQL_PORT = 3306
DEFAULT_SENTINEL_PORT = 26379
#: TLS options of a rediss+sentinel:// URL, as redis-py takes them on a rediss:// URL:
#: they apply to the sentinels and to the master alike.
TLS_OPTIONS = ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile", "ssl_cert_reqs")


def _address(text: str, default_port: int, setting: str) -> tuple[str, int]:
    """host, host:port, [v6] or [v6]:port."""
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ""
        if rest and not rest.startswith(":"):
            raise InvalidSetting(f"{setting}: {text!r} is not host:port")
    else:
        host, _, port_text = text.partition(":")
    if not host:
        raise InvalidSetting(f"{setting}: an empty host in the host list")
    if not port_text:
        return host, default_port
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise InvalidSetting(f"{setting}: {text!r} has no valid port")
    return host, int(port_text)


def _netloc(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _split(url: str, setting: str) -> tuple[str, str, list[str], str]:
    """scheme://, user info with its @ (or ''), the host list, and the rest (/path?query)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise InvalidSetting(f"{setting} must be a URL (scheme://...), not {url!r}")
    netloc, slash, tail = rest.partition("/")
    userinfo, at, hosts = netloc.rpartition("@")
    return f"{scheme}://", f"{userinfo}{at}", hosts.split(","), f"{slash}{tail}"


def database_nodes(url: str) -> tuple[str, ...]:
    """One single-host URL per node of the database URL, in its order."""
    head, userinfo, hosts, tail = _split(url, "EMS_DATABASE_URL")
    if len(hosts) == 1:
        return (url,)
    nodes = [_address(host, DEFAULT_MYSQL_PORT, "EMS_DATABASE_URL") for host in hosts]
    if len(set(nodes)) != len(nodes):
        raise InvalidSetting("EMS_DATABASE_URL names a node twice")
    return tuple(f"{head}{userinfo}{_netloc(host, port)}{tail}" for host, port in nodes)


_PASSWORD_OPTION = re.compile(r"((?:^|[?&])(?:sentinel_)?password=)[^&]*")


def redacted(url: str) -> str:
    """The URL as a log line or a message may show it: its password, and a password or
    sentinel_password option, as ***."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    netloc, slash, tail = rest.partition("/")
    userinfo, at, hosts = netloc.rpartition("@")
    user, colon, _ = userinfo.partition(":")
    userinfo = f"{user}:***" if colon else userinfo
    path, question, query = tail.partition("?")
    query = _PASSWORD_OPTION.sub(r"\1***", query)
    return f"{scheme}://{userinfo}{at}{hosts}{slash}{path}{question}{query}"


@dataclass(frozen=True)
class SentinelTarget:
    """Where a Sentinel-monitored Redis is found, and how to talk to it."""

    sentinels: tuple[tuple[str, int], ...]
    service: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    #: Auth for the sentinels themselves, when they have their own (?sentinel_password=).
    sentinel_password: str | None = None
    tls: bool = False
    #: ?ssl_ca_certs=PATH and the other TLS_OPTIONS, by name (rediss+sentinel:// only).
    tls_options: tuple[tuple[str, str], ...] = ()


def sentinel_target(url: str) -> SentinelTarget | None:
    """The target of a redis+sentinel:// URL; None for any other URL."""
    parts = urlsplit(url)
    if parts.scheme not in SENTINEL_SCHEMES:
        return None
    setting = "EMS_REDIS_URL"
    _, userinfo, hosts, tail = _split(url, setting)
    path, _, query = tail.partition("?")
    service, _, db = path.strip("/").partition("/")
    if not service or "/" in db or (db and not db.isdigit()):
        raise InvalidSetting(
            f"{setting}: a sentinel URL ends in /SERVICE or /SERVICE/DB, not {path!r}"
        )
    user, _, password = userinfo.rstrip("@").partition(":")
    options = parse_qs(query)
    tls = parts.scheme == "rediss+sentinel"
    allowed = {"sentinel_password", *(TLS_OPTIONS if tls else ())}
    unknown = set(options) - allowed
    if unknown:
        raise InvalidSetting(
            f"{setting}: unknown sentinel URL options {sorted(unknown)} "
            f"(known: {', '.join(sorted(allowed))})"
        )
    return SentinelTarget(
        sentinels=tuple(_address(host, DEFAULT_SENTINEL_PORT, setting) for host in hosts),
        service=unquote(service),
        db=int(db or 0),
        username=unquote(user) or None,
        password=unquote(password) or None,
        sentinel_password=options.get("sentinel_password", [None])[-1],
        tls=tls,
        tls_options=tuple((name, options[name][-1]) for name in TLS_OPTIONS if name in options),
    )
