"""The `ems worker` commands of the docs, run as printed: docs/worker.md's examples (a
plain and an `async def` handler, the error line of a handler that is not there) and the
container of the Kubernetes Deployment in docs/operations.md."""

from __future__ import annotations

import json
import os
import random
import re
import shlex
import signal
import subprocess
from pathlib import Path

import pytest
import yaml

from ems import Producer, Record
from ems.config import Settings
from ems.demo.readings import readings
from tests import forked
from tests.e2e.test_worker import log_rows, settled, wait_until

pytestmark = pytest.mark.slow
DOCS = Path(__file__).resolve().parents[2] / "docs"


def _env(settings: Settings, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMS_")}
    return {**env, "EMS_DATABASE_URL": settings.database_url,
            "EMS_REDIS_URL": settings.redis_url, **extra}  # fmt: skip


def _blocks(page: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", (DOCS / page).read_text(), re.M | re.S)


def _commands() -> list[list[str]]:
    [block] = [b for b in _blocks("worker.md", "sh") if "ems worker" in b]
    return [shlex.split(line)[1:] for line in block.splitlines() if line.startswith("ems ")]


def _send(settings: Settings, count: int, start: int) -> None:
    bodies = [json.dumps({"project_id": i % 5, "t": i}) for i in range(start, start + count)]
    with Producer(settings) as producer:
        producer.send_batch("iot.readings", [Record(b, key=b[:16]) for b in bodies])


def test_the_worker_pages_commands_run_as_printed(settings: Settings, tmp_path: Path) -> None:
    create, *workers = _commands()
    env = _env(settings)
    assert forked.run("ems.cli", create, env=env).returncode == 0
    sent = 0
    for args in workers:
        _send(settings, 30, sent)
        sent += 30
        proc = forked.spawn("ems.cli", args, env=env, stdout=forked.PIPE)
        try:
            assert proc.stdout is not None
            lines = [json.loads(proc.stdout.readline()) for _ in range(30)]
            assert {line["t"] for line in lines} == set(range(sent - 30, sent))
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=60) == 0
        finally:
            _stop(proc)


def _stop(proc: forked.Child) -> None:
    """A worker a failed test left running is stopped here, not left to the next test
    (whose table reset it would outlive): SIGTERM, so it stops its member processes too,
    then SIGKILL if it has not stopped."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_the_worker_pages_error_line_is_what_the_command_prints(settings: Settings) -> None:
    text = (DOCS / "worker.md").read_text()
    [(command, printed)] = re.findall(r"^\$ ems (worker .*)\n(error: .*)$", text, re.M)
    result = forked.run("ems.cli", shlex.split(command), env=_env(settings))
    assert result.returncode == 2
    assert result.stderr == printed + "\n"


def test_the_deployments_container_runs_as_printed(settings: Settings) -> None:
    [block] = [b for b in _blocks("operations.md", "yaml") if "kind: Deployment" in b]
    [container] = yaml.safe_load(block)["spec"]["template"]["spec"]["containers"]
    variables = {v["name"]: v["value"] for v in container["env"]}
    assert variables["EMS_WORKER_METRICS_PORT"] == "9100"
    variables["EMS_WORKER_METRICS_PORT"] = "0"  # 9100 may be taken on the test machine
    env = _env(settings, **variables)
    created = forked.run("ems.cli", ["topic", "create", "readings", "--partitions", "4"], env=env)
    assert created.returncode == 0, created.stderr
    with Producer(settings) as producer:
        producer.send_batch("readings", readings(random.Random(7), 5, 50))
    # The group starts at the latest offset: only what is sent once it has joined counts.
    proc = forked.spawn("ems.cli", container["args"], env=env)
    try:
        wait_until(settled(settings, "handlers", "readings", 1), 60)
        with Producer(settings) as producer:
            producer.send_batch("readings", readings(random.Random(8), 5, 50))
        # A log row is written at the fetch ("start") and settled at the ack ("done").
        wait_until(lambda: _states(settings).count(("done", 1)) == 50, 60)
        assert sorted(_states(settings)) == [("done", 1)] * 50
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        _stop(proc)


def _states(settings: Settings) -> list[tuple[str, int]]:
    return [(s, a) for *_, s, a in log_rows(settings, "handlers")]
