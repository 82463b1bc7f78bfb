"""Values as JSON for the API (pure): dataclasses as objects, times as ISO 8601 with
their zone (every stored time is UTC)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from typing import Any

from ems.groups import utc


def to_json(value: Any) -> Any:
    """A JSON-ready copy: dataclasses and mappings as dicts, sequences as lists, naive
    datetimes as UTC with "+00:00"."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dt.datetime):
        return utc(value).isoformat()
    if isinstance(value, Mapping):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple | frozenset | set):
        return [to_json(v) for v in value]
    return value
