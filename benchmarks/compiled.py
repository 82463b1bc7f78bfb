"""A compiled build of the publish path: the producer's hot modules, and the floors'
writers, compiled to C extensions by mypyc, beside the interpreted checkout.

The cost model counts the instructions per message of both builds, to show what native
code would take off ems's layers; the floors (raw+redis, raw+redis+guard) are compiled
too, so the compiled rows compare like with like.

build(directory) makes a tree that imports as the checkout does (run a process with the
tree as its working directory and first on PYTHONPATH): every file of the `ems` and
`benchmarks` packages a link to the checkout's, except the modules of COMPILED, whose
sources are copied in and compiled there (mypyc writes each extension beside its source,
so a linked source would put it into the checkout). Python imports an extension before a
source of the same name, so those modules run compiled and all others as they are.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from benchmarks.harness import BenchError

ROOT = Path(__file__).resolve().parent.parent
#: The modules compiled, as paths from the checkout's root: the single and the batch
#: send's path in ems (validation, routing, planning, the group commit, the producer, the
#: insert's statement and its connection, the fences, the allocator, the wake-ups), and
#: the floors' writers. (ems.metrics is left interpreted: mypyc 1.x names a C field
#: after its `_thread` attribute `__thread`, a keyword of the C compiler.)
COMPILED = (
    "ems/validation.py",
    "ems/producer/planning.py",
    "ems/producer/partitioner.py",
    "ems/producer/group_commit.py",
    "ems/producer/deadline.py",
    "ems/producer/metadata.py",
    "ems/producer/tokens.py",
    "ems/producer/producer.py",
    "ems/store/inserts.py",
    "ems/store/messages.py",
    "ems/store/connections.py",
    "ems/store/fences.py",
    "ems/offsets/allocators.py",
    "ems/offsets/resp.py",
    "ems/wakeups.py",
    "benchmarks/writers.py",
)
#: The packages mirrored, and the files mypyc reads its settings from.
PACKAGES = ("ems", "benchmarks")
CONFIG = ("pyproject.toml",)
#: Seconds the compilation may take (it took about 4 minutes on two slow cores).
TIMEOUT = 1800.0


def mirror(root: Path, tree: Path, packages: Sequence[str], copied: Sequence[str]) -> None:
    """The packages under `tree` as under `root`: directories made, every file a link to
    root's, except the `copied` paths (relative to root), which are copied."""
    copies = set(copied)
    for package in packages:
        (tree / package).mkdir(parents=True, exist_ok=True)
        for source in sorted((root / package).rglob("*")):
            relative = source.relative_to(root)
            if "__pycache__" in relative.parts or source.suffix in (".so", ".pyc"):
                continue
            target = tree / relative
            if source.is_dir():
                target.mkdir(parents=True, exist_ok=True)
            elif relative.as_posix() in copies:
                shutil.copyfile(source, target)
            else:
                target.symlink_to(source)
    for name in CONFIG:
        (tree / name).symlink_to(root / name)


def compiled_modules(tree: Path) -> list[str]:
    """The modules of COMPILED that have an extension in the tree (all, once built)."""
    found = []
    for path in COMPILED:
        source = tree / path
        if any(source.parent.glob(f"{source.stem}.*.so")):
            found.append(path)
    return found


def build(tree: Path) -> Path:
    """The compiled tree in `tree` (an empty or missing directory); BenchError if mypyc
    failed or left a module uncompiled."""
    tree.mkdir(parents=True, exist_ok=True)
    mirror(ROOT, tree, PACKAGES, COMPILED)
    mypyc = Path(sys.executable).with_name("mypyc")
    done = subprocess.run(
        [str(mypyc), *COMPILED],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    if done.returncode != 0:
        raise BenchError(f"mypyc failed:\n{(done.stdout + done.stderr)[-3000:]}")
    missing = sorted(set(COMPILED) - set(compiled_modules(tree)))
    if missing:
        raise BenchError(f"mypyc left {', '.join(missing)} uncompiled")
    return tree


def environment(tree: Path, env: dict[str, str]) -> dict[str, str]:
    """`env` for a process that imports ems and the benchmarks from the tree."""
    return {**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(tree), env.get("PYTHONPATH")]))}
