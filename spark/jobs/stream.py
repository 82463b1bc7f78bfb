"""The stream job: per-project windows of the demo's readings, with a watermark, from a
Structured Streaming query over an ems topic, to MySQL (reading_window) and Parquet.

    spark-submit --jars /usr/share/java/mariadb-java-client.jar spark/jobs/stream.py \\
        --checkpoint var/checkpoints/windows --parquet var/windows [--available-now]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

if __name__ == "__main__" and not __package__:
    # Run as a script (spark-submit): the repository root onto sys.path first.
    import _bootstrap  # type: ignore[import-not-found]  # noqa: F401

from spark import runtime
from spark.options import parse_duration
from spark.stream.request import StreamRequest
from spark.stream.runner import describe, run


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="stream.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--topic", default="iot.readings", help="the readings topic")
    p.add_argument("--checkpoint", required=True, help="the query's checkpoint location")
    p.add_argument("--parquet", help="also write each batch's windows under this root")
    p.add_argument("--window", default="1m", help="window length (default 1m)")
    p.add_argument("--watermark", default="2m", help="lateness allowed (default 2m)")
    p.add_argument("--max-offsets", type=int, default=10_000, help="offsets per micro-batch")
    p.add_argument("--trigger", default="5s", help="micro-batch interval (default 5s)")
    p.add_argument("--available-now", action="store_true", help="read what is there, then stop")
    p.add_argument("--master", help="Spark master when not given to spark-submit")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="Spark setting")
    return p


def request_from_args(args: argparse.Namespace) -> StreamRequest:
    return StreamRequest(
        topic=args.topic,
        checkpoint=args.checkpoint,
        parquet=args.parquet,
        window=parse_duration(args.window),
        watermark=parse_duration(args.watermark),
        max_offsets=args.max_offsets,
        trigger=parse_duration(args.trigger),
        available_now=args.available_now,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return runtime.main_for(args, run, request_from_args, describe)


if __name__ == "__main__":
    sys.exit(main())
