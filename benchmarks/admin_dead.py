"""The admin suite's dead-letter case at 300,000 dead letters: after the page table, the
dead-letter table grows to DEAD_LETTERS rows (the seed's rows copied with new ids,
older than every seeded one) and the error searches that read the whole table before
(a substring matching nothing, with and without group or since) are timed, with a
scope=matching purge preview (nothing applied). Each must stay within the console's
page target: the error search reads at most ERROR_SCAN dead letters.
"""

from __future__ import annotations

import http.client
import json
import re

import pymysql

from benchmarks.admin_seed import Scale

DEAD_LETTERS = 300_000
#: (label, method, path, JSON body of a POST or None).
DEAD_PAGES: tuple[tuple[str, str, str, dict[str, str] | None], ...] = (
    ("dead letters, 300k", "GET", "/dead-letters", None),
    ("error search, 300k", "GET", "/dead-letters?error=zzzz", None),
    ("error search (API), 300k", "GET", "/api/v1/dead-letters?error=zzzz", None),
    ("error search of a group, 300k", "GET", "/dead-letters?error=zzzz&group={group}", None),
    ("error search since 7d, 300k", "GET", "/api/v1/dead-letters?error=zzzz&since=7d", None),
    (
        "matching purge preview (API), 300k",
        "POST",
        "/api/v1/dead-letters/purge/preview",
        {"scope": "matching", "error": "zzzz"},
    ),
)


def grow(conn: pymysql.Connection, scale: Scale, total: int = DEAD_LETTERS) -> int:
    """Copy the seeded dead letters (ids 1..n) until the table holds `total`; the copies
    take ids above the seed's and times a week and more older. Returns the rows added."""
    have = scale.dead_letters
    added = 0
    with conn.cursor() as cursor:
        while have + added < total:
            step = min(have, total - have - added)
            cursor.execute(
                "INSERT INTO dead_message (id, group_id, topic_id, partition_no, offset_no, "
                "message_id, msg_key, headers, body, attempts, last_error, created_at, "
                "resent_at) SELECT id + %s, group_id, topic_id, partition_no, offset_no, "
                "message_id, msg_key, headers, body, attempts, last_error, "
                "created_at - INTERVAL %s DAY, resent_at FROM dead_message WHERE id <= %s",
                (have + added, 7 * (1 + added // have), step),
            )
            added += step
            conn.commit()
        cursor.execute("ANALYZE TABLE dead_message")
        cursor.fetchall()
    return added


def paths(scale: Scale) -> list[tuple[str, str, str, dict[str, str] | None]]:
    names = scale.names()
    return [(label, m, p.format(**names), body) for label, m, p, body in DEAD_PAGES]


_TIMING = re.compile(r"app;dur=([\d.]+)")


def call(
    port: int, token: str, method: str, path: str, body: dict[str, str] | None
) -> tuple[int, float | None]:
    """(status, Server-Timing milliseconds) of one request on a fresh connection."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    headers = {"Authorization": f"Bearer {token}"}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    try:
        conn.request(method, path, body=data, headers=headers)
        response = conn.getresponse()
        response.read()
        found = _TIMING.fullmatch(response.getheader("Server-Timing") or "")
        return response.status, float(found.group(1)) if found else None
    finally:
        conn.close()


def time_dead_pages(
    port: int, token: str, scale: Scale, requests: int
) -> list[tuple[str, str, list[float]]]:
    """(label, path, server milliseconds of each request after a warm-up) per case."""
    out = []
    for label, method, path, body in paths(scale):
        samples = []
        for n in range(requests + 1):
            status, ms = call(port, token, method, path, body)
            if status != 200 or ms is None:
                raise RuntimeError(f"{method} {path} answered {status}")
            if n:
                samples.append(ms)
        out.append((label, f"{method} {path}", samples))
    return out
