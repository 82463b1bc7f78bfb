"""What the admin console's read models (ems.ops.browse) take as input, checked before
anything is read: name prefixes, page limits and cursors, series windows and their
buckets, and the bounds of each."""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Callable

from ems.display import parse_when, shown
from ems.exceptions import InvalidCursor, InvalidName, InvalidSetting, InvalidWindow
from ems.ops.query import When
from ems.store.series import Bucket
from ems.validation import NAME_RE

DEFAULT_PAGE = 50
MAX_PAGE = 100
#: Longest prefix: a name has at most 128 characters.
MAX_PREFIX = 128
#: Groups a topic's detail lists (more_groups says when there are more).
MAX_TOPIC_GROUPS = 200
#: A group's detail shows its partitions by pages of at most GROUP_PARTITIONS, and at most
#: MAX_GROUP_MEMBERS members: at most 100 rows together.
GROUP_PARTITIONS = 50
MAX_GROUP_MEMBERS = 50
#: A streaming query's detail shows its partitions (and nothing else of many rows) by
#: pages of at most QUERY_PARTITIONS.
QUERY_PARTITIONS = 100
DEFAULT_POINTS = 500
MAX_POINTS = 1000
MAX_SERIES = dt.timedelta(days=31)
#: Partition lookups one series may cost (points x partitions): about 90 ms on an idle
#: server (a lookup costs some 3.5 us), twice that on a busy one, so a topic of 250
#: partitions or fewer gets a chart's 100 points and one of 1,000 gets 25.
MAX_SERIES_CELLS = 25_000

_US = dt.timedelta(microseconds=1)


def check_prefix(prefix: object) -> str:
    """A name prefix: text of at most 128 characters ("" lists everything)."""
    if not isinstance(prefix, str) or len(prefix) > MAX_PREFIX:
        shown = repr(prefix) if isinstance(prefix, str) and len(prefix) <= 80 else "given"
        raise InvalidName(f"the prefix {shown} must be text of at most {MAX_PREFIX} characters")
    try:
        prefix.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidName("the prefix must be valid Unicode text") from None
    return prefix


def check_page_limit(limit: object) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise InvalidSetting(f"limit must be an integer from 1 to {MAX_PAGE}, not {limit!r}")
    return limit


def topic_cursor(after: object) -> str | None:
    """A topics page cursor: None, or the name of the last topic seen."""
    if after is None:
        return None
    if not isinstance(after, str) or NAME_RE.fullmatch(after) is None:
        raise InvalidCursor(f"{shown(after)} is not a topics page cursor (a topic name)")
    return after


def group_cursor(after: object) -> tuple[str, int | None] | None:
    """A groups page cursor: None, "<group>/<topic id>" (a next_after), or a group name
    alone to list the groups after every topic of that name."""
    if after is None:
        return None
    if isinstance(after, str):
        name, slash, topic_id = after.partition("/")
        if NAME_RE.fullmatch(name) is not None:
            if not slash:
                return name, None
            if topic_id.isascii() and topic_id.isdigit() and len(topic_id) <= 19:
                return name, int(topic_id)
    raise InvalidCursor(
        f"{shown(after)} is not a groups page cursor (a group name, or the next_after of a "
        "groups page)"
    )


def partition_cursor(after: object) -> int | None:
    """A group detail's page cursor: None, or the number of the last partition seen."""
    if after is None:
        return None
    if isinstance(after, str) and after.isascii() and after.isdigit() and len(after) <= 9:
        return int(after)
    raise InvalidCursor(f"{shown(after)} is not a partitions page cursor (a partition number)")


def topic_partition_cursor(after: object) -> tuple[str, int] | None:
    """A streaming query detail's page cursor: None, or "<topic>/<partition>" of the last
    partition seen (a next_after)."""
    if after is None:
        return None
    if isinstance(after, str):
        topic, _, partition = after.rpartition("/")
        number = partition.isascii() and partition.isdigit() and len(partition) <= 9
        if NAME_RE.fullmatch(topic) is not None and number:
            return topic, int(partition)
    raise InvalidCursor(
        f"{shown(after)} is not a partitions page cursor (<topic>/<partition>, the "
        "next_after of a page)"
    )


def check_partitions_limit(limit: object, maximum: int = GROUP_PARTITIONS) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= maximum:
        raise InvalidSetting(f"limit must be an integer from 1 to {maximum}, not {limit!r}")
    return limit


def check_points(max_points: object) -> int:
    if (
        isinstance(max_points, bool)
        or not isinstance(max_points, int)
        or not 1 <= max_points <= MAX_POINTS
    ):
        raise InvalidSetting(
            f"max_points must be an integer from 1 to {MAX_POINTS}, not {max_points!r}"
        )
    return max_points


def check_window(start: dt.datetime, end: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
    """(start, end) of a series: start before end, at most 31 days apart."""
    shown = f"{start.isoformat(sep=' ')} to {end.isoformat(sep=' ')}"
    if start >= end:
        raise InvalidWindow(f"a series must start before it ends, not {shown}")
    if end - start > MAX_SERIES:
        raise InvalidWindow(f"a series covers at most {MAX_SERIES.days} days, not {shown}")
    return start, end


def buckets(start: dt.datetime, end: dt.datetime, points: int) -> list[Bucket]:
    """(start, end] cut into `points` buckets as equal as microseconds allow (fewer when
    the window is shorter than `points` microseconds)."""
    total = (end - start) // _US
    count = max(1, min(points, total))
    edges = [start + _US * (total * i // count) for i in range(count)] + [end]
    return [(low, high) for low, high in itertools.pairwise(edges)]


def series_points(max_points: int, partitions: int) -> int:
    """The buckets of a series over this many partitions."""
    return max(1, min(max_points, MAX_SERIES_CELLS // max(1, partitions)))


def _end(value: object, what: str) -> str | dt.datetime:
    if not isinstance(value, str | dt.datetime):
        raise InvalidWindow(f"{what} must be a datetime, or text such as 2h, not {value!r}")
    return value


def _when(value: str | dt.datetime, now: dt.datetime | None) -> dt.datetime:
    """A datetime as naive UTC (an aware one converted), text by parse_when against the
    database clock `now`."""
    if isinstance(value, str):
        assert now is not None
        return parse_when(value, now)
    return value.astimezone(dt.UTC).replace(tzinfo=None) if value.tzinfo else value


def series_window(
    since: When, until: When, now: Callable[[], dt.datetime]
) -> tuple[dt.datetime, dt.datetime]:
    """Both ends as naive UTC: a datetime as is, text by parse_when against the
    database clock `now` (read only for text). InvalidWindow, InvalidDatetime."""
    start, end = _end(since, "since"), _end(until, "until")
    at = now() if isinstance(start, str) or isinstance(end, str) else None
    return check_window(_when(start, at), _when(end, at))
