"""A scenario's moving parts: streaming producer processes (the thread-safe Producer and
ems.aio's, alternately) and a cluster group of member processes on one topic, started
against given servers (a private server, or a fault proxy in front of one), and, at the
end, the judge's verdict over what they recorded and what the database holds.

The processes get their servers from EMS_DATABASE_URL / EMS_REDIS_URL, so each can be
routed through its own proxy; the harness itself reads the truth over `settings`, straight
from the servers.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ems import TopicAdmin
from ems.config import Settings
from ems.store.database import Database
from tests import forked
from tests import sql as db
from tests.conftest import reset_state
from tests.faults.checks import Place, Recorded, Verdict, judge, label, read_records
from tests.faults.servers import PrivateMariaDB, PrivateRedis
from tests.faults.workload import TOPIC

GROUP = "handlers"
PARTITIONS = 4


@dataclass
class Proc:
    name: str
    popen: forked.Child
    outfile: Path
    crashed: bool = False
    #: A member's client id, as it printed it at start.
    client_id: str = ""


@dataclass
class Scenario:
    settings: Settings
    workdir: Path
    producers: int = 3
    members: int = 3
    rate: float = 100.0
    identical: bool = False
    lease_ttl: float = 4.0
    renew_every: float = 1.0
    batch: int = 50
    #: Per process name, the URLs it connects to (a proxy's); default: `settings`.
    routes: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: Per process name, extra environment (e.g. libfaketime's, to skew its clock).
    env: dict[str, dict[str, str]] = field(default_factory=dict)
    procs: list[Proc] = field(default_factory=list)

    # -- processes -------------------------------------------------------------------

    def _spawn(self, name: str, *args: str) -> Proc:
        db, rds = self.routes.get(name, (self.settings.database_url, self.settings.redis_url))
        env = {k: v for k, v in os.environ.items() if not k.startswith("EMS_")}
        env |= {
            "EMS_DATABASE_URL": db,
            "EMS_REDIS_URL": rds,
            "EMS_GAP_TIMEOUT": "1",
            "EMS_CONNECT_TIMEOUT": "2",
            "EMS_READ_TIMEOUT": "5",
            "EMS_WRITE_TIMEOUT": "5",
        }
        env |= self.env.get(name, {})
        outfile = self.workdir / f"{name}.log"
        err = (self.workdir / f"{name}.err").open("w")
        popen = forked.spawn("tests.faults.workload", args, env=env, stdout=forked.PIPE, stderr=err)
        err.close()  # the child holds its own copy
        proc = Proc(name, popen, outfile)
        self.procs.append(proc)
        return proc

    def start(self) -> None:
        """Create the topic and start every member and producer at once (as a deployment
        does), then wait until each has said it is ready."""
        TopicAdmin(self.settings).create(TOPIC, PARTITIONS)
        members = [self._spawn_member() for _ in range(self.members)]
        producers = []
        for i in range(self.producers):
            # Every other one an ems.aio.Producer: each fault meets both kinds.
            name, mode = f"producer-{i}", "aproduce" if i % 2 else "produce"
            args = [mode, name, str(self.workdir / f"{name}.log"), str(self.rate)]
            producers.append(self._spawn(name, *args, *(["identical"] if self.identical else [])))
        for member in members:
            member.client_id = _first_line(member)
        for producer in producers:
            assert _first_line(producer) == "ready"

    def add_member(self) -> Proc:
        """Start one more member (member-N) and wait for its client id."""
        proc = self._spawn_member()
        proc.client_id = _first_line(proc)
        return proc

    def _spawn_member(self) -> Proc:
        name = f"member-{len(self.of('member'))}"
        return self._spawn(
            name, "consume", GROUP, str(self.workdir / f"{name}.log"),
            str(self.lease_ttl), str(self.renew_every), str(self.batch),
        )  # fmt: skip

    def leader(self) -> tuple[str | None, int]:
        """The group's leader row: (client id, epoch)."""
        row = self._query(
            "SELECT l.client_id, l.epoch FROM group_leader l "
            "JOIN consumer_group g ON g.id = l.group_id WHERE g.name = :g",
            {"g": GROUP},
        )
        return (row[0][0], int(row[0][1])) if row else (None, 0)

    def owners(self) -> set[str]:
        """Client ids that own a partition of the group now."""
        rows = self._query(
            "SELECT DISTINCT a.client_id FROM partition_assignment a "
            "JOIN consumer_group g ON g.id = a.group_id WHERE g.name = :g "
            "AND a.client_id IS NOT NULL",
            {"g": GROUP},
        )
        return {str(r[0]) for r in rows}

    def _query(self, sql: str, params: dict[str, object]) -> list[tuple[object, ...]]:
        with self.truth() as database:
            return db.rows(database, sql, params)

    @contextmanager
    def truth(self) -> Iterator[Database]:
        """Connections straight to the servers (for a cluster, through the node ems
        would write through now), for what the database holds."""
        database = Database(self.settings)
        try:
            yield database
        finally:
            database.dispose()

    def of(self, kind: str) -> list[Proc]:
        return [p for p in self.procs if p.name.startswith(kind)]

    def kill(self, proc: Proc) -> None:
        proc.popen.kill()
        proc.popen.wait()
        proc.crashed = True

    def leave(self, proc: Proc) -> None:
        """Stop one member the way an orderly shutdown does (SIGTERM: it commits and
        leaves the group)."""
        _terminate(proc)

    def stop(self, drain_timeout: float = 60.0) -> None:
        """Stop the producers, let the members handle everything acknowledged, stop them."""
        _terminate_all(self.of("producer"))
        deadline = time.monotonic() + drain_timeout
        while not self.drained():
            if time.monotonic() > deadline:
                break  # the verdict says what was left
            time.sleep(0.2)
        _terminate_all([p for p in self.of("member") if p.popen.poll() is None])

    def close(self) -> None:
        for proc in self.procs:
            if proc.popen.poll() is None:
                proc.popen.kill()
                proc.popen.wait()
            if proc.popen.stdout is not None:
                proc.popen.stdout.close()

    # -- progress --------------------------------------------------------------------

    def recorded(self) -> Recorded:
        return read_records(
            [p.outfile for p in self.of("producer")], [p.outfile for p in self.of("member")]
        )

    def wait(self, what: str, done: Callable[[Recorded], bool], timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not done(recorded := self.recorded()):
            if time.monotonic() >= deadline:
                raise AssertionError(
                    f"timed out waiting for {what}: {len(recorded.acks)} acknowledged, "
                    f"{len(recorded.handled)} handled, {recorded.failed} failed\n"
                    f"{self.group_state()}\n{self.stderr_tails()}"
                )
            time.sleep(0.1)

    def group_state(self) -> str:
        """The group as the database sees it, for a failing wait: leader, leases and who
        holds which partition."""
        try:
            leader = self.leader()
            leases = self._query(
                "SELECT c.client_id, TIMESTAMPDIFF(MICROSECOND, NOW(6), c.lease_expires_at) "
                "FROM consumer_client c JOIN consumer_group g ON g.id = c.group_id "
                "WHERE g.name = :g",
                {"g": GROUP},
            )
            rows = self._query(
                "SELECT a.partition_no, a.client_id, a.state, a.generation "
                "FROM partition_assignment a JOIN consumer_group g ON g.id = a.group_id "
                "WHERE g.name = :g ORDER BY a.partition_no",
                {"g": GROUP},
            )
        except Exception as exc:  # the database may be the fault under test
            return f"group state unreadable: {exc!r}"
        names = {p.client_id: p.name for p in self.of("member")}
        lines = [f"leader {names.get(str(leader[0]), leader[0])} epoch {leader[1]}"]
        lines += [f"lease {names.get(str(c), c)}: {int(us) / 1e6:+.1f} s" for c, us in leases]
        lines += [f"p{p} {names.get(str(c), c)} {st} g{g}" for p, c, st, g in rows]
        return "\n".join(lines)

    def wait_acks(self, more: int, timeout: float = 60) -> None:
        """Wait for `more` acknowledgements beyond those recorded now."""
        target = len(self.recorded().acks) + more
        self.wait(f"{target} acks", lambda r: len(r.acks) >= target, timeout)

    def drained(self) -> bool:
        recorded = self.recorded()
        handled = {place for _, place, _ in recorded.handled}
        return all(a.place in handled for a in recorded.acks)

    # -- the truth -------------------------------------------------------------------

    def verdict(self) -> Verdict:
        with self.truth() as database:
            topic_id = db.row(database, "SELECT id FROM topic WHERE name = :n", {"n": TOPIC})[0]
            rows = db.rows(
                database,
                "SELECT partition_no, offset_no, body, tombstone FROM message WHERE topic_id = :t",
                {"t": topic_id},
            )
            stored: dict[Place, tuple[str, bool]] = {
                (int(p), int(o)): (label(bytes(b)), bool(t)) for p, o, b, t in rows
            }
            lows = dict(
                db.rows(
                    database,
                    "SELECT partition_no, low_offset FROM partition_low WHERE topic_id = :t",
                    {"t": topic_id},
                )
            )
            cursors = dict(
                db.rows(
                    database,
                    "SELECT o.partition_no, o.committed_offset FROM group_offset o "
                    "JOIN consumer_group g ON g.id = o.group_id WHERE g.name = :g",
                    {"g": GROUP},
                )
            )
        return judge(self.recorded(), stored, lows, cursors if self.members else None)

    def fencings(self) -> dict[str, int]:
        """Per member, how many times it found its lease gone and rejoined (its log says
        so): each time, what it had handled and not committed may come again."""
        return {p.name: self.stderr(p).count("expired; rejoining") for p in self.of("member")}

    def stderr(self, proc: Proc) -> str:
        path = self.workdir / f"{proc.name}.err"
        return path.read_text(errors="replace") if path.exists() else ""

    def stderr_tails(self, lines: int = 15) -> str:
        """The last lines each process wrote to stderr, for a failing assertion."""
        return "\n".join(
            f"--- {p.name}\n" + "\n".join(self.stderr(p).splitlines()[-lines:]) for p in self.procs
        )

    def rereads(self) -> dict[str, int]:
        """Per member, how many times an ack write it gave up on made it read partitions
        again from their stored cursors (its log says so): the batch whose acks were not
        written may then come again, to it or, once its lease is gone, to another."""
        return {
            p.name: self.stderr(p).count("were not made: reading them again")
            for p in self.of("member")
        }

    def max_redelivered(self) -> int:
        """One in-flight batch for each incident (at least one): a member crashed, lost
        its lease, or gave up on an ack write. A member takes a new batch only once the
        acks of the last are written, so what one incident can bring back is at most the
        batch in hand."""
        incidents = (
            sum(p.crashed for p in self.of("member"))
            + sum(self.fencings().values())
            + sum(self.rereads().values())
        )
        return self.batch * max(1, incidents)


def _first_line(proc: Proc, timeout: float = 30) -> str:
    assert proc.popen.stdout is not None
    deadline = time.monotonic() + timeout
    line = proc.popen.stdout.readline().strip()
    assert line and time.monotonic() < deadline, f"{proc.name} exited: {proc.popen.poll()}"
    return line


def _terminate(proc: Proc, timeout: float = 30) -> None:
    _terminate_all([proc], timeout)


def _terminate_all(procs: list[Proc], timeout: float = 30) -> None:
    """SIGTERM to every one at once (they shut down side by side, as the pods of a
    deployment do), then wait for each."""
    for proc in procs:
        proc.popen.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for proc in procs:
        try:
            proc.popen.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            dumps = {p.name: stacks(p) for p in procs if p.popen.poll() is None}
            for p in procs:
                if p.popen.poll() is None:
                    p.popen.kill()
                    p.popen.wait()
            raise AssertionError(
                f"{proc.name} did not stop on SIGTERM; the stacks of those still running:\n"
                + "\n".join(f"--- {name}\n{dump}" for name, dump in dumps.items())
            ) from None


def stacks(proc: Proc, timeout: float = 10) -> str:
    """Every thread's stack of a running workload process: SIGUSR1 makes it write them
    to its stderr (faulthandler, at C level, so even a thread holding the GIL cannot stop
    it); what it wrote after the signal, once the dump is whole."""
    err = proc.outfile.with_suffix(".err")
    start = err.stat().st_size if err.exists() else 0
    proc.popen.send_signal(signal.SIGUSR1)
    deadline = time.monotonic() + timeout
    dump, seen = "", -1
    while time.monotonic() < deadline and proc.popen.poll() is None:
        with err.open("rb") as f:
            f.seek(start)
            dump = f.read().decode(errors="replace")
        # The main thread's stack comes last: once it has begun, the dump is whole when
        # a poll finds nothing more written.
        if "Current thread" in dump and len(dump) == seen:
            break
        seen = len(dump)
        time.sleep(0.1)
    return dump or "(nothing written)"


def fresh_settings(mariadb: PrivateMariaDB, rds: PrivateRedis) -> Settings:
    """Settings on the private servers, both up (whatever a scenario did to them) and
    empty."""
    for server in (mariadb, rds):
        server.ensure_running()
    settings = Settings(
        database_url=mariadb.url(), redis_url=rds.url(), gap_timeout=1.0, purge_pause=0.0
    )
    reset_state(settings)
    client = rds.client()
    client.flushall()
    client.close()
    return settings


def skewed_clock(offset: str) -> dict[str, str]:
    """Environment that runs a process with its wall clock `offset` off (libfaketime;
    its monotonic clock stays true, as on a host whose NTP is wrong)."""
    found = sorted(Path("/usr/lib").glob("*/faketime/libfaketimeMT.so.1"))
    assert found, "libfaketime is needed (scripts/setup.sh installs Debian's faketime)"
    return {
        "LD_PRELOAD": str(found[0]),
        "FAKETIME": offset,
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
    }


@contextmanager
def running(scenario: Scenario) -> Iterator[Scenario]:
    scenario.start()
    try:
        yield scenario
    finally:
        scenario.close()
