"""`ems worker` end to end: real worker processes (and a supervisor's) against the real
MariaDB and Redis, handlers from tests.procs.worker_handlers appending one line per
message they handle. Every wait is on observed progress: lines written, rows in
consumer_client and partition_assignment, processes ended."""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path

import pytest

from ems import Producer, Record, TopicAdmin
from ems.config import Settings
from ems.store import Store
from tests import forked
from tests import sql as db
from tests.e2e.test_consumer_group import _acked, stop_streaming, streamer

pytestmark = pytest.mark.slow
HANDLERS = "tests.procs.worker_handlers"
TTL, RENEW = "6", "1"


class Worker:
    """An `ems worker` process, its stderr in a file."""

    def __init__(self, settings: Settings, tmp: Path, args: list[str], out: Path) -> None:
        self.err_path = tmp / f"worker-{time.monotonic_ns()}.err"
        env = {k: v for k, v in os.environ.items() if not k.startswith("EMS_")}
        env.update(
            EMS_DATABASE_URL=settings.database_url,
            EMS_REDIS_URL=settings.redis_url,
            EMS_GAP_TIMEOUT="1",
            WORKER_OUT=str(out),
        )
        env.update({k: v for k, v in os.environ.items() if k.startswith("EMS_WORKER_")})
        with self.err_path.open("w") as err:
            self.proc = forked.spawn("ems.cli", ["worker", *args], env=env, stderr=err)

    @property
    def stderr(self) -> str:
        return self.err_path.read_text()

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=timeout)


@pytest.fixture
def workers(settings: Settings, tmp_path: Path) -> Iterator[Callable[..., Worker]]:
    started: list[Worker] = []
    out = tmp_path / "handled.txt"

    def start(*args: str) -> Worker:
        w = Worker(settings, tmp_path, list(args), out)
        started.append(w)
        return w

    yield start
    for w in started:
        if w.proc.poll() is None:
            w.proc.kill()
            w.proc.wait(timeout=30)
    # A supervisor killed outright takes its processes along (they get SIGTERM).


def handled(tmp: Path) -> list[tuple[int, int, int, str]]:
    """(pid, partition, offset, body) per line the handlers wrote."""
    path = tmp / "handled.txt"
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        pid, p, o, body = line.split(" ", 3)
        rows.append((int(pid), int(p), int(o), body))
    return rows


def wait_until(check: Callable[[], bool], timeout: float, why: Callable[[], str] = str) -> float:
    started = time.monotonic()
    while not check():
        assert time.monotonic() - started < timeout, f"timed out {why()}"
        time.sleep(0.05)
    return time.monotonic() - started


def _query(settings: Settings, sql: str, **params: object) -> list[tuple[object, ...]]:
    with closing(Store(settings)) as store:
        return db.rows(store, sql, params or None)


def owners(settings: Settings, group: str, topic: str) -> dict[int, tuple[str | None, str]]:
    """partition -> (client id, state) of the group on the topic."""
    rows = _query(
        settings,
        "SELECT a.partition_no, a.client_id, a.state FROM partition_assignment a "
        "JOIN consumer_group g ON g.id = a.group_id JOIN topic t ON t.id = g.topic_id "
        "WHERE g.name = :group AND t.name = :topic",
        group=group,
        topic=topic,
    )
    return {int(str(p)): (None if c is None else str(c), str(s)) for p, c, s in rows}


def clients(settings: Settings) -> dict[str, int]:
    """client id -> pid of every live member."""
    rows = _query(settings, "SELECT client_id, pid FROM consumer_client")
    return {str(c): int(str(p)) for c, p in rows}


def settled(settings: Settings, group: str, topic: str, members: int) -> Callable[[], bool]:
    """Every partition assigned to one of exactly `members` live clients, balanced."""

    def check() -> bool:
        rows = owners(settings, group, topic)
        live = set(clients(settings))
        owned = Counter(c for c, s in rows.values() if s == "assigned" and c in live)
        return (
            bool(rows)
            and sum(owned.values()) == len(rows)
            and len(owned) == members
            and max(owned.values()) - min(owned.values()) <= 1
        )

    return check


def log_rows(settings: Settings, group: str) -> list[tuple[int, int, str, int]]:
    """(partition, offset, state, attempts) of the group's consumption log."""
    rows = _query(
        settings,
        "SELECT l.partition_no, l.offset_no, l.state, l.attempts FROM topic_group_log l "
        "JOIN consumer_group g ON g.id = l.group_id WHERE g.name = :group",
        group=group,
    )
    return [(int(str(p)), int(str(o)), str(s), int(str(a))) for p, o, s, a in rows]


def produce(settings: Settings, topic: str, count: int, prefix: str = "m") -> set[str]:
    bodies = [f"{prefix}-{i}" for i in range(count)]
    with Producer(settings) as producer:
        producer.send_batch(topic, [Record(b, key=f"k{i % 7}") for i, b in enumerate(bodies)])
    return set(bodies)


def assert_once_each(tmp: Path, bodies: set[str]) -> None:
    counts = Counter(body for _, _, _, body in handled(tmp))
    assert set(counts) == bodies
    assert [b for b, n in counts.items() if n > 1] == []


# -- a worker process handles a topic's messages ---------------------------------------------


@pytest.mark.parametrize("handler", ["record", "record_async"])
def test_a_worker_handles_its_topics_and_leaves_on_sigterm(
    settings: Settings,
    tmp_path: Path,
    workers: Callable[..., Worker],
    monkeypatch: pytest.MonkeyPatch,
    handler: str,
) -> None:
    with closing(TopicAdmin(settings)) as admin:
        admin.create("readings", 4)
        admin.create("alerts", 2)
    sent = produce(settings, "readings", 60) | produce(settings, "alerts", 20, "a")
    # The group, its topics and the start position from the EMS_WORKER_* variables.
    monkeypatch.setenv("EMS_WORKER_GROUP", "handlers")
    monkeypatch.setenv("EMS_WORKER_TOPIC", "readings, alerts")
    monkeypatch.setenv("EMS_WORKER_START", "earliest")
    worker = workers(f"{HANDLERS}:{handler}", "--threads", "2")
    wait_until(lambda: len(handled(tmp_path)) >= len(sent), 60, lambda: worker.stderr)
    # Two members on each topic (the second may join after the first handled everything).
    wait_until(settled(settings, "handlers", "readings", 2), 30, lambda: worker.stderr)
    wait_until(settled(settings, "handlers", "alerts", 2), 30, lambda: worker.stderr)
    assert {pid for pid, *_ in handled(tmp_path)} == {worker.proc.pid}

    assert worker.stop() == 0, worker.stderr
    assert "Traceback" not in worker.stderr
    assert_once_each(tmp_path, sent)
    logged = log_rows(settings, "handlers")
    assert len(logged) == len(sent)
    assert {(state, attempts) for *_, state, attempts in logged} == {("done", 1)}
    assert clients(settings) == {}  # every member left


# -- processes --------------------------------------------------------------------------------


def test_two_processes_share_the_partitions_and_stop_cleanly(
    settings: Settings, tmp_path: Path, workers: Callable[..., Worker]
) -> None:
    with closing(TopicAdmin(settings)) as admin:
        admin.create("readings", 6)
    supervisor = workers(
        f"{HANDLERS}:record", "--group", "handlers", "--topic", "readings",
        "--start", "earliest", "--processes", "2", "--metrics-port", "0",
    )  # fmt: skip
    wait_until(settled(settings, "handlers", "readings", 2), 60, lambda: supervisor.stderr)
    pids = set(clients(settings).values())
    assert len(pids) == 2 and supervisor.proc.pid not in pids
    sent = produce(settings, "readings", 120)
    wait_until(lambda: len(handled(tmp_path)) >= len(sent), 60, lambda: supervisor.stderr)
    assert {pid for pid, *_ in handled(tmp_path)} == pids  # both handled some
    assert supervisor.stderr.count("metrics on port") == 2

    assert supervisor.stop() == 0, supervisor.stderr
    assert_once_each(tmp_path, sent)
    assert clients(settings) == {}
    assert not any(_alive(pid) for pid in pids)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_sigterm_mid_stream_hands_the_partitions_over_at_once(
    settings: Settings, tmp_path: Path, workers: Callable[..., Worker]
) -> None:
    with closing(TopicAdmin(settings)) as admin:
        admin.create("conc", 8)
    common = ["--group", "handlers", "--topic", "conc", "--start", "earliest"]
    common += ["--lease-ttl", "20", "--renew-every", "2"]
    leaving = workers(f"{HANDLERS}:record", *common, "--processes", "2", "--batch-size", "20")
    wait_until(settled(settings, "handlers", "conc", 2), 60, lambda: leaving.stderr)
    acks = tmp_path / "acks.txt"
    producer = streamer(settings, "p", 300, acks)
    staying = workers(f"{HANDLERS}:record_async", *common)
    wait_until(settled(settings, "handlers", "conc", 3), 60, lambda: staying.stderr)
    staying_pid = staying.proc.pid
    wait_until(lambda: {p for p, *_ in handled(tmp_path)} >= set(clients(settings).values()), 60)

    assert leaving.stop() == 0, leaving.stderr  # mid-stream: the producer goes on
    # Released, not expired: the staying member owns every partition well inside the TTL.
    handover = wait_until(settled(settings, "handlers", "conc", 1), 20)
    assert handover < 10
    assert set(clients(settings).values()) == {staying_pid}

    stop_streaming([producer])
    produced = set(_acked([acks]))

    def places() -> Counter[tuple[int, int]]:
        return Counter((p, o) for _, p, o, _ in handled(tmp_path))

    wait_until(lambda: set(places()) >= produced, 60)
    assert staying.stop() == 0, staying.stderr
    assert set(places()) == produced
    assert [place for place, n in places().items() if n > 1] == []  # none handled twice
    logged = log_rows(settings, "handlers")
    assert len(logged) == len(produced)
    assert {(state, attempts) for *_, state, attempts in logged} == {("done", 1)}


def test_a_killed_process_is_restarted_and_the_group_recovers(
    settings: Settings, tmp_path: Path, workers: Callable[..., Worker]
) -> None:
    with closing(TopicAdmin(settings)) as admin:
        admin.create("readings", 4)
    supervisor = workers(
        f"{HANDLERS}:record", "--group", "handlers", "--topic", "readings",
        "--start", "earliest", "--processes", "2", "--lease-ttl", TTL, "--renew-every", RENEW,
    )  # fmt: skip
    wait_until(settled(settings, "handlers", "readings", 2), 60, lambda: supervisor.stderr)
    first = produce(settings, "readings", 40)
    wait_until(lambda: {b for *_, b in handled(tmp_path)} >= first, 60)
    victim = next(iter(clients(settings).values()))
    os.kill(victim, signal.SIGKILL)

    def replaced() -> bool:
        pids = set(clients(settings).values())
        return (
            victim not in pids and len(pids) == 2 and settled(settings, "handlers", "readings", 2)()
        )

    wait_until(replaced, 60, lambda: supervisor.stderr)
    assert "killed by signal 9" in supervisor.stderr
    second = produce(settings, "readings", 40, "n")
    wait_until(lambda: {b for *_, b in handled(tmp_path)} >= first | second, 60)
    assert supervisor.stop() == 0, supervisor.stderr
    # At least once: only what the killed process had in hand may come twice.
    counts = Counter(body for _, _, _, body in handled(tmp_path))
    assert set(counts) == first | second
    assert all(n <= 2 for n in counts.values())


# -- bad input ----------------------------------------------------------------------------


def _run_worker(settings: Settings, *args: str) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMS_")}
    env.update(EMS_DATABASE_URL=settings.database_url, EMS_REDIS_URL=settings.redis_url)
    command = ["worker", *args, "--group", "g", "--topic", "t"]
    # Up to five interpreters started one after the other, on a busy machine.
    result = forked.run("ems.cli", command, env=env, timeout=180)
    return result.returncode, result.stderr


@pytest.mark.parametrize(
    ("handler", "message"),
    [
        ("no_such_module:handle", "no module named 'no_such_module'"),
        (f"{HANDLERS}:missing", f"module '{HANDLERS}' has no attribute 'missing'"),
        (f"{HANDLERS}:NOT_CALLABLE", "is a int, not a function or other callable"),
        ("handlers.py", "a handler path is package.module:function"),
        (
            "tests.procs.worker_broken:handle",
            "raised RuntimeError: the configuration file is missing (at ",
        ),
    ],
)
@pytest.mark.parametrize("processes", ["1", "2"])
def test_a_bad_handler_is_a_clear_error(
    settings: Settings, handler: str, message: str, processes: str
) -> None:
    code, stderr = _run_worker(settings, handler, "--processes", processes)
    assert code == 2, stderr
    assert message in stderr
    assert "Traceback" not in stderr
    if processes == "2":  # not restarted: it would fail the same way
        assert stderr.count(" started: pid ") == 2
        assert "the supervisor gave up" in stderr


def test_a_process_that_keeps_crashing_at_start_is_given_up(settings: Settings) -> None:
    code, stderr = _run_worker(settings, "tests.procs.worker_crashing:handle", "--processes", "2")
    assert code == 1, stderr
    assert "failed 5 times in a row" in stderr
    assert "(last exit code 70); the supervisor gave up" in stderr
    assert "restarting in 2 s" in stderr  # the pauses grew
    assert "Traceback" not in stderr
