"""The console's pure helpers: where a login may send the browser, Authorization and
trusted-header parsing, JSON values, times for people."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import pytest

from ems.admin.forms import MAX_WHOLE, page_limit, whole
from ems.admin.principal import Principal, bearer_secret, trusted_role
from ems.admin.redirects import HOME, safe_next
from ems.admin.serialize import to_json
from ems.admin.startup import MIN_SECRET_KEY, secret_key_problem
from ems.config import Settings
from ems.display import format_utc
from ems.exceptions import InvalidCursor, InvalidInput, InvalidSetting


@pytest.mark.parametrize(
    "target", ["/", "/users", "/users?page=2", "/api/v1/overview", "/a/b%2Fc?x=1#frag"]
)
def test_a_local_path_is_kept(target: str) -> None:
    assert safe_next(target) == target


@pytest.mark.parametrize(
    "target",
    [
        None,
        "",
        "users",
        "//evil.example",
        "//evil.example/x",
        "/\\evil.example",
        "\\\\evil.example",
        "https://evil.example/",
        "http:/evil.example",
        "javascript:alert(1)",
        "/ok\r\nSet-Cookie: x=1",
        "/ok\x00",
        "/\tevil",
        "/login",
        "/logout",
        "/" + "a" * 3000,
        42,
    ],
)
def test_anything_else_goes_home(target: object) -> None:
    assert safe_next(target) == HOME


@pytest.mark.parametrize(
    ("header", "secret"),
    [
        ("Bearer ems_abc", "ems_abc"),
        ("bearer   ems_abc  ", "ems_abc"),
        ("BEARER ems_abc", "ems_abc"),
        ("Bearer", None),
        ("Bearer   ", None),
        ("Basic dXNlcjpwYXNz", None),
        ("", None),
        ("ems_abc", None),
    ],
)
def test_bearer_secret(header: str, secret: str | None) -> None:
    assert bearer_secret(header) == secret


def test_trusted_role_matches_the_whole_value() -> None:
    roles = (("ops", "operator"), ("sre", "admin"))
    assert trusted_role(roles, "ops") == "operator"
    assert trusted_role(roles, " sre ") == "admin"
    for value in ("", "OPS", "ops,sre", "sre-team", "op", "ops sre"):
        assert trusted_role(roles, value) is None


def test_the_actor_says_how_the_principal_came() -> None:
    def principal(via: str) -> Principal:
        return Principal(name="x", role="viewer", via=via, capabilities=frozenset())  # type: ignore[arg-type]

    assert principal("session").actor == "x"
    assert principal("token").actor == "token:x"
    assert principal("proxy").actor == "proxy:x"


@dataclass(frozen=True)
class _Row:
    at: dt.datetime
    items: tuple[int, ...]
    none: None = None


def test_json_times_are_utc_with_microseconds_and_z() -> None:
    naive = dt.datetime(2026, 11, 22, 10, 0, 0, 123456)
    aware = dt.datetime(2026, 11, 22, 12, 0, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert to_json(_Row(at=naive, items=(1, 2))) == {
        "at": "2026-11-22T10:00:00.123456Z",
        "items": [1, 2],
        "none": None,
    }
    assert to_json({"t": aware}) == {"t": "2026-11-22T10:00:00.000000Z"}


def test_times_for_people_are_labelled_utc() -> None:
    assert format_utc(dt.datetime(2026, 11, 22, 10, 0, 5, 999)) == "2026-11-22 10:00:05 UTC"
    aware = dt.datetime(2026, 11, 22, 12, 0, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert format_utc(aware) == "2026-11-22 10:00:00 UTC"
    assert format_utc(None) == "—"


def test_the_secret_key_is_checked() -> None:
    assert "not set" in (secret_key_problem(Settings()) or "")
    short = secret_key_problem(Settings(admin_secret_key="x" * (MIN_SECRET_KEY - 1)))
    assert short is not None and "fewer than 32" in short
    assert secret_key_problem(Settings(admin_secret_key="x" * MIN_SECRET_KEY)) is None
    assert "x" * MIN_SECRET_KEY not in repr(Settings(admin_secret_key="x" * MIN_SECRET_KEY))


@pytest.mark.parametrize(
    "text", ["", "-1", "1.0", "١٢", " 7", "0x10", str(MAX_WHOLE + 1), "9" * 40]
)
def test_a_number_parameter_is_plain_digits_within_a_bigint(text: str) -> None:
    with pytest.raises(InvalidCursor, match="before must be a non-negative integer"):
        whole(text, "before", InvalidCursor)
    assert whole(str(MAX_WHOLE), "id") == MAX_WHOLE and whole("007", "id") == 7
    with pytest.raises(InvalidInput):
        whole(text, "id")


@pytest.mark.parametrize(("text", "found"), [(None, 50), ("1", 1), ("100", 100)])
def test_a_page_limit_defaults_and_stays_within_its_maximum(text: str | None, found: int) -> None:
    assert page_limit(text, 50, 100) == found


@pytest.mark.parametrize("text", ["0", "101", "-5", "ten", "1" * 30])
def test_a_page_limit_outside_its_range_is_refused(text: str) -> None:
    with pytest.raises(InvalidSetting, match="limit must be an integer from 1 to 100"):
        page_limit(text, 50, 100)
