"""Private MariaDB and Redis servers for the fault scenarios: started from Debian's
binaries in a temporary directory, on ports of their own, so a test can kill -9, restart
or pause (SIGSTOP) them without touching the shared servers on 3306 and 6379.

MariaDB runs with durable settings (innodb_flush_log_at_trx_commit=1, a doublewrite
buffer), as a production server would, and small memory so it starts in well under a
second; a restart after kill -9 runs InnoDB's crash recovery on the same datadir. Redis
runs without persistence (what ems assumes: it keeps nothing) or with an append-only file
fsynced on every write.
"""

from __future__ import annotations

import atexit
import os
import random
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pymysql
import redis

from benchmarks.cpu import stat_fields
from ems.store import driver
from tests.tls import Certificate

MARIADBD = "/usr/sbin/mariadbd"
_live: set[subprocess.Popen[bytes]] = set()


#: Ports free_port handed out in this process: none is handed out twice.
_handed_out: set[int] = set()


def port_range(worker: str | None, workers: int, high: int = 32_768) -> range:
    """The ports an xdist worker's servers use (`worker` gwN of `workers`; None: the
    whole range): from 20000 up to `high`, the start of the kernel's range for outgoing
    connections (32768 at most), in a slice of its own per worker, so the lanes running
    side by side never pick each other's ports."""
    low = 20_000
    if worker is None or workers <= 1:
        return range(low, high)
    size = (high - low) // workers
    index = int(worker.removeprefix("gw"))
    return range(low + index * size, low + (index + 1) * size)


def free_port() -> int:
    """A free port of this worker's range, never handed out before in this process: a
    server's port stays its own while it is down between a kill and its restart, where
    a port from the ephemeral range could meanwhile be taken by any client's connection,
    and one from a shared range by another lane's server."""
    ephemeral = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = port_range(
        os.environ.get("PYTEST_XDIST_WORKER"),
        int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0")),
        min(ephemeral, 32_768),
    )
    rng = random.Random()
    for _ in range(100):
        port = rng.choice(ports)
        if port in _handed_out:
            continue
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise AssertionError(f"no free port in {ports}")


def tail(log: Path, lines: int = 20) -> str:
    """The last lines of a server's log file, for a failing assertion."""
    if not log.exists():
        return f"no {log.name} yet"
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def _kill_leftovers() -> None:
    for proc in list(_live):
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.kill()
            proc.wait()


atexit.register(_kill_leftovers)


class PrivateServer:
    """A server process the test owns: start, kill -9, restart, pause, resume, stop."""

    name = "server"

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)  # a fixture's folder, or the bench's new one
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.paused = False

    def command(self) -> list[str]:
        raise NotImplementedError

    def answers(self) -> bool:
        raise NotImplementedError

    def log_tail(self) -> str:
        return ""

    @property
    def pid(self) -> int:
        assert self.proc is not None, f"{self.name} is not running"
        return self.proc.pid

    def start(self, timeout: float = 30) -> None:
        assert self.proc is None or self.proc.poll() is not None, f"{self.name} runs already"
        self.proc = subprocess.Popen(
            self.command(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        _live.add(self.proc)
        self.paused = False
        _wait(self.answers, self.proc, timeout, lambda: f"{self.name}: {self.log_tail()}")

    def kill9(self) -> None:
        proc = self._running()
        proc.kill()  # SIGKILL works on a stopped process too
        proc.wait()
        self.paused = False

    def restart(self) -> None:
        """Start again on the same port and data: after kill9, a crash recovery."""
        self.start()

    def pause(self) -> None:
        """SIGSTOP, and wait until every thread has stopped: the signal is only queued
        when kill() returns, and on a busy machine a server thread that is running can
        still answer a query before it stops."""
        pid = self._running().pid
        os.kill(pid, signal.SIGSTOP)
        self.paused = True
        deadline = time.monotonic() + 10
        while not _all_stopped(pid):
            assert time.monotonic() < deadline, f"{self.name} did not stop on SIGSTOP"
            time.sleep(0.01)

    def resume(self) -> None:
        os.kill(self._running().pid, signal.SIGCONT)
        self.paused = False

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        if self.paused:
            self.resume()
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        _live.discard(self.proc)

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def ensure_running(self) -> None:
        """Leave the server up and answering for the next test, whatever this one did."""
        if self.paused:
            self.resume()
        if not self.running():
            self.start()

    def _running(self) -> subprocess.Popen[bytes]:
        assert self.proc is not None and self.proc.poll() is None, f"{self.name} is not running"
        return self.proc


class PrivateMariaDB(PrivateServer):
    """A MariaDB server; with installed=False its datadir starts empty, for a server
    that receives its data from another (a Galera joiner's state transfer)."""

    name = "mariadb"

    def __init__(self, root: Path, *, installed: bool = True) -> None:
        super().__init__(root)
        self.datadir = root / "data"
        self.error_log = root / "error.log"
        self.tmpdir = root / "tmp"  # its own: temporary tables of two servers never meet
        self.tmpdir.mkdir(exist_ok=True)
        if not installed:
            self.datadir.mkdir()
            return
        install = [
            "mariadb-install-db", "--no-defaults", f"--datadir={self.datadir}", "--user=root",
            f"--tmpdir={self.tmpdir}",
            "--auth-root-authentication-method=normal", "--skip-test-db",
        ]  # fmt: skip
        done = subprocess.run(install, capture_output=True, text=True)
        assert done.returncode == 0, f"mariadb-install-db failed: {done.stderr[-2000:]}"

    def command(self) -> list[str]:
        return [
            MARIADBD, "--no-defaults", "--user=root", f"--datadir={self.datadir}",
            f"--port={self.port}", "--bind-address=127.0.0.1",
            f"--socket={self.root / 'mariadb.sock'}", f"--pid-file={self.root / 'mariadb.pid'}",
            f"--log-error={self.error_log}", f"--tmpdir={self.tmpdir}",
            "--innodb-flush-log-at-trx-commit=1", "--innodb-doublewrite=1",
            "--innodb-buffer-pool-size=64M", "--innodb-log-file-size=48M",
            "--skip-name-resolve", "--performance-schema=OFF", "--max-connections=300",
        ]  # fmt: skip

    def url(self, database: str = "ems") -> str:
        return f"mysql+pymysql://root@127.0.0.1:{self.port}/{database}"

    def connect(self, **options: object) -> pymysql.Connection:
        return driver.connect(host="127.0.0.1", port=self.port, user="root", **options)  # type: ignore[arg-type]

    def add_user(self, name: str) -> str:
        """An ordinary user (no SUPER: read_only binds it) with every right on the ems
        database; returns url() as that user."""
        conn = self.connect(autocommit=True)
        try:
            with conn.cursor() as cursor:
                cursor.execute(f"CREATE OR REPLACE USER '{name}'@'127.0.0.1'")
                cursor.execute(f"GRANT ALL ON ems.* TO '{name}'@'127.0.0.1'")
        finally:
            conn.close()
        return self.url().replace("root@", f"{name}@")

    def answers(self) -> bool:
        try:
            conn = self.connect(connect_timeout=1, read_timeout=2)
        except pymysql.err.OperationalError:
            return False
        conn.close()
        return True

    def log_tail(self) -> str:
        return tail(self.error_log)


class PrivateRedis(PrivateServer):
    name = "redis"

    def __init__(
        self,
        root: Path,
        *,
        appendonly: bool = False,
        password: str | None = None,
        tls: Certificate | None = None,
    ) -> None:
        super().__init__(root)
        self.appendonly = appendonly
        #: AUTH for clients (requirepass), and for a replica towards its master.
        self.password = password
        #: With a certificate the server speaks TLS only (its port is the TLS port, the
        #: plain port is off), and a replica reaches its master over TLS too.
        self.tls = tls
        root.mkdir(parents=True, exist_ok=True)

    def command(self) -> list[str]:
        binary = shutil.which("redis-server")
        assert binary, "redis-server is needed (scripts/setup.sh installs it)"
        persistence = ["--appendonly", "yes", "--appendfsync", "always"]
        if not self.appendonly:
            persistence = ["--appendonly", "no"]
        return [
            binary, *self.listen_options(), "--bind", "127.0.0.1", "--dir", str(self.root),
            "--save", "", *persistence, *self.auth_options(),
        ]  # fmt: skip

    def listen_options(self) -> list[str]:
        if self.tls is None:
            return ["--port", str(self.port)]
        return [
            "--port", "0", "--tls-port", str(self.port), "--tls-replication", "yes",
            "--tls-cert-file", str(self.tls.cert), "--tls-key-file", str(self.tls.key),
            "--tls-ca-cert-file", str(self.tls.cert), "--tls-auth-clients", "no",
        ]  # fmt: skip

    def auth_options(self) -> list[str]:
        if self.password is None:
            return []
        return ["--requirepass", self.password, "--masterauth", self.password]

    def url(self, db: int = 0) -> str:
        auth = f":{self.password}@" if self.password else ""
        if self.tls is not None:
            return f"rediss://{auth}127.0.0.1:{self.port}/{db}?ssl_ca_certs={self.tls.cert}"
        return f"redis://{auth}127.0.0.1:{self.port}/{db}"

    def client(self) -> redis.Redis:
        tls = {} if self.tls is None else {"ssl": True, "ssl_ca_certs": str(self.tls.cert)}
        return redis.Redis(
            host="127.0.0.1", port=self.port, socket_timeout=2, password=self.password, **tls
        )

    def answers(self) -> bool:
        client = self.client()
        try:
            return bool(client.ping())
        except redis.RedisError:
            return False
        finally:
            client.close()


def _all_stopped(pid: int) -> bool:
    """Whether every thread of the process is in the stopped state (T in /proc)."""
    states = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            states.append(stat_fields(task / "stat")[0])
        except FileNotFoundError:  # a thread that just ended
            continue
    return all(state in ("T", "t") for state in states)


def _wait(
    ready: Callable[[], bool],
    proc: subprocess.Popen[bytes],
    timeout: float,
    why: Callable[[], str],
) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if proc.poll() is not None:
            raise AssertionError(f"exited with {proc.returncode}: {why()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"did not answer within {timeout} s: {why()}")
        time.sleep(0.05)
