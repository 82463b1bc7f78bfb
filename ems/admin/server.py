"""The console under gunicorn (`ems admin serve`)."""

from __future__ import annotations

from typing import Any

from flask import Flask
from gunicorn.app.base import BaseApplication

from ems.admin.app import create_app
from ems.admin.services import of
from ems.config import Settings

#: Seconds a request may take before gunicorn restarts its worker.
WORKER_TIMEOUT = 60


class Console(BaseApplication):  # type: ignore[misc]
    """gunicorn running the console with sync workers: each worker builds its own app,
    and so its own database connections, after the fork."""

    def __init__(self, settings: Settings, *, bind: str, workers: int) -> None:
        self.settings = settings
        self.options: dict[str, object] = {
            "bind": bind,
            "workers": workers,
            "worker_class": "sync",
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
