"""A handler module that ends its process while being imported (as a crash would): the
supervisor restarts it with a growing pause, then gives up."""

from __future__ import annotations

import os

os._exit(70)


def handle(d: object) -> None:  # never reached
    pass
