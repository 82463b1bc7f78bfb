"""`ems spark`: the Spark jobs (compaction, lag report, stream) on local[*] or any master.

The jobs live in the spark package (spark/compaction/, spark/lag/); they are imported when
a command runs, so the rest of the CLI works without pyspark installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from ems.cli.common import echo_json, json_option, settings, table
from ems.cli.params import MAX_OFFSET

if TYPE_CHECKING:
    from ems.stream_queries import StreamQueryDescription

master_option = click.option(
    "--master",
    default=None,
    help="Spark master: local[*] (default), local[N], spark://host:7077, yarn.",
)
group_option = click.option(
    "--group", "groups", multiple=True, help="Only this consumer group (repeatable)."
)
topic_option = click.option("--topic", default=None, help="Only groups of this topic.")
conf_option = click.option(
    "--conf",
    "confs",
    multiple=True,
    metavar="KEY=VALUE",
    help="Extra Spark configuration (repeatable), as spark-submit --conf.",
)
partitions_option = click.option(
    "--read-partitions",
    type=click.IntRange(1, 10_000),
    default=None,
    help="Parallel JDBC reads (ranges of the primary key).",
)


@click.group()
def spark() -> None:
    """Spark jobs over the consumption logs and offsets (needs ems[spark], Java 17 and the
    JDBC driver jar: EMS_JDBC_JAR, default /usr/share/java/mariadb-java-client.jar)."""


@spark.command()
@click.option("--older-than", default=None, help="Compact rows older than this, e.g. 7d.")
@click.option("--cutoff", default=None, help="Or an absolute cutoff (ISO 8601, UTC).")
@click.option(
    "--archive-root",
    default="var/archive",
    show_default=True,
    help="Parquet archive root (path or hdfs://, s3a:// URI).",
)
@group_option
@topic_option
@master_option
@partitions_option
@click.option("--fetchsize", type=click.IntRange(100, 1_000_000), default=10_000)
@click.option(
    "--delete-workers",
    type=click.IntRange(1, 8),
    default=None,
    help="Parallel DELETE connections (default: Spark's default parallelism).",
)
@click.option(
    "--every",
    default=None,
    help="Stay up and compact at this interval (e.g. 1h) in one Spark session; "
    "needs --older-than. SIGTERM stops it after the current run.",
)
@conf_option
@click.option("--crash-after", hidden=True, default=None)
def compact(
    older_than: str | None,
    cutoff: str | None,
    archive_root: str,
    groups: tuple[str, ...],
    topic: str | None,
    master: str | None,
    read_partitions: int | None,
    fetchsize: int,
    delete_workers: int | None,
    every: str | None,
    confs: tuple[str, ...],
    crash_after: str | None,
) -> None:
    """Archive final consumption-log rows to Parquet, summarize them, delete them."""
    from spark.compaction import runner as job
    from spark.compaction.request import CompactRequest
    from spark.options import parse_conf, parse_crash_point, parse_duration, parse_timestamp

    request = CompactRequest(
        archive_root=archive_root,
        cutoff=parse_timestamp(cutoff) if cutoff else None,
        older_than=parse_duration(older_than) if older_than else None,
        groups=groups,
        topic=topic,
        read_partitions=read_partitions,
        fetchsize=fetchsize,
        delete_workers=delete_workers,
        crash_after=parse_crash_point(crash_after),
    )
    if every is None:
        for outcome in job.run(settings(), request, master=master, conf=parse_conf(confs)):
            click.echo(job.describe(outcome))
        return
    runs = job.serve_until_stopped(
        settings(),
        request,
        parse_duration(every),
        master=master,
        conf=parse_conf(confs),
        echo=click.echo,
        echo_error=lambda line: click.echo(line, err=True),
    )
    click.echo(f"stopped after {runs} runs")


@spark.command(name="lag-report")
@click.option("--window", default="15m", show_default=True, help="Sliding window.")
@click.option("--as-of", default=None, help="End of the window (ISO 8601, UTC; default now).")
@group_option
@topic_option
@click.option("--output", default=None, help="Also write the report to this path.")
@click.option("--format", "output_format", type=click.Choice(["parquet", "csv"]), default="parquet")
@click.option("--chart-dir", default=None, help="Write one PNG of lag over time per group.")
@click.option("--keep-reports", type=click.IntRange(1, MAX_OFFSET), default=500, show_default=True)
@master_option
@partitions_option
@conf_option
def lag_report(
    window: str,
    as_of: str | None,
    groups: tuple[str, ...],
    topic: str | None,
    output: str | None,
    output_format: str,
    chart_dir: str | None,
    keep_reports: int,
    master: str | None,
    read_partitions: int | None,
    confs: tuple[str, ...],
) -> None:
    """Lag, lag age, rates and Burrow-style status per group and partition."""
    from spark.lag import runner as job
    from spark.lag.request import LagRequest
    from spark.options import parse_conf, parse_duration, parse_timestamp

    request = LagRequest(
        window=parse_duration(window),
        as_of=parse_timestamp(as_of) if as_of else None,
        groups=groups,
        topic=topic,
        output=output,
        output_format="csv" if output_format == "csv" else "parquet",
        chart_dir=chart_dir,
        keep_reports=keep_reports,
        read_partitions=read_partitions,
    )
    outcome = job.run(settings(), request, master=master, conf=parse_conf(confs))
    click.echo("\n".join(job.describe(outcome)))


@spark.command()
@click.option("--topic", default="iot.readings", show_default=True, help="The readings topic.")
@click.option("--checkpoint", required=True, help="The query's checkpoint location.")
@click.option("--parquet", default=None, help="Also write each batch's windows under this root.")
@click.option("--window", default="1m", show_default=True, help="Window length.")
@click.option("--watermark", default="2m", show_default=True, help="Lateness allowed.")
@click.option(
    "--max-offsets",
    type=click.IntRange(1, MAX_OFFSET),
    default=10_000,
    show_default=True,
    help="Offsets per micro-batch (maxOffsetsPerTrigger).",
)
@click.option("--trigger", default="5s", show_default=True, help="Micro-batch interval.")
@click.option("--available-now", is_flag=True, help="Read what the topic holds now, then stop.")
@click.option(
    "--query-name",
    default="reading-windows",
    show_default=True,
    help="The name `ems spark queries` shows the query's position under.",
)
@master_option
@conf_option
def stream(
    topic: str,
    checkpoint: str,
    parquet: str | None,
    window: str,
    watermark: str,
    max_offsets: int,
    trigger: str,
    available_now: bool,
    query_name: str,
    master: str | None,
    confs: tuple[str, ...],
) -> None:
    """Per-project windows of the demo's readings, from a streaming query over the topic,
    to the reading_window table and Parquet. Runs until SIGTERM or Ctrl-C (or, with
    --available-now, until it has read what was there); restarts go on from the
    checkpoint."""
    from spark.options import parse_conf, parse_duration
    from spark.stream import runner as job
    from spark.stream.request import StreamRequest

    request = StreamRequest(
        topic=topic,
        checkpoint=checkpoint,
        parquet=parquet,
        window=parse_duration(window),
        watermark=parse_duration(watermark),
        max_offsets=max_offsets,
        trigger=parse_duration(trigger),
        available_now=available_now,
        query_name=query_name,
    )
    outcome = job.run(settings(), request, master=master, conf=parse_conf(confs))
    click.echo("\n".join(job.describe(outcome)))


class _QueriesGroup(click.Group):
    """`ems spark queries [NAME]` shows queries (the `show` subcommand, implied when no
    subcommand is named first), `ems spark queries drop NAME` drops one."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        first = next((a for a in args if not a.startswith("-")), None)
        if first not in self.commands and not {"--help", "-h"} & set(args[:1]):
            args = ["show", *args]
        return super().parse_args(ctx, args)


@spark.group(cls=_QueriesGroup)
def queries() -> None:
    """Streaming queries over ems topics whose ems source was given the ems.query.name
    option: their positions (`ems spark queries [NAME]`), and dropping one."""


@queries.command("show")
@click.argument("name", required=False)
@json_option
def show_queries(name: str | None, as_json: bool) -> None:
    """Streaming queries over ems topics and, per partition, the offset each committed,
    the high watermark, the lag and the offsets skipped under failOnDataLoss=false, as
    `ems group describe` shows a group's. Only queries whose ems source was given the
    ems.query.name option record a position."""
    from contextlib import closing
    from dataclasses import asdict

    from ems.stream_queries import StreamQueries

    with closing(StreamQueries(settings())) as admin:
        described = admin.describe(name)
    if as_json:
        echo_json([asdict(d) for d in described])
        return
    if not described:
        click.echo("no streaming query has recorded a position (see ems.query.name)")
        return
    click.echo("\n\n".join(_query_report(d) for d in described))


@queries.command("drop")
@click.argument("name")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@json_option
def drop_query(name: str, yes: bool, as_json: bool) -> None:
    """Forget the recorded positions of streaming query NAME (one that will not run
    again). Its checkpoint is untouched: a query still running records them again."""
    from contextlib import closing

    from ems.stream_queries import StreamQueries

    with closing(StreamQueries(settings())) as admin:
        if not yes:
            click.confirm(
                f"Drop the recorded positions of streaming query {name}?", abort=True, err=True
            )
        dropped = admin.drop(name)
    if as_json:
        echo_json({"query": name, "partitions": dropped})
        return
    click.echo(f"dropped streaming query {name}: {dropped} partition positions")


def _query_report(d: StreamQueryDescription) -> str:
    at = d.committed_at.isoformat(sep=" ", timespec="seconds")
    rows: list[list[object]] = [
        [p.topic, p.partition, p.committed_offset, p.high_watermark, p.lag, p.skipped_offsets]
        for p in d.partitions
    ]
    rows.append(["total", "", "", "", d.lag, d.skipped_offsets])
    head = f"streaming query {d.query}: last committed {at}"
    headers = ["topic", "partition", "committed", "high", "lag", "skipped"]
    return head + "\n" + table(headers, rows)
