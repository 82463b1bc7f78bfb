"""Checks that run before any Spark work: a missing Java or JDBC jar fails fast and clearly.

Nothing here imports pyspark at module level, so the CLI can check without paying for it.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

from ems.exceptions import JdbcDriverMissing, SparkUnavailable

JDBC_INSTALL_HINT = "apt-get install libmariadb-java, or set EMS_JDBC_JAR to the driver jar"


def java_executable() -> str:
    """The java that Spark will start: $JAVA_HOME/bin/java, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = Path(home) / "bin" / "java"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
        raise SparkUnavailable(f"JAVA_HOME={home} has no bin/java; install Java 17 or fix it")
    found = shutil.which("java")
    if found is None:
        raise SparkUnavailable(
            "no Java runtime found: install Java 17 (apt-get install openjdk-17-jre-headless)"
        )
    return found


def check_jdbc_jar(path: str) -> str:
    jar = Path(path)
    if not jar.is_file():
        raise JdbcDriverMissing(f"JDBC driver jar {path} not found: {JDBC_INSTALL_HINT}")
    return str(jar.resolve())


def check_pyspark() -> None:
    if importlib.util.find_spec("pyspark") is None:
        raise SparkUnavailable("pyspark is not installed: pip install 'ems[spark]'")


def check_environment(jdbc_jar: str) -> str:
    """Raise SparkUnavailable / JdbcDriverMissing unless Spark can start; returns the jar."""
    check_pyspark()
    java_executable()
    return check_jdbc_jar(jdbc_jar)
