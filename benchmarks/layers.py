"""Client CPU split by layer: where one operation's Python time goes, ems's own modules,
the drivers, and the rest.

A profiled round (never a timed one) runs cProfile in every thread of the process, timed
by each thread's own CPU clock: a thread blocked on a lock, a socket or a queue costs
nothing, as it costs no client CPU. The ack writer and the heartbeat run in threads of
their own, so the profile follows every thread started under it (threading.setprofile),
from its first call inside the window. Sampling was the alternative; in Python a sampler
sees wall time, not each thread's CPU, and shares the GIL with what it measures.

Self time is charged by module: a function's own time to the layer of its file (ems's own
RESP client, ems.offsets.resp, is the redis layer, the place redis-py would take); a
built-in's (a C function: a socket's recv_into, a slot's __set__, a dict's copy), or that
of code without a file (a dataclass's generated __init__), to the layers of its callers,
in the shares of time each caller spent in it. A deterministic profiler inflates code that
makes many small calls, so the report shows each layer's share, and turns shares into
microseconds with the timed rounds' client CPU, not the profiled round's.

The same profile counts calls: each Python function's calls go to the layer of its file
(code without a file, such as a dataclass's generated __init__, to stdlib+other), and
built-ins' calls (C functions and methods) to BUILT_INS. Counts do not move with the
machine's load: they say what each system runs per message, layer by layer, where the
times say only how long it took on that run's machine.
"""

from __future__ import annotations

import cProfile
import functools
import pstats
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import PurePath
from typing import Any

LAYERS = (
    "ems.producer",
    "ems.consumer",
    "ems.store",
    "ems.values+types",
    "ems.offsets",
    "ems (other)",
    "pymysql",
    "redis",
    "sqlalchemy",
    "stdlib+other",
)
OTHER = "stdlib+other"
#: The calls of built-ins (functions and methods written in C), counted apart from the
#: layers' Python calls.
BUILT_INS = "built-ins"
#: What count_calls counts: each layer's Python calls, then the built-ins'.
CALL_COLUMNS = (*LAYERS, BUILT_INS)
_LIBRARIES = ("pymysql", "redis", "sqlalchemy")
_EMS = {
    "producer": "ems.producer",
    "consumer": "ems.consumer",
    "store": "ems.store",
    "values": "ems.values+types",
    "types.py": "ems.values+types",
    "offsets": "ems.offsets",
}
#: ems's own Redis client (RESP over a socket) is the redis layer, as redis-py would be.
_EMS_REDIS = ("offsets", "resp.py")
#: Built-ins called by built-ins: how far up the callers are followed for a layer.
_DEPTH = 8

#: A pstats key: (file, line, function); a built-in's file is "~".
Key = tuple[str, int, str]


def layer_of(filename: str) -> str | None:
    """The layer of a file's code; None for a built-in or code without a file, which
    its callers pay for."""
    if filename == "~" or filename.startswith("<"):
        return None
    parts = PurePath(filename).parts
    if "site-packages" in parts:
        below = parts[parts.index("site-packages") + 1 :]
        return below[0] if below and below[0] in _LIBRARIES else OTHER
    if "ems" in parts:
        at = len(parts) - 1 - parts[::-1].index("ems")
        below = parts[at + 1 :]
        if tuple(below) == _EMS_REDIS:
            return "redis"
        if len(below) > 1 or below[:1] == ("types.py",):
            return _EMS.get(below[0], "ems (other)")
        return "ems (other)"
    return OTHER


def attribute(stats: Mapping[Key, tuple[Any, ...]]) -> dict[str, float]:
    """Seconds of self time per layer (every layer of LAYERS present) from pstats'
    stats: {key: (primitive calls, calls, self time, cumulative time, {caller: (.., ..,
    self time in this function when called from caller, ..)})}."""
    out = dict.fromkeys(LAYERS, 0.0)
    for key, entry in stats.items():
        for layer, share in _layers(key, stats, _DEPTH).items():
            out[layer] += entry[2] * share
    return out


def count_calls(stats: Mapping[Key, tuple[Any, ...]]) -> dict[str, int]:
    """Calls per layer (every layer of LAYERS present) and of built-ins (BUILT_INS) from
    pstats' stats: each function's calls (recursive ones included) to the layer of its
    file; a Python function without a file (generated code) to OTHER."""
    out = dict.fromkeys(CALL_COLUMNS, 0)
    for key, entry in stats.items():
        layer = BUILT_INS if key[0] == "~" else layer_of(key[0]) or OTHER
        out[layer] += entry[1]
    return out


def _layers(key: Key, stats: Mapping[Key, tuple[Any, ...]], depth: int) -> dict[str, float]:
    """The layers a function's self time goes to, as shares summing to 1."""
    own = layer_of(key[0])
    if own is not None:
        return {own: 1.0}
    callers: Mapping[Key, tuple[Any, ...]] = stats[key][4] if key in stats else {}
    total = sum(c[2] for c in callers.values())
    if depth == 0 or not callers or total <= 0:
        return {OTHER: 1.0}
    shares: dict[str, float] = {}
    for caller, entry in callers.items():
        for layer, share in _layers(caller, stats, depth - 1).items():
            shares[layer] = shares.get(layer, 0.0) + share * entry[2] / total
    return shares


class LayerProfile:
    """A profile of one operation: threads() around all of it (so that the threads it
    starts are followed), window() around the part that counts."""

    def __init__(self) -> None:
        self._profiles: list[cProfile.Profile] = []
        self._on = False

    @contextmanager
    def threads(self) -> Iterator[None]:
        threading.setprofile(self._thread_hook)
        try:
            yield
        finally:
            threading.setprofile(None)  # type: ignore[arg-type]

    def _thread_hook(self, frame: object, event: str, arg: object) -> None:
        # Runs in each thread started under threads() until the window opens; then a
        # profiler of the thread's own replaces it. Threads run on after the window
        # until they end: the caller closes what it started soon after.
        if self._on:
            profile = _profile()
            self._profiles.append(profile)
            profile.enable()

    @contextmanager
    def window(self) -> Iterator[None]:
        main = _profile()
        self._profiles.append(main)
        self._on = True
        main.enable()
        try:
            yield
        finally:
            main.disable()
            self._on = False

    def seconds(self) -> dict[str, float]:
        """CPU seconds per layer over every profiled thread."""
        return attribute(self._merged())

    def calls(self) -> dict[str, int]:
        """Calls per layer and of built-ins over every profiled thread (count_calls)."""
        return count_calls(self._merged())

    def _merged(self) -> Mapping[Key, tuple[Any, ...]]:
        """The profiled threads' stats together (none: empty, which every layer reads as 0)."""
        merged = pstats.Stats(*self._profiles)
        return merged.stats  # type: ignore[attr-defined,no-any-return]


def _profile() -> cProfile.Profile:
    """A profiler timed by the CPU clock of the calling thread, bound to that thread: a
    profile read from another thread while its own still runs (its pending calls are then
    closed with the timer) reads the right clock."""
    clock = time.pthread_getcpuclockid(threading.get_ident())
    return cProfile.Profile(functools.partial(time.clock_gettime, clock))


def shares(seconds: Mapping[str, float]) -> dict[str, float]:
    """Each layer's share of the total (0 for all when nothing was profiled)."""
    total = sum(seconds.values())
    return {layer: (seconds.get(layer, 0.0) / total if total else 0.0) for layer in LAYERS}
