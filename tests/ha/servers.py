"""Highly available servers for the ha suite, built from the fault suite's private
servers: a three-node Galera cluster of MariaDB (wsrep on, state transfer by rsync) and a
Redis master with one replica watched by three Sentinels. Each process runs on ports of
its own in a temporary directory, so a test can kill -9, stop, isolate or restart a node
without touching the shared servers on 3306 and 6379.

The Galera nodes suspect a silent peer after 2 s and evict it after 4 s (Galera's
defaults are 5 s and 15 s): a node killed or cut off costs the survivors' writes that long
while the group waits on it, and the tests wait for it too.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pymysql
import redis

from tests.faults.servers import PrivateMariaDB, PrivateRedis, PrivateServer, free_port, tail
from tests.tls import Certificate

GALERA_PROVIDER = "/usr/lib/galera/libgalera_smm.so"
#: Galera's timeouts for a silent peer, shortened (see the module's docstring), and a
#: small write-set cache: enough for a node that was away a few seconds to catch up by
#: incremental state transfer (IST).
_PROVIDER_OPTIONS = (
    "evs.keepalive_period=PT0.5S; evs.inactive_check_period=PT0.5S; "
    "evs.suspect_timeout=PT2S; evs.inactive_timeout=PT4S; evs.install_timeout=PT4S; "
    "gcache.size=32M"
)
_STATUS_NAMES = (
    "wsrep_ready",
    "wsrep_cluster_status",
    "wsrep_cluster_size",
    "wsrep_local_state_comment",
    "wsrep_last_committed",
    "wsrep_incoming_addresses",
)
_NO_HISTORY = "00000000-0000-0000-0000-000000000000"
#: The full state transfer (SST): Debian's rsync method, with rsync's daemon (on the
#: joiner) kept root. mariadbd runs as root here, and rsync's daemon, started by root,
#: writes as nobody unless told otherwise, who may not write in root's datadir. (A
#: production mariadbd runs as mysql, and then the daemon keeps that user.) mariadbd puts
#: its own bin directory first on the PATH of the method's script, so the script puts the
#: rsync below first again.
SST_METHOD = "rsync_as_root"
_SST_SCRIPT = """#!/bin/sh
PATH="$(dirname "$0"):$PATH" exec /usr/bin/wsrep_sst_rsync "$@"
"""
_RSYNC = """#!/bin/sh
case " $* " in
  *" --daemon "*) exec /usr/bin/rsync "$@" --dparam=uid=root --dparam=gid=root ;;
esac
exec /usr/bin/rsync "$@"
"""


class GaleraNode(PrivateMariaDB):
    """One mariadbd of a GaleraCluster: a PrivateMariaDB with wsrep on, its own SQL,
    group-communication, IST and SST ports."""

    name = "galera"

    def __init__(self, root: Path, peers: Sequence[GaleraNode], *, installed: bool) -> None:
        root.mkdir(parents=True, exist_ok=True)
        super().__init__(root, installed=installed)
        # Besides its SQL port: free_port hands out none of them twice.
        self.gcomm_port = free_port()
        self.ist_port = free_port()
        self.sst_port = free_port()
        self.peers = peers
        #: For the next start only: begin a new cluster; the position to announce.
        self.bootstrap = False
        self.start_position: tuple[str, int] | None = None
        self.isolated = False
        self._log = LogWatch(self.error_log)
        self._stuck_since: float | None = None
        self.bin = root / "bin"
        self.bin.mkdir()
        for name, script in ((f"wsrep_sst_{SST_METHOD}", _SST_SCRIPT), ("rsync", _RSYNC)):
            (self.bin / name).write_text(script)
            (self.bin / name).chmod(0o755)

    def wsrep_options(self) -> list[str]:
        gcomm = ",".join(f"127.0.0.1:{peer.gcomm_port}" for peer in self.peers)
        provider = (
            f"base_port={self.gcomm_port}; gmcast.listen_addr=tcp://127.0.0.1:{self.gcomm_port}; "
            f"ist.recv_addr=127.0.0.1:{self.ist_port}; {_PROVIDER_OPTIONS}"
        )
        return [
            "--wsrep-on=ON", f"--wsrep-provider={GALERA_PROVIDER}",
            f"--wsrep-provider-options={provider}", f"--wsrep-cluster-address=gcomm://{gcomm}",
            "--wsrep-cluster-name=ems", f"--wsrep-node-name={self.root.name}",
            f"--wsrep-node-address=127.0.0.1:{self.gcomm_port}",
            f"--wsrep-node-incoming-address=127.0.0.1:{self.port}",
            f"--wsrep-sst-method={SST_METHOD}",
            f"--wsrep-sst-receive-address=127.0.0.1:{self.sst_port}",
            "--binlog-format=ROW", "--innodb-autoinc-lock-mode=2",
            "--default-storage-engine=InnoDB",
        ]  # fmt: skip

    def command(self) -> list[str]:
        """PrivateMariaDB's command with wsrep on, on a PATH where mariadbd finds the
        state transfer's script."""
        once = ["--wsrep-new-cluster"] if self.bootstrap else []
        if self.start_position is not None:
            uuid, seqno = self.start_position
            once.append(f"--wsrep-start-position={uuid}:{seqno}")
        path = f"PATH={self.bin}:{os.environ['PATH']}"
        return ["env", path, *super().command(), *self.wsrep_options(), *once]

    def start(self, timeout: float = 60) -> None:
        """Start, and wait until this node is Synced with the cluster: a joiner answers
        SQL once its state transfer is done, but serves writes only when Synced.

        After kill -9, the node's position is recovered from InnoDB first and announced,
        as the systemd unit's galera_recovery does: without it the node would not know
        what it has, and would take a full state transfer instead of an incremental
        one (or, bootstrapping, start a new history).

        A joiner can hang in the group's state exchange for good: on a busy machine,
        when the group's view reaches it before its channel is open, it misses the
        representative's state UUID and then drops every write set as "Action message in
        non-primary configuration", never answering SQL. Seen that way for STUCK_JOIN
        seconds, it is killed and started once more, as an operator would."""
        try:
            self._start(timeout)
        except _StuckJoin:
            print(f"{self.root.name} hung in the state exchange while joining: restarted")
            self.kill9()
            self._start(timeout)

    def answers(self) -> bool:
        if self._stuck_since is not None and time.monotonic() - self._stuck_since > STUCK_JOIN:
            raise _StuckJoin(self.root.name)
        if self._log.waits_for_state_uuid():
            self._stuck_since = self._stuck_since or time.monotonic()
        else:
            self._stuck_since = None
        return super().answers()

    def _start(self, timeout: float) -> None:
        self._log = LogWatch(self.error_log)
        self._stuck_since = None
        if self.start_position is None and self._crashed():
            self.start_position = self.recovered_position()
        try:
            super().start(timeout)
        finally:
            self.bootstrap = False
            self.start_position = None
        self.wait(lambda s: s["wsrep_local_state_comment"] == "Synced", timeout, "Synced")

    def status(self) -> dict[str, str]:
        """This node's view of the cluster: wsrep_ready, wsrep_cluster_status (Primary
        or non-Primary), wsrep_cluster_size, wsrep_local_state_comment (Synced, Donor...)
        and wsrep_last_committed."""
        conn = self.connect(connect_timeout=2, read_timeout=5)
        try:
            with conn.cursor() as cursor:
                cursor.execute("SHOW GLOBAL STATUS LIKE 'wsrep%'")
                rows = dict(cursor.fetchall())
        finally:
            conn.close()
        return {name: rows.get(name, "") for name in _STATUS_NAMES}

    def wait(self, ready: Callable[[dict[str, str]], bool], timeout: float, what: str) -> None:
        """Wait until this node's status() is ready; fails if it exits meanwhile."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                status = self.status()
                if ready(status):
                    return
            except pymysql.err.OperationalError as exc:
                status = {"error": str(exc)}
            assert self.proc is not None and self.proc.poll() is None, (
                f"{self.root.name} exited: {self.log_tail()}"
            )
            assert time.monotonic() < deadline, (
                f"{self.root.name} not {what} within {timeout} s: {status}\n{self.log_tail()}"
            )
            time.sleep(0.1)

    def set_provider_option(self, option: str) -> None:
        conn = self.connect(autocommit=True, connect_timeout=2, read_timeout=10)
        try:
            with conn.cursor() as cursor:
                cursor.execute("SET GLOBAL wsrep_provider_options = %s", (option,))
        finally:
            conn.close()

    def recovered_position(self) -> tuple[str, int]:
        """The history (cluster state UUID) and last transaction this node committed,
        while it is down: grastate.dat says after a clean stop; after kill -9 it says
        -1, and mariadbd --wsrep-recover reads the position from InnoDB instead."""
        state = _grastate(self.datadir)
        if int(state["seqno"]) >= 0:
            return state["uuid"], int(state["seqno"])
        log = self.root / "recover.log"
        log.unlink(missing_ok=True)
        recover = ["--wsrep-recover", f"--log-error={log}"]
        command = [*super().command(), *self.wsrep_options(), *recover]
        done = subprocess.run(command, capture_output=True)
        found = re.findall(r"WSREP: Recovered position: ([0-9a-f-]+):(-?\d+)", log.read_text())
        assert done.returncode == 0 and found, f"{self.root.name}: {log.read_text()[-2000:]}"
        uuid, seqno = found[-1]
        return uuid, int(seqno)

    def mark_safe_to_bootstrap(self) -> None:
        grastate = self.datadir / "grastate.dat"
        text = grastate.read_text()
        grastate.write_text(re.sub(r"safe_to_bootstrap: *\d", "safe_to_bootstrap: 1", text))

    def _crashed(self) -> bool:
        """Whether this node was part of a cluster and did not stop cleanly."""
        if not (self.datadir / "grastate.dat").exists():
            return False
        state = _grastate(self.datadir)
        return state["uuid"] != _NO_HISTORY and int(state["seqno"]) < 0


class GaleraArbitrator(PrivateServer):
    """garbd, Galera's arbitrator: a member of the cluster's group that votes in the
    quorum and takes part in ordering every write set, but stores and applies nothing."""

    name = "garbd"

    def __init__(self, root: Path, peers: Sequence[GaleraNode]) -> None:
        root.mkdir(parents=True, exist_ok=True)
        super().__init__(root)
        self.peers = peers
        self.log = root / "garbd.log"

    def command(self) -> list[str]:
        gcomm = ",".join(f"127.0.0.1:{peer.gcomm_port}" for peer in self.peers)
        options = f"gmcast.listen_addr=tcp://127.0.0.1:{self.port}; base_port={self.port}"
        # Its own workdir: garbd keeps the group view it saw there (gvwstate.dat), and a
        # second arbitrator reading the first one's would take itself for it.
        return [
            "garbd", f"--address=gcomm://{gcomm}", "--group=ems", f"--name={self.root.name}",
            f"--workdir={self.root}", f"--log={self.log}", f"--options={options}",
        ]  # fmt: skip

    def answers(self) -> bool:
        """Synced with the group: from then on every write set waits for it too."""
        return self.log.exists() and "Shifting JOINED -> SYNCED" in self.log.read_text()

    def log_tail(self) -> str:
        return tail(self.log)


#: Seconds a joiner may wait for the group's state UUID before it counts as hung (the
#: exchange takes milliseconds, a few seconds on a busy machine).
STUCK_JOIN = 15.0
_STATE_EXCHANGE = "STATE EXCHANGE: Waiting for state UUID."
#: The lines of a join's group steps: a new component, its state exchange, its quorum.
_GROUP_STEPS = ("New COMPONENT", "STATE EXCHANGE", "Quorum results")


class _StuckJoin(Exception):
    """A joiner hung in the state exchange (see GaleraNode.start)."""


class LogWatch:
    """Follows a server's log from an offset on: the last of its group steps. A joiner
    whose last step stays the wait for the state UUID (the next is "sent state msg",
    within milliseconds) missed it: meanwhile it logs every write set it drops as
    "Action message in non-primary configuration", and its threads' start-up notes."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.offset = log.stat().st_size if log.exists() else 0
        self.last = ""

    def waits_for_state_uuid(self) -> bool:
        if self.log.exists():
            with self.log.open("rb") as f:
                f.seek(self.offset)
                chunk = f.read()
            complete = chunk[: chunk.rfind(b"\n") + 1]
            self.offset += len(complete)
            for line in complete.decode(errors="replace").splitlines():
                if any(step in line for step in _GROUP_STEPS):
                    self.last = line
        return _STATE_EXCHANGE in self.last


def _status_or_none(node: GaleraNode) -> dict[str, str] | None:
    try:
        return node.status()
    except pymysql.err.OperationalError:
        return None


def _grastate(datadir: Path) -> dict[str, str]:
    lines = (datadir / "grastate.dat").read_text().splitlines()
    pairs = (line.split(":", 1) for line in lines if ":" in line and not line.startswith("#"))
    return {key.strip(): value.strip() for key, value in pairs}


class GaleraCluster:
    """Three (size) Galera nodes of MariaDB on 127.0.0.1, each with its own datadir."""

    def __init__(self, root: Path, size: int = 3) -> None:
        self.nodes: list[GaleraNode] = []
        for i in range(size):
            # A joiner's datadir comes from node 0, by state transfer.
            node = GaleraNode(root / f"node{i}", self.nodes, installed=i == 0)
            self.nodes.append(node)

    def node(self, i: int) -> GaleraNode:
        return self.nodes[i]

    def url(self, database: str = "ems") -> str:
        """Every node's address in one URL, for a client that fails over between them."""
        hosts = ",".join(f"127.0.0.1:{node.port}" for node in self.nodes)
        return f"mysql+pymysql://root@{hosts}/{database}"

    def start(self) -> None:
        """Bootstrap node 0, join the others, wait until all three are Synced."""
        self._bootstrap(self.nodes[0])

    def _bootstrap(self, first: GaleraNode) -> None:
        """Start a cluster from `first`, then join the others to it one at a time: two
        joiners at once keep each other out of the group for seconds."""
        first.bootstrap = True
        first.start()
        for node in self.nodes:
            if node is not first:
                node.start()
        self.wait_size(len(self.nodes))

    def wait_size(self, size: int, nodes: Sequence[int] | None = None, timeout: float = 30) -> None:
        """Wait until the given nodes (every running one by default) see a Primary
        component of `size` nodes and are Synced in it.

        Waiting for every running node to be back, a node that stays out of the Primary
        component (on a busy machine, with the short timeouts above, a joiner that the
        group evicted mid-join can stay out for good, the others logging "Action message
        in non-primary configuration") is restarted once, as an operator would, before
        the wait fails; the failure then names every node's view."""
        chosen = [self.nodes[i] for i in nodes] if nodes is not None else self._running()
        try:
            self._wait_synced(size, chosen, timeout)
        except AssertionError:
            stragglers = self.stragglers()
            if nodes is not None or not stragglers or size != len(self._running()):
                raise AssertionError(self.views()) from None
            for node in stragglers:
                print(f"{node.root.name} stayed out of the Primary component: restarted")
                node.stop()
                node.start()
            try:
                self._wait_synced(size, chosen, timeout)
            except AssertionError:
                raise AssertionError(self.views()) from None

    def stragglers(self) -> list[GaleraNode]:
        """Running nodes outside the largest Primary component any node reports."""
        views = {node: _status_or_none(node) for node in self._running()}
        primaries = [
            status["wsrep_incoming_addresses"]
            for status in views.values()
            if status is not None and status["wsrep_cluster_status"] == "Primary"
        ]
        members = max(primaries, key=lambda listed: len(listed.split(",")), default="")
        return [node for node in views if f"127.0.0.1:{node.port}" not in members.split(",")]

    def views(self) -> str:
        """Every node's view of the cluster, and its log's last lines."""
        return "\n".join(
            f"{node.root.name}: {_status_or_none(node) if node.running() else 'down'}\n"
            f"{node.log_tail()}"
            for node in self.nodes
        )

    def _wait_synced(self, size: int, chosen: Sequence[GaleraNode], timeout: float) -> None:
        for node in chosen:
            node.wait(
                lambda s: (
                    s["wsrep_cluster_size"] == str(size)
                    and s["wsrep_cluster_status"] == "Primary"
                    and s["wsrep_local_state_comment"] == "Synced"
                ),
                timeout,
                f"Synced in a Primary component of {size}",
            )

    def isolate(self, i: int) -> None:
        """Cut node i off from the others (Galera's gmcast.isolate: it closes its
        group-communication connections and refuses new ones). Once the others evict it,
        it is a non-Primary component of one and refuses queries, while they go on as a
        Primary component of the rest."""
        node = self.nodes[i]
        node.set_provider_option("gmcast.isolate=1")
        node.isolated = True
        node.wait(lambda s: s["wsrep_cluster_status"] == "non-Primary", 30, "non-Primary")
        others = [j for j, other in enumerate(self.nodes) if other is not node and other.running()]
        self.wait_size(len(others), others)

    def heal(self, i: int) -> None:
        """Reconnect node i; it catches up by IST and is Synced again."""
        node = self.nodes[i]
        node.set_provider_option("gmcast.isolate=0")
        node.isolated = False
        self.wait_size(len(self._running()))

    def stop_all(self) -> None:
        """Stop every node cleanly, node 0 last: it is the one safe to bootstrap."""
        for node in reversed(self.nodes):
            node.stop()

    def bootstrap_from_most_advanced(self) -> GaleraNode:
        """Bring back a cluster whose every node is down (stopped or killed), as an
        operator would: bootstrap the node that committed the most, and join the others
        to it. Returns the node bootstrapped."""
        assert not self._running(), "bootstrap needs every node down"
        positions = {node: node.recovered_position() for node in self.nodes}
        for node, position in positions.items():
            node.start_position = position
        first = max(self.nodes, key=lambda node: positions[node][1])
        first.mark_safe_to_bootstrap()
        self._bootstrap(first)
        return first

    def ensure_synced(self) -> None:
        """Leave all nodes up and Synced for the next test, whatever this one did."""
        if not self._running():
            self.bootstrap_from_most_advanced()
            return
        for i, node in enumerate(self.nodes):
            if node.isolated:
                self.heal(i)
            elif not node.running():
                node.restart()
        self.wait_size(len(self.nodes))

    def _running(self) -> list[GaleraNode]:
        return [node for node in self.nodes if node.running()]


class ReplicatedRedis(PrivateRedis):
    """A PrivateRedis that starts as a replica of the server on master_port, when set."""

    def __init__(
        self, root: Path, password: str | None = None, tls: Certificate | None = None
    ) -> None:
        super().__init__(root, password=password, tls=tls)
        self.master_port: int | None = None

    def command(self) -> list[str]:
        """PrivateRedis's command; a master sends its snapshot to a new replica at once
        (Redis waits 5 s by default, for more replicas to share it)."""
        command = [*super().command(), "--repl-diskless-sync-delay", "0"]
        if self.master_port is None:
            return command
        return [*command, "--replicaof", "127.0.0.1", str(self.master_port)]

    def replication(self) -> dict[str, object]:
        """INFO replication: role, master_port and master_link_status of a replica."""
        client = self.client()
        try:
            return dict(client.info("replication"))
        finally:
            client.close()


#: How long a Sentinel waits on a silent server before it calls it down. Not 1 s: a
#: Sentinel counts that time from its first PING on a new connection, and on a busy machine
#: (two cores, the rest of the suite running) its first PING to a master just promoted
#: could go unanswered that long; it then marked that master down, and as the other
#: Sentinels' votes that the old master was down still counted for 5 s, failed over again.
DOWN_AFTER_MS = 2000


class PrivateSentinel(PrivateRedis):
    """A Redis Sentinel watching `service`, at first the master on master_port. Sentinel
    rewrites its configuration file as it learns the topology and follows failovers."""

    name = "sentinel"

    def __init__(
        self,
        root: Path,
        service: str,
        master_port: int,
        password: str | None = None,
        tls: Certificate | None = None,
    ) -> None:
        super().__init__(root, password=password, tls=tls)
        self.service = service
        self.config = root / "sentinel.conf"
        self.log = root / "sentinel.log"
        # With a password, the servers and the sentinels themselves all require it.
        auth = (
            f"requirepass {password}\nsentinel sentinel-pass {password}\n"
            f"sentinel auth-pass {service} {password}\n"
            if password
            else ""
        )
        # With TLS, clients, the other sentinels and the servers are all reached over
        # TLS only; a sentinel then announces its TLS port to the others.
        listen = (
            f"port 0\ntls-port {self.port}\ntls-replication yes\ntls-auth-clients no\n"
            f"tls-cert-file {tls.cert}\ntls-key-file {tls.key}\ntls-ca-cert-file {tls.cert}\n"
            if tls
            else f"port {self.port}\n"
        )
        self.config.write_text(
            f"{listen}bind 127.0.0.1\ndir {root}\nlogfile {self.log}\n"
            f"sentinel monitor {service} 127.0.0.1 {master_port} 2\n"
            f"sentinel down-after-milliseconds {service} {DOWN_AFTER_MS}\n"
            f"sentinel failover-timeout {service} 5000\n"
            f"sentinel parallel-syncs {service} 1\n{auth}"
        )

    def auth_options(self) -> list[str]:
        return []  # in the configuration file

    def command(self) -> list[str]:
        binary = shutil.which("redis-server")
        assert binary, "redis-server is needed (scripts/setup.sh installs it)"
        return [binary, str(self.config), "--sentinel"]

    def log_tail(self) -> str:
        return tail(self.log, 15)

    def ask(self, subcommand: str) -> Any:
        """SENTINEL <subcommand> <service>, raw; None when this sentinel does not answer."""
        client = self.client()
        try:
            return client.execute_command("SENTINEL", subcommand, self.service)
        except redis.RedisError:
            return None
        finally:
            client.close()

    def master_port(self) -> int | None:
        address = self.ask("get-master-addr-by-name")
        return int(address[1]) if address else None

    def ready(self, sentinels: int, replicas: int, since: float) -> bool:
        """Whether this sentinel knows the other sentinels, and knows every replica as
        one it could promote: up, linked to the master it watches, and answering its
        PINGs since `since` (a monotonic time). A sentinel takes a replica it has just
        learnt of for one that answered at that moment: if the replica then answers no
        PING within down-after-milliseconds, say because it restarted just then, the
        sentinel marks it down for a moment, and a failover then finds no replica to
        promote and waits twice the failover-timeout to try again."""
        master = self.ask("master")
        if not master or int(master[b"num-other-sentinels"]) != sentinels - 1:
            return False
        seen = self.ask("replicas") or []
        answered_within_ms = (time.monotonic() - since) * 1000
        return len(seen) == replicas and all(
            replica[b"flags"] == b"slave"
            and replica[b"master-link-status"] == b"ok"
            and replica[b"master-port"] == master[b"port"]
            and int(replica[b"last-ok-ping-reply"]) < answered_within_ms
            for replica in seen
        )


class SentinelRedis:
    """A Redis master and one replica (without persistence, as ems runs Redis), watched
    by three Sentinels with quorum 2 that fail over DOWN_AFTER_MS after the master goes
    silent."""

    service_name = "ems"

    def __init__(
        self, root: Path, password: str | None = None, tls: Certificate | None = None
    ) -> None:
        self.password = password
        #: Servers and sentinels alike speak TLS only, with this certificate.
        self.tls = tls
        self.servers = [
            ReplicatedRedis(root / "redis-a", password, tls),
            ReplicatedRedis(root / "redis-b", password, tls),
        ]
        self.servers[1].master_port = self.servers[0].port
        self.sentinels = [
            PrivateSentinel(
                root / f"sentinel{i}", self.service_name, self.servers[0].port, password, tls
            )
            for i in range(3)
        ]
        self.killed_at = 0.0

    def start(self) -> None:
        """Start the master, its replica, then the Sentinels; wait until the replica is
        in sync and every Sentinel knows the replica and the two other Sentinels."""
        for server in self.servers:
            server.start()
        self._wait_in_sync(self.servers[0])
        since = time.monotonic()
        for sentinel in self.sentinels:
            sentinel.start()
        self._wait_sentinels_ready(since)

    def sentinel_addresses(self) -> list[tuple[str, int]]:
        return [("127.0.0.1", sentinel.port) for sentinel in self.sentinels]

    def url(self, db: int = 0) -> str:
        """The sentinels, the service name and the db: what a client needs to find the
        master of the moment."""
        hosts = ",".join(f"{host}:{port}" for host, port in self.sentinel_addresses())
        scheme = "redis+sentinel" if self.tls is None else "rediss+sentinel"
        auth, options = "", []
        if self.password is not None:
            auth = f":{self.password}@"
            options.append(f"sentinel_password={self.password}")
        if self.tls is not None:
            options.append(f"ssl_ca_certs={self.tls.cert}")
        query = f"?{'&'.join(options)}" if options else ""
        return f"{scheme}://{auth}{hosts}/{self.service_name}/{db}{query}"

    def master(self) -> ReplicatedRedis:
        """The master the Sentinels report now (they must agree)."""
        ports = {sentinel.master_port() for sentinel in self.sentinels}
        assert len(ports) == 1, f"the sentinels disagree on the master: {ports}"
        return self._on_port(ports.pop())

    def kill9_master(self) -> ReplicatedRedis:
        """kill -9 the master; returns it, down until restart()."""
        master = self.master()
        master.kill9()
        self.killed_at = time.monotonic()
        return master

    def wait_failover(self, timeout: float = 25) -> float:
        """Wait until every Sentinel reports as master a server that runs and says it
        is master; returns the seconds since kill9_master. By default long enough for a
        second election: on a busy machine the three can start theirs in the same
        millisecond, each vote for itself, and wait twice the failover-timeout (10 s)
        before the next."""
        _until(self._settled, self.killed_at + timeout, self._why_not_failed_over)
        return time.monotonic() - self.killed_at

    def restart(self, server: ReplicatedRedis) -> None:
        """Start a killed server again, as a replica of the current master: without
        persistence it comes back empty, and started as a master it would take writes
        until a Sentinel demotes it. Waits until it is in sync and every Sentinel sees
        it up."""
        master = self.master()
        server.master_port = master.port
        since = time.monotonic()
        server.start()
        self._wait_in_sync(master)
        self._wait_sentinels_ready(since)

    def ensure_running(self) -> None:
        """Leave master and replica up for the next test; a master the test killed is
        restarted once the Sentinels have failed over from it."""
        for server in self.servers:
            if not server.running():
                _until(self._settled, time.monotonic() + 10, self._why_not_failed_over)
                self.restart(server)

    def stop(self) -> None:
        for process in (*self.sentinels, *self.servers):
            process.stop()

    def _settled(self) -> bool:
        """Whether every Sentinel reports as master a server that runs and says it is."""
        ports = {sentinel.master_port() for sentinel in self.sentinels}
        if len(ports) != 1 or not (master := self._on_port(ports.pop())).running():
            return False
        return master.replication()["role"] == "master"

    def _why_not_failed_over(self) -> str:
        logs = "\n".join(f"{s.root.name}:\n{s.log_tail()}" for s in self.sentinels)
        return f"the sentinels did not fail over:\n{logs}"

    def _on_port(self, port: int | None) -> ReplicatedRedis:
        return next(server for server in self.servers if server.port == port)

    def _wait_in_sync(self, master: ReplicatedRedis) -> None:
        def in_sync() -> bool:
            for server in self.servers:
                if server is not master:
                    state = server.replication()
                    if (state.get("master_port"), state.get("master_link_status")) != (
                        master.port,
                        "up",
                    ):
                        return False
            return True

        _until(in_sync, time.monotonic() + 30, "the replica did not sync")

    def _wait_sentinels_ready(self, since: float) -> None:
        def know_all() -> bool:
            replicas = len(self.servers) - 1
            return all(s.ready(len(self.sentinels), replicas, since) for s in self.sentinels)

        _until(know_all, time.monotonic() + 30, "the sentinels do not know each other")


def _until(done: Callable[[], bool], deadline: float, why: str | Callable[[], str]) -> None:
    while not done():
        assert time.monotonic() < deadline, why if isinstance(why, str) else why()
        time.sleep(0.05)
