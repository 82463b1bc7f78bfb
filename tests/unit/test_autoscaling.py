"""The autoscaling decision: the HPA rule, its bounds and its damping, by example and by
property."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from ems.autoscale.policy import bounds, decide
from ems.config import Settings
from ems.exceptions import InvalidPolicy, InvalidSetting
from ems.values.autoscale import MemberLoad, Recommendation, ScaleInputs, ScalePolicy


def members(*loads: float, cpu: float | None = 10.0) -> list[MemberLoad]:
    return [
        MemberLoad(client_id=f"c{i}", load_rate=x, cpu_percent=cpu) for i, x in enumerate(loads)
    ]


def inputs(current: int, loads: list[MemberLoad], **kw: object) -> ScaleInputs:
    values: dict[str, object] = {"total_lag": None, "partitions": 64} | kw
    return ScaleInputs(current=current, members=loads, **values)  # type: ignore[arg-type]


POLICY = ScalePolicy(min_replicas=1, max_replicas=20, target_load=1000)


# -- by example -------------------------------------------------------------------------


def test_the_hpa_rule_scales_by_the_load_ratio_rounded_up() -> None:
    decision = decide(POLICY, inputs(4, members(1500, 1500, 1500, 1500)))
    assert (decision.current, decision.desired) == (4, 6)
    assert "x1.50" in decision.reason
    assert decide(POLICY, inputs(4, members(510, 510, 510, 510))).desired == 3  # ceil(2.04)


def test_within_the_tolerance_nothing_changes() -> None:
    assert decide(POLICY, inputs(4, members(1100, 1100, 1050, 1050))).desired == 4
    assert decide(POLICY, inputs(4, members(900, 900, 900, 900))).desired == 4
    assert decide(POLICY, inputs(4, members(1110, 1110, 1110, 1110))).desired == 5


def test_one_hot_member_asks_for_one_more_replica() -> None:
    loads = members(1000, 1000, cpu=50) + members(1000, cpu=95)
    decision = decide(POLICY, inputs(3, loads))
    assert decision.desired == 4
    assert "cpu above 90% on 1 member" in decision.reason


def test_lag_above_the_threshold_asks_for_one_more_replica_only_above() -> None:
    policy = dataclasses.replace(POLICY, lag_threshold=10_000)
    assert decide(policy, inputs(2, members(1000, 1000), total_lag=10_001)).desired == 3
    assert decide(policy, inputs(2, members(1000, 1000), total_lag=10_000)).desired == 2
    assert decide(POLICY, inputs(2, members(1000, 1000), total_lag=10**9)).desired == 2


def test_hot_cpu_and_lag_together_still_add_one() -> None:
    policy = dataclasses.replace(POLICY, lag_threshold=0)
    assert decide(policy, inputs(2, members(1000, 1000, cpu=99), total_lag=5)).desired == 3


def test_a_higher_load_recommendation_wins_over_the_plus_one() -> None:
    assert decide(POLICY, inputs(2, members(3000, 3000, cpu=99))).desired == 6


def test_the_partition_count_caps_the_replicas() -> None:
    decision = decide(POLICY, inputs(4, members(5000, 5000, 5000, 5000), partitions=6))
    assert decision.desired == 6
    assert "bounded to [1, 6]" in decision.reason


def test_min_and_max_bound_the_replicas() -> None:
    policy = dataclasses.replace(POLICY, min_replicas=2, max_replicas=5)
    assert decide(policy, inputs(4, members(10, 10, 10, 10))).desired == 2
    assert decide(policy, inputs(4, members(9000, 9000, 9000, 9000))).desired == 5


def test_without_reports_the_load_keeps_the_current_count() -> None:
    decision = decide(POLICY, inputs(3, members(cpu=None)))
    assert decision.desired == 3
    assert "no load reported" in decision.reason
    assert decide(POLICY, inputs(0, [])).desired == 1  # back to min


def test_a_scale_down_goes_only_to_the_highest_recommendation_in_the_window() -> None:
    history = [
        Recommendation(age_seconds=100, replicas=5),
        Recommendation(age_seconds=400, replicas=8),
    ]
    decision = decide(POLICY, inputs(6, members(*[100] * 6), history=history))
    assert decision.desired == 5  # the 8 is older than the 300 s window
    assert decision.recommendation == 1
    assert "held at 5" in decision.reason
    assert decide(POLICY, inputs(6, members(*[100] * 6))).desired == 1


def test_the_window_never_scales_up() -> None:
    history = [Recommendation(age_seconds=10, replicas=9)]
    assert decide(POLICY, inputs(6, members(*[100] * 6), history=history)).desired == 6


def test_nothing_changes_within_the_cooldown_after_a_change() -> None:
    busy = members(2000, 2000)
    decision = decide(POLICY, inputs(2, busy, since_last_change=599.0))
    assert decision.desired == 2
    assert "cooldown" in decision.reason
    assert decision.recommendation == 4
    assert decide(POLICY, inputs(2, busy, since_last_change=600.0)).desired == 4
    assert decide(POLICY, inputs(2, busy, since_last_change=None)).desired == 4


def test_the_cooldown_still_brings_the_replicas_within_bounds() -> None:
    policy = dataclasses.replace(POLICY, max_replicas=3)
    assert decide(policy, inputs(5, members(*[1000] * 5), since_last_change=1.0)).desired == 3


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"min_replicas": 5, "max_replicas": 4}, "exceed max"),
        ({"min_replicas": -1}, "min replicas"),
        ({"max_replicas": 0}, "max replicas"),
        ({"tolerance": 0.0}, "tolerance"),
        ({"tolerance": 1.0}, "tolerance"),
        ({"target_load": 0.0}, "target load"),
        ({"target_load": float("nan")}, "target load"),
        ({"cpu_threshold": 0.0}, "cpu threshold"),
        ({"lag_threshold": -1}, "lag threshold"),
        ({"cooldown_seconds": -1}, "cooldown"),
        ({"scale_down_window_seconds": -5}, "window"),
        ({"backend": "kubernetes"}, "needs a deployment"),
        ({"backend": "kubernetes", "deployment": "Bad_Name"}, "object name"),
        ({"namespace": "a.b"}, "namespace"),
        ({"backend": "ecs"}, "backend"),
    ],
)
def test_an_invalid_policy_is_refused(changes: dict[str, object], words: str) -> None:
    policy = dataclasses.replace(POLICY, **changes)  # type: ignore[arg-type]
    with pytest.raises(InvalidPolicy, match=words):
        decide(policy, inputs(1, members(1000)))


# -- by property ------------------------------------------------------------------------


@st.composite
def policies(draw: st.DrawFn) -> ScalePolicy:
    low = draw(st.integers(0, 20))
    return ScalePolicy(
        min_replicas=low,
        max_replicas=draw(st.integers(max(1, low), 40)),
        target_load=draw(st.floats(1, 100_000)),
        tolerance=draw(st.floats(0.01, 0.5)),
        cpu_threshold=draw(st.floats(10, 200)),
        lag_threshold=draw(st.none() | st.integers(0, 10**6)),
        scale_down_window_seconds=draw(st.integers(0, 600)),
        cooldown_seconds=draw(st.integers(0, 1200)),
    )


loads = st.none() | st.floats(0, 200_000)
cpus = st.none() | st.floats(0, 400)
member_loads = st.lists(
    st.builds(MemberLoad, client_id=st.just("c"), load_rate=loads, cpu_percent=cpus),
    max_size=12,
)
histories = st.lists(
    st.builds(Recommendation, age_seconds=st.floats(0, 1000), replicas=st.integers(0, 50)),
    max_size=10,
)


@st.composite
def states(draw: st.DrawFn) -> ScaleInputs:
    return ScaleInputs(
        current=draw(st.integers(0, 50)),
        members=draw(member_loads),
        total_lag=draw(st.none() | st.integers(0, 10**7)),
        partitions=draw(st.integers(1, 64)),
        history=draw(histories),
        since_last_change=draw(st.none() | st.floats(0, 2000)),
    )


@given(policies(), states())
def test_never_above_max_or_the_partitions_never_below_min(
    policy: ScalePolicy, state: ScaleInputs
) -> None:
    desired = decide(policy, state).desired
    assert desired <= policy.max_replicas
    assert desired <= state.partitions
    assert desired >= min(policy.min_replicas, state.partitions)
    assert bounds(policy, state.partitions)[0] <= desired <= bounds(policy, state.partitions)[1]


@given(policies(), states(), st.data())
def test_no_change_while_the_load_ratio_stays_within_the_tolerance(
    policy: ScalePolicy, state: ScaleInputs, data: st.DataObject
) -> None:
    low, high = bounds(policy, state.partitions)
    current = data.draw(st.integers(low, high))
    margin = policy.tolerance * 0.999
    ratios = st.floats(1 - margin, 1 + margin)
    calm = [
        MemberLoad(client_id="c", load_rate=policy.target_load * data.draw(ratios), cpu_percent=1.0)
        for _ in range(data.draw(st.integers(1, 8)))
    ]
    average = sum(m.load_rate or 0 for m in calm) / len(calm)
    assume(abs(average / policy.target_load - 1) <= policy.tolerance)
    state = dataclasses.replace(state, current=current, members=calm, total_lag=None)
    assert decide(policy, state).desired == current


@given(policies(), states(), st.data())
def test_more_load_never_means_fewer_replicas(
    policy: ScalePolicy, state: ScaleInputs, data: st.DataObject
) -> None:
    more = [
        dataclasses.replace(m, load_rate=(m.load_rate or 0) + data.draw(st.floats(0, 50_000)))
        if m.load_rate is not None
        else m
        for m in state.members
    ]
    busier = dataclasses.replace(state, members=more)
    assert decide(policy, busier).desired >= decide(policy, state).desired


@given(policies(), states(), st.floats(0, 1200))
def test_no_change_within_the_cooldown(
    policy: ScalePolicy, state: ScaleInputs, since: float
) -> None:
    assume(since < policy.cooldown_seconds)
    low, high = bounds(policy, state.partitions)
    state = dataclasses.replace(state, since_last_change=since)
    assert decide(policy, state).desired == max(low, min(high, state.current))


@given(policies(), states())
def test_a_scale_down_stays_at_the_highest_recommendation_of_the_window(
    policy: ScalePolicy, state: ScaleInputs
) -> None:
    since = state.since_last_change
    assume(since is None or since >= policy.cooldown_seconds)  # the cooldown holds instead
    decision = decide(policy, state)
    assume(decision.desired < state.current)
    low, high = bounds(policy, state.partitions)
    window = policy.scale_down_window_seconds
    recent = [r.replicas for r in state.history if r.age_seconds <= window]
    floor = min(state.current, max([decision.recommendation, *recent]))
    assert decision.desired == max(low, min(high, floor))


# -- settings ---------------------------------------------------------------------------


def test_autoscale_settings_from_env() -> None:
    defaults = Settings.from_env({})
    assert (defaults.autoscale_interval, defaults.kubeconfig, defaults.kube_timeout) == (
        30.0,
        None,
        2.0,
    )
    env = {"EMS_AUTOSCALE_INTERVAL": "5", "EMS_KUBECONFIG": "/k", "EMS_KUBE_TIMEOUT": "1.5"}
    s = Settings.from_env(env)
    assert (s.autoscale_interval, s.kubeconfig, s.kube_timeout) == (5.0, "/k", 1.5)
    assert Settings.from_env({"EMS_AUTOSCALE_INTERVAL": "0"}).autoscale_interval == 0
    assert Settings.from_env({"EMS_AUTOSCALE_INTERVAL": "off"}).autoscale_interval == 0


@pytest.mark.parametrize(
    "env",
    [{"EMS_AUTOSCALE_INTERVAL": "-1"}, {"EMS_AUTOSCALE_INTERVAL": "x"}, {"EMS_KUBE_TIMEOUT": "0"}],
)
def test_bad_autoscale_settings(env: dict[str, str]) -> None:
    with pytest.raises(InvalidSetting):
        Settings.from_env(env)
