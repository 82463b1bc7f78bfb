"""The read and write bounds of a connection's socket kept by the kernel.

PyMySQL bounds each read and write with the socket's timeout, and CPython serves a
socket with a timeout by a poll() before every send and every receive: two system calls
more per round trip, on the path of every statement. The same bounds set as the socket's
SO_RCVTIMEO and SO_SNDTIMEO on a blocking socket cost none: the kernel ends a read or a
write that waited that long, and the reader raises TimeoutError, as the socket's timeout
did (PyMySQL then reports the connection lost, error 2013, and closes it). ems's own
Redis connections (ems.offsets.resp) are bounded so too.
"""

from __future__ import annotations

import io
import socket
import struct
from typing import Any

_socket_readinto = socket.SocketIO.readinto


class _BoundedReads(socket.SocketIO):
    """A socket's reader that raises TimeoutError when SO_RCVTIMEO ends a read (a blocking
    socket's receive then fails with EAGAIN, which SocketIO returns as None)."""

    def readinto(self, b: Any) -> int:
        count = _socket_readinto(self, b)  # as super().readinto, without the super object
        if count is None:
            raise TimeoutError("timed out")
        return count


def _timeval(seconds: float) -> bytes:
    whole = int(seconds)
    return struct.pack("@ll", whole, int((seconds - whole) * 1_000_000))


def kernel_bounds(sock: socket.socket, read: float, write: float) -> None:
    """Make the socket blocking, each receive bounded to `read` seconds and each send to
    `write` by the kernel: a receive or send that waited that long fails with EAGAIN
    (BlockingIOError, an OSError as socket.timeout is)."""
    sock.settimeout(None)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, _timeval(read))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, _timeval(write))


def bound_in_kernel(conn: Any) -> None:
    """Move an open, idle PyMySQL connection's read and write timeouts into its socket's
    kernel options (see the module's text). A connection without timeouts, or one not
    over a plain socket (TLS reads its records its own way), is left as it is."""
    sock = getattr(conn, "_sock", None)
    read, write = conn._read_timeout, conn._write_timeout
    if type(sock) is not socket.socket or not read or not write:
        return
    kernel_bounds(sock, read, write)
    old = conn._rfile
    conn._rfile = io.BufferedReader(_BoundedReads(sock, "rb"))
    old.close()  # its buffer is empty: the connection is idle
    # PyMySQL sets the socket's timeout again whenever these differ from the current one.
    conn._read_timeout = conn._write_timeout = conn._current_timeout = None
