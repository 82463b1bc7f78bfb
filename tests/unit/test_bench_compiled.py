"""The compiled build's tree: it imports as the checkout does, its compiled modules'
sources copied in (mypyc writes an extension beside its source) and every other file a
link to the checkout's, so that nothing is written into the checkout."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from benchmarks import producer_compiled
from benchmarks.compiled import (
    COMPILED,
    ROOT,
    compiled_modules,
    ems_modules,
    environment,
    mirror,
)
from benchmarks.harness import bench_config


def _checkout(root: Path) -> None:
    for name, text in {
        "pkg/__init__.py": "",
        "pkg/hot.py": "HOT = 1\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/cold.py": "COLD = 2\n",
        "pkg/__pycache__/hot.cpython-311.pyc": "stale",
        "pkg/hot.cpython-311-x86_64-linux-gnu.so": "stale",
        "other/thing.py": "",
        ".venv/bin/python": "",
        ".git/HEAD": "",
        "build/lib/pkg/hot.py": "",
        "pkg.egg-info/PKG-INFO": "",
        ".mypy_cache/3.11/x.json": "",
        "pyproject.toml": "[tool.mypy]\n",
    }.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_compiled_modules_are_copied_and_every_other_entry_linked(tmp_path: Path) -> None:
    root, tree = tmp_path / "checkout", tmp_path / "tree"
    _checkout(root)
    mirror(root, tree, ["pkg/hot.py"])
    hot = tree / "pkg/hot.py"
    assert not hot.is_symlink() and hot.read_text() == "HOT = 1\n"
    # The directory above a copied module is made anew; its other entries are links,
    # whole directories among them.
    assert (tree / "pkg").is_dir() and not (tree / "pkg").is_symlink()
    assert (tree / "pkg/__init__.py").is_symlink()
    assert (tree / "pkg/sub").is_symlink()
    assert (tree / "pkg/sub/cold.py").resolve() == (root / "pkg/sub/cold.py").resolve()
    assert (tree / "other").is_symlink() and (tree / "pyproject.toml").is_symlink()
    # Bytecode and extensions are not carried over (the tree makes its own), nor version
    # control, the virtualenv, build output or caches.
    left_out = ["pkg/__pycache__", "pkg/hot.cpython-311-x86_64-linux-gnu.so", ".venv", ".git"]
    left_out += ["build", "pkg.egg-info", ".mypy_cache"]
    assert not [name for name in left_out if (tree / name).exists()]


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


def test_the_benchmark_and_the_wheel_compile_the_one_list_of_ems_modules(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """pyproject.toml's [tool.ems.compiled] is read by setup.py's opt-in build and here."""
    modules = ems_modules(ROOT)
    assert modules and all(path.startswith("ems/") for path in modules)
    assert (*modules, "benchmarks/writers.py") == COMPILED
    spec = importlib.util.spec_from_file_location("ems_setup", ROOT / "setup.py")
    assert spec is not None and spec.loader is not None
    setup = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(setup)
    assert setup.compiled_modules() == list(modules)
    monkeypatch.delenv("EMS_COMPILED", raising=False)
    assert setup.compiled_extensions() == []  # without EMS_COMPILED: pure Python


def test_the_compiled_producer_suite_runs_with_this_runs_servers_and_timings() -> None:
    cfg = bench_config("mysql+pymysql://u@db.example:3307", "redis://cache.example:6380/2", 2.5)
    argv = producer_compiled.command(cfg, 123)
    assert argv[1:4] == ["-m", "benchmarks", "producer"]
    options = dict(zip(argv[4::2], argv[5::2], strict=True))
    assert options == {
        "--server": "mysql+pymysql://u@db.example:3307",
        "--redis-url": "redis://cache.example:6380/2",
        "--seconds": "2.5",
        "--profile-sends": "123",
    }
