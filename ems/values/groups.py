"""Values of a consumer group's description that both GroupAdmin and the console's read
models hand out."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

#: Seconds an offset reset waits for the group's members to leave (or confirm) before it
#: gives up (ems.ops.reset, `ems group reset-offsets --timeout`).
RESET_TIMEOUT = 30.0


@dataclass(frozen=True, kw_only=True, slots=True)
class LeaderDescription:
    """The group's leader row. `live` is False once the lease ran out (or was resigned):
    the next member to renew takes the row over with epoch + 1."""

    client_id: str
    epoch: int
    lease_expires_at: dt.datetime
    #: Seconds until the lease expires, by the database clock (negative once expired).
    seconds_left: float
    live: bool
