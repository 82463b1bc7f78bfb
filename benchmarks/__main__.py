"""`python -m benchmarks`: run the producer suite and print its report."""

from __future__ import annotations

import argparse
import sys

from benchmarks.harness import bench_config
from benchmarks.producer import run

DEFAULT_SERVER = "mysql+pymysql://root@127.0.0.1:3306"
DEFAULT_REDIS = "redis://127.0.0.1:6379/0"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument(
        "--seconds", type=float, default=5.0, help="timed wall time per measurement (default 5)"
    )
    parser.add_argument(
        "--server",
        default=DEFAULT_SERVER,
        help="MySQL server URL without a database; the suite uses "
        "ems_bench and ems_bench_kombu on it",
    )
    parser.add_argument("--redis-url", default=DEFAULT_REDIS)
    parser.add_argument(
        "--profile-sends",
        type=int,
        default=2000,
        help="ems sends to profile after the cases (default 2000)",
    )
    args = parser.parse_args(argv)
    cfg = bench_config(args.server, args.redis_url, args.seconds)
    return run(cfg, args.profile_sends)


if __name__ == "__main__":
    sys.exit(main())
