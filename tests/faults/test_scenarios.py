"""Scenarios: streaming producers and a cluster group of 3 members, on private servers,
through a fault. Each run must keep every promise (see checks.py): nothing acknowledged
lost, nothing stored twice, every partition gap-free, redeliveries bounded by one
in-flight batch per crashed member, no cursor past an unhandled message; and progress must
resume within a stated time after the fault ends."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from ems.config import Settings
from tests.faults import scenario as scenarios
from tests.faults.checks import first_after
from tests.faults.proxy import FaultProxy
from tests.faults.scenario import Scenario, running, skewed_clock, stacks
from tests.faults.servers import PrivateMariaDB, PrivateRedis

pytestmark = pytest.mark.faults

#: After a server is back, producers and members make progress again within this long.
RECOVERY_SECONDS = 15.0
#: Every fault of these scenarios that _assert_kept judges ends well within a send's
#: bound (EMS_SEND_TIMEOUT, 45 s by default, which the processes keep): sends wait it out.


@pytest.fixture
def scenario(fault_settings: Settings, tmp_path: Path) -> Iterator[Scenario]:
    with running(Scenario(fault_settings, tmp_path)) as s:
        yield s


def _assert_kept(s: Scenario, since: float) -> None:
    """Every promise kept, progress back within RECOVERY_SECONDS of `since`, and no send
    raised: each fault here is shorter than the send bound, which sends ride out."""
    s.stop()
    verdict = s.verdict()
    assert verdict.problems(max_redelivered=s.max_redelivered()) == [], s.stderr_tails()
    assert verdict.acknowledged > 0
    assert s.recorded().failed == 0, _failures(s)
    resumed = first_after((a.at for a in s.recorded().acks), since)
    assert resumed is not None, "no message was acknowledged after the fault ended"
    assert resumed - since < RECOVERY_SECONDS


def _failures(s: Scenario) -> str:
    """The producers' failed calls (their "fail" lines), for a failing assertion."""
    lines = [
        line
        for p in s.of("producer")
        if p.outfile.exists()
        for line in p.outfile.read_text().splitlines()
        if line.startswith("fail ")
    ]
    return "\n".join(lines[:20]) + "\n" + s.stderr_tails()


def test_mariadb_killed_and_restarted(scenario: Scenario, private_mariadb: PrivateMariaDB) -> None:
    """kill -9 of the server mid-stream, back after 5 s: InnoDB crash recovery keeps every
    committed row; calls in flight wait for the server (a commit whose reply was lost is
    told apart by its write token) and go on, none fails."""
    scenario.wait_acks(200)
    private_mariadb.kill9()
    time.sleep(5)  # the fault's length, not a wait for a result
    private_mariadb.restart()
    back = time.time()
    scenario.wait_acks(200, timeout=60)
    scenario.wait("every member handling again", lambda r: len(r.handled) > 0)
    _assert_kept(scenario, back)


def test_redis_killed_and_restarted_empty(scenario: Scenario, private_redis: PrivateRedis) -> None:
    """kill -9 of Redis without persistence: counters and pub/sub are gone. Sends wait
    for it (none fails), then producers re-seed from MySQL; members fall back to polling,
    then pick wake-ups up again."""
    scenario.wait_acks(200)
    private_redis.kill9()
    time.sleep(2)
    private_redis.restart()
    back = time.time()
    scenario.wait_acks(200, timeout=60)
    _assert_kept(scenario, back)


def test_lost_commit_replies_with_identical_messages_after_a_redis_loss(
    fault_settings: Settings,
    private_mariadb: PrivateMariaDB,
    private_redis: PrivateRedis,
    tmp_path: Path,
) -> None:
    """Producers of identical heartbeats, each behind its own proxy that cuts the
    connection right after an INSERT has gone to the server (its reply lost), many times,
    while Redis forgets its counters so producers are handed offsets another one took.
    Each acknowledgement must be a place of its own, stored."""
    proxies = [FaultProxy("127.0.0.1", private_mariadb.port, protocol="mysql") for _ in range(3)]
    for proxy in proxies:
        proxy.start()
    try:
        routes = {
            f"producer-{i}": (
                fault_settings.database_url.replace(f":{private_mariadb.port}/", f":{proxy.port}/"),
                fault_settings.redis_url,
            )
            for i, proxy in enumerate(proxies)
        }
        s = Scenario(fault_settings, tmp_path, identical=True, routes=routes)
        with running(s):
            s.wait_acks(100)
            for round_no in range(5):
                for proxy in proxies:
                    proxy.cut_after(b"INSERT INTO message", times=2)
                client = redis.Redis.from_url(fault_settings.redis_url)
                client.flushall()
                client.close()
                s.wait_acks(60)
                assert round_no < 5
            back = time.time()
            assert sum(p.cuts for p in proxies) >= 10, "the replies were never lost"
            s.wait_acks(50)
            _assert_kept(s, back)
    finally:
        for proxy in proxies:
            proxy.close()


def test_mariadb_paused_longer_than_the_lease(
    scenario: Scenario, private_mariadb: PrivateMariaDB
) -> None:
    """SIGSTOP of the server for twice the lease TTL. Its clock runs on while it is
    stopped, so when it resumes every lease is past by the database's clock: each member
    finds its lease gone at its first renewal and rejoins, once (never twice for one
    pause), and its uncommitted window is redelivered, within the bound; every promise
    holds."""
    scenario.wait_acks(200)
    private_mariadb.pause()
    time.sleep(2 * scenario.lease_ttl)
    private_mariadb.resume()
    back = time.time()
    scenario.wait_acks(200, timeout=60)
    _assert_kept(scenario, back)
    assert max(scenario.fencings().values()) <= 1, scenario.fencings()


def _through_proxies(
    fault_settings: Settings, private_mariadb: PrivateMariaDB, names: list[str]
) -> tuple[dict[str, FaultProxy], dict[str, tuple[str, str]]]:
    proxies = {
        name: FaultProxy("127.0.0.1", private_mariadb.port, protocol="mysql").start()
        for name in names
    }
    port = f":{private_mariadb.port}/"
    routes = {
        name: (fault_settings.database_url.replace(port, f":{p.port}/"), fault_settings.redis_url)
        for name, p in proxies.items()
    }
    return proxies, routes


def test_a_member_cut_off_from_mariadb_loses_its_partitions_and_rejoins(
    fault_settings: Settings, private_mariadb: PrivateMariaDB, tmp_path: Path
) -> None:
    """member-0's link to MariaDB stalls for longer than its lease: its partitions move to
    the others within TTL + 2 s; when the link heals, what it had sent arrives late and
    must commit nothing over the new owners' cursors; it rejoins."""
    proxies, routes = _through_proxies(fault_settings, private_mariadb, ["member-0"])
    s = Scenario(fault_settings, tmp_path, routes=routes)
    try:
        with running(s):
            s.wait("member-0 handling", lambda r: _partitions_of(r, "member-0", s) != set())
            s.wait_acks(100)
            mine = _partitions_of(s.recorded(), "member-0", s)
            cut = time.time()
            proxies["member-0"].stall()
            s.wait(
                "member-0's partitions moving",
                lambda r: any(
                    at > cut and place[0] in mine for at, place, _ in _handled_by_others(s)
                ),
                timeout=s.lease_ttl + 10,
            )
            moved = min(
                at for at, place, _ in _handled_by_others(s) if at > cut and place[0] in mine
            )
            time.sleep(max(0.0, cut + s.lease_ttl + 3 - time.time()))
            proxies["member-0"].heal()
            back = time.time()
            s.wait_acks(100)
            _assert_kept(s, back)
            assert moved - cut < s.lease_ttl + 2 + 2  # TTL + 2 s, plus the last renewal's age
    finally:
        for proxy in proxies.values():
            proxy.close()


def test_200_ms_on_every_database_link(
    fault_settings: Settings, private_mariadb: PrivateMariaDB, tmp_path: Path
) -> None:
    """100 ms each way on every process's MariaDB link: throughput falls, leases still
    renew, nobody is fenced, so nothing is delivered twice. (Before renewals had a thread
    of their own, a leader's round of many round trips outlasted a 4 s lease here.)"""
    names = [f"member-{i}" for i in range(3)] + [f"producer-{i}" for i in range(3)]
    proxies, routes = _through_proxies(fault_settings, private_mariadb, names)
    for proxy in proxies.values():
        proxy.set_latency(0.1)
    s = Scenario(fault_settings, tmp_path, routes=routes, rate=20)
    try:
        with running(s):
            s.wait_acks(100, timeout=60)
            s.wait("messages handled", lambda r: len(r.handled) >= 100, timeout=60)
            s.stop(drain_timeout=90)
            verdict = s.verdict()
            assert verdict.problems(max_redelivered=0) == []
            assert verdict.delivered_twice == 0
    finally:
        for proxy in proxies.values():
            proxy.close()


def _refused(s: Scenario) -> bool:
    """Whether a producer logged that its send waits on a server taking no writes."""
    return any("takes no writes" in s.stderr(p) for p in s.of("producer"))


def _member_files(s: Scenario) -> dict[str, Path]:
    return {p.name: p.outfile for p in s.of("member")}


def _handled_by(s: Scenario, name: str) -> list[tuple[float, tuple[int, int], str]]:
    from tests.faults.checks import read_records

    return read_records([], [_member_files(s)[name]]).handled


def _handled_by_others(s: Scenario) -> list[tuple[float, tuple[int, int], str]]:
    return [h for name in _member_files(s) if name != "member-0" for h in _handled_by(s, name)]


def _partitions_of(recorded: object, name: str, s: Scenario) -> set[int]:
    return {place[0] for _, place, _ in _handled_by(s, name)}


def test_the_server_turned_read_only_and_back(
    fault_settings: Settings, private_mariadb: PrivateMariaDB, tmp_path: Path
) -> None:
    """SET GLOBAL read_only for a while (a failover in progress, a maintenance window):
    producers are refused (DatabaseReadOnly) and their sends wait, members keep waiting,
    nothing is half-written, and everything resumes when the server takes writes again,
    no send having failed. The processes connect as an ordinary user: read_only does not
    bind one with SUPER."""
    app_url = private_mariadb.add_user("app")
    admin = private_mariadb.connect(autocommit=True)
    names = [f"member-{i}" for i in range(3)] + [f"producer-{i}" for i in range(3)]
    routes = {name: (app_url, fault_settings.redis_url) for name in names}
    s = Scenario(fault_settings, tmp_path, routes=routes)
    try:
        with running(s):
            s.wait_acks(200)
            with admin.cursor() as cursor:
                cursor.execute("SET GLOBAL read_only = 1")
            s.wait("producers refused", lambda r: _refused(s), timeout=30)
            time.sleep(3)  # the fault's length, not a wait for a result
            with admin.cursor() as cursor:
                cursor.execute("SET GLOBAL read_only = 0")
            back = time.time()
            s.wait_acks(200)
            assert all(p.popen.poll() is None for p in s.procs), "a process died"
            _assert_kept(s, back)
            assert _refused(s)
    finally:
        with admin.cursor() as cursor:
            cursor.execute("SET GLOBAL read_only = 0")
        admin.close()


@pytest.mark.parametrize("offset", ["+1h", "-1h"], ids=["an hour ahead", "an hour behind"])
def test_a_member_and_a_producer_with_a_skewed_clock(
    fault_settings: Settings, tmp_path: Path, offset: str
) -> None:
    """Leases, hole ages and created_at use the database's clock, so a member (the first,
    likely the leader) and a producer whose clocks are an hour off change nothing: every
    promise kept, and nobody fenced, so nothing is delivered twice."""
    env = {name: skewed_clock(offset) for name in ("member-0", "producer-0")}
    s = Scenario(fault_settings, tmp_path, env=env)
    with running(s):
        s.wait_acks(300)
        s.wait("messages handled", lambda r: len(r.handled) >= 300)
        s.wait(
            "the skewed producer streaming",
            lambda r: sum(a.body.startswith("producer-0-") for a in r.acks) >= 200,
        )
        assert [p.name for p in s.procs if p.popen.poll() is not None] == [], "a process died"
        s.stop()
        verdict = s.verdict()
        assert verdict.problems(max_redelivered=0) == []
        assert verdict.delivered_twice == 0
        skewed = [a.at for a in s.recorded().acks if a.body.startswith("producer-0-")]
        assert skewed and abs(skewed[0] - time.time()) > 3000, "the clock was not skewed"


def test_the_leader_cut_off_in_the_middle_of_a_rebalance(
    fault_settings: Settings, private_mariadb: PrivateMariaDB, tmp_path: Path
) -> None:
    """A 4th member joins, and at once the leader's MariaDB link stalls, with the
    rebalance under way, for longer than its lease. Another member takes over with a
    higher epoch and finishes the rebalance; when the old leader's link heals, what it
    had sent arrives late and none of it lands: no partition is owned under its old id,
    and every promise holds."""
    names = [f"member-{i}" for i in range(4)]
    proxies, routes = _through_proxies(fault_settings, private_mariadb, names)
    s = Scenario(fault_settings, tmp_path, routes=routes)
    try:
        with running(s):
            s.wait_acks(200)
            s.wait("a leader", lambda r: s.leader()[0] is not None)
            old_leader, old_epoch = s.leader()
            leader = next(p for p in s.of("member") if p.client_id == old_leader)
            s.add_member()
            proxies[leader.name].stall()
            cut = time.time()
            s.wait(
                "a new leader",
                lambda r: s.leader()[1] > old_epoch and s.leader()[0] != old_leader,
                timeout=s.lease_ttl + 10,
            )
            took_over = time.time() - cut
            time.sleep(max(0.0, cut + s.lease_ttl + 3 - time.time()))
            proxies[leader.name].heal()
            back = time.time()
            s.wait_acks(200)
            s.wait("the late writes settled", lambda r: old_leader not in s.owners(), 30)
            _assert_kept(s, back)
            assert old_leader not in s.owners()
            assert took_over < s.lease_ttl + 4
    finally:
        for proxy in proxies.values():
            proxy.close()


def test_a_member_killed_while_its_acks_lag_behind(
    fault_settings: Settings, private_mariadb: PrivateMariaDB, tmp_path: Path
) -> None:
    """100 ms each way on the members' links, so an ack write (a transaction of several
    round trips) takes longer than a fetch (one): a busy member could hand out batch
    after batch while its acks were still on the way. kill -9 of that member: what it had
    handled and not committed comes again, and that is at most the batch in hand (it
    was five batches before a new batch waited for the last one's acks)."""
    names = [f"member-{i}" for i in range(3)]
    proxies, routes = _through_proxies(fault_settings, private_mariadb, names)
    for proxy in proxies.values():
        proxy.set_latency(0.1)
    s = Scenario(fault_settings, tmp_path, routes=routes, rate=150, batch=20)
    try:
        with running(s):
            s.wait("member-0 busy", lambda r: len(_handled_by(s, "member-0")) >= 150, 90)
            s.kill(s.of("member")[0])
            s.wait_acks(100)
            for proxy in proxies.values():
                proxy.set_latency(0.0)  # the backlog drains quickly; the count is made
            s.stop(drain_timeout=90)
            verdict = s.verdict()
            assert verdict.problems(max_redelivered=s.max_redelivered()) == [], s.stderr_tails()
    finally:
        for proxy in proxies.values():
            proxy.close()


def test_a_process_asked_for_its_stacks_writes_every_threads(
    fault_settings: Settings, tmp_path: Path
) -> None:
    """What a failing stop shows of a process that did not stop on SIGTERM: its threads'
    stacks, the main thread's last, with the producer's loop in it."""
    with running(Scenario(fault_settings, tmp_path, producers=1, members=0)) as s:
        s.wait_acks(5)
        (producer,) = s.of("producer")
        dump = stacks(producer)
        assert producer.popen.poll() is None, "the dump stopped the process"
    main = dump.split("Current thread", 1)[-1]
    assert "workload.py" in main and " in produce\n" in main, dump


def test_a_process_that_does_not_stop_on_sigterm_is_named_with_its_stacks(
    scenario: Scenario, private_mariadb: PrivateMariaDB
) -> None:
    """A stop that fails says which process did not stop and where its threads were: a
    producer whose send waits for a paused server rides it out past SIGTERM."""
    scenario.wait_acks(5)
    (producer, *_) = scenario.of("producer")
    private_mariadb.pause()
    try:
        # At 100 messages a second, half a second without an ack is a send waiting.
        acks, moved = -1, time.monotonic()
        while time.monotonic() - moved < 0.5:
            now = producer.outfile.read_text().count("ack ")
            if now != acks:
                acks, moved = now, time.monotonic()
            time.sleep(0.05)
        with pytest.raises(AssertionError, match="did not stop on SIGTERM") as failed:
            scenarios._terminate_all([producer], timeout=1)
    finally:
        private_mariadb.resume()
    assert producer.popen.poll() is not None, "left running"
    report = str(failed.value)
    assert report.startswith(f"{producer.name} did not stop")
    main = report.split("Current thread", 1)[-1]
    assert "ems/producer/producer.py" in main and " in produce\n" in main, report
