"""The admin console: a Flask app over the operations library (never the store), with
accounts and roles, safe by default. `ems admin serve` runs it under gunicorn.

`create_app` loads Flask and the console on first use: the pure parts (capabilities,
start-up checks) import without them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ems.admin.app import create_app

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from ems.admin.app import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
