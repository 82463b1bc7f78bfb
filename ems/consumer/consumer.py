"""Consumer: join a group on a topic and receive its messages.

Cluster groups share the partitions among live members (the leader assigns them, sticky
and balanced); each message is delivered to the group at least once, in offset order per
partition, and failures are retried by the group's backoff ladder and then dead-lettered.
Broadcast groups deliver every message to every live member.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from types import TracebackType
from typing import Unpack

from sqlalchemy import Engine

from ems.backend import Backend, mysql_backend
from ems.config import Settings
from ems.consumer.builder import build
from ems.consumer.cluster import ClusterSession
from ems.consumer.errors import LeaseLost
from ems.consumer.exactly_once import (
    PULL_REFUSED,
    ExactlyOnce,
    Settler,
    TransactionFactory,
    check_use,
)
from ems.consumer.groups import ConsumerOptions, GroupOptions, with_options
from ems.consumer.state import Acks, Outcome, Settled, batch_settled, holds_back
from ems.exceptions import (
    EmsError,
    InvalidHandler,
    InvalidSetting,
    InvalidTransaction,
    LockConflict,
    ServerUnavailable,
)
from ems.metrics import MetricsServer, start_server
from ems.retry.requested import ERROR_CHARS, DeadLetter, Retry, check_delay, verdict
from ems.retry.tracebacks import format_traceback
from ems.signals import relayed
from ems.store import Store
from ems.store.errors import StaleGeneration
from ems.types import Delivery
from ems.validation import check_name

log = logging.getLogger(__name__)

#: A handler of (delivery), or of (delivery, transaction) for an exactly-once consumer.
Handler = Callable[..., object]

#: Longest wait between looks at the partitions while pub/sub wake-ups arrive, and while
#: they do not (Redis unreachable: plain polling).
IDLE_WAIT = 1.0
POLL_WAIT = 0.2
#: Seconds between updates of the leader-epoch gauge.
GAUGE_EVERY = 1.0


class Consumer:
    """A member of consumer group `group` on `topic`.

    Use `run()` with a handler (returning normally acks, raising retries), or the pull
    form: `poll()` returns deliveries, then `ack()` or `nack()` them. The group is created
    on first use with the options given; an existing group keeps its settings, and
    options that contradict them raise GroupConflict. A batch holds at most batch_size
    messages and max_batch_bytes of bodies (a single larger message comes alone); both are
    this member's own, not the group's.

    With `transactional` (a SQLAlchemy sessionmaker or Engine, or a callable returning a
    Session, Connection or PyMySQL connection to the server that holds ems's database),
    run() consumes exactly once: the handler receives (delivery, transaction), writes
    through it, and each batch's writes commit with its settlement or not at all (see
    docs/transactions.md).

    It runs on MySQL and Redis (`settings`, or the environment; `store`, a Store the
    caller keeps and closes), or on another `backend`, such as ems.testing's in-memory
    twin.

    Its options (`**options`) are ems.consumer.groups.GroupOptions's fields; ems.aio's
    Consumer takes the same. Both show the same attributes: `group` (the GroupInfo
    joined), `topic` (the TopicInfo), `options` (the GroupOptions checked), `handler`
    and `client_id`.
    """

    def __init__(
        self,
        group: str,
        topic: str,
        handler: Handler | None = None,
        *,
        settings: Settings | None = None,
        store: Store | None = None,
        metrics_port: int | None = None,
        backend: Backend | None = None,
        transactional: TransactionFactory | None = None,
        **options: Unpack[ConsumerOptions],
    ) -> None:
        check_name(group, "group")
        check_name(topic, "topic")
        if handler is not None and not callable(handler):
            raise InvalidHandler(f"handler must be callable, not {type(handler).__name__}")
        if transactional is not None:
            _check_transactional(transactional, handler, options.get("broadcast", False))
        self.options = GroupOptions.checked(**options)
        self.handler = handler
        if backend is None:
            backend = mysql_backend(settings or Settings.from_env(), store)
        self.settings = backend.settings
        self._backend = backend
        self.store = backend.store
        self.publisher = backend.notifier
        try:
            parts = build(backend, group, topic, self.options)
        except BaseException:
            self._release_backend()
            raise
        self.topic, self.group, self.policy = parts.topic, parts.group, parts.policy
        self.membership, self.session = parts.membership, parts.session
        self.listener, self.inbox = parts.subscription, parts.inbox
        self._follow = parts.follow
        self.metrics, self.meter = parts.metrics, parts.meter
        self._exactly_once: ExactlyOnce | None = None
        if transactional is not None:
            try:
                settler = self.settler()
            except BaseException:
                self._release_backend()
                raise
            assert handler is not None
            self._exactly_once = ExactlyOnce(transactional, handler, settler)
        self._stopping = threading.Event()
        self._started = False
        self._closed = False
        #: Serve Prometheus /metrics on this port from start() (0: any free port; the
        #: port taken is metrics_server.port).
        self.metrics_port = metrics_port
        self.metrics_server: MetricsServer | None = None
        self._next_gauges = 0.0
        #: The stored high watermarks the lag gauge last read, and when (monotonic).
        self._highs: Mapping[int, int] = {}
        self._highs_at = -GAUGE_EVERY

    #: What inspect.signature and help() show: every option of GroupOptions by name.
    __signature__ = with_options(__init__)

    def settler(self) -> Settler:
        """What settles this member's exactly-once batches through their own
        transactions (ems.aio's Consumer drives it too); InvalidSetting off the MySQL
        backend or in a broadcast group."""
        settlements = self._backend.settlements
        if settlements is None or not isinstance(self.session, ClusterSession):
            raise InvalidSetting("exactly-once consumption needs the MySQL backend")
        return Settler(
            self.session,
            settlements,
            policy=self.policy,
            failed=failed,
            observe=self.metrics.handler_seconds.observe,
            idle_timeout=self.settings.idle_transaction_timeout,
        )

    # -- lifecycle ---------------------------------------------------------------------

    @property
    def client_id(self) -> str:
        return self.membership.client_id

    def start(self) -> None:
        """Join the group (done by the first poll or run when not called)."""
        if not self._started:
            if self.metrics_port is not None and self.metrics_server is None:
                self.metrics_server = _serve_metrics(self.metrics_port, self.settings.metrics_addr)
            self._started = True
            self.metrics.track_lag(self._lag)
            self.listener.start()
            self.membership.start()

    def stop(self) -> None:
        """Ask run() to finish its batch, ack it, commit and leave. Safe from any thread
        (from a signal handler through ems.signals.relayed: it sets events)."""
        self._stopping.set()
        self.inbox.wake.set()

    def close(self) -> None:
        """Commit the cursors and leave the group. Deliveries polled and not acked are
        delivered again, to this group's next owner of their partition."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._started:
                try:
                    self.session.close()  # pending acks, then the cursors
                finally:
                    # Whatever the last commit met, no thread renews a closed member.
                    try:
                        self.membership.leave()
                    finally:
                        self.listener.stop()
        finally:
            self._release_backend()
            self.metrics.left()
            if self.metrics_server is not None:
                self.metrics_server.close()

    def __enter__(self) -> Consumer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- pull form ---------------------------------------------------------------------

    def poll(self, timeout: float = 1.0, max_messages: int | None = None) -> list[Delivery]:
        """Deliveries from this client's partitions, waiting up to timeout seconds for
        some. Deliveries not acked within the group's ack timeout are retried."""
        self.start()
        limit = min(max_messages or self.options.batch_size, self.options.batch_size)
        deadline = time.monotonic() + timeout
        while True:
            news = self.inbox.take()
            if news:
                self.session.mark(news)
            self.membership.check()
            self.session.sync()
            # Before the read: news of a partition taken now is read with it, or wakes us.
            interest = self.session.interest()
            if interest != self.inbox.interest:
                self.inbox.interest = interest
                self._follow(interest)
            late = self.session.expire()
            if late:
                self.session.settle(late, wait=False)
            batch = self.session.fetch(limit, self.options.max_batch_bytes)
            self._update_gauges()
            left = deadline - time.monotonic()
            if batch or left <= 0 or self._stopping.is_set():
                return batch
            idle = IDLE_WAIT if self.listener.connected.is_set() else POLL_WAIT
            if not self.inbox.wake.wait(min(left, idle)):
                # No wake-up for a while (none sent, one lost, or no Redis): one look at
                # the high watermarks (an index dive per partition) picks the partitions
                # worth a read, rather than a read of every partition.
                self.session.mark(self._news())
            self.inbox.wake.clear()

    def _news(self) -> dict[int, int]:
        """{partition: highest stored offset} of the partitions that hold messages."""
        # The session's topic: it learns of partitions added since the start.
        highs = self.store.messages.high_watermarks(self.session.topic)
        return {p: high - 1 for p, high in highs.items() if high > 0}

    def ack(self, deliveries: Delivery | Iterable[Delivery]) -> None:
        self.settle(Acks(many(deliveries)))

    def nack(
        self,
        deliveries: Delivery | Iterable[Delivery],
        error: str = "nack",
        delay: float | None = None,
    ) -> None:
        """Fail deliveries: retried after `delay` seconds (default: the group's ladder;
        0 to a year, else InvalidSetting), or dead-lettered after the group's last
        attempt."""
        delay = None if delay is None else check_delay(delay)
        error = str(error)[:ERROR_CHARS]
        self.settle(Outcome(d, error, delay) for d in many(deliveries))

    def settle(self, outcomes: Iterable[Outcome] | Acks, *, wait: bool = True) -> None:
        """Apply outcomes (an error of None acks), or a batch of successes: written
        before returning (wait), or by the ack writer while the next batch is fetched."""
        if self._exactly_once is not None:
            raise InvalidSetting(PULL_REFUSED)
        outcomes = outcomes if isinstance(outcomes, Acks) else list(outcomes)
        self.meter.add(len(outcomes))
        self.session.settle(outcomes, wait=wait)

    # -- push form ---------------------------------------------------------------------

    def run(self, max_messages: int | None = None, *, handle_signals: bool = True) -> int:
        """Deliver messages to the handler until stop(), SIGTERM or SIGINT (or
        max_messages), then finish and ack the batch in hand, commit and leave. Returns
        the number of messages handled."""
        if self.handler is None:
            raise InvalidHandler("run() needs a handler; use poll() and ack() without one")
        handled = 0
        with _signals(self.stop, enabled=handle_signals):
            try:
                while not self._stopping.is_set():
                    if max_messages is not None and handled >= max_messages:
                        break
                    room = None if max_messages is None else max_messages - handled
                    handled += self._run_once(room)
            finally:
                self.close()
        return handled

    def _run_once(self, room: int | None) -> int:
        try:
            batch = self.poll(timeout=IDLE_WAIT, max_messages=room)
            if self._exactly_once is not None:
                self.meter.add(len(batch))
                self._exactly_once.handle(batch)
                return len(batch)
            # Acks commit on the ack writer while the next batch is fetched.
            self.settle(self._handle(batch), wait=False)
            return len(batch)
        except (ServerUnavailable, LockConflict, StaleGeneration, LeaseLost) as exc:
            log.warning("consume round failed, retrying: %s", exc)
            self._stopping.wait(POLL_WAIT)
            return 0

    def _handle(self, batch: list[Delivery]) -> Settled:
        assert self.handler is not None
        handled: list[Delivery] = []
        failures: list[Outcome] = []
        blocked: set[int] = set()
        observe = self.metrics.handler_seconds.observe
        # One clock read per message: a handler call ends where the next one begins.
        began = time.perf_counter()
        for d in batch:
            if d.partition in blocked:
                continue  # ordered: a retry in place blocks the rest of its partition's batch
            try:
                self.handler(d)
            except Exception as exc:  # the handler's failure is the message's, not ours
                observe(time.perf_counter() - began)
                outcome = failed(d, exc)
                failures.append(outcome)
                if holds_back(outcome, self.policy):
                    blocked.add(d.partition)
                began = time.perf_counter()
            else:
                ended = time.perf_counter()
                observe(ended - began)
                began = ended
                handled.append(d)
        return batch_settled(handled, failures)

    # -- gauges ------------------------------------------------------------------------

    def _update_gauges(self) -> None:
        """The leader epoch, at most once a second, from what the membership knows."""
        now = time.monotonic()
        if now < self._next_gauges:
            return
        self._next_gauges = now + GAUGE_EVERY
        self.metrics.leader_epoch.set(self.membership.epoch or 0)

    def _lag(self) -> Mapping[int, int] | None:
        """Lag per owned partition, read when /metrics is scraped (on the server's
        thread): the high watermark minus the committed cursor. The high watermark is the
        highest of what wake-ups announced, the read position, and the stored one (read
        at most once a second: one index dive per partition), so a member that joined a
        backlog shows all of it, not only the batch it has read."""
        known = dict(self.inbox.known_high)
        for p, high in self._stored_highs().items():
            known[p] = max(known.get(p, 0), high)
        return self.session.lag(known)

    def _stored_highs(self) -> Mapping[int, int]:
        now = time.monotonic()
        if now >= self._highs_at + GAUGE_EVERY:
            self._highs_at = now
            try:
                self._highs = self.store.messages.high_watermarks(self.session.topic)
            except EmsError as exc:  # a scrape while the database is away: the last ones
                log.debug("high watermarks not read for the lag gauge: %s", exc)
        return self._highs

    def _release_backend(self) -> None:
        self.publisher.close()
        if self._backend.owns_store:
            self.store.close()


def failed(d: Delivery, exc: Exception) -> Outcome:
    """A handler's exception as the delivery's failure: its text is the error the
    consumption log, the retry row and the dead letter keep, with its traceback, bounded
    (ems.retry.tracebacks). A failure is logged at WARNING with its whole traceback; a
    Retry (INFO) or a DeadLetter (WARNING) the handler raised is logged on one line, as
    the outcome it asked for."""
    found = verdict(exc)
    where = (d.topic, d.partition, d.offset, d.attempt)
    if isinstance(exc, Retry):
        log.info("handler asked to retry %s/%s@%s (attempt %d): %s", *where, found.error)
    elif isinstance(exc, DeadLetter):
        log.warning("handler dead-lettered %s/%s@%s (attempt %d): %s", *where, found.error)
    else:
        log.warning("handler failed on %s/%s@%s (attempt %d)", *where, exc_info=exc)
    return Outcome(d, found.error, found.delay, format_traceback(exc), found.dead)


def _check_transactional(factory: object, handler: object, broadcast: bool) -> None:
    check_use(handler, broadcast)
    if not (isinstance(factory, Engine) or callable(factory)):
        raise InvalidTransaction(
            "transactional takes a SQLAlchemy Engine or sessionmaker, or a callable that "
            f"returns a Session, Connection or PyMySQL connection, not a {type(factory).__name__}"
        )


def _serve_metrics(port: int, addr: str) -> MetricsServer:
    try:
        return start_server(port, addr)
    except OSError as exc:
        raise InvalidSetting(f"cannot serve metrics on {addr} port {port}: {exc}") from exc


def many(deliveries: Delivery | Iterable[Delivery]) -> list[Delivery]:
    return [deliveries] if isinstance(deliveries, Delivery) else list(deliveries)


@contextmanager
def _signals(stop: Callable[[], None], *, enabled: bool) -> Iterator[None]:
    """SIGTERM and SIGINT ask for a graceful stop while run() runs (main thread only)."""
    if not enabled or threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_signal(signum: int) -> None:
        log.info("signal %d: finishing the batch in hand, then leaving", signum)
        stop()

    with relayed((signal.SIGTERM, signal.SIGINT), on_signal):
        yield
