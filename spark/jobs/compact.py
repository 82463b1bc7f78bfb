"""Compaction of the consumption log (topic_group_log).

Rows in a final state (done, dead) last updated before a cutoff are archived to Parquet
under <archive root>/date=YYYY-MM-DD/group_id=N/run_id=R/, summarized per (group, topic,
hour) into log_summary, then deleted from MySQL in id-range chunks of at most 10,000 rows.

Crash-safe and idempotent. A run records its cutoff, scope and id range before reading, and
each step commits with the run's new status: archived (Parquet committed and published;
only now may rows be deleted), summarized (summaries, computed from the archive while the
chunks are deleted, upserted), done (every chunk deleted; each chunk's DELETE commits with
its count). A rerun first finishes unfinished runs from their last completed step,
re-reading nothing it already archived; deletes only remove rows the archive holds. Rows in
start or retry are never read or touched.

    spark-submit --jars /usr/share/java/mariadb-java-client.jar \\
        spark/jobs/compact.py --older-than 7d --archive-root /var/lib/ems/archive

With --every (e.g. 1h) the job stays up and compacts at that interval in one Spark session,
so the JVM compiles the job's code once instead of on every run, as a cron-started job must.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence

if __name__ == "__main__" and not __package__:
    # Run as a script (spark-submit): the repository root onto sys.path first.
    import _bootstrap  # type: ignore[import-not-found]  # noqa: F401

from ems.config import Settings
from spark import runtime
from spark.compaction.request import DEFAULT_ARCHIVE_ROOT, CompactRequest
from spark.compaction.runner import describe, run, serve_until_stopped
from spark.options import parse_crash_point, parse_duration, parse_timestamp


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="compact.py", description=__doc__.split("\n\n")[0])
    when = p.add_mutually_exclusive_group(required=True)
    when.add_argument("--older-than", help="age cutoff, e.g. 7d (rounded down to the hour)")
    when.add_argument("--cutoff", help="absolute cutoff, ISO 8601 (UTC when naive)")
    p.add_argument("--archive-root", default=DEFAULT_ARCHIVE_ROOT, help="Parquet archive root")
    p.add_argument("--group", action="append", default=[], help="only this group (repeatable)")
    p.add_argument("--topic", help="only groups of this topic")
    p.add_argument("--master", help="Spark master when not given to spark-submit")
    p.add_argument("--read-partitions", type=int, help="JDBC read partitions")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="Spark setting")
    p.add_argument("--fetchsize", type=int, default=10_000)
    p.add_argument("--delete-workers", type=int, help="parallel DELETE connections")
    p.add_argument("--every", help="stay up and compact at this interval, e.g. 1h")
    p.add_argument("--crash-after", help=argparse.SUPPRESS)
    return p


def request_from_args(args: argparse.Namespace) -> CompactRequest:
    return CompactRequest(
        archive_root=args.archive_root,
        cutoff=parse_timestamp(args.cutoff) if args.cutoff else None,
        older_than=parse_duration(args.older_than) if args.older_than else None,
        groups=tuple(args.group),
        topic=args.topic,
        read_partitions=args.read_partitions,
        fetchsize=args.fetchsize,
        delete_workers=args.delete_workers,
        crash_after=parse_crash_point(args.crash_after),
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if not args.every:
        return runtime.main_for(
            args, run, request_from_args, lambda outcomes: map(describe, outcomes)
        )

    def forever(
        settings: Settings, request: CompactRequest, *, master: str | None, conf: Mapping[str, str]
    ) -> int:
        every = parse_duration(args.every)
        return serve_until_stopped(settings, request, every, master=master, conf=conf)

    return runtime.main_for(
        args, forever, request_from_args, lambda runs: [f"stopped after {runs} runs"]
    )


if __name__ == "__main__":
    sys.exit(main())
