"""The console's charts (pure): the ranges a chart covers, and the geometry of a line chart
drawn as SVG by the templates: points scaled into the view box, value ticks at round
numbers from 0 up, time ticks at round UTC times, each with its label.

The templates draw what these functions compute, so everything that can be wrong in a
chart (a point off the plot, a tick label that lies, an axis that does not reach the
largest value) is tested here without a browser.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass

from ems.exceptions import InvalidWindow
from ems.values.browse import LagPoint, VolumePoint


@dataclass(frozen=True, kw_only=True, slots=True)
class ChartRange:
    """How far back a chart looks: `name` as in the URL (?range=1h), `span` the window."""

    name: str
    span: dt.timedelta
    label: str


RANGES: dict[str, ChartRange] = {
    r.name: r
    for r in (
        ChartRange(name="1h", span=dt.timedelta(hours=1), label="1 hour"),
        ChartRange(name="24h", span=dt.timedelta(hours=24), label="24 hours"),
        ChartRange(name="7d", span=dt.timedelta(days=7), label="7 days"),
    )
}
DEFAULT_RANGE = "1h"
#: Points a chart (and the table beside it) shows at most.
CHART_POINTS = 100


def parse_range(text: str | None) -> ChartRange:
    """The range ?range= names (None: the default, 1 hour). InvalidWindow for any other
    text, an empty one included."""
    if text is None:
        return RANGES[DEFAULT_RANGE]
    found = RANGES.get(text)
    if found is None:
        shown = repr(text) if len(text) <= 20 else "given"
        raise InvalidWindow(f"range must be one of {', '.join(RANGES)}, not {shown}")
    return found


# -- geometry ----------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class Box:
    """The view box (width x height) and the plot area inside it."""

    width: int = 720
    height: int = 260
    left: int = 72
    right: int = 704
    top: int = 14
    bottom: int = 222


@dataclass(frozen=True, kw_only=True, slots=True)
class Tick:
    #: The tick's coordinate in the view box (x for time ticks, y for value ticks).
    at: float
    label: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Dot:
    x: float
    y: float
    #: Said when the pointer rests on the dot (an SVG <title>).
    label: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Chart:
    box: Box
    #: The polyline's points attribute: "x,y x,y ...", oldest first.
    line: str
    dots: tuple[Dot, ...]
    x_ticks: tuple[Tick, ...]
    y_ticks: tuple[Tick, ...]
    #: The largest value shown (the top tick's value).
    top: int


#: Time steps a time axis may use, smallest first.
TIME_STEPS = tuple(
    dt.timedelta(minutes=m)
    for m in (1, 2, 5, 10, 15, 30, 60, 120, 180, 360, 720, 1440, 2880, 10080)
)
_EPOCH = dt.datetime(1970, 1, 1)


def scale(value: float, low: float, high: float, to_low: float, to_high: float) -> float:
    """`value` in [low, high] mapped linearly onto [to_low, to_high] (the middle of the
    target when the domain is a single value)."""
    if high == low:
        return (to_low + to_high) / 2
    return to_low + (value - low) * (to_high - to_low) / (high - low)


def nice_step(raw: float) -> int:
    """The smallest 1, 2 or 5 times a power of ten at least `raw` (and at least 1: the
    values charted are counts)."""
    if raw <= 1:
        return 1
    power = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 5, 10):
        if factor * power >= raw:
            return int(factor * power)
    raise AssertionError("unreachable")  # pragma: no cover


def value_ticks(largest: int, most: int = 5) -> list[int]:
    """Round values from 0 to at least `largest`, at most `most` + 1 of them, evenly
    spaced ([0, 1] when everything is 0)."""
    step = nice_step(max(largest, 1) / most)
    top = max(1, math.ceil(largest / step)) * step
    return list(range(0, top + 1, step))


def time_ticks(start: dt.datetime, end: dt.datetime, most: int = 7) -> list[dt.datetime]:
    """Round UTC times in [start, end], at most `most` of them: the multiples (counted
    from the epoch: midnights for days) of the smallest step of TIME_STEPS that keeps to
    `most`."""
    for step in TIME_STEPS:
        first = _EPOCH + math.ceil((start - _EPOCH) / step) * step
        count = max(0, (end - first) // step + 1)
        if count <= most or step == TIME_STEPS[-1]:
            return [first + i * step for i in range(min(count, most))]
    raise AssertionError("unreachable")  # pragma: no cover


def time_label(at: dt.datetime, start: dt.datetime, end: dt.datetime) -> str:
    """A tick's label, as short as the range allows: the time of day within a day, the
    date and time over longer ranges, the date alone at midnight."""
    if end - start <= dt.timedelta(days=1):
        return at.strftime("%H:%M")
    if at.time() == dt.time(0):
        return at.strftime("%m-%d")
    return at.strftime("%m-%d %H:%M")


def value_label(value: int) -> str:
    return f"{value:,}"


def plot(
    points: Sequence[tuple[dt.datetime, int]],
    start: dt.datetime,
    end: dt.datetime,
    box: Box = Box(),
    *,
    unit: str = "",
) -> Chart:
    """A line chart of (time, value) points over [start, end] (naive is UTC, aware is
    converted): time from left to right, values from 0 at the bottom to the top tick.
    Points outside the window are kept inside the plot (clamped)."""
    points = [(naive_utc(at), v) for at, v in points]
    start, end = naive_utc(start), naive_utc(end)
    largest = max((v for _, v in points), default=0)
    values = value_ticks(largest)
    top = values[-1]
    x0, x1, y0, y1 = box.left, box.right, box.bottom, box.top
    span = (end - start).total_seconds()

    def x_of(at: dt.datetime) -> float:
        return _clamp(scale((at - start).total_seconds(), 0, span, x0, x1), x0, x1)

    def y_of(value: float) -> float:
        return _clamp(scale(value, 0, top, y0, y1), y1, y0)

    dots = tuple(
        Dot(
            x=round(x_of(at), 1),
            y=round(y_of(v), 1),
            label=f"{at.strftime('%Y-%m-%d %H:%M:%S')} UTC: {value_label(v)}{unit}",
        )
        for at, v in points
    )
    return Chart(
        box=box,
        line=" ".join(f"{d.x},{d.y}" for d in dots),
        dots=dots,
        x_ticks=tuple(
            Tick(at=round(x_of(t), 1), label=time_label(t, start, end))
            for t in time_ticks(start, end)
        ),
        y_ticks=tuple(Tick(at=round(y_of(v), 1), label=value_label(v)) for v in values),
        top=top,
    )


def naive_utc(value: dt.datetime) -> dt.datetime:
    if value.tzinfo is None:
        return value
    return value.astimezone(dt.UTC).replace(tzinfo=None)


def _clamp(value: float, low: float, high: float) -> float:
    return min(max(value, low), high)


# -- the pages' values -------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class LagSeries:
    """A group's lag chart for the page and the API: the window it covers and its points,
    oldest first. A broadcast group has none, and `reason` says why."""

    group: str
    topic: str
    mode: str
    range: str
    since: dt.datetime
    until: dt.datetime
    points: tuple[LagPoint, ...]
    reason: str | None


@dataclass(frozen=True, kw_only=True, slots=True)
class VolumeSeries:
    """A topic's volume chart for the page and the API: the window it covers and its
    points, oldest first."""

    topic: str
    range: str
    since: dt.datetime
    until: dt.datetime
    points: tuple[VolumePoint, ...]
