"""A TCP proxy that injects network faults between a client and a server.

It runs its own asyncio loop on a background thread, so synchronous tests and child
processes (pointed at `proxy.port`) go through it unchanged. Each accepted connection gets
one upstream connection; bytes are piped both ways, and the controls act at once on live
and new connections:

- latency: every chunk waits this long before it is delivered, in order (a slow link);
- stall: bytes are accepted from both sides and held, none delivered (a partition in
  which TCP keeps the connections open); heal delivers what was held, as a partition
  that heals loses nothing at the TCP level;
- cut_all: every live connection reset at once (RST, both sides);
- refuse: new connections closed at once (the host unreachable);
- cut_after(match): the next connection whose client sends a packet containing `match`
  has that packet delivered to the server, then is cut before any reply can come back:
  the server may have done it, the client cannot know (an ambiguous commit). With
  protocol="mysql" the client's stream is split into MySQL packets (3-byte length, 1
  sequence byte, payload) so the match is judged on whole packets and the cut lands
  right after one; with "raw", on each chunk read. With late=N the client is cut first
  and the packet reaches the server N seconds later: the client reconnects and carries
  on while the server has not yet done what it may do (a COMMIT that lands after the
  client looked and found it had not).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, Literal

Protocol = Literal["raw", "mysql"]
#: A COMMIT statement's packet payload (COM_QUERY, 0x03), to match with protocol="mysql":
#: not PyMySQL's "SET AUTOCOMMIT = 0" at connect, which a plain b"COMMIT" matches first.
COMMIT = b"\x03COMMIT"


@dataclass(eq=False)
class _Link:
    client: asyncio.StreamWriter
    server: asyncio.StreamWriter
    #: Set once the reply direction must deliver nothing more (a cut is under way).
    muted: bool = False
    tasks: list[asyncio.Task[None]] = field(default_factory=list)


class FaultProxy:
    def __init__(self, host: str, port: int, *, protocol: Protocol = "raw") -> None:
        self.target = (host, port)
        self.protocol = protocol
        self.port = 0
        self.connections = 0
        self.cuts = 0
        self._latency = 0.0
        self._refuse = False
        self._stalled: asyncio.Event | None = None  # set = flowing
        self._cut_matches: list[tuple[bytes, float]] = []
        self._links: set[_Link] = set()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None

    # -- life ------------------------------------------------------------------------

    def start(self) -> FaultProxy:
        self._thread.start()
        self._call(self._start())
        return self

    def close(self) -> None:
        if not self._thread.is_alive():
            return
        self._call(self._close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- controls (any thread) ---------------------------------------------------------

    def set_latency(self, seconds: float) -> None:
        self._latency = seconds

    def stall(self) -> None:
        self._call(self._set_flowing(False))

    def unstall(self) -> None:
        self._call(self._set_flowing(True))

    def refuse(self, on: bool = True) -> None:
        self._refuse = on

    def cut_all(self) -> None:
        self._call(self._cut_all())

    def cut_after(self, match: bytes, times: int = 1, late: float = 0.0) -> None:
        self._call(self._arm(match, times, late=late))

    def heal(self) -> None:
        self._latency = 0.0
        self._refuse = False
        self._call(self._arm(b"", 0, clear=True))
        self.unstall()

    # -- the loop's side -----------------------------------------------------------------

    def _call(self, coro: Coroutine[Any, Any, None]) -> None:
        asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)

    async def _start(self) -> None:
        self._stalled = asyncio.Event()
        self._stalled.set()
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _close(self) -> None:
        assert self._server is not None
        self._server.close()
        await self._cut_all(count=False)
        await self._server.wait_closed()

    async def _set_flowing(self, flowing: bool) -> None:
        assert self._stalled is not None
        if flowing:
            self._stalled.set()
        else:
            self._stalled.clear()

    async def _arm(self, match: bytes, times: int, clear: bool = False, late: float = 0.0) -> None:
        if clear:
            self._cut_matches.clear()
        self._cut_matches += [(match, late)] * times

    async def _cut_all(self, count: bool = False) -> None:
        for link in list(self._links):
            _reset(link)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        if self._refuse:
            _abort(writer)
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            _abort(writer)
            return
        link = _Link(writer, up_writer)
        self._links.add(link)
        link.tasks = [
            asyncio.create_task(self._pipe(link, reader, up_writer, upstream=True)),
            asyncio.create_task(self._pipe(link, up_reader, writer, upstream=False)),
        ]
        await asyncio.gather(*link.tasks, return_exceptions=True)
        self._links.discard(link)
        _reset(link)

    async def _pipe(
        self,
        link: _Link,
        source: asyncio.StreamReader,
        sink: asyncio.StreamWriter,
        upstream: bool,
    ) -> None:
        pending = b""
        while True:
            chunk = await source.read(65536)
            if not chunk:
                break
            if self._latency:
                await asyncio.sleep(self._latency)
            assert self._stalled is not None
            await self._stalled.wait()
            if link.muted:
                break
            if not upstream:
                sink.write(chunk)
                await sink.drain()
                continue
            pending += chunk
            packets, pending = _split(pending, self.protocol)
            for packet in packets:
                late = self._matches(packet)
                if late is None:
                    sink.write(packet)
                    continue
                link.muted = True
                self.cuts += 1
                if late:
                    _abort(link.client)
                    await asyncio.sleep(late)
                sink.write(packet)
                await sink.drain()
                # Give the server the packet before the cut reaches it.
                await asyncio.sleep(0.05)
                _reset(link)
                return
            await sink.drain()
        sink.close()

    def _matches(self, packet: bytes) -> float | None:
        """The delay of the armed cut this packet matches (taken), or None."""
        for i, (match, late) in enumerate(self._cut_matches):
            if match and match in packet:
                del self._cut_matches[i]
                return late
        return None


def _split(data: bytes, protocol: Protocol) -> tuple[list[bytes], bytes]:
    """Whole packets of `data` and what is left of an unfinished one."""
    if protocol == "raw":
        return [data], b""
    packets = []
    while len(data) >= 4:
        length = struct.unpack("<I", data[:3] + b"\0")[0]
        if len(data) < 4 + length:
            break
        packets.append(data[: 4 + length])
        data = data[4 + length :]
    return packets, data


def _abort(writer: asyncio.StreamWriter) -> None:
    """Close with RST, not FIN: the peer sees a reset connection."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


def _reset(link: _Link) -> None:
    link.muted = True
    _abort(link.client)
    _abort(link.server)
    for task in link.tasks:
        task.cancel()
