"""The console under gunicorn (`ems admin serve`)."""

from __future__ import annotations

from typing import Any

from flask import Flask
from gunicorn.app.base import BaseApplication

from ems.admin.app import MAX_BODY, create_app
from ems.admin.services import of
from ems.admin.worker import ConsoleWorker
from ems.config import Settings

#: Seconds a worker's event loop may go without a beat before gunicorn restarts it.
WORKER_TIMEOUT = 60


class Console(BaseApplication):  # type: ignore[misc]
    """gunicorn running the console: EMS_ADMIN_WORKERS processes of EMS_ADMIN_THREADS
    threads (ems.admin.worker: a thread gets a request only once it has arrived whole).
    Each worker builds its own app, and so its own database connections, after the fork.
    X-Forwarded-Proto is believed from EMS_ADMIN_FORWARDED_ALLOW_IPS peers only, as the
    app believes X-Forwarded-For."""

    def __init__(self, settings: Settings, *, bind: str) -> None:
        self.settings = settings
        worker = type(
            "ConsoleWorker",
            (ConsoleWorker,),
            {"request_timeout": settings.admin_header_timeout, "max_body": MAX_BODY},
        )
        self.options: dict[str, object] = {
            "bind": bind,
            "workers": settings.admin_workers,
            "threads": settings.admin_threads,
            "worker_class": worker,
            "keepalive": settings.admin_keepalive,
            "forwarded_allow_ips": ",".join(settings.admin_forwarded_allow_ips) or "0.0.0.0/32",
            "timeout": WORKER_TIMEOUT,
            "accesslog": "-",
            "errorlog": "-",
            "proc_name": "ems-admin",
            "worker_exit": _worker_exit,
        }
        super().__init__()

    def load_config(self) -> None:
        for key, value in self.options.items():
            self.cfg.set(key, value)

    def load(self) -> Flask:
        return create_app(self.settings)


def _worker_exit(server: object, worker: Any) -> None:
    """In the worker, as it ends: write the audit entries its sampler held back and close
    its connections."""
    app = getattr(worker, "wsgi", None)
    if isinstance(app, Flask):
        of(app).close()
