"""Every ```sql block of docs/*.md runs against the migrated schema, on the seeded state of
tests/integration/sql_seed.py, and returns rows. A block that reads only ems_ views runs as
an account granted the views alone (`ems db grant-readonly`), one that reads tables as an
account granted --with-tables: each example needs no more rights than docs/sql.md says."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ems.config import Settings
from ems.store import Store
from ems.store.readonly import account
from tests.conftest import connect
from tests.integration.sql_seed import seed_all

DOCS = Path(__file__).resolve().parents[2] / "docs"
_BLOCK = re.compile(r"^```sql\n(.*?)^```$", re.M | re.S)
_READS = re.compile(r"\b(?:FROM|JOIN)\s+([A-Za-z_]\w*)", re.I)


def blocks() -> list[tuple[str, int, str]]:
    found = []
    for path in sorted(DOCS.glob("*.md")):
        for n, match in enumerate(_BLOCK.finditer(path.read_text()), start=1):
            found.append((path.name, n, match.group(1)))
    return found


def statements(block: str) -> list[str]:
    return [s.strip() for s in re.split(r";\s*$", block, flags=re.M) if s.strip()]


def views_only(block: str) -> bool:
    return all(name.startswith("ems_") for name in _READS.findall(block))


BLOCKS = blocks()


def test_the_docs_have_examples_of_both_kinds() -> None:
    kinds = [views_only(sql) for _, _, sql in BLOCKS]
    assert kinds.count(True) >= 8 and kinds.count(False) >= 3


@pytest.fixture(scope="module")
def accounts(migrated_settings: Settings) -> Iterator[dict[bool, tuple[str, str]]]:
    """views-only? -> (user, password) of an account granted through ems."""
    admin = connect(migrated_settings)
    store = Store(migrated_settings)
    made: dict[bool, tuple[str, str]] = {}
    try:
        for only_views in (True, False):
            user, password = f"ems_doc_{uuid.uuid4().hex[:10]}", uuid.uuid4().hex
            with admin.cursor() as cursor:
                cursor.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'")
            made[only_views] = (user, password)
            store.readonly.grant(
                migrated_settings.database_name,
                account(user),
                with_tables=not only_views,
            )
        yield made
    finally:
        with admin.cursor() as cursor:
            for user, _ in made.values():
                cursor.execute(f"DROP USER IF EXISTS '{user}'@'%'")
        admin.close()
        store.close()


@pytest.mark.parametrize(("doc", "n", "sql"), BLOCKS, ids=[f"{d}#{n}" for d, n, _ in BLOCKS])
def test_sql_example_runs_and_answers(
    store: Store,
    settings: Settings,
    accounts: dict[bool, tuple[str, str]],
    doc: str,
    n: int,
    sql: str,
) -> None:
    seed_all(store)
    user, password = accounts[views_only(sql)]
    conn = connect(settings, user, password)
    try:
        for statement in statements(sql):
            with conn.cursor() as cursor:
                cursor.execute(statement)
                assert cursor.fetchall(), f"{doc} block {n} returned no rows:\n{statement}"
    finally:
        conn.close()
