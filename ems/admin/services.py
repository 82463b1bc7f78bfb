"""The operations the console runs on, one set per app (and per server process): the
overview reader, the browser of topics and groups, the accounts and the audit trail,
sharing one store."""

from __future__ import annotations

import logging

from flask import Flask, current_app

from ems.admin.principal import NOBODY
from ems.alarms.desk import AlarmDesk
from ems.config import Settings
from ems.groups import GroupAdmin
from ems.ops.accounts import Accounts, AuditLog
from ems.ops.audit_search import AuditSearch
from ems.ops.autoscale import AutoscaleReader
from ems.ops.browse import Browser
from ems.ops.dead_letter_plans import DeadLetterChanges
from ems.ops.dead_letters import DeadLetters
from ems.ops.overview import OverviewReader
from ems.ops.plans import Plans
from ems.ops.query import MessageQuery
from ems.ops.ranking import Ranker
from ems.ops.reset import OffsetReset
from ems.ops.stream_queries import StreamQueryReader
from ems.ops.trace import MessageTracer
from ems.topics import TopicAdmin
from ems.values.accounts import AuditEntry
from ems.values.refusals import RefusalSampler

log = logging.getLogger(__name__)

_KEY = "ems"


class Services:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.overview = OverviewReader(settings)
        self.browser = Browser(settings, store=self.overview.store)
        self.accounts = Accounts(settings, store=self.overview.store)
        self.audit = AuditLog(settings, store=self.overview.store)
        self.plans = Plans(settings, store=self.overview.store)
        self.dead_letters = DeadLetters(settings, store=self.overview.store)
        self.dead_letter_changes = DeadLetterChanges(self.dead_letters)
        self.messages = MessageQuery(settings, store=self.overview.store)
        self.tracer = MessageTracer(settings, store=self.overview.store)
        self.ranker = Ranker(settings, store=self.overview.store)
        self.stream_queries = StreamQueryReader(settings, store=self.overview.store)
        self.alarms = AlarmDesk(settings, store=self.overview.store)
        self.autoscale = AutoscaleReader(settings, store=self.overview.store)
        self.audit_search = AuditSearch(settings, store=self.overview.store)
        #: Topic alter and delete, group delete (previewed and confirmed: views/lifecycle).
        self.topic_admin = TopicAdmin(settings, store=self.overview.store)
        self.group_admin = GroupAdmin(settings, store=self.overview.store)
        #: Which refusals of anonymous callers the audit trail writes.
        self.refusals = RefusalSampler()
        self._resets: OffsetReset | None = None

    @property
    def resets(self) -> OffsetReset:
        """Offset resets (made on first use: they publish wake-ups through Redis)."""
        if self._resets is None:
            self._resets = OffsetReset(self.settings, store=self.overview.store)
        return self._resets

    def flush_refusals(self) -> None:
        """Write what the refusal sampler holds back, one entry per address: nothing
        counted is dropped when the process ends."""
        for address, n in self.refusals.flush():
            entry = AuditEntry(
                actor=NOBODY,
                address=address,
                user_agent="",
                action="access",
                target="-",
                params={"refusals": n},
                outcome="denied",
                detail="anonymous refusals held back by the sampler",
            )
            try:
                self.audit.record(entry)
            except Exception:
                log.exception("the audit trail could not be written: %d refusals of %s", n, address)

    def close(self) -> None:
        """Write the refusals held back, close the shared store (its connections) and the
        Redis clients."""
        self.flush_refusals()
        if self._resets is not None:
            self._resets.close()
        self.dead_letters.close()  # its producer, if it made one
        self.overview.close()


def attach(app: Flask, services: Services) -> None:
    app.extensions[_KEY] = services


def of(app: Flask) -> Services:
    found = app.extensions[_KEY]
    assert isinstance(found, Services)
    return found


def services() -> Services:
    """The current app's services."""
    return of(current_app)
