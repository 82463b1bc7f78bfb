"""The compiled build's tree: it imports as the checkout does, its compiled modules'
sources copied in (mypyc writes an extension beside its source) and every other file a
link to the checkout's, so that nothing is written into the checkout."""

from __future__ import annotations

import os
from pathlib import Path

from benchmarks.compiled import COMPILED, ROOT, compiled_modules, environment, mirror


def _checkout(root: Path) -> None:
    for name, text in {
        "pkg/__init__.py": "",
        "pkg/hot.py": "HOT = 1\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/cold.py": "COLD = 2\n",
        "pkg/__pycache__/hot.cpython-311.pyc": "stale",
        "pyproject.toml": "[tool.mypy]\n",
    }.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_compiled_modules_are_copied_and_every_other_file_linked(tmp_path: Path) -> None:
    root, tree = tmp_path / "checkout", tmp_path / "tree"
    _checkout(root)
    mirror(root, tree, ["pkg"], ["pkg/hot.py"])
    hot, cold = tree / "pkg/hot.py", tree / "pkg/sub/cold.py"
    assert not hot.is_symlink() and hot.read_text() == "HOT = 1\n"
    assert cold.is_symlink() and cold.resolve() == (root / "pkg/sub/cold.py").resolve()
    assert (tree / "pkg/sub").is_dir() and not (tree / "pkg/sub").is_symlink()
    assert (tree / "pyproject.toml").is_symlink()
    # Bytecode is not carried over: the tree's interpreter makes its own.
    assert not (tree / "pkg/__pycache__").exists()


def test_a_module_counts_as_compiled_only_with_its_extension_beside_it(tmp_path: Path) -> None:
    first = Path(COMPILED[0])
    source = tmp_path / first
    source.parent.mkdir(parents=True)
    source.write_text("")
    assert compiled_modules(tmp_path) == []
    (source.parent / f"{first.stem}.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    assert compiled_modules(tmp_path) == [first.as_posix()]


def test_the_tree_comes_first_on_the_import_path(tmp_path: Path) -> None:
    env = environment(tmp_path, {"PYTHONPATH": "/elsewhere"})
    assert env["PYTHONPATH"].split(os.pathsep) == [str(tmp_path), "/elsewhere"]
    assert environment(tmp_path, {})["PYTHONPATH"] == str(tmp_path)


def test_every_compiled_module_exists_in_the_checkout() -> None:
    assert all((ROOT / path).is_file() for path in COMPILED)
