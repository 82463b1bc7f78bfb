"""`ems admin serve`: it refuses to start without a secret key or an admin account (exit
code 2 and what to do), and serves the console under a real gunicorn."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from click.testing import CliRunner, Result

from ems.cli.app import cli
from ems.config import Settings
from ems.ops.accounts import Accounts
from tests.admin.conftest import PASSWORD

ROOT = Path(__file__).resolve().parents[2]
SECRET = "k" * 48


def _serve(settings: Settings, *args: str) -> Result:
    return CliRunner().invoke(cli, ["admin", "serve", *args], obj=settings)


def test_no_secret_key_no_console(settings: Settings) -> None:
    with Accounts(settings) as accounts:
        accounts.add_user("ada", "admin", PASSWORD)
    for key in (None, "x" * 31):
        result = _serve(settings.with_(admin_secret_key=key))
        assert result.exit_code == 2, result.output
        assert "EMS_ADMIN_SECRET_KEY" in result.output
        assert "secrets.token_urlsafe" in result.output


def test_no_admin_no_console(settings: Settings) -> None:
    with Accounts(settings) as accounts:
        accounts.add_user("vera", "viewer", PASSWORD)
    result = _serve(settings.with_(admin_secret_key=SECRET))
    assert result.exit_code == 2, result.output
    assert "create one with: ems admin user add NAME --role admin" in result.output


def test_bad_options_are_refused(settings: Settings) -> None:
    for args in (
        ["--port", "0"],
        ["--port", "70000"],
        ["--workers", "0"],
        ["--threads", "0"],
        ["--forwarded-allow-ips", "not-an-address"],
    ):
        assert _serve(settings.with_(admin_secret_key=SECRET), *args).exit_code == 2


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _get(url: str) -> tuple[int, dict[str, object], dict[str, str]]:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status, json.load(answer), dict(answer.headers)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error), dict(error.headers)


def test_gunicorn_serves_the_console(settings: Settings, tmp_path: Path) -> None:
    with Accounts(settings) as accounts:
        accounts.add_user("ada", "admin", PASSWORD)
    port = _free_port()
    env = {
        **os.environ,
        "EMS_DATABASE_URL": settings.database_url,
        "EMS_REDIS_URL": settings.redis_url,
        "EMS_ADMIN_SECRET_KEY": SECRET,
    }
    log = (tmp_path / "serve.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "ems.cli", "admin", "serve", "--port", str(port), "--workers", "1"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            assert server.poll() is None, (tmp_path / "serve.log").read_text()
            try:
                status, body, headers = _get(f"http://127.0.0.1:{port}/healthz")
                break
            except (urllib.error.URLError, ConnectionError):
                assert time.monotonic() < deadline, (tmp_path / "serve.log").read_text()
                time.sleep(0.2)
        assert (status, body) == (200, {"status": "ok"})
        assert headers["X-Frame-Options"] == "DENY"
        status, body, _ = _get(f"http://127.0.0.1:{port}/api/v1/overview")
        assert (status, set(body)) == (401, {"error"})
    finally:
        server.send_signal(signal.SIGTERM)
        code = server.wait(timeout=30)
        log.close()
    output = (tmp_path / "serve.log").read_text()
    assert "gunicorn" in output.lower() or "Booting worker" in output
    assert code == 0, output


def test_the_admin_group_loads_no_web_server() -> None:
    """`ems admin ...` commands start without Flask or gunicorn; `serve` imports them
    when it runs."""
    probe = (
        "import sys, click; from ems.cli.app import cli; "
        "group = cli.get_command(click.Context(cli), 'admin'); "
        "assert group.get_command(click.Context(group), 'serve') is not None; "
        "print(' '.join(sorted(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    loaded = set(out.stdout.split())
    assert "ems.cli.admin_serve" in loaded
    assert not {"flask", "gunicorn", "flask_wtf", "ems.admin.app"} & loaded
