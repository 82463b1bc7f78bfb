"""The cost model's split of client CPU by layer: which layer a module's code is, how a
profile's self time is charged to layers, and that a profile follows threads."""

from __future__ import annotations

import json
import threading

import pytest

from benchmarks.layers import (
    BUILT_INS,
    CALL_COLUMNS,
    LAYERS,
    OTHER,
    LayerProfile,
    attribute,
    count_calls,
    layer_of,
    shares,
)

SITE = "/venv/lib/python3.11/site-packages"
EMS = "/work/main/ems"


@pytest.mark.parametrize(
    ("filename", "layer"),
    [
        (f"{EMS}/producer/producer.py", "ems.producer"),
        (f"{EMS}/consumer/cluster.py", "ems.consumer"),
        (f"{EMS}/store/messages.py", "ems.store"),
        (f"{EMS}/values/fetch.py", "ems.values+types"),
        (f"{EMS}/types.py", "ems.values+types"),
        (f"{EMS}/offsets/reader.py", "ems.offsets"),
        (f"{EMS}/offsets/resp.py", "redis"),
        (f"{EMS}/coordination/membership.py", "ems (other)"),
        (f"{EMS}/config.py", "ems (other)"),
        (f"{SITE}/pymysql/connections.py", "pymysql"),
        (f"{SITE}/redis/client.py", "redis"),
        (f"{SITE}/sqlalchemy/engine/base.py", "sqlalchemy"),
        (f"{SITE}/kombu/connection.py", OTHER),
        ("/usr/lib/python3.11/json/decoder.py", OTHER),
        ("/work/main/benchmarks/writers.py", OTHER),
        ("~", None),
        ("<string>", None),
    ],
)
def test_a_file_belongs_to_the_layer_of_its_package(filename: str, layer: str | None) -> None:
    assert layer_of(filename) == layer


def test_self_time_goes_to_the_functions_layer_and_a_builtins_to_its_callers() -> None:
    store = (f"{EMS}/store/messages.py", 10, "fetch")
    driver = (f"{SITE}/pymysql/connections.py", 20, "_read_packet")
    init = ("<string>", 2, "__init__")  # a dataclass's generated __init__
    recv = ("~", 0, "<method 'recv_into' of '_socket.socket' objects>")
    setattr_ = ("~", 0, "<built-in method __setattr__ of type object>")
    stats = {
        store: (1, 1, 2.0, 10.0, {}),
        driver: (5, 5, 3.0, 7.0, {store: (5, 5, 3.0, 7.0)}),
        # recv_into: 4 s under the driver, 1 s under the store
        recv: (6, 6, 5.0, 5.0, {driver: (5, 5, 4.0, 4.0), store: (1, 1, 1.0, 1.0)}),
        init: (2, 2, 0.5, 1.5, {store: (2, 2, 0.5, 1.5)}),
        # built-in under file-less code under the store: the store pays
        setattr_: (4, 4, 1.0, 1.0, {init: (4, 4, 1.0, 1.0)}),
    }
    seconds = attribute(stats)
    assert set(seconds) == set(LAYERS)
    assert seconds["ems.store"] == pytest.approx(2.0 + 1.0 + 0.5 + 1.0)
    assert seconds["pymysql"] == pytest.approx(3.0 + 4.0)
    assert sum(seconds.values()) == pytest.approx(11.5)
    assert shares(seconds)["pymysql"] == pytest.approx(7.0 / 11.5)


def test_a_builtin_without_callers_is_other() -> None:
    lone = ("~", 0, "<built-in method time.sleep>")
    assert attribute({lone: (1, 1, 0.25, 0.25, {})})[OTHER] == pytest.approx(0.25)
    assert shares(dict.fromkeys(LAYERS, 0.0)) == dict.fromkeys(LAYERS, 0.0)


def test_calls_go_to_the_functions_layer_and_builtins_apart() -> None:
    store = (f"{EMS}/store/messages.py", 10, "fetch")
    driver = (f"{SITE}/pymysql/connections.py", 20, "_read_packet")
    init = ("<string>", 2, "__init__")  # generated code: a Python call without a file
    recv = ("~", 0, "<method 'recv_into' of '_socket.socket' objects>")
    stats = {
        store: (1, 3, 2.0, 10.0, {}),  # 3 calls, 1 of them primitive (recursion)
        driver: (5, 5, 3.0, 7.0, {store: (5, 5, 3.0, 7.0)}),
        recv: (6, 6, 5.0, 5.0, {driver: (6, 6, 5.0, 5.0)}),
        init: (2, 2, 0.5, 1.5, {store: (2, 2, 0.5, 1.5)}),
    }
    calls = count_calls(stats)
    assert list(calls) == list(CALL_COLUMNS)
    assert (calls["ems.store"], calls["pymysql"], calls[OTHER], calls[BUILT_INS]) == (3, 5, 2, 6)
    assert sum(calls.values()) == 16
    assert LayerProfile().calls() == dict.fromkeys(CALL_COLUMNS, 0)
    assert LayerProfile().seconds() == dict.fromkeys(LAYERS, 0.0)


def _twice(values: list[int]) -> list[int]:
    return [v * 2 for v in values]


def _window_calls(times: int) -> dict[str, int]:
    profile = LayerProfile()
    _twice([1])  # before the window: not counted
    with profile.threads(), profile.window():
        for _ in range(times):
            _twice([1, 2, 3])
    return profile.calls()


def test_a_profile_counts_the_calls_of_its_window_only() -> None:
    empty, seven = _window_calls(0), _window_calls(7)
    # this test file is other; each call of _twice runs its list comprehension's frame too
    # (the window's own exit, the same in both, is counted once in each)
    assert seven[OTHER] - empty[OTHER] == 14
    assert seven[BUILT_INS] == empty[BUILT_INS]
    assert all(seven[layer] == 0 for layer in LAYERS if layer != OTHER)


def _encode_many(stop: threading.Event, spins: list[int]) -> None:
    while not stop.is_set():
        json.dumps({"readings": list(range(200))})
        spins[0] += 1


def test_a_profile_counts_a_thread_started_before_its_window() -> None:
    profile = LayerProfile()
    stop, spins = threading.Event(), [0]
    with profile.threads():
        worker = threading.Thread(target=_encode_many, args=(stop, spins))
        worker.start()
        with profile.window():
            seen = spins[0]
            while spins[0] < seen + 200:  # the thread works inside the window
                pass
        stop.set()
        worker.join()
    seconds = profile.seconds()
    # json's encoder is stdlib; the main thread only spun in this test file (also other)
    assert seconds[OTHER] > 0.001
    assert sum(seconds.values()) == pytest.approx(seconds[OTHER])
