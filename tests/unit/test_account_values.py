"""Roles and the audit trail's text fitting (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ems.exit_codes import EXIT_BAD_INPUT, EXIT_FAILURE, exit_code_for
from ems.store.audit import TEXT_BYTES, cut_bytes, cut_chars, params_json
from ems.values.account_errors import InvalidRole, LoginThrottled
from ems.values.accounts import ROLES, allows, check_role


def test_roles_in_order() -> None:
    assert ROLES == ("viewer", "operator", "admin")
    assert [check_role(r) for r in ROLES] == list(ROLES)
    assert allows("admin", "operator") and allows("operator", "operator")
    assert not allows("viewer", "operator") and not allows("operator", "admin")


@pytest.mark.parametrize("role", ["", "Admin", "root", " viewer", None, 1])
def test_unknown_roles(role: object) -> None:
    with pytest.raises(InvalidRole):
        check_role(role)
    assert exit_code_for(InvalidRole()) == EXIT_BAD_INPUT


def test_a_throttled_sign_in_says_when_to_come_back() -> None:
    error = LoginThrottled(12.2)
    assert error.retry_after == 12.2
    assert "13 seconds" in str(error)
    assert exit_code_for(error) == EXIT_FAILURE


@given(st.text(), st.integers(1, 300))
def test_cut_chars_fits(text: str, limit: int) -> None:
    cut = cut_chars(text, limit)
    assert len(cut) <= limit
    if len(text) <= limit and not any("\ud800" <= c <= "\udfff" for c in text):
        assert cut == text
    cut.encode("utf-8")  # always storable


@given(st.text(), st.integers(8, 400))
def test_cut_bytes_fits(text: str, limit: int) -> None:
    cut = cut_bytes(text, limit)
    assert cut is not None
    assert len(cut.encode("utf-8")) <= limit
    if len(text.encode("utf-8", "surrogatepass")) <= limit:
        assert len(cut) == len(text)
    else:
        assert cut.endswith("…")


def test_cut_bytes_defaults_to_a_text_column() -> None:
    assert cut_bytes(None) is None
    assert len(cut_bytes("€" * TEXT_BYTES).encode()) <= TEXT_BYTES  # type: ignore[union-attr]


def test_params_json_takes_anything() -> None:
    assert params_json(None) == {}
    assert params_json({"a": {1, 2}.__class__.__name__}) == {"a": "set"}
    assert params_json({(1, 2): "tuple key"}) == {"unencodable": "{(1, 2): 'tuple key'}"}
