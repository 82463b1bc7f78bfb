"""Handlers for `ems worker` in the tests: each appends "pid partition offset body" to
the file WORKER_OUT names, one flushed line per message, so a kill -9 loses no line of a
message the handler finished."""

from __future__ import annotations

import asyncio
import os

from ems import Delivery

#: Not a handler: `ems worker tests.procs.worker_handlers:NOT_CALLABLE` is refused.
NOT_CALLABLE = 42


def _line(d: Delivery) -> str:
    return f"{os.getpid()} {d.partition} {d.offset} {d.body.decode()}\n"


def _write(line: str) -> None:
    with open(os.environ["WORKER_OUT"], "a") as out:
        out.write(line)


def record(d: Delivery) -> None:
    _write(_line(d))


async def record_async(d: Delivery) -> None:
    await asyncio.sleep(0)
    _write(_line(d))
