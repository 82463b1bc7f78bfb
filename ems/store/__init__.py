"""The only code that talks to MySQL: statements as named methods, errors translated once."""

from __future__ import annotations

import importlib
import threading
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from ems.config import Settings
from ems.store.database import Database
from ems.store.translation import translate, wrap_errors

if TYPE_CHECKING:
    from ems.store.accounts import AccountStore
    from ems.store.alarms import AlarmStore
    from ems.store.assignments import AssignmentStore
    from ems.store.audit import AuditStore
    from ems.store.autoscale import AutoscaleStore
    from ems.store.browse import BrowseStore
    from ems.store.compaction import CompactionStore
    from ems.store.consumption import ConsumptionStore, SettlementsThrough
    from ems.store.dead_letters import DeadLetterStore
    from ems.store.group_refs import GroupRefStore
    from ems.store.groups import GroupStore
    from ems.store.lag_metrics import LagMetricsStore
    from ems.store.lag_reports import LagReportStore
    from ems.store.leases import LeaseStore
    from ems.store.lifecycle import LifecycleStore
    from ems.store.maintenance import MaintenanceStore
    from ems.store.messages import MessageStore
    from ems.store.outbox import OutboxStore
    from ems.store.overview import OverviewStore
    from ems.store.partitions import PartitionStore
    from ems.store.plans import PlanStore
    from ems.store.purge import PurgeStore
    from ems.store.queries import QueryStore
    from ems.store.reading_windows import ReadingWindowStore
    from ems.store.readonly import ReadonlyStore
    from ems.store.replays import ReplayStore
    from ems.store.resets import ResetStore
    from ems.store.scheduler import SchedulerStore
    from ems.store.series import SeriesStore
    from ems.store.snapshots import SnapshotStore
    from ems.store.stream_queries import StreamQueryStore
    from ems.store.time_index import TimeIndexStore
    from ems.store.topics import HeadStore, TopicStore
    from ems.store.traces import TraceStore

Part = TypeVar("Part")

_making = threading.RLock()


class _Group(Generic[Part]):
    """A statement group of the Store, made on first use: its module (and the models it
    uses) is imported then, so a process pays only for the statements it runs (`ems topic
    list` imports the topic statements, not the thirty other groups). Made once per Store;
    from then on the instance attribute answers (this descriptor defines no __set__)."""

    def __init__(self, target: str, *needs: str) -> None:
        self.module, self.cls = target.split(":")
        #: Other groups of the same Store the constructor takes after the database.
        self.needs = needs

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, store: None, owner: type) -> _Group[Part]: ...
    @overload
    def __get__(self, store: Store, owner: type | None = None) -> Part: ...

    def __get__(self, store: Store | None, owner: type | None = None) -> Part | _Group[Part]:
        if store is None:
            return self  # looked up on the class
        with _making:
            made: Part | None = store.__dict__.get(self.name)
            if made is None:
                needs = [getattr(store, name) for name in self.needs]
                cls: Any = getattr(importlib.import_module(self.module), self.cls)
                made = store.__dict__[self.name] = cls(store.db, *needs)
        return made


class Store:
    """One engine and the statement groups that use it."""

    topics: _Group[TopicStore] = _Group("ems.store.topics:TopicStore")
    messages: _Group[MessageStore] = _Group("ems.store.messages:MessageStore")
    outbox: _Group[OutboxStore] = _Group("ems.store.outbox:OutboxStore")
    heads: _Group[HeadStore] = _Group("ems.store.topics:HeadStore")
    partitions: _Group[PartitionStore] = _Group("ems.store.partitions:PartitionStore")
    groups: _Group[GroupStore] = _Group("ems.store.groups:GroupStore")
    leases: _Group[LeaseStore] = _Group("ems.store.leases:LeaseStore")
    assignments: _Group[AssignmentStore] = _Group("ems.store.assignments:AssignmentStore")
    consumption: _Group[ConsumptionStore] = _Group("ems.store.consumption:ConsumptionStore")
    settlements: _Group[SettlementsThrough] = _Group("ems.store.consumption:SettlementsThrough")
    group_refs: _Group[GroupRefStore] = _Group("ems.store.group_refs:GroupRefStore")
    snapshots: _Group[SnapshotStore] = _Group("ems.store.snapshots:SnapshotStore")
    compaction: _Group[CompactionStore] = _Group("ems.store.compaction:CompactionStore")
    lag_reports: _Group[LagReportStore] = _Group("ems.store.lag_reports:LagReportStore")
    autoscale: _Group[AutoscaleStore] = _Group("ems.store.autoscale:AutoscaleStore")
    time_index: _Group[TimeIndexStore] = _Group("ems.store.time_index:TimeIndexStore")
    resets: _Group[ResetStore] = _Group("ems.store.resets:ResetStore", "time_index")
    replays: _Group[ReplayStore] = _Group("ems.store.replays:ReplayStore")
    alarms: _Group[AlarmStore] = _Group("ems.store.alarms:AlarmStore")
    scheduler: _Group[SchedulerStore] = _Group("ems.store.scheduler:SchedulerStore")
    purge: _Group[PurgeStore] = _Group("ems.store.purge:PurgeStore")
    maintenance: _Group[MaintenanceStore] = _Group("ems.store.maintenance:MaintenanceStore")
    queries: _Group[QueryStore] = _Group("ems.store.queries:QueryStore")
    traces: _Group[TraceStore] = _Group("ems.store.traces:TraceStore")
    dead_letters: _Group[DeadLetterStore] = _Group("ems.store.dead_letters:DeadLetterStore")
    readonly: _Group[ReadonlyStore] = _Group("ems.store.readonly:ReadonlyStore")
    accounts: _Group[AccountStore] = _Group("ems.store.accounts:AccountStore")
    audit: _Group[AuditStore] = _Group("ems.store.audit:AuditStore")
    browse: _Group[BrowseStore] = _Group("ems.store.browse:BrowseStore")
    series: _Group[SeriesStore] = _Group("ems.store.series:SeriesStore")
    overview: _Group[OverviewStore] = _Group("ems.store.overview:OverviewStore")
    lag_metrics: _Group[LagMetricsStore] = _Group("ems.store.lag_metrics:LagMetricsStore")
    plans: _Group[PlanStore] = _Group("ems.store.plans:PlanStore")
    lifecycle: _Group[LifecycleStore] = _Group("ems.store.lifecycle:LifecycleStore")
    reading_windows: _Group[ReadingWindowStore] = _Group(
        "ems.store.reading_windows:ReadingWindowStore"
    )
    stream_queries: _Group[StreamQueryStore] = _Group("ems.store.stream_queries:StreamQueryStore")

    def __init__(self, settings: Settings, database: Database | None = None) -> None:
        self.settings = settings
        self.db = database or Database(settings)

    def close(self) -> None:
        self.db.dispose()


#: The statement groups of a Store, by attribute name.
GROUPS = {name: v for name, v in vars(Store).items() if isinstance(v, _Group)}

__all__ = ["GROUPS", "Database", "Store", "translate", "wrap_errors"]
