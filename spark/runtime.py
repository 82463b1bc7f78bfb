"""What both jobs share around Spark: preflight, the session, error translation, crashes.

pyspark and py4j are imported only where Spark is used: the preflight runs first and says
how to install what is missing.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, nullcontext, suppress
from typing import TYPE_CHECKING, TypeVar

from ems.config import Settings
from ems.exceptions import EmsError, SparkJobFailed
from ems.exit_codes import exit_code_for
from spark.options import parse_conf
from spark.preflight import check_environment
from spark.session import get_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Outcome = TypeVar("Outcome")


@contextmanager
def spark_errors() -> Iterator[None]:
    """Spark and py4j failures become SparkJobFailed; ems errors pass through."""
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    try:
        yield
    except EmsError:
        raise
    except (PySparkException, Py4JError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SparkJobFailed(f"Spark job failed: {first}") from exc


@contextmanager
def session(
    app_name: str,
    settings: Settings,
    *,
    master: str | None,
    conf: Mapping[str, str] | None = None,
    shield_jvm: bool = False,
) -> Iterator[SparkSession]:
    """A session for one job run, stopped afterwards (only if this run started it).
    `shield_jvm`: a JVM started here ignores SIGTERM (see sigterm_ignored)."""
    from pyspark.sql import SparkSession

    jar = check_environment(settings.jdbc_jar)
    existing = SparkSession.getActiveSession()
    with spark_errors(), sigterm_ignored() if shield_jvm else nullcontext():
        spark = get_session(app_name, jar, master=master, conf=conf)
        spark.sparkContext.setLogLevel("WARN")
    try:
        yield spark
    finally:
        if existing is None:
            stop_quietly(spark)


@contextmanager
def sigterm_ignored() -> Iterator[None]:
    """SIGTERM ignored for the block. A JVM started meanwhile inherits that and keeps
    ignoring it (HotSpot leaves an ignored SIGTERM alone), so a SIGTERM to the whole process
    group (systemd, a shell's kill) reaches only Python, which stops after its current run;
    the JVM still ends with Python. A SIGTERM that arrives during the block is lost."""
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def stop_quietly(spark: SparkSession) -> None:
    """Stop the session; nothing to do if its JVM has already gone (killed)."""
    from py4j.protocol import Py4JError

    if alive(spark):
        with suppress(Py4JError):  # it went while stopping
            spark.stop()


def alive(spark: SparkSession) -> bool:
    """Whether the session's JVM still answers."""
    from py4j.protocol import Py4JError

    try:
        spark.sparkContext._jsc.sc().isStopped()
    except (Py4JError, AttributeError):
        return False
    return True


def crash_now() -> None:
    """Die at once, as a killed job would: no cleanup, no finally blocks."""
    os.kill(os.getpid(), signal.SIGKILL)


@contextmanager
def stop_on_sigterm() -> Iterator[threading.Event]:
    """An event that SIGTERM sets, for a job that stays up: it stops after its current run
    (Ctrl-C still interrupts at once; an interrupted run is finished by the next)."""
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    try:
        yield stop
    finally:
        signal.signal(signal.SIGTERM, previous)


def main_for(
    args: argparse.Namespace,
    run: Callable[..., Outcome],
    make_request: Callable[[argparse.Namespace], object],
    report: Callable[[Outcome], Iterable[str]],
) -> int:
    """A job's spark-submit entry point: build its request from the arguments, run it with
    settings from the environment and print its report; or print the error and return the
    CLI's exit code for it."""
    try:
        request = make_request(args)
        outcome = run(Settings.from_env(), request, master=args.master, conf=parse_conf(args.conf))
    except EmsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exit_code_for(exc)
    for line in report(outcome):
        print(line)
    return 0
