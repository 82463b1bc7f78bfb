"""InnoDB's state, read between benchmark phases: bytes written, and waiting until the
server has settled after a bulk load or delete (its background work would otherwise be
measured as part of whatever runs next)."""

from __future__ import annotations

import time

from benchmarks.harness import query

#: Settling: the server is quiet when InnoDB's history list is short, the dirty page count
#: has stopped falling (the page cleaner caught up) and, when asked, InnoDB writes no
#: faster than it did while idle; never wait longer than SETTLE_MAX_SECONDS.
SETTLE_MAX_SECONDS = 240.0
SETTLE_HISTORY = 20_000
#: How much faster than the idle write rate still counts as idle (the rate wobbles).
SETTLE_WRITE_SLACK = 1.25
_SETTLE_STATUS = (
    "SELECT (SELECT COUNT FROM information_schema.INNODB_METRICS "
    "WHERE NAME = 'trx_rseg_history_len'), (SELECT VARIABLE_VALUE FROM "
    "information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'INNODB_BUFFER_POOL_PAGES_DIRTY')"
)
_IO = (
    "SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS "
    "WHERE VARIABLE_NAME IN ('INNODB_DATA_WRITTEN', 'INNODB_OS_LOG_WRITTEN', "
    "'INNODB_PAGES_READ')"
)


def innodb_io(url: str) -> tuple[int, int, int]:
    """InnoDB's bytes written to data files (pages and doublewrite), bytes written to the
    redo log, and pages read, so far."""
    status = {str(k): int(v) for k, v in query(url, _IO)}
    return (
        status["INNODB_DATA_WRITTEN"],
        status["INNODB_OS_LOG_WRITTEN"],
        status["INNODB_PAGES_READ"],
    )


def settle(url: str, idle_write_rate: float | None = None) -> float:
    """Wait until the server is quiet (see SETTLE_*); with `idle_write_rate` (bytes/s),
    also until InnoDB writes no faster than that over 5 s. Returns the seconds waited."""
    started = time.monotonic()
    dirty: list[int] = []
    written: list[int] = []
    while time.monotonic() - started < SETTLE_MAX_SECONDS:
        ((history, pages),) = query(url, _SETTLE_STATUS)
        dirty.append(int(pages))
        written.append(innodb_io(url)[0])
        if len(dirty) >= 6:
            falling = dirty[-6] > dirty[-1] * 1.05
            rate = (written[-1] - written[-6]) / 5.0
            busy = idle_write_rate is not None and rate > idle_write_rate * SETTLE_WRITE_SLACK
            if int(history) < SETTLE_HISTORY and not falling and not busy:
                break
        time.sleep(1.0)
    return time.monotonic() - started
