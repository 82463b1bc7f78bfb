"""A small RESP2 client for the producer's hot path: one plain socket, no pool.

Every single publish allocates its offset with one INCRBY. Through redis-py that command
costs about three times the client CPU of writing the packed bytes to a socket and parsing
the `:123` reply, which on a small host caps many producers. This client speaks only what
the allocator and the wake-up publisher need (arrays of bulk strings out; simple, error,
integer, bulk and array replies in) and keeps redis-py's rules for an unreachable server:
bounded retries with exponential backoff on connection errors and LOADING replies, then a
typed RedisUnavailable. URLs it cannot serve (TLS, unix sockets) keep using redis-py.
"""

from __future__ import annotations

import select
import socket
import threading
import time
from collections.abc import Callable, Sequence
from typing import TypeAlias
from urllib.parse import unquote, urlsplit

from ems.exceptions import RedisOutcomeUnknown, RedisReplyError, RedisUnavailable, caused
from ems.sockets import kernel_bounds

_CRLF = b"\r\n"
#: Error reply codes that mean "the server is not ready yet" (or, READONLY, is a replica
#: now: a demoted master): the command did not run, and it is retried on a new
#: connection, as redis-py does for LOADING.
_TRANSIENT = ("LOADING", "MASTERDOWN", "TRYAGAIN", "READONLY")
_BACKOFF_BASE = 0.05
_BACKOFF_CAP = 1.0


class ErrorReply:
    """An error reply (`-CODE message`), returned as a value so one failed command in a
    pipeline does not hide the replies of the others."""

    __slots__ = ("message",)

    def __init__(self, message: str) -> None:
        self.message = message

    @property
    def code(self) -> str:
        return self.message.split(" ", 1)[0]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ErrorReply) and other.message == self.message

    def __hash__(self) -> int:
        return hash(self.message)

    def __repr__(self) -> str:
        return f"ErrorReply({self.message!r})"


Reply: TypeAlias = "int | bytes | ErrorReply | list[Reply] | None"


class Incomplete(Exception):
    """The buffer ends before the reply does."""


class ProtocolError(Exception):
    """The bytes are not a RESP2 reply."""


# -- the codec (pure) ------------------------------------------------------------------


def pack(*args: bytes | str | int) -> bytes:
    """A command as a RESP array of bulk strings."""
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        if isinstance(arg, str):
            data = arg.encode()
        elif isinstance(arg, int):  # bool is an int too; Redis has no booleans
            data = b"%d" % arg
        else:
            data = arg
        parts.append(b"$%d\r\n%b\r\n" % (len(data), data))
    return b"".join(parts)


def parse(buf: bytes, pos: int = 0) -> tuple[Reply, int]:
    """The reply that starts at buf[pos] and the position just after it. Raises
    Incomplete when more bytes are needed, ProtocolError when these cannot be RESP2."""
    end = buf.find(_CRLF, pos)
    if end < 0:
        raise Incomplete
    kind, line, after = buf[pos : pos + 1], buf[pos + 1 : end], end + 2
    if kind == b":":
        return _integer(line), after
    if kind == b"+":
        return line, after
    if kind == b"-":
        return ErrorReply(line.decode("utf-8", "replace")), after
    if kind == b"$":
        size = _integer(line)
        if size < 0:
            return None, after
        stop = after + size
        if len(buf) < stop + 2:
            raise Incomplete
        if buf[stop : stop + 2] != _CRLF:
            raise ProtocolError(f"bulk string of {size} bytes is not followed by CRLF")
        return buf[after:stop], stop + 2
    if kind == b"*":
        count = _integer(line)
        if count < 0:
            return None, after
        items: list[Reply] = []
        for _ in range(count):
            if buf.startswith(b":", after):
                # An integer, read here without a call per item: the offset script
                # answers with one per partition of a batch.
                end = buf.find(_CRLF, after)
                if end < 0:
                    raise Incomplete
                items.append(_integer(buf[after + 1 : end]))
                after = end + 2
                continue
            item, after = parse(buf, after)
            items.append(item)
        return items, after
    raise ProtocolError(f"unknown reply type {kind!r}")


def _integer(line: bytes) -> int:
    # int() would also accept spaces, underscores and a plus sign; RESP never sends them.
    digits = line[1:] if line[:1] == b"-" else line
    if not digits.isdigit() or not digits.isascii():
        raise ProtocolError(f"not an integer: {line!r}")
    return int(line)


# -- the connection ----------------------------------------------------------------------


class RespConnection:
    """One TCP connection to Redis behind a lock, reconnected on demand. Thread-safe."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        db: int = 0,
        username: str | None = None,
        password: str | None = None,
        timeout: float = 3.0,
        retries: int = 3,
        quiet: bool = False,
        locate: Callable[[], tuple[str, int]] | None = None,
    ) -> None:
        self.address = (host, port)
        #: Where to connect, asked again for every new connection (a Sentinel's current
        #: master); None: always `address`. It raises OSError when it cannot say.
        self.locate = locate
        #: Replies switched off (CLIENT REPLY OFF) on every new connection: for send_only.
        self.quiet = quiet
        self.db = db
        self.username = username
        self.password = password
        self.timeout = timeout
        self.retries = retries
        self._sock: socket.socket | None = None
        self._poller: select.poll | None = None
        self._buf = b""
        self._lock = threading.Lock()
        #: A subscribed connection's writes from other threads (see command_subscribed).
        self._write_lock = threading.Lock()

    @classmethod
    def from_url(
        cls, url: str, *, timeout: float, retries: int, quiet: bool = False
    ) -> RespConnection | None:
        """A connection for a redis:// URL; None for schemes it does not speak."""
        parts = urlsplit(url)
        if parts.scheme != "redis" or parts.query:
            return None
        path = parts.path.strip("/")
        if path and not path.isdigit():
            return None
        return cls(
            parts.hostname or "127.0.0.1",
            parts.port or 6379,
            db=int(path or 0),
            username=unquote(parts.username) if parts.username else None,
            password=unquote(parts.password) if parts.password else None,
            timeout=timeout,
            retries=retries,
            quiet=quiet,
        )

    def call(self, *args: bytes | str | int) -> Reply:
        """One command; its error reply is raised as RedisReplyError."""
        return check(self.execute(pack(*args), 1)[0])

    def execute(self, packed: bytes, replies: int, *, idempotent: bool = True) -> list[Reply]:
        """Send packed commands and read `replies` replies (error replies as values).
        Connection errors are retried with backoff; after the last, RedisUnavailable.
        A command that must not run twice (idempotent=False) is sent again only when it
        provably did not reach Redis (the failure came while connecting, or Redis
        answered that it is not ready); once its bytes may have gone out, a failure
        raises RedisOutcomeUnknown instead."""
        failures = 0
        with self._lock:
            while True:
                sent = False
                try:
                    sock = self._live_socket()
                    sent = True  # from here on, the bytes may reach Redis
                    sock.sendall(packed)
                    found = [self._read()] if replies else []
                    for _ in range(replies - 1):
                        found.append(self._read())
                    transient = _transient(found)
                    if transient is None:
                        return found
                    sent = False  # an error reply: Redis did not run the command
                    raise ConnectionError(transient)
                except (OSError, ProtocolError) as exc:
                    self._close()
                    if sent and not idempotent:
                        lost = f"the connection to Redis failed after a command was sent: {exc}"
                        raise caused(RedisOutcomeUnknown(lost), exc)  # noqa: B904 (see caused)
                    # Whatever was in flight is lost with the connection; the caller's
                    # commands are sent again whole on a new one.
                    failures += 1
                    if failures > self.retries:
                        raise caused(RedisUnavailable(f"Redis is unreachable: {exc}"), exc)  # noqa: B904 (see caused)
                    time.sleep(min(_BACKOFF_CAP, _BACKOFF_BASE * 2**failures))

    def _live_socket(self) -> socket.socket:
        """The connection, replaced first if Redis has closed it (a restart, a killed
        client, an idle timeout): between commands nothing should be readable, so any
        event on the socket (end of stream, an error, stray bytes) means a fresh one, and
        reconnecting then provably loses no command of ours, where a failed send would
        not."""
        if self._sock is None or self._poller is None:
            return self._connect()
        if not self._poller.poll(0):
            return self._sock
        self._close()
        return self._connect()

    def send_only(self, packed: bytes) -> None:
        """Write without reading replies (after CLIENT REPLY OFF). One attempt: the caller
        decides what a lost write means. Raises OSError."""
        with self._lock:
            try:
                (self._sock or self._connect()).sendall(packed)
            except OSError:
                self._close()
                raise

    def close(self) -> None:
        with self._lock:
            self._close()

    # -- pub/sub: a connection that subscribes receives pushes and nothing else ----------

    def subscribe(self, channels: Sequence[str]) -> None:
        """Connect anew and subscribe to the channels (RedisReplyError if refused); the
        connection then only receives their messages, through pushes(). Raises OSError."""
        with self._lock:
            self._close()
            sock = self._connect()
            sock.sendall(pack("SUBSCRIBE", *channels))
            for _ in channels:
                reply = self._read()
                if isinstance(reply, ErrorReply):
                    self._close()
                    raise RedisReplyError(f"Redis refused the subscription: {reply.message}")

    def command_subscribed(self, packed: bytes) -> None:
        """Write (UN)SUBSCRIBE commands on the subscribed connection while another thread
        may wait in pushes(), without its lock: their confirmations come among the
        pushes. Raises OSError (the connection lost, or not subscribed)."""
        sock = self._sock
        if sock is None:
            raise ConnectionError("not subscribed")
        with self._write_lock:
            sock.sendall(packed)

    def pushes(self, timeout: float) -> list[Reply]:
        """The pushes that have arrived, all of them, waiting up to timeout seconds for
        the first ([] if none came). Raises OSError when the connection is lost."""
        with self._lock:
            if self._sock is None or self._poller is None:
                raise ConnectionError("not subscribed")
            found = self._complete()
            if found or not self._poller.poll(int(timeout * 1000)):
                return found
            chunk = self._sock.recv(65536)
            if not chunk:
                self._close()
                raise ConnectionError("Redis closed the connection")
            self._buf += chunk
            return self._complete()

    def _complete(self) -> list[Reply]:
        """The whole replies in the buffer, taken out of it."""
        found: list[Reply] = []
        buf, pos = self._buf, 0
        while pos < len(buf):
            try:
                reply, pos = parse(buf, pos)
            except Incomplete:
                break
            found.append(reply)
        self._buf = buf[pos:]
        return found

    def _connect(self) -> socket.socket:
        if self.locate is not None:
            self.address = self.locate()
        sock = socket.create_connection(self.address, timeout=self.timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.timeout:
            kernel_bounds(sock, self.timeout, self.timeout)  # no poll() around each call
        self._sock, self._buf = sock, b""
        self._poller = select.poll()
        self._poller.register(sock, select.POLLIN)
        setup = []
        if self.password is not None:
            auth = (self.username, self.password) if self.username else (self.password,)
            setup.append(pack("AUTH", *auth))
        if self.db:
            setup.append(pack("SELECT", self.db))
        if setup:
            sock.sendall(b"".join(setup))
            for _ in setup:
                reply = self._read()
                if isinstance(reply, ErrorReply):
                    self._close()
                    raise RedisReplyError(f"Redis refused the connection: {reply.message}")
        if self.quiet:
            sock.sendall(pack("CLIENT", "REPLY", "OFF"))
        return sock

    def _read(self) -> Reply:
        assert self._sock is not None
        buf = self._buf
        while True:
            if buf:
                try:
                    reply, after = parse(buf)
                except Incomplete:
                    pass
                else:
                    self._buf = buf[after:]
                    return reply
            chunk = self._sock.recv(65536)
            if not chunk:
                raise ConnectionError("Redis closed the connection")
            buf += chunk

    def _close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock, self._buf, self._poller = None, b"", None


def check(reply: Reply) -> Reply:
    """The reply, or RedisReplyError if Redis answered with an error."""
    if isinstance(reply, ErrorReply):
        raise RedisReplyError(f"Redis answered: {reply.message}")
    return reply


def _transient(replies: list[Reply]) -> str | None:
    for reply in replies:
        if type(reply) is ErrorReply and reply.code in _TRANSIENT:
            return reply.message
    return None
