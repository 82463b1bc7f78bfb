"""What a producer looked up about its topics, kept for a bounded time (pure)."""

from __future__ import annotations

import time
from collections.abc import Callable

from ems.types import TopicInfo


class TopicCache:
    """Topics by name, each usable for `max_age` seconds after it was looked up: a
    producer's next send after that looks the topic up again, so an alter (a new maximum
    body) reaches it within max_age, and a deleted topic's id is not used past it."""

    def __init__(self, max_age: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_age = max_age
        self._clock = clock
        self._found: dict[str, tuple[TopicInfo, float]] = {}

    def get(self, name: str) -> TopicInfo | None:
        """The topic if it was looked up less than max_age ago."""
        found = self._found.get(name)
        if found is None or self._clock() - found[1] >= self.max_age:
            return None
        return found[0]

    def previous(self, name: str) -> TopicInfo | None:
        """The topic as last looked up, however long ago."""
        found = self._found.get(name)
        return None if found is None else found[0]

    def put(self, name: str, info: TopicInfo) -> None:
        self._found[name] = (info, self._clock())
