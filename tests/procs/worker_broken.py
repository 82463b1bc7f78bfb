"""A handler module whose import fails: `ems worker` reports it, typed, and exits 2."""

from __future__ import annotations

raise RuntimeError("the configuration file is missing")
