"""Wake-ups reach their listeners over every kind of Redis URL ems accepts (plain TCP,
TLS, unix sockets, an ACL user with a query string), never send a password over a plain
connection to a TLS port, and a URL ems cannot serve is refused when the settings are made,
not lost in silence. Each server here is a private redis-server of the test's own."""

from __future__ import annotations

import logging
import queue
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ems import Consumer, Producer, TopicAdmin
from ems.config import Settings
from ems.exceptions import InvalidSetting
from ems.wakeups import Listener, Publisher, topic_channel
from tests.tls import self_signed

SECRET = "wake-up-secret-7f3a"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def serve(args: list[str], ready: Callable[[], bool]) -> subprocess.Popen[bytes]:
    binary = shutil.which("redis-server")
    assert binary, "redis-server is needed (scripts/setup.sh installs it)"
    proc = subprocess.Popen([binary, "--save", "", "--appendonly", "no", *args])
    deadline = time.monotonic() + 10
    while not ready():
        assert proc.poll() is None, "redis-server exited"
        assert time.monotonic() < deadline, "redis-server did not come up"
        time.sleep(0.05)
    return proc


@pytest.fixture
def unix_redis(tmp_path: Path) -> Iterator[str]:
    path = tmp_path / "redis.sock"
    proc = serve(["--port", "0", "--unixsocket", str(path), "--dir", str(tmp_path)], path.exists)
    yield f"unix://{path}?db=0"
    proc.kill()
    proc.wait()


@pytest.fixture
def tls_redis(tmp_path: Path) -> Iterator[str]:
    made = self_signed(tmp_path)
    cert, key = made.cert, made.key
    port = free_port()

    def listening() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            return False

    args = ["--port", "0", "--tls-port", str(port), "--tls-cert-file", str(cert)]
    args += ["--tls-key-file", str(key), "--tls-ca-cert-file", str(cert)]
    args += ["--tls-auth-clients", "no", "--requirepass", SECRET, "--dir", str(tmp_path)]
    proc = serve(args, listening)
    yield f"rediss://:{SECRET}@127.0.0.1:{port}/0?ssl_ca_certs={cert}"
    proc.kill()
    proc.wait()


@pytest.fixture
def acl_redis(tmp_path: Path) -> Iterator[str]:
    """Only an ACL user may do anything: the default user is off."""
    port = free_port()
    path = tmp_path / "redis.sock"
    args = ["--port", str(port), "--unixsocket", str(path), "--dir", str(tmp_path)]
    args += ["--user", "default", "off", "--user", "ems", "on", f">{SECRET}", "~*", "&*"]
    args += ["+@all"]
    proc = serve(args, path.exists)
    yield f"redis://ems:{SECRET}@127.0.0.1:{port}/0?socket_timeout=5"
    proc.kill()
    proc.wait()


def wake_ups_flow(settings: Settings, url: str) -> None:
    """A producer on `url` wakes a listener on `url`."""
    topic = TopicAdmin(settings).create("t", 1)
    local = settings.with_(redis_url=url)
    got: queue.Queue[str] = queue.Queue()
    listener = Listener(local, {topic_channel(local, topic.id): got.put})
    listener.start()
    try:
        assert listener.connected.wait(10)
        with Producer(local) as producer:
            producer.send("t", b"a")
        assert got.get(timeout=10) == "0:0"
    finally:
        listener.stop()


def test_wake_ups_flow_over_a_unix_socket(settings: Settings, unix_redis: str) -> None:
    wake_ups_flow(settings, unix_redis)


def test_wake_ups_flow_over_tls(settings: Settings, tls_redis: str) -> None:
    wake_ups_flow(settings, tls_redis)


def test_wake_ups_flow_as_an_acl_user(settings: Settings, acl_redis: str) -> None:
    wake_ups_flow(settings, acl_redis)


def test_no_password_goes_in_clear_to_a_tls_port(settings: Settings) -> None:
    """A plain listener poses as the TLS port and records what arrives: a TLS handshake,
    never an AUTH with the password."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    received: list[bytes] = []

    def record() -> None:
        conn, _ = server.accept()
        conn.settimeout(2)
        try:
            while chunk := conn.recv(65536):
                received.append(chunk)
        except OSError:
            pass
        conn.close()

    recorder = threading.Thread(target=record, daemon=True)
    recorder.start()
    publisher = Publisher(settings.with_(redis_url=f"rediss://:{SECRET}@127.0.0.1:{port}/0"))
    publisher.publish("channel", "payload")  # a hint: its failure is only logged
    recorder.join(5)
    publisher.close()
    server.close()
    sent = b"".join(received)
    assert sent, "the publisher never connected"
    assert SECRET.encode() not in sent


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:6379/0", "redis+sentinel://x", "127.0.0.1:6379", "", "tcp://h"]
)
def test_a_redis_url_ems_cannot_serve_is_refused_up_front(settings: Settings, url: str) -> None:
    with pytest.raises(InvalidSetting, match="EMS_REDIS_URL"):
        settings.with_(redis_url=url)
    with pytest.raises(InvalidSetting, match="EMS_REDIS_URL"):
        Settings.from_env({"EMS_REDIS_URL": url})


def test_a_consumer_warns_once_naming_the_url_when_redis_is_unreachable(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    """Without Redis a consumer still gets its messages (by polling), but the operator is
    told once, at WARNING, which URL failed, without its password; the retries that
    follow do not repeat it."""
    TopicAdmin(settings).create("t", 1)
    unreachable = settings.with_(redis_url=f"redis://:{SECRET}@127.0.0.1:1/0")
    caplog.set_level(logging.DEBUG, logger="ems.wakeups")
    with Producer(settings) as producer:
        producer.send("t", "polled")
    with Consumer("g", "t", settings=unreachable, start="earliest") as consumer:
        got = consumer.poll(timeout=20)
        assert [d.body for d in got] == [b"polled"]
        consumer.ack(got)
        deadline = time.monotonic() + 20
        while sum(r.getMessage().startswith("wake-up listener") for r in caplog.records) < 3:
            assert time.monotonic() < deadline, caplog.text
            time.sleep(0.05)
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, caplog.text
    message = warnings[0].getMessage()
    assert "redis://:***@127.0.0.1:1/0" in message and "polling" in message, message
    assert SECRET not in caplog.text
