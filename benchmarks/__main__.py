"""`python -m benchmarks [SUITE ...]`: run benchmark suites and print their reports.

Every suite writes benchmarks/results/<suite>-latest.md. With no suite named, all run.
Afterwards the benchmark figures of docs/benchmarks.md are rendered again from the results
files (benchmarks/docs_figures.py).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks import (
    admin,
    aio,
    aio_drivers,
    assignor,
    cli,
    consumer,
    cost,
    docs_figures,
    faults,
    ha,
    memory,
    producer,
    producer_compiled,
    purge,
    purge_drop,
    scale,
    spark_stream,
    steal,
    tx,
)
from benchmarks import spark as spark_suite
from benchmarks.harness import BenchConfig, bench_config
from ems.config import Settings

RESULTS = Path(__file__).resolve().parent / "results"
DEFAULT_SERVER = "mysql+pymysql://root@127.0.0.1:3306"
DEFAULT_REDIS = "redis://127.0.0.1:6379/0"

#: Suite name -> runner(cfg, args) returning an exit status. Each suite module adds itself here.
SUITES: dict[str, Callable[[BenchConfig, argparse.Namespace], int]] = {
    "producer": lambda cfg, args: producer.run(cfg, args.profile_sends),
    "producer-compiled": producer_compiled.run,
    "assignor": assignor.run,
    "consumer": consumer.run,
    "spark": lambda cfg, args: spark_suite.run(cfg, args) or spark_stream.run(cfg, args),
    "spark-stream": spark_stream.run,
    "purge": purge.run,
    "purge-drop": purge_drop.run,
    "faults": faults.run,
    "ha": ha.run,
    "admin": admin.run,
    "aio": aio.run,
    "aio-drivers": aio_drivers.run,
    "scale": scale.run,
    "memory": memory.run,
    "tx": tx.run,
    "cli": cli.run,
    "cost": cost.run,
}


def positive_int(text: str) -> int:
    """An argparse type for counts: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument(
        "suites", nargs="*", metavar="SUITE", help=f"one of {', '.join(SUITES)} (default: all)"
    )
    parser.add_argument(
        "--seconds", type=float, default=5.0, help="timed wall time per measurement (default 5)"
    )
    parser.add_argument(
        "--server",
        default=DEFAULT_SERVER,
        help="MySQL server URL without a database; suites use ems_bench* databases on it",
    )
    parser.add_argument("--redis-url", default=DEFAULT_REDIS)
    parser.add_argument(
        "--profile-sends",
        type=int,
        default=2000,
        help="ems sends to profile after the producer cases (default 2000)",
    )
    parser.add_argument(
        "--consume-messages",
        type=positive_int,
        default=200_000,
        help="consumer suite: backlog to drain (default 200,000, ~10 s for ems)",
    )
    parser.add_argument(
        "--aio-consume-messages",
        type=positive_int,
        default=200_000,
        help="aio suite: backlog the sync and the aio consumer groups each drain (default 200,000)",
    )
    parser.add_argument(
        "--soak-seconds",
        type=float,
        default=120.0,
        help="consumer suite: memory soak at 1,000 msg/s whose RSS trend is judged, after "
        "the warm-up (default 120; 600 for the 10-minute soak)",
    )
    parser.add_argument(
        "--soak-warmup",
        type=float,
        default=60.0,
        help="consumer suite: seconds of the same paced stream before the soak, left out "
        "of its slope (default 60)",
    )
    parser.add_argument(
        "--spark-rows",
        type=positive_int,
        default=2_000_000,
        help="consumption-log rows the spark suite compacts (default 2,000,000)",
    )
    parser.add_argument(
        "--spark-rounds",
        type=positive_int,
        default=3,
        help="spark suite: end-to-end compactions by each side (default 3; medians reported)",
    )
    parser.add_argument(
        "--spark-stream-messages",
        type=positive_int,
        default=1_000_000,
        help="spark and spark-stream suites: backlog over 16 partitions the ems source "
        "and the SDK consumer each drain, and rows the sink writes (default 1,000,000)",
    )
    parser.add_argument(
        "--spark-stream-rate",
        type=positive_int,
        default=1_000,
        help="spark and spark-stream suites: paced messages per second of the latency "
        "run (default 1,000)",
    )
    parser.add_argument(
        "--purge-rows",
        type=positive_int,
        default=1_000_000,
        help="purge and purge-drop suites: expired messages to purge while publishing "
        "(default 1,000,000; purge-drop seeds this many per old segment)",
    )
    parser.add_argument(
        "--purge-idle-seconds",
        type=float,
        default=20.0,
        help="purge suite: idle publishing measured before the purge (default 20)",
    )
    parser.add_argument(
        "--purge-chunk-rows",
        type=positive_int,
        default=Settings.purge_chunk_rows,
        help=f"purge suite: rows per DELETE (default {Settings.purge_chunk_rows:,} as the "
        "job's; at most 10,000)",
    )
    parser.add_argument(
        "--purge-pause",
        type=float,
        default=Settings.purge_pause,
        help="purge suite: rest after each transaction, as a multiple of the work "
        f"(default {Settings.purge_pause:g} as the job's)",
    )
    parser.add_argument(
        "--fault-seconds",
        type=float,
        default=60.0,
        help="faults suite: streaming time per scenario (default 60)",
    )
    parser.add_argument(
        "--fault-every",
        type=float,
        default=10.0,
        help="faults suite: seconds of health before each fault (default 10)",
    )
    parser.add_argument(
        "--scenarios",
        default="",
        help="faults suite: the scenarios to run, by letter (e.g. 'ace'; default all)",
    )
    parser.add_argument(
        "--admin-requests",
        type=positive_int,
        default=30,
        help="admin suite: requests timed per page (default 30)",
    )
    parser.add_argument(
        "--scale-rows",
        type=positive_int,
        default=10_000_000,
        help="scale suite: messages generated in the large topic (default 10,000,000)",
    )
    parser.add_argument(
        "--memory-rows",
        type=positive_int,
        default=1_000_000,
        help="memory suite: messages of 256 bytes one member drains (default 1,000,000)",
    )
    parser.add_argument(
        "--tx-rounds",
        type=positive_int,
        default=3,
        help="tx suite: rounds of every workload, the variants' order alternating (default 3)",
    )
    parser.add_argument(
        "--tx-backlog",
        type=positive_int,
        default=100_000,
        help="tx suite: committed outbox rows the relay moves per round (default 100,000)",
    )
    parser.add_argument(
        "--tx-latency-messages",
        type=positive_int,
        default=150,
        help="tx suite: paced messages per latency run, at 50/s (default 150)",
    )
    parser.add_argument(
        "--cli-runs",
        type=positive_int,
        default=30,
        help="cli suite: fresh interpreters per command, in rounds (default 30)",
    )
    parser.add_argument(
        "--tx-consume-backlog",
        type=positive_int,
        default=60_000,
        help="tx suite: backlog each consuming group drains, per variant and round "
        "(default 60,000: about two minutes for the section, the server let settle "
        "before each run)",
    )
    args = parser.parse_args(argv)
    unknown = [name for name in args.suites if name not in SUITES]
    if unknown:
        parser.error(f"unknown suite {', '.join(unknown)}; choose from {', '.join(SUITES)}")
    cfg = bench_config(args.server, args.redis_url, args.seconds)
    status = 0
    for name in args.suites or list(SUITES):
        started, before = time.time(), steal.read()
        status = max(status, SUITES[name](cfg, args))
        steal.mark(RESULTS.glob("*-latest.md"), started, before)
    if docs_figures.update():
        page = docs_figures.PAGE.relative_to(docs_figures.ROOT)
        print(f"rendered the benchmark figures in {page} from benchmarks/results")
    return status


if __name__ == "__main__":
    sys.exit(main())
