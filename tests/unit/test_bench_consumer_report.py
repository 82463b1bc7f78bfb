"""The consumer suite's throughput table: ems against raw as medians of the alternating
drain rounds, judged against the target."""

from __future__ import annotations

from benchmarks.consumer_report import DrainRound, Results, throughput_table


def rounds(ems: list[float], raw: list[float]) -> list[DrainRound]:
    out = []
    for e, r in zip(ems, raw, strict=True):
        out += [
            DrainRound(system="raw", rate=r, cpu_micros=r / 1000),
            DrainRound(system="ems", rate=e, cpu_micros=e / 1000),
        ]
    return out


def row(lines: list[str], system: str) -> list[str]:
    return next(line for line in lines if line.startswith(f"| {system}")).split(" | ")


def test_the_ratio_is_of_the_medians_and_meets_the_target_at_0_95() -> None:
    # One slow ems round and one fast raw round move no median.
    r = Results(
        messages=1, soak=0, drains=rounds([30_000, 50_000, 48_000], [50_000, 49_000, 90_000])
    )
    lines = throughput_table(r)
    assert row(lines, "ems")[1] == "48,000"
    raw = row(lines, "raw")
    assert raw[1:4] == ["50,000", "50.0", "0.96x"]
    assert raw[5].startswith("yes")
    assert "raw 50,000; ems 30,000; raw 49,000; ems 50,000" in lines[-1]


def test_a_ratio_under_the_target_says_so() -> None:
    r = Results(messages=1, soak=0, drains=rounds([47_000], [50_000]))
    assert row(throughput_table(r), "raw")[5].startswith("**NO**: 0.94x < 0.95x")
