"""The one place that knows "settings, or from the environment, and the store I opened"."""

from __future__ import annotations

from types import TracebackType
from typing import Self

from ems.config import Settings
from ems.store import Store


class StoreClient:
    """Base of the classes that run on a Store (the admin APIs, the operations):
    settings as given or read from the environment, and the store passed in, which stays
    the caller's to close, or one opened here and closed by close()."""

    def __init__(self, settings: Settings | None = None, *, store: Store | None = None) -> None:
        self.settings = settings or Settings.from_env()
        self._owns_store = store is None
        self.store = store or Store(self.settings)

    def close(self) -> None:
        if self._owns_store:
            self.store.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
