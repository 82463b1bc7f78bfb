"""One way to write SQL in ems/store: every statement is a named, module-level string of
plain SQL with %s placeholders, run through the driver. A statement whose shape varies (an
IN list of variable length, a search's optional filters) is a module-level template or
fragments completed by a small module-level function that returns (sql, params). So a
store method names its statements and never spells SQL out, and no SQLAlchemy Core
expression (select(), text(), func...) builds one.

Read from the source (ast), so the rule holds for code no test happens to run."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

STORE = Path(__file__).resolve().parents[2] / "ems" / "store"
MODULES = sorted(STORE.glob("*.py"))

#: What ems/store may take from SQLAlchemy: engines, connections, events, errors, URLs;
#: never a way to build a statement.
ALLOWED_SQLALCHEMY = {
    "sqlalchemy": {"Connection", "Engine", "create_engine", "event"},
    "sqlalchemy.engine": {"Connection", "Engine", "ExceptionContext", "make_url", "URL"},
    "sqlalchemy.exc": None,  # every error class
    # The types of a caller's own session or connection, whose transaction ems joins.
    "sqlalchemy.orm": {"Session", "scoped_session"},
    "sqlalchemy.ext.asyncio": {"AsyncConnection", "AsyncSession", "async_scoped_session"},
    "sqlalchemy.pool": None,
}

#: A whole statement: a string that starts with a SQL verb.
STATEMENT = re.compile(
    r"^\s*\(?\s*(SELECT|INSERT|UPDATE|DELETE|REPLACE|WITH|CREATE|DROP|ALTER|TRUNCATE|LOCK|"
    r"UNLOCK|SET|DO|SHOW|CALL|EXPLAIN|ANALYZE|XA|BEGIN|COMMIT|ROLLBACK|SAVEPOINT|RELEASE)\b"
)
#: A piece of one: SQL keywords or placeholders, as a method must not hold.
FRAGMENT = re.compile(
    r"%s|\b(SELECT|FROM|WHERE|JOIN|VALUES|ORDER BY|GROUP BY|LIMIT|IN \(|AND|OR|NOT|NULL|"
    r"CASE|WHEN|INTERVAL|NOW\(6\))\b"
)


def _strings(node: ast.AST) -> Iterator[tuple[int, str]]:
    """The literal text of every string in node, docstrings left out."""
    docstrings = {
        id(n.body[0].value)
        for n in ast.walk(node)
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        and n.body
        and isinstance(n.body[0], ast.Expr)
        and isinstance(n.body[0].value, ast.Constant)
    }
    inside_f = {id(v) for n in ast.walk(node) if isinstance(n, ast.JoinedStr) for v in n.values}
    for n in ast.walk(node):
        if id(n) in docstrings or id(n) in inside_f:
            continue
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            yield n.lineno, n.value
        elif isinstance(n, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in n.values)
            yield n.lineno, text


def _functions(tree: ast.Module) -> Iterator[tuple[ast.AST, bool]]:
    """Every function of the module, with whether it is a method (inside a class)."""
    for top in tree.body:
        if isinstance(top, ast.FunctionDef | ast.AsyncFunctionDef):
            yield top, False
        elif isinstance(top, ast.ClassDef):
            for n in ast.walk(top):
                if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef):
                    yield n, True


def _module_strings(tree: ast.Module) -> set[str]:
    """Names bound at module level to SQL text."""
    names = set()
    for top in tree.body:
        if isinstance(top, ast.Assign | ast.AnnAssign) and top.value is not None:
            targets = top.targets if isinstance(top, ast.Assign) else [top.target]
            if any(STATEMENT.match(s) or FRAGMENT.search(s) for _, s in _strings(top.value)):
                names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def violations(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("sqlalchemy"):
            allowed = ALLOWED_SQLALCHEMY.get(n.module or "", set())
            for alias in n.names:
                if allowed is not None and alias.name not in allowed:
                    found.append(f"{n.lineno}: imports {alias.name} from {n.module}")
    templates = _module_strings(tree)
    for function, method in _functions(tree):
        name = getattr(function, "name", "?")
        for line, text in _strings(function):
            if STATEMENT.match(text):
                found.append(f"{line}: a statement written inside {name}(): name it")
            elif method and FRAGMENT.search(text):
                found.append(f"{line}: SQL text in method {name}(): use a named builder")
        if not method:
            continue
        for n in ast.walk(function):
            if (
                isinstance(n, ast.Call)
                and isinstance(n.func, ast.Attribute)
                and n.func.attr == "format"
                and isinstance(n.func.value, ast.Name)
                and n.func.value.id in templates
            ):
                found.append(
                    f"{n.lineno}: {n.func.value.id}.format() in method {name}(): "
                    "complete it in a named builder"
                )
    return sorted(set(found), key=lambda f: int(f.split(":")[0]))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_statements_are_named_at_module_level(path: Path) -> None:
    assert violations(path) == []


def test_the_rule_catches_what_it_forbids(tmp_path: Path) -> None:
    module = tmp_path / "bad.py"
    module.write_text(
        "from sqlalchemy import select, text\n"
        "_T = 'SELECT a FROM t WHERE id IN ({ids})'\n"
        "def ok(ids):\n"
        "    return _T.format(ids=', '.join(['%s'] * len(ids))), tuple(ids)\n"
        "def inline():\n"
        "    return 'DELETE FROM t'\n"
        "class S:\n"
        "    def get(self, ids):\n"
        "        '''SELECT in a docstring is prose.'''\n"
        "        sql = _T.format(ids=', '.join(['%s'] * len(ids)))\n"
        "        return f'SELECT {sql}'\n"
    )
    found = violations(module)
    assert [f.split(":")[0] for f in found] == ["1", "1", "6", "10", "10", "11"]
