"""Consumer-group lag report over a sliding window of offset snapshots.

Per group, topic and partition: high watermark, committed offset, lag in messages, lag age
(age of the oldest unconsumed message), consumption and production rates over the window,
and a Burrow-style status (see spark.transforms.lag). Written to lag_report (rows of one
lag_report_run, published when the run is marked done), optionally to Parquet or CSV, and
as one PNG chart of lag over time per group.

Snapshots come from `ems offsets snapshot` (run it every 30-60 s); the report never
counts rows of the message table.

    spark-submit --jars /usr/share/java/mariadb-java-client.jar \\
        spark/jobs/lag_report.py --window 15m --output var/lag --chart-dir var/lag
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

if __name__ == "__main__" and not __package__:
    # Run as a script (spark-submit): the repository root onto sys.path first.
    import _bootstrap  # type: ignore[import-not-found]  # noqa: F401

from spark import runtime
from spark.lag.request import DEFAULT_KEEP, LagRequest
from spark.lag.runner import describe, run
from spark.options import parse_duration, parse_timestamp


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="lag_report.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--window", default="15m", help="sliding window, e.g. 15m (default 15m)")
    p.add_argument("--as-of", help="end of the window, ISO 8601 UTC (default: now)")
    p.add_argument("--group", action="append", default=[], help="only this group (repeatable)")
    p.add_argument("--topic", help="only groups of this topic")
    p.add_argument("--output", help="also write the report here")
    p.add_argument("--format", choices=("parquet", "csv"), default="parquet")
    p.add_argument("--chart-dir", help="write lag-<group>@<topic>.png charts here")
    p.add_argument("--keep-reports", type=int, default=DEFAULT_KEEP)
    p.add_argument("--master", help="Spark master when not given to spark-submit")
    p.add_argument("--read-partitions", type=int, help="JDBC read partitions")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="Spark setting")
    return p


def request_from_args(args: argparse.Namespace) -> LagRequest:
    return LagRequest(
        window=parse_duration(args.window),
        as_of=parse_timestamp(args.as_of) if args.as_of else None,
        groups=tuple(args.group),
        topic=args.topic,
        output=args.output,
        output_format=args.format,
        chart_dir=args.chart_dir,
        keep_reports=args.keep_reports,
        read_partitions=args.read_partitions,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return runtime.main_for(args, run, request_from_args, describe)


if __name__ == "__main__":
    sys.exit(main())
