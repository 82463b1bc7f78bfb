"""Wake-ups within one process: what Redis pub/sub carries for ems, as direct calls."""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Mapping

from ems.config import Settings
from ems.ports import Callbacks
from ems.wakeups import group_channel, messages_payload, topic_channel


class LocalBus:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subscribers: dict[str, list[Callable[[str], None]]] = {}

    def publish(self, channel: str, payload: str) -> None:
        with self._lock:
            callbacks = list(self._subscribers.get(channel, ()))
        for callback in callbacks:
            callback(payload)

    def subscribe(self, channel: str, callback: Callable[[str], None]) -> None:
        with self._lock:
            self._subscribers.setdefault(channel, []).append(callback)

    def unsubscribe(self, channel: str, callback: Callable[[str], None]) -> None:
        with self._lock:
            found = self._subscribers.get(channel, [])
            if callback in found:
                found.remove(callback)


class LocalNotifier:
    """ems.ports.Notifier on a LocalBus, with the channels and payloads of Redis."""

    def __init__(self, bus: LocalBus, settings: Settings) -> None:
        self.bus = bus
        self.settings = settings

    def messages(self, topic_id: int, last_offsets: Mapping[int, int]) -> None:
        self.bus.publish(topic_channel(self.settings, topic_id), messages_payload(last_offsets))

    def group(self, group_id: int) -> None:
        self.bus.publish(group_channel(self.settings, group_id), "changed")

    def close(self) -> None:
        pass


class LocalSubscription:
    """ems.ports.Subscription on a LocalBus: connected from start() to stop()."""

    def __init__(self, bus: LocalBus, callbacks: Callbacks) -> None:
        self.bus = bus
        self.callbacks = dict(callbacks)
        self.connected = threading.Event()

    def start(self) -> None:
        for channel, callback in self.callbacks.items():
            self.bus.subscribe(channel, callback)
        self.connected.set()

    def stop(self) -> None:
        self.connected.clear()
        for channel, callback in self.callbacks.items():
            self.bus.unsubscribe(channel, callback)

    def follow(self, channel: str, partitions: Collection[int] | None) -> None:
        """Every wake-up of the topic still comes: the bus has no partition channels."""


class AsyncLocalNotifier:
    """ems.ports.AsyncNotifier on a LocalBus: LocalNotifier's wake-ups, awaited."""

    def __init__(self, bus: LocalBus, settings: Settings) -> None:
        self.notifier = LocalNotifier(bus, settings)

    async def messages(self, topic_id: int, last_offsets: Mapping[int, int]) -> None:
        self.notifier.messages(topic_id, last_offsets)

    async def close(self) -> None:
        pass
