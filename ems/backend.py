"""What the SDK's clients run on: storage, offset counters and wake-ups, as one value.

A Producer and a Consumer take the same Backend: MySQL and Redis (mysql_backend), or the
in-memory twin of ems.testing, whose tables keep the server's rules. The clients reach
storage through the ports of ems.ports only, so either runs the same code on both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ems.autoscale.step import Autoscaler, autoscaler_for
from ems.config import Settings
from ems.offsets.allocators import allocator_for
from ems.ports import (
    Callbacks,
    Notifier,
    OffsetAllocator,
    Outbox,
    SettlementsThrough,
    Storage,
    Subscription,
)
from ems.store import Store
from ems.types import GroupInfo
from ems.wakeups import Listener, Publisher


@dataclass(frozen=True)
class Backend:
    """What one client runs on: its storage (closed with the client when it owns it),
    wake-ups sent (closed with the client) and received, the offset counters a producer
    opens on first use (they may be away at start) and closes, and a consumer leader's
    autoscaling step (None: off)."""

    settings: Settings
    store: Storage
    owns_store: bool
    notifier: Notifier
    subscribe: Callable[[Callbacks], Subscription]
    autoscaler: Callable[[GroupInfo], Autoscaler | None]
    allocator: Callable[[], OffsetAllocator]
    #: Where transactional sends write (None: this backend takes none).
    outbox: Outbox | None = None
    #: Writes exactly-once settlements in the caller's transaction (None: takes none).
    settlements: SettlementsThrough | None = None


def mysql_backend(settings: Settings, store: Store | None = None) -> Backend:
    """MySQL (the store given, which stays the caller's, or one opened here) and Redis,
    with the offset allocator settings.allocator names."""
    opened = store or Store(settings)
    return Backend(
        settings=settings,
        store=opened,
        owns_store=store is None,
        notifier=Publisher(settings),
        subscribe=lambda callbacks: Listener(settings, callbacks),
        autoscaler=lambda group: autoscaler_for(opened, group, settings),
        allocator=lambda: allocator_for(settings, opened.heads),
        outbox=opened.outbox,
        settlements=opened.settlements,
    )
