"""`ems scheduler` and `ems cleanup`: the cleanup jobs, on intervals or once (cron)."""

from __future__ import annotations

import logging
import math
import signal
from contextlib import closing
from dataclasses import asdict

import click

from ems.cli.common import echo_json, json_option, settings, table
from ems.cli.params import seconds
from ems.config import MAX_SECONDS
from ems.exceptions import InvalidPolicy
from ems.exit_codes import EXIT_FAILURE
from ems.maintenance.jobs import DESTRUCTIVE, JOBS, job, run_job
from ems.maintenance.jobs import dry_run as preview
from ems.maintenance.scheduler import DEFAULT_INTERVALS, Scheduler, SchedulerConfig, holder_id
from ems.signals import relayed
from ems.store import Store
from ems.values.schedule import JobRunInfo

_RUN_HEADERS = ("job", "interval s", "last run", "status", "runner", "seconds", "counts / error")


def _intervals(pairs: tuple[str, ...]) -> dict[str, float]:
    intervals = dict(DEFAULT_INTERVALS)
    for pair in pairs:
        name, _, seconds = pair.partition("=")
        try:
            value = float(seconds)
        except ValueError:
            value = math.nan
        if not 0 < value <= MAX_SECONDS:  # nan compares false: refused too
            raise InvalidPolicy(
                f"--interval takes JOB=SECONDS with 0 < SECONDS <= {MAX_SECONDS:g}, not {pair!r}"
            )
        intervals[name] = value
    return intervals


@click.command()
@click.option("--metrics-port", type=click.IntRange(0, 65535), help="Serve /metrics here.")
@click.option(
    "--lag-metrics",
    is_flag=True,
    help="Also serve every group's lag on /metrics, as `ems exporter` does (needs --metrics-port).",
)
@click.option("--once", is_flag=True, help="Run every job once (taking the lease), then exit.")
@click.option(
    "--interval",
    "intervals",
    multiple=True,
    metavar="JOB=SECONDS",
    help="Run JOB every SECONDS (repeatable). Defaults: "
    + ", ".join(f"{k}={v:g}" for k, v in DEFAULT_INTERVALS.items()),
)
@click.option("--lease-ttl", type=seconds(), default=15.0, show_default=True)
@click.option("--renew-every", type=seconds(), default=3.0, show_default=True)
def scheduler(
    metrics_port: int | None,
    lag_metrics: bool,
    once: bool,
    intervals: tuple[str, ...],
    lease_ttl: float,
    renew_every: float,
) -> None:
    """Run the cleanup jobs on intervals. Start one per replica: a database lease makes
    exactly one of them active, and a standby takes over when it lapses. SIGTERM finishes
    the current chunk, releases the lease and exits."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    # APScheduler logs every execution at INFO; the jobs log their own counts.
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    if lag_metrics and metrics_port is None:
        raise click.UsageError("--lag-metrics needs --metrics-port")
    config = SchedulerConfig(
        intervals=_intervals(intervals), lease_ttl=lease_ttl, renew_every=renew_every
    )
    with closing(Store(settings())) as store:
        runner = Scheduler(store, settings(), config)
        if metrics_port is not None:
            _serve_metrics(store, metrics_port, lag_metrics)
        if once:
            failed = runner.run_once()
            if failed:
                click.echo(f"error: jobs not run to their end: {', '.join(failed)}", err=True)
                raise SystemExit(EXIT_FAILURE)
            return

        click.echo(f"scheduler {runner.holder} started", err=True)
        with relayed((signal.SIGTERM, signal.SIGINT), lambda signum: runner.stop.set()):
            runner.run_forever()


def _serve_metrics(store: Store, port: int, lag_metrics: bool) -> None:
    from ems.metrics import REGISTRY, serve

    if lag_metrics:
        from ems.ops.lag_exporter import lag_collector

        REGISTRY.register(lag_collector(store, settings().exporter_cache))
    addr = settings().metrics_addr
    click.echo(f"metrics on port {serve(port, addr)} ({addr})", err=True)


@click.group()
def cleanup() -> None:
    """Run cleanup jobs once (for system cron) and list their runs."""


@cleanup.command(name="run")
@click.argument("name", metavar="JOB")
@click.option("--yes", "-y", is_flag=True, help="Do not ask before a job that deletes rows.")
@click.option(
    "--dry-run",
    is_flag=True,
    help="Count what purge-retention or delete-consumed would delete; delete nothing.",
)
@json_option
def run(name: str, yes: bool, dry_run: bool, as_json: bool) -> None:
    """Run cleanup JOB once, under the job's lock: refused (exit 1) while another run of
    it, by a scheduler or another cron, is in progress."""
    job(name)  # UnknownJob before anything else
    if dry_run:
        _dry_run(name, as_json)
        return
    if name in DESTRUCTIVE and not yes:
        click.confirm(f"job {name} deletes rows. Run it?", abort=True)
    with closing(Store(settings())) as store:
        result = run_job(store, settings(), name, holder=f"cli:{holder_id()}")
    if as_json:
        echo_json(asdict(result))
        return
    click.echo(f"{name}: {_counts(result.counts)} ({result.seconds:.2f}s, run {result.run_id})")


def _dry_run(name: str, as_json: bool) -> None:
    with closing(Store(settings())) as store:
        counts = preview(store, settings(), name)
    if as_json:
        echo_json({"job": name, "dry_run": True, "counts": counts})
    else:
        click.echo(f"{name} (dry run, nothing deleted): {_counts(counts)}")


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in counts.items())


@cleanup.command(name="list")
@json_option
def list_jobs(as_json: bool) -> None:
    """The jobs, their default intervals and their last runs."""
    with closing(Store(settings())) as store:
        last = store.scheduler.last_runs(list(JOBS))
    if as_json:
        echo_json(
            [
                {
                    "job": name,
                    "interval_seconds": DEFAULT_INTERVALS.get(name),
                    "last_run": asdict(last[name]) if name in last else None,
                }
                for name in JOBS
            ]
        )
        return
    click.echo(table(_RUN_HEADERS, [_row(name, last.get(name)) for name in JOBS]))


def _row(name: str, run: JobRunInfo | None) -> list[object]:
    interval = DEFAULT_INTERVALS.get(name)
    if run is None:
        return [name, interval, None, None, None, None, None]
    seconds = (
        (run.finished_at - run.started_at).total_seconds() if run.finished_at is not None else None
    )
    detail = run.error or ", ".join(f"{k}={v}" for k, v in (run.counts or {}).items())
    return [
        name,
        interval,
        run.started_at,
        run.status,
        run.runner,
        None if seconds is None else f"{seconds:.2f}",
        detail,
    ]
