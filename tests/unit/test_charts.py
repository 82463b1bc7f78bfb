"""The console's charts (pure): ranges, round ticks, points scaled into the plot, and the
<time> markup of the `utc` filter (escaped, never inside an attribute of a template)."""

from __future__ import annotations

import datetime as dt
import itertools
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ems.admin.charts import (
    RANGES,
    Box,
    nice_step,
    parse_range,
    plot,
    scale,
    time_label,
    time_ticks,
    value_ticks,
)
from ems.admin.times import iso_z, utc_time
from ems.exceptions import InvalidWindow

T0 = dt.datetime(2026, 11, 25, 9, 7, 30)
TEMPLATES = Path(__file__).resolve().parents[2] / "ems" / "admin" / "templates"


def test_the_ranges_and_the_default() -> None:
    assert parse_range(None).span == dt.timedelta(hours=1)
    assert parse_range("24h").span == dt.timedelta(hours=24)
    assert parse_range("7d").span == dt.timedelta(days=7)
    assert list(RANGES) == ["1h", "24h", "7d"]


@pytest.mark.parametrize("text", ["", "2h", "1H", "7d ", "30d", "x" * 500, "<script>"])
def test_any_other_range_is_refused(text: str) -> None:
    with pytest.raises(InvalidWindow, match="range must be one of 1h, 24h, 7d"):
        parse_range(text)


def test_a_long_range_is_not_echoed() -> None:
    with pytest.raises(InvalidWindow) as found:
        parse_range("y" * 500)
    assert "yyyy" not in str(found.value)


@pytest.mark.parametrize(
    ("raw", "step"),
    [(0, 1), (0.3, 1), (1, 1), (1.5, 2), (2, 2), (3, 5), (7, 10), (10, 10), (11, 20), (4001, 5000)],
)
def test_a_nice_step_is_one_two_or_five_times_a_power_of_ten(raw: float, step: int) -> None:
    assert nice_step(raw) == step


@pytest.mark.parametrize(
    ("largest", "ticks"),
    [
        (0, [0, 1]),
        (1, [0, 1]),
        (7, [0, 2, 4, 6, 8]),
        (10, [0, 2, 4, 6, 8, 10]),
        (125_000, [0, 50_000, 100_000, 150_000]),
    ],
)
def test_value_ticks(largest: int, ticks: list[int]) -> None:
    assert value_ticks(largest) == ticks


@given(st.integers(min_value=0, max_value=10**15))
def test_value_ticks_reach_the_largest_value_evenly(largest: int) -> None:
    ticks = value_ticks(largest)
    assert ticks[0] == 0 and ticks[-1] >= largest
    assert 2 <= len(ticks) <= 6
    steps = {b - a for a, b in itertools.pairwise(ticks)}
    assert len(steps) == 1
    # No more room above the largest value than one step.
    assert ticks[-1] - largest < steps.pop() or largest == 0


@pytest.mark.parametrize(
    ("span", "step", "first"),
    [
        (dt.timedelta(hours=1), dt.timedelta(minutes=10), dt.datetime(2026, 11, 25, 9, 10)),
        (dt.timedelta(hours=24), dt.timedelta(hours=6), dt.datetime(2026, 11, 25, 12, 0)),
        (dt.timedelta(days=7), dt.timedelta(days=1), dt.datetime(2026, 11, 26, 0, 0)),
    ],
)
def test_time_ticks_are_round_utc_times_within_the_window(
    span: dt.timedelta, step: dt.timedelta, first: dt.datetime
) -> None:
    ticks = time_ticks(T0, T0 + span)
    assert ticks[0] == first
    assert all(b - a == step for a, b in itertools.pairwise(ticks))
    assert all(T0 <= t <= T0 + span for t in ticks)
    assert 3 <= len(ticks) <= 7


@given(
    st.datetimes(min_value=dt.datetime(2000, 1, 1), max_value=dt.datetime(2100, 1, 1)),
    st.timedeltas(min_value=dt.timedelta(minutes=1), max_value=dt.timedelta(days=31)),
)
def test_time_ticks_never_leave_the_window(start: dt.datetime, span: dt.timedelta) -> None:
    ticks = time_ticks(start, start + span)
    assert len(ticks) <= 7
    assert all(start <= t <= start + span for t in ticks)
    assert ticks == sorted(ticks)


def test_time_labels_say_the_date_beyond_a_day() -> None:
    day = (T0, T0 + dt.timedelta(hours=24))
    week = (T0, T0 + dt.timedelta(days=7))
    assert time_label(dt.datetime(2026, 11, 25, 12, 0), *day) == "12:00"
    assert time_label(dt.datetime(2026, 11, 26, 0, 0), *week) == "11-26"
    assert time_label(dt.datetime(2026, 11, 26, 12, 0), *week) == "11-26 12:00"


def test_scale_maps_linearly_and_a_flat_domain_to_the_middle() -> None:
    assert scale(5, 0, 10, 100, 200) == 150
    assert scale(0, 0, 10, 222, 14) == 222  # y grows downwards
    assert scale(3, 3, 3, 0, 10) == 5


def test_plot_scales_points_into_the_box() -> None:
    box = Box()
    end = T0 + dt.timedelta(hours=1)
    points = [(T0, 0), (T0 + dt.timedelta(minutes=30), 5), (end, 10)]
    chart = plot(points, T0, end, box, unit=" msgs")
    assert [(d.x, d.y) for d in chart.dots] == [
        (box.left, box.bottom),
        ((box.left + box.right) / 2, (box.top + box.bottom) / 2),
        (box.right, box.top),
    ]
    assert chart.line == " ".join(f"{d.x},{d.y}" for d in chart.dots)
    assert chart.top == 10
    assert [t.label for t in chart.y_ticks] == ["0", "2", "4", "6", "8", "10"]
    assert chart.y_ticks[0].at == box.bottom and chart.y_ticks[-1].at == box.top
    assert [t.label for t in chart.x_ticks] == [
        "09:10",
        "09:20",
        "09:30",
        "09:40",
        "09:50",
        "10:00",
    ]
    assert chart.dots[1].label == "2026-11-25 09:37:30 UTC: 5 msgs"


@given(
    st.lists(
        st.tuples(
            st.datetimes(min_value=dt.datetime(2026, 1, 1), max_value=dt.datetime(2026, 12, 31)),
            st.integers(min_value=0, max_value=10**12),
        ),
        max_size=100,
    )
)
def test_every_point_lands_inside_the_plot(points: list[tuple[dt.datetime, int]]) -> None:
    box = Box()
    start, end = dt.datetime(2026, 6, 1), dt.datetime(2026, 6, 8)
    chart = plot(points, start, end, box)
    assert len(chart.dots) == len(points)
    for d in chart.dots:
        assert box.left <= d.x <= box.right and box.top <= d.y <= box.bottom
    for t in chart.x_ticks:
        assert box.left <= t.at <= box.right


def test_an_empty_series_has_an_axis_and_no_line() -> None:
    chart = plot([], T0, T0 + dt.timedelta(hours=1))
    assert chart.line == "" and chart.dots == ()
    assert [t.label for t in chart.y_ticks] == ["0", "1"]


def test_a_time_is_markup_with_its_iso_value_and_its_zone() -> None:
    at = dt.datetime(2026, 11, 25, 10, 0, 0, 123)
    assert iso_z(at) == "2026-11-25T10:00:00Z"
    aware = dt.datetime(2026, 11, 25, 12, 0, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert str(utc_time(aware)) == (
        '<time datetime="2026-11-25T10:00:00Z">2026-11-25 10:00:00 UTC</time>'
    )
    assert str(utc_time(None)) == "—"
    assert str(utc_time(None, missing="<never>")) == "&lt;never&gt;"


#: An attribute value (in double quotes) that prints a time through the `utc` filter.
_UTC_IN_ATTRIBUTE = re.compile(r'=\s*"[^"]*\|\s*utc\b(?!_)[^"]*"')


def test_no_template_puts_a_time_element_inside_an_attribute() -> None:
    """The `utc` filter gives a <time> element: in an attribute value it would show as
    markup; attributes take `utc_text`."""
    found = {
        path.name: _UTC_IN_ATTRIBUTE.findall(path.read_text()) for path in TEMPLATES.glob("*.html")
    }
    assert {name: hits for name, hits in found.items() if hits} == {}
    assert _UTC_IN_ATTRIBUTE.search('<span title="{{ at | utc }}">')
    assert not _UTC_IN_ATTRIBUTE.search('<span title="{{ at | utc_text }}">')
