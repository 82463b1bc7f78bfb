"""What the modules of the opt-in compiled build (pyproject.toml's [tool.ems.compiled])
must not rely on, as mypyc compiles them: a raise statement's `from` (mypyc ignores it;
they chain with ems.exceptions.caused). The compiled test lane (`make test-compiled`) runs
the tests against that build; these checks hold in the interpreted suite too."""

from __future__ import annotations

import ast

import pytest

from benchmarks.compiled import ROOT, ems_modules
from ems.exceptions import SendTimeout, caused


@pytest.mark.parametrize("path", ems_modules(ROOT))
def test_a_compiled_module_chains_exceptions_with_caused(path: str) -> None:
    tree = ast.parse((ROOT / path).read_text(), path)
    chained = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Raise) and node.cause]
    assert not chained, f"{path}: `raise ... from` at lines {chained}; use caused()"


def test_caused_is_raise_from() -> None:
    cause = ValueError("the cause")
    with pytest.raises(SendTimeout) as raised:
        raise caused(SendTimeout("gave up"), cause)
    assert raised.value.__cause__ is cause and raised.value.__suppress_context__
    try:
        try:
            raise KeyError("handled")
        except KeyError:
            raise caused(SendTimeout("no cause"), None)  # noqa: B904 (as `from None`)
    except SendTimeout as error:
        assert error.__cause__ is None and error.__suppress_context__
        assert isinstance(error.__context__, KeyError)  # kept, but not shown
