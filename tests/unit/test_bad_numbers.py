"""Non-finite, negative, zero and huge numbers, wherever a number comes in: every numeric
setting and every number option of the command line. Each is either accepted as a sane
value or refused with a typed error naming the setting or option, never carried on into
a wait that never ends, a LIMIT 0 loop or a timedelta overflow."""

from __future__ import annotations

import math
from collections.abc import Iterator

import click
import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from ems.cli import cli
from ems.config import BOUNDS, Settings
from ems.display import parse_when
from ems.exceptions import InvalidDatetime, InvalidSetting

HOSTILE = ["inf", "-inf", "nan", "NaN", "-1", "0", "0.5", "1e308", str(10**30), "-1e308", "1e-9"]
numbers = st.sampled_from(HOSTILE) | st.floats().map(repr) | st.integers().map(str)


def number_params() -> Iterator[tuple[str, click.Parameter]]:
    """Every parameter of every command whose type is a number (click.INT, click.FLOAT
    and their ranges), found by walking the command tree."""

    def walk(command: click.Command, path: str) -> Iterator[tuple[str, click.Parameter]]:
        for param in command.params:
            if isinstance(param.type, click.types.IntParamType | click.types.FloatParamType):
                yield f"{path} {param.name}", param
        if isinstance(command, click.Group):
            ctx = click.Context(command)  # the top group loads its commands on demand
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                assert sub is not None, name
                yield from walk(sub, f"{path} {name}")

    yield from walk(cli, "ems")


PARAMS = list(number_params())


def test_the_tree_has_number_options() -> None:
    assert len(PARAMS) > 20
    assert "ems group reset-offsets timeout" in dict(PARAMS)


@pytest.mark.parametrize(("where", "param"), PARAMS, ids=[w for w, _ in PARAMS])
@hypothesis_settings(max_examples=40, deadline=None)
@given(raw=numbers)
def test_every_number_option_takes_only_finite_bounded_values(
    where: str, param: click.Parameter, raw: str
) -> None:
    ctx = click.Context(cli)
    try:
        value = param.type.convert(raw, param, ctx)
    except click.BadParameter:
        return  # click reports it as a usage error: exit code 2, the option named
    assert isinstance(value, int | float)
    assert math.isfinite(value), (where, raw)
    assert abs(value) <= 2**63 - 1, (where, raw)


@pytest.mark.parametrize("name", sorted(BOUNDS))
@hypothesis_settings(max_examples=40, deadline=None)
@given(raw=numbers | st.sampled_from(["", "abc", "1_000", " 5 "]))
def test_every_numeric_setting_is_checked_at_load(name: str, raw: str) -> None:
    bound = BOUNDS[name]
    try:
        settings = Settings.from_env({bound.env: raw})
    except InvalidSetting as exc:
        assert bound.env in str(exc)
        return
    value = getattr(settings, name)
    assert math.isfinite(value)
    assert (value == 0 and bound.zero) or bound.low <= value <= bound.high
    if bound.whole:
        assert isinstance(value, int)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("purge_chunk_rows", 0.5),
        ("purge_chunk_rows", 0),
        ("gap_timeout", math.nan),
        ("connect_timeout", math.inf),
        ("pool_size", True),
    ],
)
def test_settings_made_in_code_are_checked_too(name: str, value: object) -> None:
    with pytest.raises(InvalidSetting, match=BOUNDS[name].env):
        Settings(**{name: value})  # type: ignore[arg-type]


@pytest.mark.parametrize("text", ["999999d", "99999999999999999999w", "1e400s", "3000000d"])
def test_ages_that_overflow_a_datetime_are_invalid(text: str) -> None:
    import datetime as dt

    with pytest.raises(InvalidDatetime):
        parse_when(text, dt.datetime(2026, 11, 24))
