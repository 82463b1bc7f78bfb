"""Topic ranking: message volume per topic over the last hour and day, from the
topic_watermark captures the snapshots job takes (never COUNT(*) on the message table).

A window's volume is the difference of the summed high watermarks between the newest
capture and the newest capture at or before now - window, computed and ranked in one
statement (the CLI lists every topic, the console the busiest 100). When the captures do
not reach back that far (the scheduler started recently), the earliest capture is the
baseline and the volume is marked partial, with the span it really covers. With fewer than two
captures there is no volume to show (None).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Literal

from ems.display import shown
from ems.exceptions import InvalidInput
from ems.store import Store
from ems.store.client import StoreClient

HOUR = 3600.0
DAY = 86400.0


@dataclass(frozen=True, kw_only=True, slots=True)
class Volume:
    messages: int
    #: Seconds between the two captures compared.
    span_seconds: float
    #: False: the captures cover less than the window (see span_seconds).
    complete: bool


@dataclass(frozen=True, kw_only=True, slots=True)
class TopicRank:
    topic: str
    last_hour: Volume | None
    last_day: Volume | None


@dataclass(frozen=True, kw_only=True, slots=True)
class Ranking:
    #: When the newest capture was taken (None: no capture yet) and its age in seconds.
    newest_capture: dt.datetime | None
    capture_age_seconds: float | None
    topics: list[TopicRank]


Window = Literal["hour", "day"]
#: Topics a ranking page shows at most.
MAX_RANKED = 100


def topic_ranking(store: Store, window: Window = "day", limit: int | None = None) -> Ranking:
    """Topics by their volume over `window`, then over the other window, then by name:
    the `limit` busiest (None: every topic), ranked in the server from three captures."""
    maintenance = store.maintenance
    now = maintenance.now()
    newest = maintenance.newest_capture()
    if newest is None:
        names = [] if limit is not None else sorted(t.name for t in store.topics.all())
        topics = [TopicRank(topic=n, last_hour=None, last_day=None) for n in names]
        return Ranking(newest_capture=None, capture_age_seconds=None, topics=topics)
    bases = {
        w: maintenance.baseline_capture(now - dt.timedelta(seconds=s))
        for w, s in (("hour", HOUR), ("day", DAY))
    }
    other: Window = "day" if window == "hour" else "hour"
    # A window without a baseline (fewer than two captures) compares the newest with
    # itself in SQL, and shows no volume.
    first, second = (bases[w][0] or newest for w in (window, other))
    rows = maintenance.top_volumes(newest, first, second, limit)
    return Ranking(
        newest_capture=newest,
        capture_age_seconds=(now - newest).total_seconds(),
        topics=[
            TopicRank(
                topic=name,
                last_hour=_volume(newest, bases["hour"], a if window == "hour" else b),
                last_day=_volume(newest, bases["day"], a if window == "day" else b),
            )
            for name, a, b in rows
        ],
    )


class Ranker(StoreClient):
    """The topic ranking for the admin console."""

    def top(self, window: object, limit: object = MAX_RANKED) -> tuple[Ranking, list[TopicRank]]:
        """The ranking's captures and its `limit` busiest topics for the window ("hour"
        or "day"). InvalidInput for another window or a limit outside 1 to MAX_RANKED."""
        if window not in ("hour", "day"):
            raise InvalidInput(f"window must be hour or day, not {shown(window, 32)}")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_RANKED:
            raise InvalidInput(f"limit must be an integer from 1 to {MAX_RANKED}")
        ranking = topic_ranking(self.store, window, limit)
        return ranking, ranking.topics


def _volume(
    newest: dt.datetime, base: tuple[dt.datetime | None, bool], grown: int
) -> Volume | None:
    at, complete = base
    if at is None or at >= newest:
        return None
    return Volume(messages=grown, span_seconds=(newest - at).total_seconds(), complete=complete)
