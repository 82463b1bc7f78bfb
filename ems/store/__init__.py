"""The only code that talks to MySQL: statements as named methods, errors translated once."""

from __future__ import annotations

from ems.config import Settings
from ems.store.accounts import AccountStore
from ems.store.alarms import AlarmStore
from ems.store.assignments import AssignmentStore
from ems.store.audit import AuditStore
from ems.store.autoscale import AutoscaleStore
from ems.store.browse import BrowseStore
from ems.store.compaction import CompactionStore
from ems.store.consumption import ConsumptionStore, SettlementsThrough
from ems.store.database import Database, translate, wrap_errors
from ems.store.dead_letters import DeadLetterStore
from ems.store.group_refs import GroupRefStore
from ems.store.groups import GroupStore
from ems.store.lag_reports import LagReportStore
from ems.store.leases import LeaseStore
from ems.store.maintenance import MaintenanceStore
from ems.store.messages import MessageStore
from ems.store.outbox import OutboxStore
from ems.store.plans import PlanStore
from ems.store.purge import PurgeStore
from ems.store.queries import QueryStore
from ems.store.readonly import ReadonlyStore
from ems.store.replays import ReplayStore
from ems.store.resets import ResetStore
from ems.store.scheduler import SchedulerStore
from ems.store.snapshots import SnapshotStore
from ems.store.time_index import TimeIndexStore
from ems.store.topics import HeadStore, TopicStore
from ems.store.traces import TraceStore


class Store:
    """One engine and the statement groups that use it."""

    def __init__(self, settings: Settings, database: Database | None = None) -> None:
        self.settings = settings
        self.db = database or Database(settings)
        self.topics = TopicStore(self.db)
        self.messages = MessageStore(self.db)
        self.outbox = OutboxStore(self.db)
        self.heads = HeadStore(self.db)
        self.groups = GroupStore(self.db)
        self.leases = LeaseStore(self.db)
        self.assignments = AssignmentStore(self.db)
        self.consumption = ConsumptionStore(self.db)
        self.settlements = SettlementsThrough(self.db)
        self.group_refs = GroupRefStore(self.db)
        self.snapshots = SnapshotStore(self.db)
        self.compaction = CompactionStore(self.db)
        self.lag_reports = LagReportStore(self.db)
        self.autoscale = AutoscaleStore(self.db)
        self.time_index = TimeIndexStore(self.db)
        self.resets = ResetStore(self.db, self.time_index)
        self.replays = ReplayStore(self.db)
        self.alarms = AlarmStore(self.db)
        self.scheduler = SchedulerStore(self.db)
        self.purge = PurgeStore(self.db)
        self.maintenance = MaintenanceStore(self.db)
        self.queries = QueryStore(self.db)
        self.traces = TraceStore(self.db)
        self.dead_letters = DeadLetterStore(self.db)
        self.readonly = ReadonlyStore(self.db)
        self.accounts = AccountStore(self.db)
        self.audit = AuditStore(self.db)
        self.browse = BrowseStore(self.db)
        self.plans = PlanStore(self.db)

    def close(self) -> None:
        self.db.dispose()


__all__ = ["Database", "Store", "translate", "wrap_errors"]
