"""The high-availability report (`make bench SUITES=ha`): ems on a 3-node Galera cluster
with Redis under Sentinel, against ems on one MariaDB node and one Redis, in one run on
this machine; and how long publishing and consuming pause when the node ems writes
through, or the Redis master, is killed.

Every server is private to the run (tests/ha/servers.py, tests/faults/servers.py): one
MariaDB with the durable settings of the fault suite, and three Galera nodes with the
same settings plus wsrep; all of them share this machine's cores. Each system is measured
ROUNDS times, alternating which goes first. A shared machine's speed drifts by a fifth
within minutes, so each ratio is taken within a round (the cluster's round against the
one node's round beside it) and the report gives the median of those ratios, with their
range:

- publish, single: one producer thread, one send() per message;
- publish, batch: one producer thread, send_batch() of BATCH messages;
- consume: one member of a cluster group drains what the two publish phases stored,
  timed from its first delivery to its last.

The failover rows run the scenario harness of the fault suite (3 producer processes at
~100 msg/s, a cluster group of 3 members) on the HA servers: node 0 or the Redis master
is killed with SIGKILL mid-stream; the pause is the longest time without an
acknowledgement and without a delivery around the kill, and the judge checks that
nothing acknowledged was lost.
"""

from __future__ import annotations

import argparse
import dataclasses
import secrets
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from benchmarks.cpu import busy_share, machine_ticks
from benchmarks.docs_figures import results_path
from benchmarks.harness import BenchConfig, mysql_connect, topic_fences
from benchmarks.report import environment
from ems import Consumer, Delivery, Producer, Record, TopicAdmin
from ems.config import Settings
from ems.store import migrate
from ems.store.inserts import insert_statements
from ems.types import NewMessage, placed_of
from tests.conftest import reset_state
from tests.faults.checks import longest_gap
from tests.faults.scenario import Scenario, running
from tests.faults.servers import PrivateMariaDB, PrivateRedis
from tests.ha.servers import GaleraArbitrator, GaleraCluster, SentinelRedis

ROUNDS = 5
SECONDS = 3.0
BATCH = 100
#: Producer threads sharing one Producer in the concurrent batch row.
THREADS = 4
PARTITIONS = 4
BODY = b'{"project_id": 17, "sensor": "t-104", "celsius": 21.5, "at": "2026-11-26T04:00:00Z"}'
#: Seconds of streaming before and after a kill in the failover rows.
STREAM_SECONDS = 10.0


@dataclass(frozen=True)
class Rates:
    """One system's rates; raw: the same durable work as ems's batch publish without
    ems's client path (raw_batch), and raw_busy the share of the machine's CPU that was
    busy meanwhile; commits: one-row commits a second (raw_commits), the fixed cost of a
    commit on the system."""

    single: float = 0.0
    batch: float = 0.0
    threads: float = 0.0
    raw: float = 0.0
    consume: float = 0.0
    commits: float = 0.0
    raw_busy: float = 0.0


def medians(rounds: Sequence[Rates]) -> Rates:
    """Each rate's median over the rounds."""
    columns = zip(*(dataclasses.astuple(r) for r in rounds), strict=True)
    return Rates(*(statistics.median(column) for column in columns))


def round_ratios(one: Sequence[Rates], ha: Sequence[Rates], field: str) -> list[float]:
    """The cluster's rate over the one node's, round by round (rounds where the one node
    measured nothing are left out)."""
    pairs = zip(one, ha, strict=True)
    return [getattr(b, field) / getattr(a, field) for a, b in pairs if getattr(a, field)]


@dataclass
class Pause:
    what: str
    no_ack: float
    no_delivery: float
    acknowledged: int
    problems: list[str]


def log(message: str) -> None:
    print(f"ha: {message}", flush=True)


def _for_seconds(seconds: float, step: Callable[[], int]) -> tuple[int, float]:
    """How many messages `step` (which returns how many it sent) sent in about `seconds`,
    and their rate."""
    sent, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        sent += step()
    return sent, sent / (time.perf_counter() - start)


def measure(settings: Settings, name: str) -> Rates:
    """One round: single publishes, batch publishes, then one member drains them all."""
    reset(settings)
    TopicAdmin(settings).create(name, PARTITIONS)
    producer = Producer(settings)
    counter = iter(range(10**9))

    def send_one() -> int:
        producer.send(name, BODY, key=f"p{next(counter) % 50}")
        return 1

    batch = [Record(BODY, key=f"p{i % 50}") for i in range(BATCH)]
    try:
        singles, single = _for_seconds(SECONDS, send_one)
        batched, batch_rate = _for_seconds(SECONDS, lambda: len(producer.send_batch(name, batch)))
        with ThreadPoolExecutor(THREADS) as pool:
            runs = [
                pool.submit(_for_seconds, SECONDS, lambda: len(producer.send_batch(name, batch)))
                for _ in range(THREADS)
            ]
            threaded = [run.result() for run in runs]
    finally:
        producer.close()
    batched += sum(n for n, _ in threaded)
    threads_rate = sum(rate for _, rate in threaded)
    times: list[float] = []

    def handle(delivery: Delivery) -> None:
        times.append(time.perf_counter())

    consumer = Consumer("drain", name, handle, settings=settings, start="earliest")
    try:
        consumer.run(max_messages=singles + batched, handle_signals=False)
    finally:
        consumer.close()
    consume = (len(times) - 1) / (times[-1] - times[0])
    return Rates(single, batch_rate, threads_rate, 0.0, consume)


def raw_batch(settings: Settings, name: str) -> tuple[float, float]:
    """Batches of BATCH rows over the partitions with PyMySQL on one autocommit
    connection, each the very INSERT ems builds (ems.store.inserts.insert_statements: hex
    literals, the partitions' fences, a write token), offsets counted locally: the
    database's share of a batch publish, measured on the same servers. Returns the rate
    and the share of the machine's CPU that was busy meanwhile."""
    reset(settings)
    topic = TopicAdmin(settings).create(name, PARTITIONS)
    conn = mysql_connect(migrate.node_url(settings))
    fences = topic_fences(conn, topic.id).fences
    offsets = [0] * PARTITIONS

    def one_batch() -> int:
        rows = []
        for i in range(BATCH):
            p = i % PARTITIONS
            rows.append(NewMessage(topic.id, p, offsets[p], f"p{i % 50}".encode(), None, BODY))
            offsets[p] += 1
        for statement in insert_statements(placed_of(rows), secrets.randbits(63), fences) or ():
            conn.query(statement)
        return BATCH

    try:
        before = machine_ticks()
        rate = _for_seconds(SECONDS, one_batch)[1]
        return rate, busy_share(before, machine_ticks())
    finally:
        conn.close()


def raw_commits(settings: Settings) -> float:
    """One-row UPDATEs a second, each its own commit, on one autocommit connection: what
    a commit costs on the system whatever it writes (on a cluster, the write set's round
    through the group and its certification)."""
    conn = mysql_connect(migrate.node_url(settings))
    try:
        conn.query("CREATE TABLE IF NOT EXISTS bench_commit (id INT PRIMARY KEY, n BIGINT)")
        conn.query("REPLACE INTO bench_commit VALUES (1, 0)")

        def one_commit() -> int:
            conn.query("UPDATE bench_commit SET n = n + 1 WHERE id = 1")
            return 1

        return _for_seconds(SECONDS / 2, one_commit)[1]
    finally:
        conn.query("DROP TABLE IF EXISTS bench_commit")
        conn.close()


def reset(settings: Settings) -> None:
    """Empty tables and Redis keys (on a cluster, through the node ems writes through)."""
    reset_state(settings.with_(database_url=migrate.node_url(settings)))


@contextmanager
def one_node(root: Path) -> Iterator[Settings]:
    (root / "mariadb").mkdir(parents=True)
    mariadb, rds = PrivateMariaDB(root / "mariadb"), PrivateRedis(root / "redis")
    mariadb.start()
    rds.start()
    try:
        settings = Settings(database_url=mariadb.url(), redis_url=rds.url())
        migrate.create_database(settings)
        migrate.upgrade(settings)
        yield settings
    finally:
        mariadb.stop()
        rds.stop()


@contextmanager
def cluster(root: Path) -> Iterator[tuple[GaleraCluster, SentinelRedis, Settings]]:
    (root / "galera").mkdir(parents=True)
    galera, sentinels = GaleraCluster(root / "galera"), SentinelRedis(root / "sentinel")
    galera.start()
    sentinels.start()
    try:
        settings = Settings(database_url=galera.url(), redis_url=sentinels.url(), gap_timeout=1.0)
        migrate.create_database(settings)
        migrate.upgrade(settings)
        yield galera, sentinels, settings
    finally:
        sentinels.stop()
        galera.stop_all()


@contextmanager
def arbitrated(root: Path) -> Iterator[Settings]:
    """One Galera node with two arbitrators (garbd) in its group, and a Redis: each
    commit goes through the same group of three and its ordering as on the cluster, but
    no other node applies it, so nothing else competes with the writer for the cores."""
    (root / "galera").mkdir(parents=True)
    galera, rds = GaleraCluster(root / "galera", size=1), PrivateRedis(root / "redis")
    arbitrators = [GaleraArbitrator(root / f"garbd{i}", galera.nodes) for i in range(2)]
    galera.start()
    rds.start()
    try:
        for arbitrator in arbitrators:
            arbitrator.start()
        galera.node(0).wait(lambda s: s["wsrep_cluster_size"] == "3", 30, "3 members")
        settings = Settings(database_url=galera.url(), redis_url=rds.url())
        migrate.create_database(settings)
        migrate.upgrade(settings)
        yield settings
    finally:
        for arbitrator in arbitrators:
            arbitrator.stop()
        rds.stop()
        galera.stop_all()


def failover(
    what: str, settings: Settings, workdir: Path, kill: Callable[[], None], heal: Callable[[], None]
) -> Pause:
    """Stream, kill, stream, heal; the longest pauses around the kill and the verdict."""
    reset(settings)
    workdir.mkdir()
    with running(Scenario(settings, workdir)) as scenario:
        time.sleep(STREAM_SECONDS)
        killed = time.time()
        kill()
        time.sleep(STREAM_SECONDS)
        heal()
        scenario.stop()
        verdict = scenario.verdict()
        recorded = scenario.recorded()
        problems = verdict.problems(max_redelivered=scenario.max_redelivered())

    def pause(times: list[float]) -> float:
        return longest_gap(sorted(t for t in times if killed - 2 <= t <= killed + STREAM_SECONDS))

    return Pause(
        what,
        pause([a.at for a in recorded.acks]),
        pause([at for at, _, _ in recorded.handled]),
        verdict.acknowledged,
        problems,
    )


def _ms(rate: float) -> str:
    return f"{1000 / rate:.2f} ms" if rate else "-"


def _ms_added(one: float, ha: float) -> str:
    return f"{1000 / ha - 1000 / one:.2f} ms" if one and ha else "-"


def _range(ratios: Sequence[float]) -> str:
    return f"{min(ratios):.2f}-{max(ratios):.2f}" if ratios else "-"


def _share(part: Sequence[Rates], field: str) -> str:
    """The median over the rounds of ems's batch rate over the field's rate."""
    shares = [r.batch / getattr(r, field) for r in part if getattr(r, field)]
    return f"{statistics.median(shares):.2f}x" if shares else "-"


def _batch_time(
    one_rounds: Sequence[Rates], ha_rounds: Sequence[Rates], arbitrated_rounds: Sequence[Rates]
) -> list[str]:
    """Where the cluster's time for a raw batch goes: the group's share (one Galera node
    with two arbitrators) and the other nodes' applying on the same cores (the rest)."""
    if not arbitrated_rounds:
        return []
    ratios = round_ratios(one_rounds, arbitrated_rounds, "raw")
    if not ratios:
        return []
    one, ha, lone = (
        1000 * BATCH / medians(r).raw for r in (one_rounds, ha_rounds, arbitrated_rounds)
    )
    return [
        f"Where a raw batch of {BATCH} rows goes on the cluster: {one:.2f} ms on one node, "
        f"{lone:.2f} ms on one Galera node with two arbitrators (garbd: they vote and order "
        f"each write set with it, as the other nodes do, but apply nothing), {ha:.2f} ms on "
        f"the 3-node cluster. The group and wsrep add {lone - one:.2f} ms; the other two "
        f"nodes applying each batch on the same cores add {ha - lone:.2f} ms. With a core "
        "for each node they would apply beside the writer rather than in its way: the "
        "writer with two arbitrators does "
        f"{statistics.median(ratios):.2f}x of one node (range {_range(ratios)}), less what a "
        "real network's round trip adds to each commit.",
        "",
    ]


def report(
    header: list[str],
    one_rounds: Sequence[Rates],
    ha_rounds: Sequence[Rates],
    pauses: list[Pause],
    arbitrated_rounds: Sequence[Rates] = (),
) -> str:
    """The page: rates as medians over the rounds, ratios as the median of the rounds'
    ratios (the verdict is on that median), where a batch's time goes, and the failover
    pauses."""
    one, ha = medians(one_rounds), medians(ha_rounds)
    rows = [
        ("publish, single (msg/s)", "single", None),
        ("publish, batch of 100 (msg/s)", "batch", 0.5),
        (f"publish, batch of 100, {THREADS} threads (msg/s)", "threads", None),
        ("raw: the same INSERTs of 100, PyMySQL (rows/s)", "raw", None),
        ("raw: one-row commits, PyMySQL (commits/s)", "commits", None),
        ("consume, one member (msg/s)", "consume", 0.5),
    ]
    lines = [
        "## ems high availability: a 3-node Galera cluster and Redis under Sentinel",
        "",
        *header,
        f"- rates: one producer thread for {SECONDS:g} s of single sends, then {SECONDS:g} s "
        f"of batches of {BATCH}, then {THREADS} threads sharing the producer for {SECONDS:g} s "
        f"of batches; one member drains them all; {len(one_rounds)} rounds per system, "
        "alternating which goes first",
        "- each rate is its median over the rounds; each ratio is the median of the rounds' "
        "own ratios (the cluster's round against the one node's round beside it), with their "
        "range: the machine's speed drifts between rounds",
        "- one node: a private MariaDB (innodb_flush_log_at_trx_commit=1) and Redis; HA: "
        "three Galera nodes with the same settings (all on this machine's cores) and a Redis "
        "master with a replica under three Sentinels",
        "",
        "### Rates",
        "",
        "| | one node | 3-node cluster + Sentinel | cluster / one node | range over rounds "
        "| target |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for name, field, target in rows:
        ratios = round_ratios(one_rounds, ha_rounds, field)
        ratio = statistics.median(ratios) if ratios else 0.0
        verdict = "-" if target is None else (
            f">= {target}x: {'met' if ratios and ratio >= target else '**missed**'}"
        )  # fmt: skip
        shown = f"{ratio:.2f}x" if ratios else "-"
        lines.append(
            f"| {name} | {getattr(one, field):,.0f} | {getattr(ha, field):,.0f} | {shown} "
            f"| {_range(ratios)} | {verdict} |"
        )
    lines += [
        "",
        f"ems batch publish against the raw INSERTs on the same servers: one node "
        f"{_share(one_rounds, 'raw')}, cluster {_share(ha_rounds, 'raw')}. The "
        "cluster's share of the gap is the engine's where the raw ratio (cluster / one node) "
        "is as low as ems's.",
        "",
        f"One commit of one row takes {_ms(one.commits)} on one node and {_ms(ha.commits)} "
        f"on the cluster: the cluster adds {_ms_added(one.commits, ha.commits)} to every "
        f"commit, whatever it writes. The machine's CPU was {one.raw_busy:.0%} busy during "
        f"the raw batches on one node and {ha.raw_busy:.0%} on the cluster: where the "
        "cluster's share stays well below 100%, one writer waits on the cluster's round "
        "trips rather than on the CPU.",
        "",
        *_batch_time(one_rounds, ha_rounds, arbitrated_rounds),
        "### Failover",
        "",
        "| kill -9 of | longest without an ack | longest without a delivery | acknowledged "
        "| promises | target |",
        "|---|---:|---:|---:|---|---|",
    ]
    for p in pauses:
        kept = "kept" if not p.problems else "**BROKEN**: " + "; ".join(p.problems)
        worst = max(p.no_ack, p.no_delivery)
        met = "met" if worst <= 10 else "**missed**"
        lines.append(
            f"| {p.what} | {p.no_ack:.1f} s | {p.no_delivery:.1f} s | {p.acknowledged:,} | "
            f"{kept} | pause <= 10 s: {met} |"
        )
    lines += [
        "",
        "The pause is the longest time without a new acknowledgement (and without a new "
        "delivery) from 2 s before the kill to the end of the stretch after it: 3 producer "
        "processes at ~100 msg/s and a cluster group of 3 members, the fault suite's "
        "scenario harness and judge.",
        "",
    ]
    return "\n".join(lines)


def run(cfg: BenchConfig, args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="ems-ha-") as tmp:
        root = Path(tmp)
        rounds: dict[str, list[Rates]] = {"one node": [], "cluster": [], "arbitrated": []}
        with (
            one_node(root / "one") as single,
            cluster(root / "ha") as (galera, sentinels, settings),
            arbitrated(root / "arbitrated") as lone,
        ):
            header = environment(dataclasses.replace(cfg, settings=single))
            systems = [("one node", single), ("cluster", settings)]
            for round_no in range(ROUNDS):
                for name, target in systems if round_no % 2 == 0 else systems[::-1]:
                    rates = measure(target, f"ha.r{round_no}")
                    raw, busy = raw_batch(target, f"ha.raw{round_no}")
                    got = dataclasses.replace(
                        rates,
                        raw=raw,
                        raw_busy=busy,
                        commits=raw_commits(target),
                    )
                    log(f"{name}, round {round_no + 1}: {got}")
                    rounds[name].append(got)
                    if target is single:  # beside it: the writer with two arbitrators
                        raw, busy = raw_batch(lone, f"ha.arb{round_no}")
                        log(f"one node with two arbitrators, round {round_no + 1}: {raw:.0f}")
                        rounds["arbitrated"].append(Rates(raw=raw, raw_busy=busy))
            node0 = galera.node(0)

            def restart_node0() -> None:
                node0.restart()
                galera.wait_size(3)

            pauses = [
                failover(
                    "the node ems writes through", settings, root / "a", node0.kill9, restart_node0
                ),
            ]
            killed: list[object] = []

            def kill_master() -> None:
                killed.append(sentinels.kill9_master())

            def restart_master() -> None:
                sentinels.wait_failover(timeout=15)
                sentinels.restart(killed[0])  # type: ignore[arg-type]

            pauses.append(
                failover("the Redis master", settings, root / "d", kill_master, restart_master)
            )
    text = report(header, rounds["one node"], rounds["cluster"], pauses, rounds["arbitrated"])
    print(text)
    results_path("ha").write_text(text)
    return 0 if all(not p.problems for p in pauses) else 1
