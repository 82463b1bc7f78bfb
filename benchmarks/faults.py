"""The reliability report (`make bench SUITES=faults`): every fault scenario of
tests/faults/ run for longer, with the fault injected again and again, and one table of
what each run kept.

Each scenario runs streaming producers (3 processes, ~100 msg/s each, singles and batches)
and a cluster group of 3 member processes on private MariaDB and Redis servers that this
suite starts, crashes, pauses and cuts off (tests/faults/servers.py, proxy.py); the
servers on 3306 and 6379 are not touched. A run lasts `--fault-seconds` (default 60); a
fault is injected after every `--fault-every` seconds of health (default 10) and healed
before the next stretch of health. The judge is the suite's own (tests/faults/checks.py):
what the producers acknowledged, what the members handled, and what the database holds.

The columns: messages acknowledged; of those, lost (not stored at their place); stored
twice; partition gaps; deliveries beyond the first (and the bound: one batch per crashed
or fenced member); stored messages below a cursor that nobody handled; the longest time
without a new acknowledgement and without a new delivery; and the worst time, over the
run's faults, from a fault's end to the next acknowledgement and the next delivery.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.docs_figures import results_path
from benchmarks.harness import BenchConfig
from benchmarks.report import environment
from ems.config import Settings
from ems.store import migrate
from tests.faults.checks import Verdict, Window, longest_gap, read_records, worst_recovery
from tests.faults.proxy import FaultProxy
from tests.faults.scenario import Scenario, fresh_settings, running, skewed_clock
from tests.faults.servers import PrivateMariaDB, PrivateRedis

#: Members that may ever run in one scenario (the leader and mixed scenarios add some).
MAX_MEMBERS = 10


@dataclass
class Rig:
    """What a fault acts on: the private servers, the running scenario, its proxies."""

    mariadb: PrivateMariaDB
    redis: PrivateRedis
    scenario: Scenario
    proxies: dict[str, FaultProxy]
    rng: random.Random
    app_admin: Callable[[str], None] = lambda sql: None


@dataclass(frozen=True)
class Nemesis:
    """One scenario of the report: how its processes are set up, and its fault."""

    name: str
    what: str
    #: Inject one fault and heal it; returns when the fault has ended.
    fault: Callable[[Rig], None] | None
    #: Processes whose MariaDB link runs through a fault proxy.
    proxied: tuple[str, ...] = ()
    identical: bool = False
    #: Per process, its wall clock's offset (libfaketime).
    skew: dict[str, str] = field(default_factory=dict)
    #: Connect the processes as an ordinary user (read_only does not bind SUPER).
    app_user: bool = False


# -- faults ----------------------------------------------------------------------------


def _mariadb_kill9(rig: Rig) -> None:
    rig.mariadb.kill9()
    time.sleep(5)
    rig.mariadb.restart()


def _mariadb_pause(rig: Rig) -> None:
    rig.mariadb.pause()
    time.sleep(2 * rig.scenario.lease_ttl)
    rig.mariadb.resume()


def _lost_replies(rig: Rig) -> None:
    for name, proxy in rig.proxies.items():
        if name.startswith("producer"):
            proxy.cut_after(b"INSERT INTO message", times=2)
    client = rig.redis.client()
    client.flushall()
    client.close()
    time.sleep(3)
    for proxy in rig.proxies.values():
        proxy.heal()


def _redis_kill9(rig: Rig) -> None:
    rig.redis.kill9()
    time.sleep(2)
    rig.redis.restart()


def _stall(rig: Rig, name: str) -> None:
    rig.proxies[name].stall()
    time.sleep(rig.scenario.lease_ttl + 3)
    rig.proxies[name].heal()


def _member_stall(rig: Rig) -> None:
    _stall(rig, "member-0")


def _leader_cut_in_rebalance(rig: Rig) -> None:
    """A member joins (or, when 5 run, a non-leader leaves), and at once the leader's
    link stalls for longer than its lease, with the rebalance under way."""
    s = rig.scenario
    leader_id, _ = s.leader()
    live = [p for p in s.of("member") if p.popen.poll() is None]
    leader = next((p for p in live if p.client_id == leader_id), None)
    others = [p for p in live if p is not leader]
    if len(live) >= 5 and others:
        s.leave(others[-1])
    else:
        s.add_member()
    if leader is not None:
        _stall(rig, leader.name)


def _read_only(rig: Rig) -> None:
    rig.app_admin("SET GLOBAL read_only = 1")
    time.sleep(3)
    rig.app_admin("SET GLOBAL read_only = 0")


def _latency(rig: Rig) -> None:
    for proxy in rig.proxies.values():
        proxy.set_latency(0.1)
    time.sleep(10)
    for proxy in rig.proxies.values():
        proxy.set_latency(0.0)


def _member_kill9(rig: Rig) -> None:
    s = rig.scenario
    live = [p for p in s.of("member") if p.popen.poll() is None]
    s.kill(rig.rng.choice(live))
    time.sleep(1)
    s.add_member()


def _mixed(rig: Rig) -> None:
    """One fault drawn at random (seeded): the run meets several kinds, one at a time."""
    kinds = (_mariadb_kill9, _mariadb_pause, _redis_kill9, _member_kill9, _member_stall)
    rig.rng.choice(kinds)(rig)


_MEMBERS = tuple(f"member-{i}" for i in range(MAX_MEMBERS))
_EVERYONE = (*_MEMBERS, "producer-0", "producer-1", "producer-2")

NEMESES: tuple[Nemesis, ...] = (
    Nemesis("a. MariaDB kill -9", "kill -9 of the server, restarted after 5 s", _mariadb_kill9),
    Nemesis("b. MariaDB paused", "SIGSTOP of the server for twice the lease TTL", _mariadb_pause),
    Nemesis(
        "c. lost INSERT replies",
        "each producer's link cut right after an INSERT went out (twice), and Redis "
        "flushed; every message an identical heartbeat",
        _lost_replies,
        proxied=("producer-0", "producer-1", "producer-2"),
        identical=True,
    ),
    Nemesis("d. Redis kill -9", "kill -9 of Redis (no persistence), back after 2 s", _redis_kill9),
    Nemesis(
        "e. member cut off",
        "member-0's MariaDB link stalled for the lease TTL + 3 s",
        _member_stall,
        proxied=("member-0",),
    ),
    Nemesis(
        "f. leader cut off in a rebalance",
        "a member joins or leaves, and the leader's link stalls for the lease TTL + 3 s",
        _leader_cut_in_rebalance,
        proxied=_MEMBERS,
    ),
    Nemesis(
        "g. clocks an hour off",
        "member-0 and producer-0 an hour ahead, member-1 and producer-1 an hour behind "
        "(libfaketime), the whole run",
        None,
        skew={"member-0": "+1h", "producer-0": "+1h", "member-1": "-1h", "producer-1": "-1h"},
    ),
    Nemesis(
        "h. read-only",
        "SET GLOBAL read_only for 3 s (processes connect as an ordinary user)",
        _read_only,
        app_user=True,
    ),
    Nemesis(
        "i. 200 ms latency",
        "100 ms each way on every process's MariaDB link for 10 s",
        _latency,
        proxied=_EVERYONE,
    ),
    Nemesis(
        "j. mixed",
        "one of a, b, d, e or a member's kill -9 (replaced by a new member), drawn at random",
        _mixed,
        proxied=_MEMBERS,
    ),
)


# -- one run ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    name: str
    faults: int
    #: Connections the proxies cut (a lost reply each, in scenario c).
    cuts: int
    #: Times a member found its lease gone and rejoined.
    fenced: int
    verdict: Verdict
    bound: int
    problems: list[str]
    no_ack: float
    no_delivery: float
    ack_recovery: float | None
    delivery_recovery: float | None


def run_one(
    nemesis: Nemesis,
    mariadb: PrivateMariaDB,
    rds: PrivateRedis,
    workdir: Path,
    seconds: float,
    every: float,
) -> Outcome:
    settings = fresh_settings(mariadb, rds)
    with _proxies(mariadb, nemesis.proxied) as proxies, _app_user(mariadb, nemesis) as admin:
        url = settings.database_url.replace("root@", "app@") if nemesis.app_user else None
        routes = _routes(settings, mariadb, proxies, url)
        env = {name: skewed_clock(offset) for name, offset in nemesis.skew.items()}
        s = Scenario(
            settings,
            workdir,
            identical=nemesis.identical,
            routes=routes,
            env=env,
        )
        rig = Rig(mariadb, rds, s, proxies, random.Random(nemesis.name), admin)
        with running(s):
            s.wait_acks(100, timeout=60)
            windows = _inject_for(rig, nemesis.fault, seconds, every)
            ended = time.time()
            s.stop(drain_timeout=90)
            verdict = s.verdict()
            fenced = sum(s.fencings().values())
            bound = s.max_redelivered()
            acks, handled = _true_times(s, set(nemesis.skew))
            cuts = sum(p.cuts for p in proxies.values())
    return Outcome(
        name=nemesis.name,
        faults=len(windows),
        cuts=cuts,
        fenced=fenced,
        verdict=verdict,
        bound=bound,
        problems=verdict.problems(max_redelivered=bound),
        no_ack=longest_gap(acks),
        no_delivery=longest_gap([t for t in handled if t <= ended]),
        ack_recovery=worst_recovery(acks, windows),
        delivery_recovery=worst_recovery(handled, windows),
    )


def _inject_for(
    rig: Rig, fault: Callable[[Rig], None] | None, seconds: float, every: float
) -> list[Window]:
    """Alternate health (`every` s) and a fault until `seconds` have passed."""
    end = time.monotonic() + seconds
    windows: list[Window] = []
    while fault is not None and time.monotonic() + every < end:
        time.sleep(every)
        start = time.time()
        fault(rig)
        windows.append((start, time.time()))
    time.sleep(max(0.0, end - time.monotonic()))
    return windows


def _true_times(s: Scenario, skewed: set[str]) -> tuple[list[float], list[float]]:
    """Ack and delivery times from the processes whose clock is right."""
    right = [p for p in s.procs if p.name not in skewed]
    recorded = read_records(
        [p.outfile for p in right if p.name.startswith("producer")],
        [p.outfile for p in right if p.name.startswith("member")],
    )
    return sorted(a.at for a in recorded.acks), sorted(at for at, _, _ in recorded.handled)


@contextmanager
def _proxies(mariadb: PrivateMariaDB, names: Sequence[str]) -> Iterator[dict[str, FaultProxy]]:
    proxies: dict[str, FaultProxy] = {}
    try:
        for name in names:
            proxies[name] = FaultProxy("127.0.0.1", mariadb.port, protocol="mysql").start()
        yield proxies
    finally:
        for proxy in proxies.values():
            proxy.close()


@contextmanager
def _app_user(mariadb: PrivateMariaDB, nemesis: Nemesis) -> Iterator[Callable[[str], None]]:
    if not nemesis.app_user:
        yield lambda sql: None
        return
    mariadb.add_user("app")
    admin = mariadb.connect(autocommit=True)

    def execute(sql: str) -> None:
        with admin.cursor() as cursor:
            cursor.execute(sql)

    try:
        yield execute
    finally:
        execute("SET GLOBAL read_only = 0")
        admin.close()


def _routes(
    settings: Settings,
    mariadb: PrivateMariaDB,
    proxies: dict[str, FaultProxy],
    database_url: str | None,
) -> dict[str, tuple[str, str]]:
    direct = database_url or settings.database_url
    routes = {name: (direct, settings.redis_url) for name in _EVERYONE}
    port = f":{mariadb.port}/"
    for name, proxy in proxies.items():
        routes[name] = (direct.replace(port, f":{proxy.port}/"), settings.redis_url)
    return routes


# -- the report ------------------------------------------------------------------------


def _seconds(value: float | None) -> str:
    return "never" if value is None else f"{value:.1f} s"


def table(outcomes: Sequence[Outcome]) -> str:
    lines = [
        "| scenario | faults | acknowledged | lost | stored twice | gaps | delivered twice "
        "(bound) | cursor past unhandled | longest without an ack | longest without a "
        "delivery | recovery: next ack | recovery: next delivery | promises |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for o in outcomes:
        v = o.verdict
        gaps = sum(len(g) for g in v.gaps.values())
        kept = "kept" if not o.problems else "**BROKEN**: " + "; ".join(o.problems)
        recovery = ("-", "-") if not o.faults else (
            _seconds(o.ack_recovery), _seconds(o.delivery_recovery)
        )  # fmt: skip
        notes = [f"{o.cuts} links cut"] * bool(o.cuts) + [f"{o.fenced} leases lost"] * bool(
            o.fenced
        )
        faults = f"{o.faults}" + (f" ({', '.join(notes)})" if notes else "")
        lines.append(
            f"| {o.name} | {faults} | {v.acknowledged:,} | {len(v.lost)} | "
            f"{len(v.stored_twice)} | {gaps} | {v.delivered_twice} ({o.bound}) | "
            f"{len(v.past_cursor)} | {o.no_ack:.1f} s | {o.no_delivery:.1f} s | "
            f"{recovery[0]} | {recovery[1]} | {kept} |"
        )
    return "\n".join(lines)


def report(outcomes: Sequence[Outcome], header: list[str], seconds: float, every: float) -> str:
    legend = [f"- {n.name}: {n.what}" for n in NEMESES if n.name in {o.name for o in outcomes}]
    kept = sum(not o.problems for o in outcomes)
    return "\n".join(
        [
            "## ems reliability report: fault scenarios",
            "",
            *header,
            f"- each scenario: {seconds:g} s of streaming (3 producers at ~100 msg/s, a "
            f"cluster group of 3 members, batch 50, lease TTL 4 s), a fault after every "
            f"{every:g} s of health; private MariaDB (innodb_flush_log_at_trx_commit=1) and "
            "Redis (no persistence)",
            *legend,
            "",
            table(outcomes),
            "",
            f"Every promise kept in {kept} of {len(outcomes)} scenarios. Recovery is the "
            "worst, over a run's faults, from the fault's end to the next acknowledgement "
            "and the next delivery; the redelivery bound is one batch for each time a "
            "member crashed or lost its lease and rejoined (at least one).",
            "",
        ]
    )


def run(cfg: BenchConfig, args: argparse.Namespace) -> int:
    chosen = [n for n in NEMESES if not args.scenarios or n.name[0] in args.scenarios]
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="ems-faults-") as tmp:
        root = Path(tmp)
        mariadb, rds = PrivateMariaDB(root / "mariadb"), PrivateRedis(root / "redis")
        mariadb.start()
        rds.start()
        try:
            settings = Settings(database_url=mariadb.url(), redis_url=rds.url())
            migrate.create_database(settings)
            migrate.upgrade(settings)
            header = environment(dataclasses.replace(cfg, settings=settings))
            for nemesis in chosen:
                workdir = root / nemesis.name[0]
                workdir.mkdir()
                print(f"faults: {nemesis.name} ...", flush=True)
                outcome = run_one(
                    nemesis, mariadb, rds, workdir, args.fault_seconds, args.fault_every
                )
                print(table([outcome]).splitlines()[-1], flush=True)
                outcomes.append(outcome)
        finally:
            mariadb.stop()
            rds.stop()
    text = report(outcomes, header, args.fault_seconds, args.fault_every)
    print(text)
    results_path("faults").write_text(text)
    return 0 if all(not o.problems for o in outcomes) else 1
