"""A compiled build of the publish path: the modules named in pyproject.toml's
[tool.ems.compiled], and the floors' writers, compiled to C extensions by mypyc, beside
the interpreted checkout.

The cost model counts the instructions per message of both builds, to show what native
code takes off ems's layers; the floors (raw+redis, raw+redis+guard) are compiled too, so
the compiled rows compare like with like. The compiled test lane (`make test-compiled`)
runs the tests against the same tree.

build(directory) makes a tree that imports as the checkout does (run a process with the
tree as its working directory and first on PYTHONPATH): every entry of the checkout a link
to the checkout's, except the modules of COMPILED, whose sources are copied in and
compiled there (mypyc writes each extension beside its source, so a linked source would
put it into the checkout), and the directories that hold them, made anew. Python imports
an extension before a source of the same name, so those modules run compiled and all
others as they are. `python -m benchmarks.compiled DIRECTORY` builds one.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Collection, Sequence
from pathlib import Path

from benchmarks.harness import BenchError

ROOT = Path(__file__).resolve().parent.parent


def ems_modules(root: Path) -> tuple[str, ...]:
    """The modules of ems an opt-in build compiles (pyproject.toml's [tool.ems.compiled]),
    as paths from the checkout's root."""
    with (root / "pyproject.toml").open("rb") as file:
        return tuple(tomllib.load(file)["tool"]["ems"]["compiled"]["modules"])


#: The modules compiled here: ems's, and the floors' writers.
COMPILED = (*ems_modules(ROOT), "benchmarks/writers.py")
#: Entries of the checkout the tree leaves out: version control, the virtualenv, caches,
#: build output (mypyc writes its own build/ in the tree).
SKIPPED = frozenset({".git", ".venv", ".hypothesis", "build", "dist", "site", "__pycache__"})
#: Seconds the compilation may take (it took about 4 minutes on two slow cores).
TIMEOUT = 1800.0


def _skipped(path: Path) -> bool:
    return (
        path.name in SKIPPED
        or path.name.endswith((".egg-info", "_cache"))
        or path.suffix in (".so", ".pyc")
    )


def mirror(root: Path, tree: Path, copied: Collection[str]) -> None:
    """The checkout at `root` under `tree`: the `copied` paths (relative to root) copied,
    the directories above them made, and every other entry a link to root's."""
    copies = {Path(path) for path in copied}
    holders = {parent for path in copies for parent in path.parents}
    tree.mkdir(parents=True, exist_ok=True)

    def walk(relative: Path) -> None:
        for source in sorted((root / relative).iterdir()):
            if _skipped(source):
                continue
            entry = relative / source.name
            target = tree / entry
            if entry in holders:
                target.mkdir(exist_ok=True)
                walk(entry)
            elif entry in copies:
                shutil.copyfile(source, target)
            else:
                target.symlink_to(source)

    walk(Path())


def compiled_modules(tree: Path, modules: Sequence[str] = COMPILED) -> list[str]:
    """Those of `modules` that have an extension in the tree (all, once built)."""
    found = []
    for path in modules:
        source = tree / path
        if any(source.parent.glob(f"{source.stem}.*.so")):
            found.append(path)
    return found


def under_test() -> tuple[Path, list[str]]:
    """Where this process imports ems from, and which of ems's modules of the opt-in
    build run compiled there (none in the checkout; all in a tree it was started in)."""
    import ems

    root = Path(ems.__file__).parents[1]
    return root, compiled_modules(root, ems_modules(ROOT))


@functools.cache
def shared() -> Path:
    """One tree of COMPILED for every suite of this benchmark run, built on first use
    and removed when the run ends."""
    work = tempfile.mkdtemp(prefix="ems-compiled-")
    atexit.register(shutil.rmtree, work, True)
    return build(Path(work) / "tree")


def build(tree: Path, modules: Sequence[str] = COMPILED) -> Path:
    """The compiled tree in `tree` (an empty or missing directory), `modules` compiled;
    BenchError if mypyc failed or left one uncompiled."""
    mirror(ROOT, tree, modules)
    mypyc = Path(sys.executable).with_name("mypyc")
    done = subprocess.run(
        [str(mypyc), *modules],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    if done.returncode != 0:
        raise BenchError(f"mypyc failed:\n{(done.stdout + done.stderr)[-3000:]}")
    missing = sorted(set(modules) - set(compiled_modules(tree, modules)))
    if missing:
        raise BenchError(f"mypyc left {', '.join(missing)} uncompiled")
    return tree


def environment(tree: Path, env: dict[str, str]) -> dict[str, str]:
    """`env` for a process that imports ems and the benchmarks from the tree."""
    return {**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(tree), env.get("PYTHONPATH")]))}


if __name__ == "__main__":
    # The build the compiled test lane runs against: ems's modules, as the wheel has them.
    if len(sys.argv) != 2:
        sys.exit("usage: python -m benchmarks.compiled DIRECTORY (empty or missing)")
    try:
        print(build(Path(sys.argv[1]), ems_modules(ROOT)))
    except BenchError as exc:
        sys.exit(str(exc))
