"""Topic ranking: message volume per topic over the last hour and day, from the
topic_watermark captures the snapshots job takes (never COUNT(*) on the message table).

A window's volume is the difference of the summed high watermarks between the newest
capture and the newest capture at or before now - window. When the captures do not reach
back that far (the scheduler started recently), the earliest capture is the baseline and
the volume is marked partial, with the span it really covers. With fewer than two
captures there is no volume to show (None).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from ems.display import shown
from ems.exceptions import InvalidInput
from ems.store import Store
from ems.store.client import StoreClient

HOUR = 3600.0
DAY = 86400.0


@dataclass(frozen=True, kw_only=True, slots=True)
class Capture:
    """One watermark capture: summed high watermark per topic id."""

    captured_at: dt.datetime
    totals: Mapping[int, int]


@dataclass(frozen=True, kw_only=True, slots=True)
class Baseline:
    capture: Capture
    #: False when it is later than now - window (the history is shorter than the window).
    complete: bool


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


def volume(topic_id: int, newest: Capture, base: Baseline | None) -> Volume | None:
    """Messages published to the topic between the baseline and the newest capture."""
    if base is None or base.capture.captured_at >= newest.captured_at:
        return None
    grown = newest.totals.get(topic_id, 0) - base.capture.totals.get(topic_id, 0)
    span = (newest.captured_at - base.capture.captured_at).total_seconds()
    return Volume(messages=max(0, grown), span_seconds=span, complete=base.complete)


def rank(
    names: Mapping[int, str],
    newest: Capture | None,
    hour: Baseline | None,
    day: Baseline | None,
) -> list[TopicRank]:
    """Every topic with its hour and day volumes, the busiest first (by day, then hour,
    then name)."""
    ranks = [
        TopicRank(
            topic=name,
            last_hour=volume(tid, newest, hour) if newest else None,
            last_day=volume(tid, newest, day) if newest else None,
        )
        for tid, name in names.items()
    ]

    def key(r: TopicRank) -> tuple[int, int, str]:
        day_n = r.last_day.messages if r.last_day else -1
        hour_n = r.last_hour.messages if r.last_hour else -1
        return (-day_n, -hour_n, r.topic)

    return sorted(ranks, key=key)


def _baseline(store: Store, now: dt.datetime, window: float) -> Baseline | None:
    at, complete = store.maintenance.baseline_capture(now - dt.timedelta(seconds=window))
    if at is None:
        return None
    return Baseline(
        capture=Capture(captured_at=at, totals=store.maintenance.totals(at)), complete=complete
    )


def topic_ranking(store: Store, windows: Sequence[float] = (HOUR, DAY)) -> Ranking:
    """Read the three captures the ranking needs (a handful of index lookups) and rank."""
    names = {t.id: t.name for t in store.topics.all()}
    now = store.maintenance.now()
    newest_at = store.maintenance.newest_capture()
    if newest_at is None:
        return Ranking(
            newest_capture=None, capture_age_seconds=None, topics=rank(names, None, None, None)
        )
    newest = Capture(captured_at=newest_at, totals=store.maintenance.totals(newest_at))
    hour, day = (_baseline(store, now, w) for w in windows)
    return Ranking(
        newest_capture=newest_at,
        capture_age_seconds=(now - newest_at).total_seconds(),
        topics=rank(names, newest, hour, day),
    )


Window = Literal["hour", "day"]
#: Topics a ranking page shows at most.
MAX_RANKED = 100


class Ranker(StoreClient):
    """The topic ranking for the admin console."""

    def top(self, window: object, limit: object = MAX_RANKED) -> tuple[Ranking, list[TopicRank]]:
        """The ranking's captures and its `limit` busiest topics for the window ("hour"
        or "day"), ranked in the server. InvalidInput for another window or a limit
        outside 1 to MAX_RANKED."""
        if window not in ("hour", "day"):
            raise InvalidInput(f"window must be hour or day, not {shown(window, 32)}")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_RANKED:
            raise InvalidInput(f"limit must be an integer from 1 to {MAX_RANKED}")
        store = self.store
        now = store.maintenance.now()
        newest = store.maintenance.newest_capture()
        if newest is None:
            return Ranking(newest_capture=None, capture_age_seconds=None, topics=[]), []
        bases = {
            w: store.maintenance.baseline_capture(now - dt.timedelta(seconds=s))
            for w, s in (("hour", HOUR), ("day", DAY))
        }
        other = "day" if window == "hour" else "hour"
        # A window without a baseline (fewer than two captures) compares the newest with
        # itself in SQL, and shows no volume.
        first, second = (bases[w][0] or newest for w in (window, other))
        rows = store.maintenance.top_volumes(newest, first, second, limit)
        top = [
            TopicRank(
                topic=name,
                last_hour=_volume(newest, bases["hour"], a if window == "hour" else b),
                last_day=_volume(newest, bases["day"], a if window == "day" else b),
            )
            for name, a, b in rows
        ]
        ranking = Ranking(
            newest_capture=newest,
            capture_age_seconds=(now - newest).total_seconds(),
            topics=top,
        )
        return ranking, top


def _volume(
    newest: dt.datetime, base: tuple[dt.datetime | None, bool], grown: int
) -> Volume | None:
    at, complete = base
    if at is None or at >= newest:
        return None
    return Volume(messages=grown, span_seconds=(newest - at).total_seconds(), complete=complete)
