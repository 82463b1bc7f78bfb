"""PyMySQL connections as ems opens them: PyMySQL's own, except that the TLS context of
its PREFERRED mode is built once per process, and only when a server offers TLS.

With no TLS option in the URL PyMySQL prefers TLS: it builds a default context (no
certificate check, so no CA is ever consulted) and uses it when the server offers TLS.
Building that context loads the system's CA store, about 15-30 ms of CPU, fifteen times
the rest of a connect to a local server. Every ems process opens connections as its pools
grow and its nodes change, so the one context is shared: the same settings, the same
behaviour, one load; and it is built when a server first offers TLS, so a process talking
to a server without TLS (a short CLI command, say) never pays for it. Explicit TLS options
(?ssl_ca=...) keep PyMySQL's own path.

DATETIME and TIMESTAMP values are parsed by datetime.fromisoformat (C, about 0.1 us)
rather than PyMySQL's regular expression (about 4 us): every message read carries one, so
at 50,000 messages a second the parse alone took a fifth of a core. A text that is not
ISO (a zero date) goes to PyMySQL's converter, which returns what it always returned.

A statement's arguments are bound through a tuple of their exact number (Cursor). PyMySQL
builds it with tuple(map(escape, args)), which CPython starts at a guess of 10 items and
resizes: freed, the tuple goes to CPython's free list of its final size, and a new one is
allocated for the next guess. Every statement of other than 10 arguments thus leaves one
more tuple parked, until each free list holds its bound of 2,000: a consumer's statements
(a fetch has 6 arguments, a batch's log and ack statements 3 per offset range plus a few)
filled 8 of them (16,000 tuples), and a group member's RSS crept 2-3.5 MB over its first
10-15 minutes at a paced stream, a bounded growth that read as a leak."""

from __future__ import annotations

import datetime as dt
import ssl
import threading
from typing import Any

import pymysql.connections
import pymysql.converters
import pymysql.cursors
import pymysql.err
import sqlalchemy
from pymysql.constants import FIELD_TYPE
from sqlalchemy import event
from sqlalchemy.engine import Engine

_preferred: ssl.SSLContext | None = None
_lock = threading.Lock()


class Connection(pymysql.connections.Connection):  # type: ignore[misc]
    def _create_ssl_ctx(self, sslp: Any) -> ssl.SSLContext | None:
        if sslp != {}:  # TLS options of the caller's own
            return super()._create_ssl_ctx(sslp)  # type: ignore[no-any-return]
        return None  # PREFERRED: the shared context, built when first asked for (ctx)

    @property
    def ctx(self) -> ssl.SSLContext:
        """The connection's TLS context: its own, or the shared PREFERRED one. PyMySQL
        asks for it only to wrap the socket of a server that offers TLS."""
        own: ssl.SSLContext | None = self.__dict__.get("_own_ctx")
        return own if own is not None else self._preferred_ctx()

    @ctx.setter
    def ctx(self, value: ssl.SSLContext | None) -> None:
        self.__dict__["_own_ctx"] = value

    def _preferred_ctx(self) -> ssl.SSLContext:
        global _preferred
        with _lock:
            if _preferred is None:
                _preferred = super()._create_ssl_ctx({})
            return _preferred


class Cursor(pymysql.cursors.Cursor):  # type: ignore[misc]
    def _mogrify(self, query: str, args: Any) -> str:
        """The statement with its arguments bound, as PyMySQL binds them, through a tuple
        made at its size (a list first) rather than resized from a guess."""
        if not isinstance(args, (list, tuple)):
            return super()._mogrify(query, args)  # type: ignore[no-any-return]
        escape = self._get_db().escape
        try:
            return query % tuple([escape(arg) for arg in args])
        except TypeError as exc:
            raise pymysql.err.ProgrammingError(str(exc)) from exc


def datetime_value(text: str) -> dt.datetime | str:
    """A DATETIME or TIMESTAMP column's value, as PyMySQL's convert_datetime returns it."""
    if len(text) >= 19:  # a date and a time: PyMySQL would return a date for a date alone
        try:
            return dt.datetime.fromisoformat(text)
        except ValueError:
            pass
    return pymysql.converters.convert_datetime(text)  # type: ignore[no-any-return]


#: PyMySQL's conversions, with the faster datetime parse.
CONVERSIONS = {
    **pymysql.converters.conversions,
    FIELD_TYPE.DATETIME: datetime_value,
    FIELD_TYPE.TIMESTAMP: datetime_value,
}


def connect(*args: Any, **kwargs: Any) -> Connection:
    """pymysql.connect, through Connection, with CONVERSIONS and Cursor unless told
    otherwise."""
    kwargs.setdefault("conv", CONVERSIONS)
    kwargs.setdefault("cursorclass", Cursor)
    return Connection(*args, **kwargs)


def open_through_driver(engine: Engine) -> None:
    """Make a pymysql engine open its connections with connect()."""

    @event.listens_for(engine, "do_connect")
    def _connect(dialect: Any, record: Any, cargs: list[Any], cparams: dict[str, Any]) -> Any:
        return connect(*cargs, **cparams)


def create_engine(url: str, **options: Any) -> Engine:
    """sqlalchemy.create_engine for a one-server engine that opens through connect()."""
    engine = sqlalchemy.create_engine(url, **options)
    open_through_driver(engine)
    return engine
