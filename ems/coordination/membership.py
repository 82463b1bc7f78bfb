"""A client's membership in a group: its lease, leadership, and the partitions it owns.

Two daemon threads, each an ems.service.Service. The heartbeat renews the lease every
`renew_every` seconds (database clock) and does nothing else, so the lease never waits
behind other work: a leader's round takes many round trips, and over a slow link it
outlasted the lease when renewals came after it. Its renewals run on a connection of their
own for the same reason: from the pool, a renewal found no idle connection while the other
threads held them, and opening one took most of a short lease. The round thread tries to
lead the group, runs the leader's round when it leads, rejoins when the heartbeat found
the lease gone, and publishes the partitions this client owns for the consume loop.
Neither blocks on the consume loop, so a slow handler does not cost the lease.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ems.coordination.handoff import plan
from ems.coordination.identity import client_id, local_ip
from ems.exceptions import EmsError, UnknownGroup
from ems.service import Service
from ems.store.errors import NotLeader
from ems.types import AssignmentRow, GroupInfo

if TYPE_CHECKING:
    from ems.autoscale.step import Autoscaler
    from ems.coordination.load import LoadMeter
    from ems.ports import CoordinationStore, Notifier

log = logging.getLogger(__name__)

#: Margin after a lease's expiry before acting on it, for statement latency.
_SLACK = 0.05


class Membership:
    def __init__(
        self,
        store: CoordinationStore,
        group: GroupInfo,
        publisher: Notifier,
        *,
        ttl: float,
        renew_every: float,
        lead: bool = True,
        on_change: Callable[[], None] | None = None,
        meter: LoadMeter | None = None,
        autoscaler: Autoscaler | None = None,
    ) -> None:
        self.store = store
        self.group = group
        self.publisher = publisher
        self.ttl = ttl
        self.renew_every = renew_every
        self.may_lead = lead
        self.host = local_ip()
        self.client_id = client_id(self.host)
        self.epoch: int | None = None
        #: Local monotonic time by which the lease surely still holds: the renewal was
        #: sent before the database computed NOW(6) + TTL.
        self.deadline = 0.0
        self.owned: dict[int, AssignmentRow] = {}
        self.version = 0
        self._on_change = on_change
        #: The load this member reports with each renewal; None reports nothing.
        self._meter = meter
        #: The leader's autoscaling step; None disables it.
        self._autoscaler = autoscaler
        self._wake = threading.Event()
        #: Ends both threads: set by leave() (and by a test, as a kill -9 would).
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._next_round = 0.0
        #: Held while the client id is renewed or replaced, so a renewal never judges an
        #: identity the round thread is replacing.
        self._identity = threading.Lock()
        #: Set by the heartbeat when a renewal found the lease gone.
        self._lost = threading.Event()
        #: Why the group cannot be joined again (it was deleted): the threads end, and
        #: check() raises it to the consume loop.
        self._gone: str | None = None
        self._renewals = store.leases.heartbeat()
        self._rounds = Service(
            "ems-membership", self._run, wake=self._wake.set, stopping=self._stop
        )
        self._heartbeat = Service("ems-heartbeat", self._beat, stopping=self._stop)

    # -- for the consume loop ----------------------------------------------------------

    def start(self) -> None:
        self._register()
        self._heartbeat.start()
        self._rounds.start()

    def lease_valid(self) -> bool:
        return time.monotonic() < self.deadline

    def ownership(self) -> tuple[int, dict[int, AssignmentRow]]:
        with self._lock:
            return self.version, dict(self.owned)

    def renewing(self) -> bool:
        """Whether the threads that keep the membership run (from start() until leave())."""
        return self._heartbeat.is_alive() or self._rounds.is_alive()

    def check(self) -> None:
        """UnknownGroup once a rejoin found the group deleted: this member cannot go on."""
        if self._gone is not None:
            raise UnknownGroup(self._gone)

    def poke(self) -> None:
        """Run a round now (a wake-up arrived or a partition was released)."""
        self._wake.set()

    def leave(self) -> None:
        """Stop renewing, give up leadership and delete the client row."""
        self._rounds.stop()
        self._heartbeat.stop()
        self._rounds.join(timeout=self.ttl)
        self._heartbeat.join(timeout=self.ttl)
        self._renewals.close()
        try:
            if self.epoch is not None:
                self.store.leases.resign(self.group.id, self.client_id, self.epoch)
            self.store.leases.delete(self.client_id)
        finally:
            self.publisher.group(self.group.id)

    # -- the thread --------------------------------------------------------------------

    def _register(self) -> None:
        # On the heartbeat's connection, opened before the lease's clock starts: over a
        # 400 ms link a new connection took 1.8 s, and paid within a 2 s lease (by the
        # join's pooled connection or the first renewal's) it left the lease no time.
        self._renewals.open()
        sent = time.monotonic()
        self._renewals.register(self.group.id, self.client_id, self.host, os.getpid(), self.ttl)
        self.deadline = sent + self.ttl
        self.publisher.group(self.group.id)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._next_round = time.monotonic() + self.renew_every
            try:
                self._round()
            except UnknownGroup as exc:
                self._gone = (
                    f"group {self.group.name!r} was deleted (on its own or with its topic) "
                    f"while this member ran: it cannot join it again ({exc})"
                )
                log.error("membership of %s ends: %s", self.client_id, self._gone)
                self._stop.set()
                return
            except EmsError as exc:
                log.warning("membership round of %s failed: %s", self.client_id, exc)
            except Exception:  # keep renewing: a dead thread would cost the lease silently
                log.exception("membership round of %s failed", self.client_id)
            timeout = max(0.01, self._next_round - time.monotonic())
            self._wake.wait(timeout)
            self._wake.clear()

    def _beat(self) -> None:
        while not self._stop.is_set():
            due = time.monotonic() + self.renew_every
            try:
                self._renew()
            except EmsError as exc:
                log.warning("lease renewal of %s failed: %s", self.client_id, exc)
            except Exception:  # keep renewing: a dead thread would cost the lease silently
                log.exception("lease renewal of %s failed", self.client_id)
            self._stop.wait(max(0.01, due - time.monotonic()))

    def _renew(self) -> None:
        report = self._meter.sample() if self._meter is not None else None
        with self._identity:
            sent = time.monotonic()
            if self._renewals.renew(
                self.client_id,
                self.ttl,
                cpu_percent=None if report is None else report.cpu_percent,
                load_rate=None if report is None else report.load_rate,
            ):
                self.deadline = sent + self.ttl
                return
            self._lost.set()  # under the lock: never for an identity already replaced
        self._wake.set()

    def _round(self) -> None:
        if self._lost.is_set():
            self._rejoin()
        if self.may_lead:
            self._lead()
        mine = {
            r.partition: r
            for r in self.store.assignments.rows(self.group.id)
            if r.client_id == self.client_id and r.state != "released"
        }
        self._publish(mine)

    def _rejoin(self) -> None:
        """The lease expired (a long pause, a lost database): the old identity's partitions
        are being reassigned, so drop them and join again as a new client."""
        log.warning("lease of %s expired; rejoining", self.client_id)
        self.epoch = None
        self._publish({})
        with self._identity:
            self.client_id = client_id(self.host)
            self._register()
            self._lost.clear()

    def _publish(self, mine: dict[int, AssignmentRow]) -> None:
        with self._lock:
            if mine == self.owned:
                return
            self.owned = mine
            self.version += 1
        if self._on_change is not None:
            self._on_change()

    def _lead(self) -> None:
        epoch = self.store.leases.lead(self.group.id, self.client_id, self.ttl)
        self.epoch = epoch
        if epoch is None:
            leader = self.store.leases.leader(self.group.id)
            if leader is not None:
                self._soon(leader.expires_in + _SLACK)
            return
        try:
            self._leader_round(epoch)
        except NotLeader:
            self.epoch = None

    def _leader_round(self, epoch: int) -> None:
        members = self.store.leases.members(self.group.id)
        live = [m.client_id for m in members if m.expires_in > 0]
        # An offset reset pauses the group: revoke everything, grant nothing, until then.
        pause = self.store.groups.pause_left(self.group.id)
        work = plan(self.store.assignments.rows(self.group.id), live, paused=pause is not None)
        if work or len(live) < len(members):
            self.store.assignments.apply(
                self.group.id, (self.client_id, epoch), work.grants, work.revokes
            )
            self.publisher.group(self.group.id)
        for m in members:
            if m.expires_in > 0:
                self._soon(m.expires_in + _SLACK)
        if pause is not None:
            self._soon(pause + _SLACK)  # a reset that died leaves its pause to run out
        if self._autoscaler is not None and pause is None:  # a paused group looks idle
            self._autoscaler.maybe_run(self.client_id, epoch)

    def _soon(self, seconds: float) -> None:
        self._next_round = min(self._next_round, time.monotonic() + max(0.0, seconds))
