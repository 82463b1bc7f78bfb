"""Charts over time: a group's lag from the offset snapshots, and a topic's volume (messages
written) from the watermark captures, over the last hour, 24 hours or 7 days
(`?range=1h|24h|7d`, default 1h; anything else is a 400). Each page draws the chart as
SVG with the same points in a table below (at most 100), and has its JSON twin. The window
ends at the database clock's now.

A name of dots only is reached by /group/lag?name=... and /topic/volume?name=... (see
listing.detail_url)."""

from __future__ import annotations

import datetime as dt

from flask import Blueprint, Response, jsonify, render_template, request

from ems.admin.capabilities import READ
from ems.admin.charts import (
    CHART_POINTS,
    RANGES,
    ChartRange,
    LagSeries,
    VolumeSeries,
    parse_range,
    plot,
)
from ems.admin.guard import requires
from ems.admin.serialize import to_json
from ems.admin.services import services
from ems.admin.views.listing import named
from ems.display import format_utc

bp = Blueprint("charts", __name__)

BROADCAST = (
    "a broadcast group keeps no offset snapshots (its members hold their cursors in "
    "memory), so it has no lag to chart"
)


@bp.get("/groups/<name>/lag")
@requires(READ)
def lag(name: str | None = None) -> str:
    found = _lag(name)
    chart = plot([(p.at, p.lag) for p in found.points], found.since, found.until)
    largest = max((p.lag for p in found.points), default=0)
    topic = request.args.get("topic")
    return render_template(
        "lag.html",
        series=found,
        chart=chart,
        ranges=RANGES.values(),
        topic_arg={} if topic is None else {"topic": topic},
        label=f"Lag of group {found.group} on {found.topic}, {_last(found.range)}",
        description=f"{_points(found)}; the largest lag {largest:,} messages. {_TABLE}",
    )


@bp.get("/api/v1/groups/<name>/lag")
@requires(READ)
def api_lag(name: str | None = None) -> Response:
    return jsonify(to_json(_lag(name)))


@bp.get("/topics/<name>/volume")
@requires(READ)
def volume(name: str | None = None) -> str:
    found = _volume(name)
    written = [(p.at, p.messages) for p in found.points if p.messages is not None]
    chart = plot(written, found.since, found.until, unit=" messages")
    return render_template(
        "volume.html",
        series=found,
        chart=chart,
        ranges=RANGES.values(),
        label=f"Messages written to topic {found.topic}, {_last(found.range)}",
        description=f"{_points(found)}. {_TABLE}",
    )


@bp.get("/api/v1/topics/<name>/volume")
@requires(READ)
def api_volume(name: str | None = None) -> Response:
    return jsonify(to_json(_volume(name)))


bp.add_url_rule("/group/lag", "lag_by_query", lag)
bp.add_url_rule("/api/v1/group/lag", "api_lag_by_query", api_lag)
bp.add_url_rule("/topic/volume", "volume_by_query", volume)
bp.add_url_rule("/api/v1/topic/volume", "api_volume_by_query", api_volume)


_TABLE = "The table below the chart has the same points."


def _last(name: str) -> str:
    return f"the last {RANGES[name].label}"


def _points(series: LagSeries | VolumeSeries) -> str:
    return (
        f"{len(series.points)} points from {format_utc(series.since)} to {format_utc(series.until)}"
    )


def _window() -> tuple[ChartRange, dt.datetime, dt.datetime]:
    """The range asked for (checked before anything is read) and its window, ending at
    the database clock's now."""
    chosen = parse_range(request.args.get("range"))
    until = services().overview.ping()
    return chosen, until - chosen.span, until


def _lag(name: str | None) -> LagSeries:
    chosen, since, until = _window()
    browser = services().browser
    # The heading says which topic (when ?topic= is left out) and the mode; UnknownGroup.
    # The series is asked for by what the caller named: a topic name as stored is shown,
    # never sent back as input.
    asked, topic = named(name), request.args.get("topic")
    group = browser.group_heading(asked, topic)
    points = browser.lag_series(asked, since, until, CHART_POINTS, topic=topic)
    return LagSeries(
        group=group.name,
        topic=group.topic,
        mode=group.mode,
        range=chosen.name,
        since=since,
        until=until,
        points=tuple(points),
        reason=BROADCAST if group.mode != "cluster" else None,
    )


def _volume(name: str | None) -> VolumeSeries:
    chosen, since, until = _window()
    topic = named(name)
    points = services().browser.topic_volume_series(topic, since, until, CHART_POINTS)
    return VolumeSeries(
        topic=topic,
        range=chosen.name,
        since=since,
        until=until,
        points=tuple(points),
    )
