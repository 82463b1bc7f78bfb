"""The read-only account's GRANTs without a server: which accounts are accepted (they are
written into the statements), what is granted, and the page that shows the output."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ems.exceptions import InvalidAccount, InvalidSetting, UnknownAccount
from ems.exit_codes import EXIT_BAD_INPUT, exit_code_for
from ems.models import metadata
from ems.store.readonly import ACCOUNT_TABLES, VIEW_NAMES, account, grant_statements

SQL_DOC = Path(__file__).resolve().parents[2] / "docs" / "sql.md"


@pytest.mark.parametrize(
    ("user", "host"),
    [
        ("analyst", "%"),
        ("app_ro.1", "10.0.0.%"),
        ("_x", "127.0.0.1"),
        ("a-b", "::1"),
        ("a" * 32, "10.0.0.0/255.255.255.0"),
        ("bi", "db-1.example.com"),
        ("bi", "fe80::1%"),
    ],
)
def test_plain_accounts_are_taken_as_they_are(user: str, host: str) -> None:
    found = account(user, host)
    assert str(found) == f"'{user}'@'{host}'"


@pytest.mark.parametrize(
    ("user", "host"),
    [
        ("analyst'", "%"),
        ('analyst"', "%"),
        ("ana`lyst", "%"),
        ("ana\\lyst", "%"),
        ("ana lyst", "%"),
        ("analyst;", "%"),
        ("analyst\n", "%"),
        ("", "%"),
        ("-analyst", "%"),
        (".analyst", "%"),
        ("a" * 33, "%"),
        ("anal\u00fdst", "%"),
        ("analyst", ""),
        ("analyst", "%'"),
        ("analyst", "host name"),
        ("analyst", "h" * 256),
        ("analyst", "10.0.0.1;"),
    ],
)
def test_accounts_that_could_change_the_statement_are_refused(user: str, host: str) -> None:
    with pytest.raises(InvalidAccount, match="nothing was granted"):
        account(user, host)


def test_one_select_grant_per_view_and_with_tables_per_table() -> None:
    to = account("analyst")
    views = grant_statements("ems", to)
    assert views == [f"GRANT SELECT ON `ems`.`{v}` TO 'analyst'@'%'" for v in VIEW_NAMES]
    everything = grant_statements("ems", to, with_tables=True)
    assert everything[: len(views)] == views
    granted = [re.findall(r"`ems`\.`(\w+)`", s)[0] for s in everything[len(views) :]]
    assert granted == sorted(set(metadata.tables) - set(ACCOUNT_TABLES))
    assert "message" in granted
    assert all(s.startswith("GRANT SELECT ON ") for s in everything)


def test_the_account_tables_are_never_granted() -> None:
    """Password and token hashes stay out of an analyst's reach, with the tables too."""
    assert set(ACCOUNT_TABLES) == {t for t in metadata.tables if t.startswith("admin_")}
    everything = " ".join(grant_statements("ems", account("analyst"), with_tables=True))
    assert "admin_" not in everything


@pytest.mark.parametrize("database", ["ems-prod", "ems`", "", "a" * 65])
def test_a_database_name_that_cannot_be_quoted_is_refused(database: str) -> None:
    with pytest.raises(InvalidSetting):
        grant_statements(database, account("analyst"))


def test_both_errors_exit_as_bad_input() -> None:
    assert exit_code_for(InvalidAccount()) == EXIT_BAD_INPUT
    assert exit_code_for(UnknownAccount()) == EXIT_BAD_INPUT


def test_the_output_shown_in_docs_sql_is_the_real_one() -> None:
    text = SQL_DOC.read_text()
    start = text.index("$ ems db grant-readonly analyst\n")
    shown = text[start : text.index("```", start)].splitlines()[1:]
    assert shown == [f"{s};" for s in grant_statements("ems", account("analyst"))]
