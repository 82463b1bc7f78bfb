"""Python child processes forked from an interpreter that has already imported ems.

A fresh `python -m ...` spends about half a second of CPU importing before it does
anything, and the suite starts the CLI and its worker programs (consumers, producers,
fault workloads) several hundred times. `spawn` starts each as its own process, with its
own arguments, environment, standard streams, signals, exit status and interpreter
shutdown, but forked from a server process (multiprocessing's forkserver) that imported
the modules once: a child can be signalled, killed with SIGKILL and waited for like any
other. What such a child cannot be is a main process to multiprocessing, so a command
that starts processes of its own (the demo) runs in a fresh interpreter, and so do the
tests that check the entry points themselves, and a child whose environment changes what
happens at exec (LD_PRELOAD, say libfaketime's, or PYTHONPATH) gets one by itself.
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
import pkgutil
import runpy
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from multiprocessing import reduction
from pathlib import Path
from typing import IO, Any, Protocol

import ems.cli
import ems.models
import ems.store

ROOT = Path(__file__).resolve().parents[1]


def _modules(package: Any) -> list[str]:
    return [
        f"{package.__name__}.{m.name}"
        for m in pkgutil.iter_modules(package.__path__)
        if m.name != "__main__"  # run afresh in each child, as `python -m` does
    ]


_CONTEXT = multiprocessing.get_context("forkserver")
_CONTEXT.set_forkserver_preload(
    [
        "ems.cli.app",
        *_modules(ems.cli),
        # The command modules import the store's statement groups and the models they
        # use when a command runs (ems.store and ems.models load their parts on first
        # use): the children import none of them.
        *_modules(ems.store),
        *_modules(ems.models),
        # What the worker programs import (not the programs: each runs afresh as __main__).
        "ems",
    ]
)

#: As subprocess.PIPE: the parent reads the child's stdout.
PIPE = subprocess.PIPE

#: Read when a process is exec'd: a child that sets them differently needs a fresh one.
_READ_AT_EXEC = ("LD_PRELOAD", "LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONHASHSEED", "PYTHONHOME")


class Child(Protocol):
    """What the tests use of a running child: subprocess.Popen has it, and so has Forked."""

    stdout: IO[str] | None
    pid: int

    @property
    def returncode(self) -> int | None: ...
    def poll(self) -> int | None: ...
    def wait(self, timeout: float | None = None) -> int: ...
    def send_signal(self, sig: int) -> None: ...
    def kill(self) -> None: ...


class Forked:
    """A running child, with the part of subprocess.Popen's interface the tests use."""

    def __init__(self, args: list[str], process: Any, stdout: IO[str] | None) -> None:
        self.args = args
        self.stdout = stdout
        self._process = process
        self.pid: int = process.pid

    @property
    def returncode(self) -> int | None:
        code: int | None = self._process.exitcode
        return code

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        if self._process.exitcode is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        code: int = self._process.exitcode
        return code

    def send_signal(self, sig: int) -> None:
        if self._process.exitcode is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def spawn(
    module: str,
    args: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path = ROOT,
    stdin: IO[Any] | None = None,
    stdout: IO[Any] | int | None = None,
    stderr: IO[Any] | None = None,
) -> Child:
    """`python -m module *args`: stdin, stdout and stderr are open files (the child gets
    its own copy), stdout=PIPE to read it as text, or None: stdin from /dev/null, stdout
    and stderr the parent's (where pytest captures them)."""
    if any(env.get(name) != os.environ.get(name) for name in _READ_AT_EXEC):
        return subprocess.Popen(
            [sys.executable, "-m", module, *args],
            cwd=cwd,
            env=env,
            text=True,
            stdin=stdin or subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
        )
    reader: IO[str] | None = None
    streams: list[_Inherited | None] = [None, _Inherited(1), _Inherited(2)]
    if stdin is not None:
        streams[0] = _Inherited(stdin.fileno())
    if stdout == PIPE:
        read_end, write_end = os.pipe()
        reader = open(read_end, encoding="utf-8")  # noqa: SIM115 - the caller's to close
        streams[1] = _Inherited(write_end)
    elif stdout is not None:
        assert not isinstance(stdout, int)
        streams[1] = _Inherited(stdout.fileno())
    if stderr is not None:
        streams[2] = _Inherited(stderr.fileno())
    argv = [module, *args]
    process = _CONTEXT.Process(target=_main, args=(argv, dict(env), str(cwd), streams))
    try:
        process.start()
    finally:
        if stdout == PIPE:
            os.close(write_end)
    return Forked(argv, process, reader)


def run(
    module: str,
    args: Sequence[str],
    *,
    env: Mapping[str, str],
    input: str | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """`python -m module *args` to its end, as subprocess.run(..., capture_output=True,
    text=True) returns it."""
    with tempfile.TemporaryDirectory(prefix="ems-forked-") as folder:
        paths = [Path(folder, name) for name in ("stdin", "stdout", "stderr")]
        paths[0].write_text(input or "")
        with paths[0].open() as i, paths[1].open("w") as o, paths[2].open("w") as e:
            child = spawn(module, args, env=env, stdin=i, stdout=o, stderr=e)
        try:
            code = child.wait(timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
            raise
        return subprocess.CompletedProcess(
            [module, *args], code, paths[1].read_text(), paths[2].read_text()
        )


class _Inherited:
    """A file descriptor of the parent's, sent to the child over the forkserver's socket."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __reduce__(self) -> tuple[Any, tuple[Any]]:
        return _detach, (reduction.DupFd(self.fd),)


def _detach(duplicate: Any) -> int:
    fd: int = duplicate.detach()
    return fd


def _main(argv: list[str], env: dict[str, str], cwd: str, streams: list[int | None]) -> None:
    """In the forked child: become `python -m argv[0] *argv[1:]` and exit as it would."""
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    for target, fd in enumerate(streams):
        if fd is None:
            fd = os.open(os.devnull, os.O_RDWR)
        os.dup2(fd, target)
        os.close(fd)
    sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    # As a fresh interpreter started from a terminal has them.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    sys.argv = list(argv)
    code = 0
    try:
        runpy.run_module(argv[0], run_name="__main__", alter_sys=True)
    except SystemExit as exit_:
        code = _exit_status(exit_.code)
    except BaseException:  # reported as the interpreter reports an uncaught exception
        sys.excepthook(*sys.exc_info())
        code = 1
    # What interpreter shutdown does before the process ends.
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _exit_status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1
