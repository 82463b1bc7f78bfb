"""Values as JSON for the API (pure): dataclasses as objects, times as every JSON ems
writes carries them (ems.display.json_time: '2026-11-22T10:00:00.123456Z')."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from typing import Any

from ems.display import json_time


def to_json(value: Any) -> Any:
    """A JSON-ready copy: dataclasses and mappings as dicts, sequences as lists, naive
    datetimes as json_time writes them (naive ones are UTC)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dt.datetime):
        return json_time(value)
    if isinstance(value, Mapping):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple | frozenset | set):
        return [to_json(v) for v in value]
    return value
