"""The example handlers of `ems worker` print one reading per line, in one write: with
--threads, handlers on several threads share stdout, and a line written in two pieces can
run into another thread's."""

from __future__ import annotations

import asyncio
import datetime as dt
import io
import json

import pytest

from ems.types import delivery
from examples import aio_data_handler, data_handler


class Writes(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def write(self, text: str) -> int:
        self.calls.append(text)
        return super().write(text)


def test_each_reading_is_one_whole_line_in_one_write(monkeypatch: pytest.MonkeyPatch) -> None:
    out = Writes()
    monkeypatch.setattr("sys.stdout", out)
    body = json.dumps({"project_id": 3, "t": 7}).encode()
    at = dt.datetime.now(dt.UTC)
    data_handler.store_reading(delivery("iot.readings", 2, 5, None, {}, body, at, 1, 1))
    asyncio.run(aio_data_handler.store_reading({"project_id": 4}, 1, 9))
    assert [json.loads(c) for c in out.calls] == [
        {"partition": 2, "offset": 5, "project_id": 3, "t": 7},
        {"partition": 1, "offset": 9, "project_id": 4},
    ]
    assert all(c.endswith("\n") and c.count("\n") == 1 for c in out.calls)
