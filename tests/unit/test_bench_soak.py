"""The consumer suite's memory soak: the slope is judged over the window after the
warm-up, where a member's allocator pools have taken their working size; the maximum
counts the warm-up too."""

from __future__ import annotations

from benchmarks.consumer_procs import slope_per_minute
from benchmarks.consumer_report import EmsRun, memory_table, soak_series

WARMUP = 60.0
SOAK = 120.0


def run_of(rss: list[float], warmup: float = WARMUP) -> EmsRun:
    """One member sampled once a second over the warm-up and the soak."""
    return EmsRun(
        rss_start=[68.0],
        rss_drained=[70.0],
        soak=[(float(t), [mb]) for t, mb in enumerate(rss)],
        soak_warmup=warmup,
        soak_rate=1000.0,
    )


def verdict(run: EmsRun) -> str:
    (row,) = [line for line in memory_table(run, SOAK) if line.startswith("| 0 |")]
    return row.rsplit("|", 2)[1].strip()


def settling() -> list[float]:
    """1.5 MB taken over the first minute, then flat but for page-sized wobbles."""
    warm = [70.0 + 1.5 * t / WARMUP for t in range(int(WARMUP))]
    return warm + [71.5 + 0.004 * (t % 3) for t in range(int(SOAK) + 1)]


def test_a_warm_up_that_settles_is_no_trend() -> None:
    run = run_of(settling())
    warm, window = soak_series(run, 0)
    assert len(warm) == WARMUP and window[0] == (WARMUP, 71.5)
    # A soak of its first minute alone would have judged the warm-up a trend.
    assert slope_per_minute([(t, v[0]) for t, v in run.soak[: int(WARMUP)]]) >= 0.5
    assert verdict(run) == "yes"


def test_growth_over_the_soak_fails_however_flat_the_warm_up() -> None:
    leak = [70.0] * int(WARMUP) + [70.0 + 0.6 * t / 60 for t in range(int(SOAK) + 1)]
    assert verdict(run_of(leak)) == "**NO**"


def test_the_warm_up_counts_toward_the_maximum() -> None:
    spike = settling()
    spike[10] = 101.0
    assert verdict(run_of(spike)) == "**NO**"


def test_without_a_warm_up_every_sample_is_judged() -> None:
    first_minute = settling()[: int(WARMUP) + 1]
    run = run_of(first_minute, warmup=0.0)
    warm, window = soak_series(run, 0)
    assert warm == [] and len(window) == len(run.soak)
    assert verdict(run) == "**NO**"
