"""ems's PyMySQL connections keep PyMySQL's PREFERRED TLS mode and build its context once
per process; explicit TLS options keep PyMySQL's own context per connection."""

from __future__ import annotations

from pathlib import Path

import pymysql.connections
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
