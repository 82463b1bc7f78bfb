"""Slow and idle clients starve nobody: a real `ems admin serve` with one worker of two
threads keeps answering while many sockets sit idle or half-way through a request, and
closes those whose time to send a request is up (EMS_ADMIN_HEADER_TIMEOUT)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from ems.admin.requests import MAX_HEAD, arrived
from ems.config import Settings
from ems.ops.accounts import Accounts
from tests.admin.conftest import PASSWORD

ROOT = Path(__file__).resolve().parents[2]
SECRET = "k" * 48
#: Seconds any one answer may take here (far more than it does; far less than forever).
PROMPT = 10.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _health(port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=PROMPT) as answer:
        return int(answer.status)


@contextmanager
def serving(settings: Settings, tmp_path: Path, header_timeout: float) -> Iterator[int]:
    """`ems admin serve` with one worker of two threads; its port once it answers."""
    with Accounts(settings) as accounts:
        accounts.add_user("ada", "admin", PASSWORD)
    port = _free_port()
    env = {
        **os.environ,
        "EMS_DATABASE_URL": settings.database_url,
        "EMS_REDIS_URL": settings.redis_url,
        "EMS_ADMIN_SECRET_KEY": SECRET,
        "EMS_ADMIN_HEADER_TIMEOUT": str(header_timeout),
    }
    log_path = tmp_path / "serve.log"
    command = ["admin", "serve", "--port", str(port), "--workers", "1", "--threads", "2"]
    with log_path.open("w") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "ems.cli", *command],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 30
            while True:
                assert server.poll() is None, log_path.read_text()
                try:
                    assert _health(port) == 200
                    break
                except (urllib.error.URLError, ConnectionError):
                    assert time.monotonic() < deadline, log_path.read_text()
                    time.sleep(0.2)
            yield port
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=60)


def _open(stack: ExitStack, port: int, send: bytes) -> socket.socket:
    sock = stack.enter_context(socket.create_connection(("127.0.0.1", port), timeout=PROMPT))
    if send:
        sock.sendall(send)
    return sock


def _answer(sock: socket.socket) -> bytes:
    """One whole answer of /healthz (it ends with its JSON body)."""
    received = b""
    while not received.endswith(b"}\n"):
        more = sock.recv(1024)
        assert more, received
        received += more
    return received


HALF_HEAD = b"GET /healthz HTTP/1.1\r\nHost: console\r\nX-Slow: "
HALF_BODY = (
    b"POST /login HTTP/1.1\r\nHost: console\r\nContent-Type: application/x-www-form-urlencoded"
    b"\r\nContent-Length: 200\r\n\r\nname=ada&password="
)


def test_idle_and_half_sent_requests_starve_nobody(settings: Settings, tmp_path: Path) -> None:
    with serving(settings, tmp_path, header_timeout=300) as port, ExitStack() as stack:
        for send in (b"", HALF_HEAD, HALF_BODY):
            for _ in range(10):
                _open(stack, port, send)
        # Give the server the chance to be starved: it has seen every socket when a
        # request on a connection opened after them is answered.
        _open(stack, port, b"")
        started = time.monotonic()
        for _ in range(10):
            assert _health(port) == 200
        assert time.monotonic() - started < PROMPT


def test_a_request_not_sent_in_time_is_closed(settings: Settings, tmp_path: Path) -> None:
    with serving(settings, tmp_path, header_timeout=1) as port, ExitStack() as stack:
        slow = _open(stack, port, HALF_HEAD)
        slow.settimeout(30)
        assert slow.recv(1024) == b""  # closed by the server, nothing answered
        # A request sent whole on time is answered, and its connection kept alive.
        keep = _open(stack, port, b"GET /healthz HTTP/1.1\r\nHost: console\r\n\r\n")
        assert _answer(keep).startswith(b"HTTP/1.1 200")
        keep.sendall(b"GET /healthz HTTP/1.1\r\nHost: console\r\nConnection: close\r\n\r\n")
        assert _answer(keep).startswith(b"HTTP/1.1 200")


def test_when_a_request_has_arrived() -> None:
    head = b"GET / HTTP/1.1\r\nHost: x\r\n"
    assert not arrived(head, max_body=100)
    assert arrived(head + b"\r\n", max_body=100)
    post = b"POST / HTTP/1.1\r\ncontent-length: 5\r\n\r\n"
    assert not arrived(post + b"abc", max_body=100)
    assert arrived(post + b"abcde", max_body=100)
    assert arrived(b"POST / HTTP/1.1\r\nContent-Length:  500\r\n\r\n", max_body=100)
    assert arrived(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", max_body=100)
    assert arrived(b"G" * MAX_HEAD, max_body=100)
    twice = b"POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n"
    assert arrived(twice, max_body=100)
