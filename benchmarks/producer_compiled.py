"""The producer suite on the compiled build: ems's publish path and the floors' writers
compiled by mypyc (benchmarks.compiled), timed as the interpreted suite is, side by side
with floors built alike. Writes benchmarks/results/producer-compiled-latest.md.

The suite runs in a process of its own started in the compiled tree, so that it and the
worker processes it starts import the compiled modules (benchmarks.producer names its page
by the build it finds)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from benchmarks import compiled
from benchmarks.harness import BenchConfig, server_url
from benchmarks.producer import log


def command(cfg: BenchConfig, profile_sends: int) -> list[str]:
    """The producer suite's command line, for the same servers and timings as this run."""
    return [
        sys.executable,
        "-m",
        "benchmarks",
        "producer",
        "--server",
        server_url(cfg),
        "--redis-url",
        cfg.settings.redis_url,
        "--seconds",
        f"{cfg.seconds:g}",
        "--profile-sends",
        str(profile_sends),
    ]


def run(cfg: BenchConfig, args: argparse.Namespace) -> int:
    log("compiling the publish path and the writers (a few minutes, once per run)")
    tree = compiled.shared()
    env = compiled.environment(tree, dict(os.environ))
    return subprocess.run(command(cfg, args.profile_sends), cwd=tree, env=env).returncode
