"""redis-py clients and pools for settings.redis_url: one Redis by its URL, or the master
of a Sentinel-monitored service (redis+sentinel://, ems.urls).

Through Sentinel every new connection asks the sentinels for the current master, so
after a failover the next connection (a retried command, a listener that reconnects)
reaches the promoted replica. A connection still open to a demoted master gets
READONLY replies, which redis-py's sentinel connection turns into a reconnect.
"""

from __future__ import annotations

from typing import Any

import redis
import redis.asyncio
import redis.asyncio.retry
import redis.asyncio.sentinel
import redis.retry
import redis.sentinel
from redis.backoff import NoBackoff

from ems.config import Settings
from ems.offsets.resp import RespConnection
from ems.urls import SentinelTarget

# redis-py's sentinel modules carry no annotations; typed at this module's functions.
_SYNC: Any = redis.sentinel
_ASYNC: Any = redis.asyncio.sentinel


def _sentinel_options(target: SentinelTarget, options: dict[str, Any], once: Any) -> dict[str, Any]:
    """Connection options for the sentinels themselves: the same timeouts and TLS, their
    own password, and `once`, a retry policy that never repeats: a discovery asks each
    sentinel once and moves on to the next (redis-py's default would retry a dead or
    refusing sentinel three times with backoff of seconds before asking the next one),
    and the master connection's own retry policy decides whether to discover again."""
    own: dict[str, Any] = {
        key: options[key] for key in ("socket_connect_timeout", "socket_timeout") if key in options
    }
    own["retry"] = once
    if target.sentinel_password:
        own["password"] = target.sentinel_password
    if target.tls:
        own.update(ssl=True, **dict(target.tls_options))
    return own


def _master_options(target: SentinelTarget, options: dict[str, Any]) -> dict[str, Any]:
    master = {"db": target.db, **options}
    if target.username:
        master["username"] = target.username
    if target.password:
        master["password"] = target.password
    if target.tls:
        master.update(ssl=True, **dict(target.tls_options))
    return master


def _master_in(manager: Any, service: str, sentinel_no: int, masters: Any) -> Any:
    """The (host, port) of service in one sentinel's SENTINEL MASTERS answer, when that
    sentinel holds it healthy; the sentinel then goes first for the next discovery."""
    state = masters.get(service)
    if not state or not manager.check_master_state(state, service):
        return None
    sentinels = manager.sentinels
    sentinels[0], sentinels[sentinel_no] = sentinels[sentinel_no], sentinels[0]
    return state["ip"], state["port"]


def _no_master(service: str, errors: list[str]) -> redis.sentinel.MasterNotFoundError:
    """What no sentinel could tell, with each sentinel's own error (redis-py's message
    gives only their class, 'network:ConnectionError', never 'certificate verify failed'
    or 'invalid password')."""
    why = "; ".join(errors) or "the sentinels answered, none holds a healthy master"
    return redis.sentinel.MasterNotFoundError(f"no master for {service!r}: {why}")


def _where(sentinel: Any) -> str:
    kwargs = sentinel.connection_pool.connection_kwargs
    return f"sentinel {kwargs.get('host')}:{kwargs.get('port')}"


class _Sentinel(redis.sentinel.Sentinel):
    def discover_master(self, service_name: str) -> Any:
        errors = []
        for sentinel_no, sentinel in enumerate(self.sentinels):
            try:
                masters = sentinel.sentinel_masters()
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                errors.append(f"{_where(sentinel)}: {exc}")
                continue
            if (found := _master_in(self, service_name, sentinel_no, masters)) is not None:
                return found
        raise _no_master(service_name, errors)


class _AsyncSentinel(redis.asyncio.sentinel.Sentinel):
    async def discover_master(self, service_name: str) -> Any:
        errors = []
        for sentinel_no, sentinel in enumerate(self.sentinels):
            try:
                masters = await sentinel.sentinel_masters()
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                errors.append(f"{_where(sentinel)}: {exc}")
                continue
            if (found := _master_in(self, service_name, sentinel_no, masters)) is not None:
                return found
        raise _no_master(service_name, errors)


def _sentinel(module: Any, target: SentinelTarget, options: dict[str, Any]) -> Any:
    """A Sentinel manager (of `module`: sync or asyncio) for target: redis-py's, with
    clear errors."""
    if module is _ASYNC:
        manager: Any = _AsyncSentinel
        once: Any = redis.asyncio.retry.Retry(NoBackoff(), 0)
    else:
        manager, once = _Sentinel, redis.retry.Retry(NoBackoff(), 0)
    return manager(list(target.sentinels), sentinel_kwargs=_sentinel_options(target, options, once))


def client_for(settings: Settings, **options: Any) -> redis.Redis:
    """A client for settings.redis_url; options are redis-py connection options."""
    target = settings.redis_sentinel
    if target is None:
        return redis.Redis.from_url(settings.redis_url, **options)
    options.pop("single_connection_client", None)  # a Sentinel client keeps a pool
    manager = _sentinel(_SYNC, target, options)
    client: redis.Redis = manager.master_for(target.service, **_master_options(target, options))
    return client


def pool_for(settings: Settings, **options: Any) -> redis.ConnectionPool:
    """A connection pool for settings.redis_url (for connections made one by one)."""
    target = settings.redis_sentinel
    if target is None:
        return redis.ConnectionPool.from_url(settings.redis_url, **options)
    manager = _sentinel(_SYNC, target, options)
    pool: redis.ConnectionPool = _SYNC.SentinelConnectionPool(
        target.service, manager, is_master=True, **_master_options(target, options)
    )
    return pool


def async_client_for(settings: Settings, **options: Any) -> redis.asyncio.Redis:
    """As client_for, for asyncio."""
    target = settings.redis_sentinel
    if target is None:
        return redis.asyncio.Redis.from_url(settings.redis_url, **options)
    manager = _sentinel(_ASYNC, target, options)
    client: redis.asyncio.Redis = manager.master_for(
        target.service, **_master_options(target, options)
    )
    return client


def async_pool_for(settings: Settings, **options: Any) -> redis.asyncio.ConnectionPool:
    """As pool_for, for asyncio."""
    target = settings.redis_sentinel
    if target is None:
        return redis.asyncio.ConnectionPool.from_url(settings.redis_url, **options)
    manager = _sentinel(_ASYNC, target, options)
    pool: redis.asyncio.ConnectionPool = _ASYNC.SentinelConnectionPool(
        target.service, manager, is_master=True, **_master_options(target, options)
    )
    return pool


def resp_for(
    settings: Settings, *, timeout: float, retries: int, quiet: bool = False
) -> RespConnection | None:
    """ems's own RESP connection (the producer's hot path) for settings.redis_url where it
    can serve it: redis://, and a Sentinel service without TLS, whose current master is
    asked for at every new connection. None for the URLs only redis-py speaks."""
    target = settings.redis_sentinel
    if target is None:
        return RespConnection.from_url(
            settings.redis_url, timeout=timeout, retries=retries, quiet=quiet
        )
    if target.tls:
        return None
    sentinel = _sentinel(
        _SYNC, target, {"socket_connect_timeout": timeout, "socket_timeout": timeout}
    )

    def locate() -> tuple[str, int]:
        try:
            host, port = sentinel.discover_master(target.service)
        except redis.RedisError as exc:
            raise ConnectionError(str(exc)) from exc
        return str(host), int(port)

    return RespConnection(
        "", 0, db=target.db, username=target.username, password=target.password,
        timeout=timeout, retries=retries, quiet=quiet, locate=locate,
    )  # fmt: skip
