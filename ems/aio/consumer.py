"""The asyncio consumer: an async handler on the event loop, the group protocol of the
sync Consumer underneath.

The membership, the partition session, the consumption log and the cursors are the sync
Consumer's own, driven from one worker thread per consumer, so a sync and an async member
follow one protocol by construction (there is no second implementation to drift). The
event loop never waits on MySQL or Redis: every database step is awaited off the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import signal
import threading
import time
from collections import defaultdict, deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from types import CoroutineType, TracebackType
from typing import Any, ParamSpec, Self, TypeVar, Unpack, cast

from ems.aio.exactly_once import AsyncExactlyOnce, AsyncTransactionFactory, check_transactional
from ems.backend import Backend
from ems.config import Settings
from ems.consumer.consumer import IDLE_WAIT, POLL_WAIT, failed, many
from ems.consumer.consumer import Consumer as SyncConsumer
from ems.consumer.errors import LeaseLost
from ems.consumer.exactly_once import PULL_REFUSED
from ems.consumer.groups import ConsumerOptions, GroupOptions, with_options
from ems.consumer.state import Acks, Outcome, Settled, batch_settled, holds_back
from ems.exceptions import InvalidHandler, InvalidSetting, LockConflict, ServerUnavailable
from ems.retry.requested import ERROR_CHARS, check_delay
from ems.store import Store
from ems.store.errors import StaleGeneration
from ems.types import Delivery, GroupInfo, TopicInfo
from ems.validation import check_name, check_positive_int

log = logging.getLogger(__name__)

#: `async def handle(delivery)`; a plain function also works, run on the loop itself.
AsyncHandler = Callable[[Delivery], Awaitable[object] | object]
#: An exactly-once handler: `async def handle(delivery, transaction)` (what the factory
#: gave: an AsyncSession or AsyncConnection).
AsyncTransactionalHandler = Callable[[Delivery, Any], Awaitable[object] | object]
#: Most handler calls one partition may have running at once (an unordered group).
MAX_CONCURRENCY = 1000

P = ParamSpec("P")
T = TypeVar("T")


class Consumer:
    """A member of consumer group `group` on `topic`, for asyncio code.

    Push form: `await run()` awaits `handler(delivery)` for each message (returning acks,
    raising retries) until stop(), SIGTERM/SIGINT or cancellation, then acks what was
    handled, commits and leaves. Pull form: `await poll()` then `await ack(...)` or
    `await nack(...)`, or `async for delivery in consumer` (acks stay explicit: a delivery
    not acked within the group's ack timeout comes again).

    Partitions are handled concurrently; within one partition, `concurrency` handler calls
    at most run at once (default 1: one at a time, in offset order). Above 1 the group must
    be unordered. A cursor never moves past a message whose handler has not finished.
    With `transactional` (a SQLAlchemy AsyncEngine or async_sessionmaker, or a callable
    returning an AsyncSession or AsyncConnection, on the server that holds ems's
    database), run() consumes exactly once, as ems.Consumer's: the handler is awaited
    with (delivery, transaction), one message at a time, and each batch's writes commit
    with its settlement or not at all (see docs/transactions.md).
    Options, the backend and the attributes (`group`, `topic`, `options`, `handler`,
    `client_id`) are those of ems.Consumer; `group`, `topic` and `client_id` are there
    from the join on (start()), and raise RuntimeError before.
    """

    def __init__(
        self,
        group: str,
        topic: str,
        handler: AsyncHandler | AsyncTransactionalHandler | None = None,
        *,
        concurrency: int = 1,
        settings: Settings | None = None,
        store: Store | None = None,
        metrics_port: int | None = None,
        backend: Backend | None = None,
        transactional: AsyncTransactionFactory | None = None,
        **options: Unpack[ConsumerOptions],
    ) -> None:
        check_name(group, "group")
        check_name(topic, "topic")
        if handler is not None and not callable(handler):
            raise InvalidHandler(f"handler must be callable, not {type(handler).__name__}")
        check_positive_int(concurrency, "concurrency", MAX_CONCURRENCY)
        if concurrency > 1 and options.get("ordered"):
            raise InvalidSetting("concurrency above 1 needs an unordered group (ordered=False)")
        if transactional is not None:
            broadcast = bool(options.get("broadcast", False))
            check_transactional(transactional, handler, broadcast, concurrency)
        self._transactional = transactional
        #: Set at the join when transactional.
        self._exactly_once: AsyncExactlyOnce | None = None
        #: Checked now, so bad options raise here and not at the first await.
        self.options = GroupOptions.checked(**options)
        self._names = (group, topic)
        self.handler = handler
        self.concurrency = concurrency
        self._args: dict[str, Any] = {
            **options,
            "settings": settings,
            "store": store,
            "metrics_port": metrics_port,
            "backend": backend,
        }
        self._sync: SyncConsumer | None = None
        #: The member while start() joins: its client id is the one it registers under, so
        #: a task that already sees it in the group can name it before start() returns.
        self._joining: SyncConsumer | None = None
        self._worker = ThreadPoolExecutor(1, thread_name_prefix=f"ems-aio-{group}")
        self._starting: asyncio.Future[None] | None = None
        self._stopping = threading.Event()
        self._closed = False
        #: Deliveries fetched by a poll whose caller was cancelled: the next poll returns them.
        self._held: deque[Delivery] = deque()
        self._iterated: deque[Delivery] = deque()
        #: run()'s outcomes of its last batch, handed to the member with the next poll (or
        #: by close()): one trip to the worker thread for both, not one each.
        self._unsettled: Settled = []

    #: What inspect.signature and help() show: every option of GroupOptions by name.
    __signature__ = with_options(__init__)

    # -- lifecycle ---------------------------------------------------------------------

    @property
    def client_id(self) -> str:
        """This member's id in the group: set from the join on, while start() may still be
        under way (and a new one after a lapsed lease made the member join again)."""
        return self._joined().client_id

    @property
    def group(self) -> GroupInfo:
        """The group joined, as ems.Consumer's `group` (from the join on)."""
        return self._joined().group

    @property
    def topic(self) -> TopicInfo:
        """The topic consumed, as ems.Consumer's `topic` (from the join on)."""
        return self._joined().topic

    def _joined(self) -> SyncConsumer:
        member = self._sync or self._joining
        if member is None:
            raise RuntimeError("the consumer has not joined: await start() first")
        return member

    @property
    def _member(self) -> SyncConsumer:
        if self._sync is None:
            raise RuntimeError("the consumer has not started: await start() first")
        return self._sync

    async def start(self) -> None:
        """Look up the topic, create or check the group and join it (done by the first
        poll or run when not awaited)."""
        if self._closed:
            raise RuntimeError("the consumer is closed")
        if self._starting is None:
            self._starting = asyncio.ensure_future(self._off_loop(self._join))
        try:
            await asyncio.shield(self._starting)
        except Exception:
            # The join failed (an unknown topic, a conflicting group): this consumer
            # cannot be used, and its worker thread goes now rather than at exit.
            self._worker.shutdown(wait=False)
            raise

    def _join(self) -> None:
        group, topic = self._names
        member = SyncConsumer(group, topic, None, **self._args)
        try:
            if self.concurrency > 1 and member.policy.ordered:
                raise InvalidSetting(
                    f"group {group!r} is ordered: concurrency above 1 needs an unordered group"
                )
            if self._transactional is not None:
                handler = cast(AsyncTransactionalHandler, self.handler)
                self._exactly_once = AsyncExactlyOnce(
                    self._transactional, handler, member.settler(), self._off_loop
                )
            self._joining = member
            member.start()
        except BaseException:
            self._joining = None
            member.close()
            raise
        self._sync = member
        if self._stopping.is_set():
            member.stop()

    def stop(self) -> None:
        """Ask run() (or an `async for`) to finish the batch in hand, ack it, commit and
        leave. Safe from any thread, a signal handler or the loop."""
        self._stopping.set()
        if self._sync is not None:
            self._sync.stop()

    async def close(self) -> None:
        """Commit the cursors and leave the group. Deliveries polled and not acked are
        delivered again, to this group's next owner of their partition."""
        if self._closed:
            return
        self._closed = True
        self.stop()
        try:
            if self._starting is not None:
                with contextlib.suppress(Exception):
                    await asyncio.shield(self._starting)
            if self._sync is not None:
                settled, self._unsettled = self._unsettled, []
                await asyncio.shield(self._off_loop(_settle_then_close, self._sync, settled))
        finally:
            self._worker.shutdown(wait=False)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- pull form ---------------------------------------------------------------------

    async def poll(self, timeout: float = 1.0, max_messages: int | None = None) -> list[Delivery]:
        """Deliveries from this member's partitions, waiting up to timeout seconds for
        some. A poll cancelled while fetching keeps what it fetched for the next poll."""
        await self.start()
        # Under run(): the last batch's outcomes go to the member first, in the same trip
        # to the worker thread (as the sync Consumer's run() settles a batch and polls
        # the next on its thread); if that trip fails they are dropped, and their batch
        # comes again, as when a settle fails.
        settled, self._unsettled = self._unsettled, []
        if self._held:
            await self._settle(settled, wait=False)
            limit = max_messages or len(self._held)
            return [self._held.popleft() for _ in range(min(limit, len(self._held)))]
        fetching = asyncio.ensure_future(
            self._off_loop(_settle_then_poll, self._member, settled, timeout, max_messages)
        )
        try:
            return await asyncio.shield(fetching)
        except asyncio.CancelledError:
            fetching.add_done_callback(self._hold)
            raise

    def _hold(self, fetched: asyncio.Future[list[Delivery]]) -> None:
        if not fetched.cancelled() and fetched.exception() is None:
            self._held.extend(fetched.result())

    async def ack(self, deliveries: Delivery | Iterable[Delivery]) -> None:
        """Ack deliveries, written before this returns. Cancelled, the ack is still
        written or the deliveries come again: nothing acked is lost either way."""
        self._refuse_pull_settling()
        await self._settle(Acks(many(deliveries)), wait=True)

    async def nack(
        self,
        deliveries: Delivery | Iterable[Delivery],
        error: str = "nack",
        delay: float | None = None,
    ) -> None:
        """Fail deliveries: retried after `delay` seconds (default: the group's ladder;
        0 to a year, else InvalidSetting), or dead-lettered after the group's last
        attempt."""
        self._refuse_pull_settling()
        delay = None if delay is None else check_delay(delay)
        error = str(error)[:ERROR_CHARS]
        await self._settle([Outcome(d, error, delay) for d in many(deliveries)], wait=True)

    def _refuse_pull_settling(self) -> None:
        if self._transactional is not None:
            raise InvalidSetting(PULL_REFUSED)

    async def _settle(self, outcomes: Settled, *, wait: bool) -> None:
        if self._closed:
            # Closed meanwhile by another task: close() wrote what was pending and left;
            # these come again to the partitions' next owners.
            return
        if outcomes:
            member = self._member
            await asyncio.shield(self._off_loop(member.settle, outcomes, wait=wait))

    def __aiter__(self) -> AsyncIterator[Delivery]:
        return self

    async def __anext__(self) -> Delivery:
        while not self._iterated:
            if self._stopping.is_set():
                raise StopAsyncIteration
            self._iterated.extend(await self.poll(timeout=IDLE_WAIT))
        return self._iterated.popleft()

    # -- push form ---------------------------------------------------------------------

    async def run(self, max_messages: int | None = None, *, handle_signals: bool = True) -> int:
        """Await the handler for each message until stop(), SIGTERM or SIGINT (or
        max_messages), then ack what was handled, commit and leave; cancelled, the same,
        and CancelledError is raised again. Returns the number of messages handled."""
        if self.handler is None:
            raise InvalidHandler("run() needs a handler; use poll() and ack() without one")
        handled = 0
        with _loop_signals(self.stop, enabled=handle_signals):
            try:
                while not self._stopping.is_set():
                    if max_messages is not None and handled >= max_messages:
                        break
                    room = None if max_messages is None else max_messages - handled
                    handled += await self._run_once(room)
            finally:
                await self.close()
        return handled

    async def _run_once(self, room: int | None) -> int:
        successes: list[Delivery] = []
        failures: list[Outcome] = []
        try:
            batch = await self.poll(timeout=IDLE_WAIT, max_messages=room)
            if self._exactly_once is not None:
                self._member.meter.add(len(batch))
                await self._exactly_once.handle(batch)
                return len(batch)
            try:
                await self._handle(batch, successes, failures)
            finally:
                # Acks commit on the ack writer while the next batch is fetched;
                # cancelled or stopped, close() hands them over: what finished is acked
                # and the rest comes again.
                self._unsettled = batch_settled(successes, failures)
            return len(batch)
        except (ServerUnavailable, LockConflict, StaleGeneration, LeaseLost) as exc:
            log.warning("consume round failed, retrying: %s", exc)
            await asyncio.sleep(POLL_WAIT)
            return 0

    async def _handle(
        self, batch: list[Delivery], successes: list[Delivery], failures: list[Outcome]
    ) -> None:
        """Handle the batch, each partition's deliveries in order, recording each
        delivery in successes or failures as its handler call ends."""
        by_partition: dict[int, list[Delivery]] = defaultdict(list)
        for d in batch:
            by_partition[d.partition].append(d)
        runs = [self._partition(ds, successes, failures) for ds in by_partition.values()]
        if len(runs) == 1:
            await runs[0]
        elif runs:
            await asyncio.gather(*runs)

    async def _partition(
        self, deliveries: list[Delivery], successes: list[Delivery], failures: list[Outcome]
    ) -> None:
        if self.concurrency == 1:
            # _call written out, with what it looks up bound once: this runs per message.
            member = self._member
            policy, observe = member.policy, member.metrics.handler_seconds.observe
            handler = cast(AsyncHandler, self.handler)
            for d in deliveries:
                began = time.perf_counter()
                try:
                    result = handler(d)
                    if type(result) is CoroutineType or inspect.isawaitable(result):
                        await result
                except Exception as exc:  # the handler's failure is the message's, not ours
                    observe(time.perf_counter() - began)
                    failure = failed(d, exc)
                    failures.append(failure)
                    if holds_back(failure, policy):
                        return  # ordered: a retry in place blocks the rest of its partition's batch
                    continue
                observe(time.perf_counter() - began)
                successes.append(d)
            return
        room = asyncio.Semaphore(self.concurrency)

        async def one(d: Delivery) -> None:
            async with room:
                failure = await self._call(d)
            if failure is None:
                successes.append(d)
            else:
                failures.append(failure)

        await asyncio.gather(*(one(d) for d in deliveries))

    async def _call(self, d: Delivery) -> Outcome | None:
        """The handler's call on d: its failure, or None when it succeeded."""
        handler = cast(AsyncHandler, self.handler)
        began = time.perf_counter()
        failure = None
        try:
            result = handler(d)
            if type(result) is CoroutineType or inspect.isawaitable(result):
                await result
        except Exception as exc:  # the handler's failure is the message's, not ours
            failure = failed(d, exc)
        self._member.metrics.handler_seconds.observe(time.perf_counter() - began)
        return failure

    # -- the worker thread ---------------------------------------------------------------

    async def _off_loop(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """fn on this consumer's worker thread: one database step at a time, in order."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._worker, functools.partial(fn, *args, **kwargs))


def _settle_then_poll(
    member: SyncConsumer, settled: Settled, timeout: float, max_messages: int | None
) -> list[Delivery]:
    """On the worker thread: hand the outcomes to the ack writer, then poll."""
    if settled:
        member.settle(settled, wait=False)
    return member.poll(timeout, max_messages)


def _settle_then_close(member: SyncConsumer, settled: Settled) -> None:
    """On the worker thread: hand the outcomes to the ack writer, then close (which
    writes them, commits the cursors and leaves)."""
    try:
        if settled:
            member.settle(settled, wait=False)
    finally:
        member.close()


@contextlib.contextmanager
def _loop_signals(stop: Callable[[], None], *, enabled: bool) -> Iterator[None]:
    """SIGTERM and SIGINT ask for a graceful stop while run() runs (main thread's loop)."""
    if not enabled or threading.current_thread() is not threading.main_thread():
        yield
        return
    loop = asyncio.get_running_loop()
    previous = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    installed = []
    for s in previous:
        try:
            loop.add_signal_handler(s, _on_signal, s, stop)
        except (NotImplementedError, RuntimeError):
            continue
        installed.append(s)
    try:
        yield
    finally:
        for s in installed:
            loop.remove_signal_handler(s)
            # The loop resets a signal to its default: put back what was there (the
            # application's own handler, asyncio.run's SIGINT handler).
            if previous[s] is not None:
                signal.signal(s, previous[s])


def _on_signal(signum: int, stop: Callable[[], None]) -> None:
    log.info("signal %d: finishing the batch in hand, then leaving", signum)
    stop()
