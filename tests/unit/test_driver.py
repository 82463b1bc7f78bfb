"""ems's PyMySQL connections keep PyMySQL's PREFERRED TLS mode and build its context once
per process; explicit TLS options keep PyMySQL's own context per connection. Their cursors
bind arguments as PyMySQL does, without parking tuples in CPython's free lists."""

from __future__ import annotations

import datetime as dt
import gc
import sys
from decimal import Decimal
from pathlib import Path

import pymysql.connections
import pymysql.cursors
import pymysql.err
import pytest

from ems.store import driver
from tests.tls import self_signed


def test_preferred_tls_is_kept_with_one_context_for_every_connection() -> None:
    first = driver.connect(host="127.0.0.1", defer_connect=True)
    second = driver.connect(host="127.0.0.1", port=3307, defer_connect=True)
    own = pymysql.connections.Connection(host="127.0.0.1", defer_connect=True)
    assert first.ctx is second.ctx
    for conn in (first, second):
        assert conn.ssl and not conn._ssl_required  # TLS when offered, plain otherwise
        assert conn.ctx.verify_mode == own.ctx.verify_mode
        assert conn.ctx.check_hostname == own.ctx.check_hostname
        assert conn.ctx.protocol == own.ctx.protocol


def test_explicit_tls_options_get_their_own_required_context(tmp_path: Path) -> None:
    certificate = self_signed(tmp_path)
    shared = driver.connect(host="127.0.0.1", defer_connect=True).ctx
    conn = driver.connect(host="127.0.0.1", ssl_ca=str(certificate.cert), defer_connect=True)
    assert conn._ssl_required
    assert conn.ctx is not shared


def test_tls_can_still_be_turned_off() -> None:
    conn = driver.connect(host="127.0.0.1", ssl_disabled=True, defer_connect=True)
    assert not conn.ssl


def test_the_preferred_context_is_built_only_when_asked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A server that offers no TLS never makes PyMySQL ask for it: a short command against
    # such a server does not load the CA store.
    monkeypatch.setattr(driver, "_preferred", None)
    conn = driver.connect(host="127.0.0.1", defer_connect=True)
    assert conn.ssl and driver._preferred is None
    context = conn.ctx
    assert driver._preferred is context
    assert driver.connect(host="127.0.0.1", defer_connect=True).ctx is context


def _offline(**options: object) -> pymysql.connections.Connection:
    conn = driver.connect(host="127.0.0.1", defer_connect=True, **options)
    conn.server_status = 0  # what a server's handshake sets: backslash escapes on
    return conn


def test_statements_are_bound_as_pymysql_binds_them() -> None:
    conn = _offline()
    ours = conn.cursor()
    theirs = pymysql.cursors.Cursor(conn)
    assert isinstance(ours, driver.Cursor)
    values: list[object] = [
        7,
        -1.5,
        "it's",
        b"\x00\xff'",
        None,
        True,
        dt.datetime(2026, 1, 2, 3, 4, 5, 600),
        Decimal("1.10"),
    ]
    for n in range(len(values) + 1):
        sql = "SELECT " + ", ".join(["%s"] * n) if n else "SELECT 1"
        for args in (tuple(values[:n]), list(values[:n])):
            assert ours.mogrify(sql, args) == theirs.mogrify(sql, args)
    named = {"a": "x'y", "b": 3}
    assert ours.mogrify("SELECT %(a)s, %(b)s", named) == theirs.mogrify(
        "SELECT %(a)s, %(b)s", named
    )
    with pytest.raises(pymysql.err.ProgrammingError):
        ours.mogrify("SELECT %s, %s", (1,))


def _blocks_left_by(cursor: pymysql.cursors.Cursor, sizes: range, rounds: int) -> int:
    """Blocks still allocated after binding statements of these argument counts, from free
    lists cleared first (a full collection clears CPython's free lists)."""
    statements = {n: ("SELECT " + ", ".join(["%s"] * n), tuple(range(n))) for n in sizes}
    gc.collect()
    gc.disable()
    try:
        before = sys.getallocatedblocks()
        for _ in range(rounds):
            for sql, args in statements.values():
                cursor.mogrify(sql, args)
        return sys.getallocatedblocks() - before
    finally:
        gc.enable()


def test_binding_parks_no_tuples_in_cpythons_free_lists() -> None:
    # PyMySQL's tuple(map(escape, args)) is resized from a guess of 10 items: each
    # statement of another count leaves a tuple in the free list of its size, up to
    # 2,000 per size, which a consumer's RSS showed as a creep of a few MB.
    conn = _offline()
    sizes, rounds = range(11, 16), 3000
    parked = _blocks_left_by(pymysql.cursors.Cursor(conn), sizes, rounds)
    assert parked > 1000 * len(sizes), f"premise: PyMySQL's binding parked only {parked}"
    assert _blocks_left_by(conn.cursor(), sizes, rounds) < 200
