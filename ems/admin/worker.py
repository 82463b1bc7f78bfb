"""The console's gunicorn worker: gunicorn's threaded worker (gthread), except that a
connection is read in the worker's event loop, without a thread, until its request has
arrived whole (ems.admin.requests.arrived): head and a body up to the console's largest.
A client that connects and sends nothing, or half a request, or trickles one, only costs
a socket in the loop, and is closed when its time to send the request is up
(EMS_ADMIN_HEADER_TIMEOUT). Once a thread has the request, a read or write that stalls
that long fails (SO_RCVTIMEO and SO_SNDTIMEO), so a thread is never held for long by a
client either. Kept-alive connections wait in the loop as gthread's do, and their next
request is read the same way.
"""

from __future__ import annotations

import errno
import socket
import struct
import time
from collections import deque
from functools import partial
from typing import Any

from gunicorn.workers.gthread import TConn, ThreadWorker

from ems.admin.requests import arrived

_RETRY = (errno.EAGAIN, errno.EWOULDBLOCK, errno.ECONNABORTED)


class ConsoleWorker(ThreadWorker):  # type: ignore[misc]
    """gthread that hands a thread whole requests only; see the module's docstring."""

    #: Seconds a client has to send its request (set per server by Console).
    request_timeout: float = 10.0
    #: Largest body read ahead before the request gets a thread.
    max_body: int = 1024 * 1024

    def init_process(self) -> None:
        self.arriving: deque[Any] = deque()  # ordered by deadline: one timeout for all
        super().init_process()

    def accept(self, listener: Any) -> None:
        try:
            sock, client = listener.accept()
        except OSError as exc:
            if exc.errno in _RETRY:
                return
            raise
        self.nr_conns += 1
        conn = TConn(self.cfg, sock, client, listener.getsockname())
        if self.cfg.is_ssl:  # the console serves plain http; TLS is gthread's way
            self.enqueue_req(conn)
            return
        self._await_request(conn)

    def on_client_socket_readable(self, conn: Any, client: Any) -> None:
        """A kept-alive connection's next request is read like a first one."""
        self.poller.unregister(client)
        self.keepalived_conns.remove(conn)
        self._await_request(conn)

    def _await_request(self, conn: Any) -> None:
        conn.sock.setblocking(False)
        conn.ems_received = bytearray()
        conn.ems_deadline = time.monotonic() + self.request_timeout
        self.arriving.append(conn)
        self.poller.register(conn.sock, 1, partial(self._on_bytes, conn))  # EVENT_READ

    def _on_bytes(self, conn: Any, _sock: Any) -> None:
        try:
            data = conn.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._drop(conn)
            return
        conn.ems_received += data
        if arrived(bytes(conn.ems_received), max_body=self.max_body):
            self._unwatch(conn)
            self._hand_over(conn, bytes(conn.ems_received))

    def _hand_over(self, conn: Any, received: bytes) -> None:
        conn.sock.setblocking(True)
        stall = _timeval(self.request_timeout)
        conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, stall)
        conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, stall)
        conn.init()
        conn.parser.unreader.unread(received)
        conn.data_ready = True
        self.enqueue_req(conn)

    def _unwatch(self, conn: Any) -> None:
        self.poller.unregister(conn.sock)
        self.arriving.remove(conn)

    def _drop(self, conn: Any) -> None:
        self._unwatch(conn)
        self.nr_conns -= 1
        conn.close()

    def murder_pending(self) -> None:
        """gthread's, and close the connections whose time to send a request is up."""
        super().murder_pending()
        now = time.monotonic()
        while self.arriving and self.arriving[0].ems_deadline <= now:
            self._drop(self.arriving[0])


def _timeval(seconds: float) -> bytes:
    whole = int(seconds)
    return struct.pack("ll", whole, int((seconds - whole) * 1_000_000))
