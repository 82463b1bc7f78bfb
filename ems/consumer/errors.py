"""The consumer's own control flow: a settlement refused because this member's lease
deadline passed. The consume loop catches it, as a failed write, and reads the partitions
again from their stored cursors; it is private, an EmsError like every ems error.
"""

from __future__ import annotations

from ems.exceptions import EmsError

__all__ = ["LeaseLost"]


class LeaseLost(EmsError):
    """The client could not renew its lease before the deadline; it stopped fetching and
    committed nothing."""
