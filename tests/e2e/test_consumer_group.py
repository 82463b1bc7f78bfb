"""A consumer group of real processes under churn: producers stream while members are
killed (-9), added, stopped with SIGTERM, and the leader is killed mid-rebalance.

Checks: no acknowledged message is lost; per partition, first deliveries come in offset
order; a message is delivered twice only when a kill -9'd member had it in flight (at most
one batch per kill); nothing a SIGTERM'd member handled is delivered again; partitions of
a dead member are owned again within TTL + 2 s.
"""

from __future__ import annotations

import os
import signal
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ems import TopicAdmin
from ems.config import Settings
from ems.store import Store
from tests import forked
from tests import sql as db
from tests.procs.producer import label

pytestmark = pytest.mark.slow
PARTITIONS = 8
TTL, RENEW, BATCH = 3.0, 1.0, 100
GROUP = "handlers"


class Member:
    """A member process: the sync Consumer, or ems.aio's (kind "aio")."""

    def __init__(self, settings: Settings, out: Path, kind: str = "sync") -> None:
        self.out = out
        self.kind = kind
        module = "tests.procs.aio_consumer" if kind == "aio" else "tests.procs.consumer"
        args = [settings.database_url, GROUP, "conc", str(out), str(TTL), str(RENEW)]
        self.proc = forked.spawn(module, [*args, str(BATCH)], env=_env(), stdout=forked.PIPE)
        assert self.proc.stdout is not None
        self.client_id = self.proc.stdout.readline().strip()
        assert self.client_id, "consumer did not start"

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def terminate(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(timeout=TTL * 3) == 0


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("EMS_")}


@pytest.fixture
def members(settings: Settings, tmp_path: Path) -> Iterator[Callable[..., Member]]:
    started: list[Member] = []

    def start(kind: str = "sync") -> Member:
        m = Member(settings, tmp_path / f"member-{len(started)}.txt", kind)
        started.append(m)
        return m

    yield start
    for m in started:
        if m.proc.poll() is None:
            m.proc.kill()


def owners(settings: Settings) -> dict[int, tuple[str | None, str]]:
    store = Store(settings)
    try:
        return {r.partition: (r.client_id, r.state) for r in store.assignments.rows(_gid(store))}
    finally:
        store.close()


def _gid(store: Store) -> int:
    return int(db.row(store, "SELECT id FROM consumer_group")[0])


def leader_of(settings: Settings) -> str | None:
    store = Store(settings)
    try:
        info = store.leases.leader(_gid(store))
        return info.client_id if info else None
    finally:
        store.close()


def wait_until(
    check: Callable[[], bool], timeout: float, why: Callable[[], str] = lambda: ""
) -> float:
    started = time.monotonic()
    while not check():
        assert time.monotonic() - started < timeout, f"timed out {why()}"
        time.sleep(0.05)
    return time.monotonic() - started


def settled_among(settings: Settings, live: list[Member]) -> Callable[[], bool]:
    ids = {m.client_id for m in live}

    def check() -> bool:
        rows = owners(settings)
        counts = [sum(1 for c, _ in rows.values() if c == i) for i in ids]
        return all(c in ids and s == "assigned" for c, s in rows.values()) and (
            max(counts) - min(counts) <= 1
        )

    return check


def streamer(settings: Settings, name: str, rate: int, acks: Path) -> forked.Child:
    """A producer that sends until stop_streaming(): the tests keep producing until they
    have seen every member they wait on handle something, however slow the machine."""
    args = [settings.database_url, "stream", name, str(acks), str(rate)]
    return forked.spawn("tests.procs.producer", args, env=_env())


def stop_streaming(producers: list[forked.Child]) -> None:
    for p in producers:
        p.send_signal(signal.SIGTERM)
    for p in producers:
        assert p.wait(timeout=60) == 0


def handled_by(live: list[Member]) -> Callable[[], bool]:
    """Whether every member of `live` has handled at least one message."""
    return lambda: all(m.out.exists() and m.out.stat().st_size for m in live)


def idle(members: list[Member]) -> str:
    ids = [m.client_id for m in members if not read_lines(m.out)]
    return f"members that handled nothing: {ids}"


def read_lines(path: Path) -> list[tuple[float, int, int, str]]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        t, p, o, body = line.split(" ", 3)
        rows.append((float(t), int(p), int(o), label(body.encode())))
    return rows


def test_group_under_churn(
    settings: Settings, tmp_path: Path, members: Callable[..., Member]
) -> None:
    TopicAdmin(settings).create("conc", PARTITIONS)
    first = [members() for _ in range(3)]
    wait_until(settled_among(settings, first), TTL * 2)
    acks = [tmp_path / f"acks-{i}.txt" for i in range(2)]
    producers = [streamer(settings, f"p{i}", 250, acks[i]) for i in range(2)]
    # Producers stream and every member has work before the first kill.
    wait_until(handled_by(first), 30, lambda: idle(first))

    victim = next(m for m in first if m.client_id != leader_of(settings))
    victim.kill()
    resumed = wait_until(settled_among(settings, [m for m in first if m is not victim]), TTL + 2)

    joiner = members()
    live = [m for m in (*first, joiner) if m is not victim]
    joined = wait_until(settled_among(settings, live), TTL)

    quitter = next(m for m in live if m.client_id != leader_of(settings))
    quitter.terminate()
    live.remove(quitter)
    wait_until(settled_among(settings, live), TTL + 2)

    before = generation(settings)
    newcomer = members()
    # The leader has begun the rebalance (its first assignment write) when it is killed.
    wait_until(lambda: generation(settings) > before, 30, lambda: "(no rebalance)")
    leader = next(m for m in live if m.client_id == leader_of(settings))
    leader.kill()
    live = [m for m in live if m is not leader] + [newcomer]
    failover = wait_until(settled_among(settings, live), TTL + 2 + 2)

    # Producers stream on until every live member, the newcomer too, has handled some.
    wait_until(handled_by(live), 30, lambda: idle(live))
    stop_streaming(producers)
    produced = _acked(acks)

    def handled() -> set[tuple[int, int]]:
        return {(p, o) for m in (*first, joiner, newcomer) for _, p, o, _ in read_lines(m.out)}

    wait_until(lambda: set(produced) <= handled(), 30)
    for m in live:
        m.terminate()

    lines = {m.client_id: read_lines(m.out) for m in (*first, joiner, newcomer)}
    _check_order_and_duplicates(
        lines, produced, killed={victim.client_id, leader.client_id}, graceful={quitter.client_id}
    )
    print(
        f"resumed after kill -9 in {resumed:.2f}s, join settled in {joined:.2f}s, "
        f"leader failover settled in {failover:.2f}s"
    )


def test_sync_and_async_members_in_one_group_under_kill_and_sigterm(
    settings: Settings, tmp_path: Path, members: Callable[..., Member]
) -> None:
    """Two sync and two ems.aio members share the partitions; an async member is killed
    (-9) and the other stopped by SIGTERM while producers stream; a new async member
    joins. Same checks as the churn test."""
    TopicAdmin(settings).create("conc", PARTITIONS)
    first = [members(kind) for kind in ("sync", "aio", "sync", "aio")]
    wait_until(settled_among(settings, first), TTL * 2)
    acks = [tmp_path / f"acks-{i}.txt" for i in range(2)]
    producers = [streamer(settings, f"p{i}", 250, acks[i]) for i in range(2)]
    # Producers stream and every member has work before the kill.
    wait_until(handled_by(first), 30, lambda: idle(first))

    leader = leader_of(settings)
    victim, quitter = _two_aio(first, leader)
    victim.kill()
    live = [m for m in first if m is not victim]
    wait_until(settled_among(settings, live), TTL + 2)
    quitter.terminate()
    live.remove(quitter)
    wait_until(settled_among(settings, live), TTL + 2)
    joiner = members("aio")
    live.append(joiner)
    wait_until(settled_among(settings, live), TTL + 2)

    # Producers stream on until the joiner has handled some: however long the kill, the
    # SIGTERM and the join took, the joiner gets work.
    wait_until(handled_by(live), 30, lambda: idle(live))
    stop_streaming(producers)
    produced = _acked(acks)
    everyone = [*first, joiner]

    def handled() -> set[tuple[int, int]]:
        return {(p, o) for m in everyone for _, p, o, _ in read_lines(m.out)}

    wait_until(lambda: set(produced) <= handled(), 30)
    for m in live:
        m.terminate()
    lines = {m.client_id: read_lines(m.out) for m in everyone}
    assert all(lines[m.client_id] for m in (*first, joiner) if m is not victim)
    _check_order_and_duplicates(
        lines, produced, killed={victim.client_id}, graceful={quitter.client_id}
    )


def _two_aio(first: list[Member], leader: str | None) -> tuple[Member, Member]:
    """Two async members, the leader (if async) last: the victim is never the leader."""
    aio = sorted((m for m in first if m.kind == "aio"), key=lambda m: m.client_id == leader)
    return aio[0], aio[1]


def _acked(acks: list[Path]) -> dict[tuple[int, int], str]:
    """Each acknowledged message by (partition, offset); no two acks share one."""
    lines = [line.split(" ", 2) for path in acks for line in path.read_text().splitlines()]
    produced = {(int(p), int(o)): body for p, o, body in lines}
    assert produced and len(produced) == len(lines), "two acks for one offset"
    return produced


def generation(settings: Settings) -> int:
    store = Store(settings)
    try:
        return int(db.row(store, "SELECT generation FROM consumer_group")[0])
    finally:
        store.close()


def _check_order_and_duplicates(
    lines: dict[str, list[tuple[float, int, int, str]]],
    produced: dict[tuple[int, int], str],
    *,
    killed: set[str],
    graceful: set[str],
) -> None:
    events = sorted((t, p, o, body, cid) for cid, rows in lines.items() for t, p, o, body in rows)
    first_by: dict[tuple[int, int], str] = {}
    duplicates: dict[str, int] = defaultdict(int)
    last_first: dict[int, int] = {}
    for _, p, o, body, cid in events:
        assert produced[(p, o)] == body, "a message arrived with another body"
        if (p, o) in first_by:
            origin = first_by[(p, o)]
            assert origin in killed, f"{(p, o)} redelivered although {origin} did not crash"
            duplicates[origin] += 1
            continue
        first_by[(p, o)] = cid
        assert o > last_first.get(p, -1), f"partition {p}: offset {o} after a later one"
        last_first[p] = o
    assert set(first_by) == set(produced), "an acknowledged message was never delivered"
    for origin, count in duplicates.items():
        assert count <= BATCH, f"{count} redeliveries after {origin} died: more than its batch"
    assert not set(duplicates) & graceful
