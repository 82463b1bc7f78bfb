"""ems.service.Service: the one start/stop/join contract of ems's background threads."""

from __future__ import annotations

import queue
import threading

from ems.service import Service

WAIT = 10.0  # seconds: a bound for a busy machine, never a pause


def test_a_loop_runs_on_its_named_thread_until_stopped() -> None:
    turns: list[str] = []
    running = threading.Event()

    def loop() -> None:
        while not service.stopping.wait(0.001):
            turns.append(threading.current_thread().name)
            running.set()

    service = Service("ems-test-loop", loop)
    assert not service.started and not service.is_alive()
    service.start()
    assert running.wait(WAIT)
    assert service.is_alive()
    assert service.stop_and_join(WAIT)
    assert not service.is_alive()
    assert set(turns) == {"ems-test-loop"}


def test_start_twice_runs_one_loop() -> None:
    entered: queue.Queue[int] = queue.Queue()
    release = threading.Event()

    def loop() -> None:
        entered.put(1)
        release.wait(WAIT)

    service = Service("ems-test-once", loop)
    service.start()
    service.start()
    assert entered.get(timeout=WAIT) == 1
    release.set()
    assert service.join(WAIT)
    assert entered.empty()


def test_stop_wakes_a_loop_that_waits_on_something_else() -> None:
    jobs: queue.Queue[str | None] = queue.Queue()
    done: list[str] = []

    def loop() -> None:
        while (job := jobs.get()) is not None:
            done.append(job)

    service = Service("ems-test-queue", loop, wake=lambda: jobs.put(None))
    service.start()
    jobs.put("a")
    jobs.put("b")
    assert service.stop_and_join(WAIT)
    assert done == ["a", "b"]  # what was queued before the stop is done


def test_join_says_whether_the_loop_ended() -> None:
    release = threading.Event()
    service = Service("ems-test-join", lambda: release.wait(WAIT))
    service.start()
    service.stop()  # asked, but this loop looks at its own event only
    assert not service.join(0.01)
    release.set()
    assert service.join(WAIT)


def test_a_service_never_started_stops_and_joins_at_once() -> None:
    woken: list[bool] = []
    service = Service("ems-test-idle", lambda: None, wake=lambda: woken.append(True))
    assert service.stop_and_join(0)
    assert service.stopping.is_set() and woken == [True]
    service.stop()  # twice: harmless
    assert service.join()


def test_a_loop_may_stop_and_join_itself() -> None:
    ended = threading.Event()

    def loop() -> None:
        assert not service.stop_and_join(0)  # itself: it has not ended yet
        ended.set()

    service = Service("ems-test-self", loop)
    service.start()
    assert ended.wait(WAIT)
    assert service.join(WAIT)


def test_services_that_share_a_stopping_event_stop_together() -> None:
    stopping = threading.Event()
    services = [Service(f"ems-test-{i}", stopping.wait, stopping=stopping) for i in range(2)]
    for service in services:
        service.start()
    services[0].stop()
    assert all(service.join(WAIT) for service in services)
