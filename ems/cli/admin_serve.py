"""`ems admin serve`: the admin console under gunicorn (Flask's own server with --debug
only), on 127.0.0.1:8642 unless told otherwise.

It refuses to start (exit code 2, and what to do) without EMS_ADMIN_SECRET_KEY of at
least 32 characters, or when no admin account exists: nobody could manage the console.
Flask and gunicorn are imported only when the command runs; the `admin` group of
ems.cli.admin names this command and loads it on demand.
"""

from __future__ import annotations

import click

from ems.cli.common import settings
from ems.exit_codes import EXIT_BAD_INPUT

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8642


@click.command()
@click.option("--host", default=DEFAULT_HOST, show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(1, 65535), default=DEFAULT_PORT, show_default=True)
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=None,
    help="gunicorn worker processes [default: EMS_ADMIN_WORKERS, 2].",
)
@click.option(
    "--threads",
    type=click.IntRange(1, 256),
    default=None,
    help="Threads per worker [default: EMS_ADMIN_THREADS, 8].",
)
@click.option(
    "--forwarded-allow-ips",
    default=None,
    metavar="LIST",
    help="Proxies (addresses, networks, or *) whose X-Forwarded-For and X-Forwarded-Proto "
    "are believed [default: EMS_ADMIN_FORWARDED_ALLOW_IPS, 127.0.0.1,::1].",
)
@click.option(
    "--debug",
    is_flag=True,
    help="Flask's development server, one process, templates reloaded (never in production).",
)
def serve(
    host: str,
    port: int,
    workers: int | None,
    threads: int | None,
    forwarded_allow_ips: str | None,
    debug: bool,
) -> None:
    """Serve the admin console (gunicorn; see docs/admin.md)."""
    from ems.admin.startup import NO_ADMIN, secret_key_problem
    from ems.config import forwarded_allow_ips as allow_list
    from ems.ops.accounts import Accounts

    current = settings()
    changes: dict[str, object] = {"admin_workers": workers, "admin_threads": threads}
    if forwarded_allow_ips is not None:
        changes["admin_forwarded_allow_ips"] = allow_list(forwarded_allow_ips)
    current = current.with_(**{k: v for k, v in changes.items() if v is not None})
    problem = secret_key_problem(current)
    if problem is not None:
        _refuse(problem)
    with Accounts(current) as accounts:
        if not accounts.has_admin():
            _refuse(NO_ADMIN)
    if debug:
        from ems.admin import create_app

        app = create_app(current)
        click.echo(f"ems admin (debug server): http://{_url_host(host)}:{port}/", err=True)
        app.run(host=host, port=port, debug=True, use_reloader=False, use_debugger=False)
        return
    from ems.admin.server import Console

    Console(current, bind=f"{_url_host(host)}:{port}").run()


def _refuse(message: str) -> None:
    click.echo(f"error: {message}", err=True)
    click.get_current_context().exit(EXIT_BAD_INPUT)


def _url_host(host: str) -> str:
    """An IPv6 address in brackets, as URLs and gunicorn's bind take it."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host
