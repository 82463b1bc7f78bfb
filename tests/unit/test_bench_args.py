"""The benchmark runner's count options refuse what cannot be a count, before any suite runs."""

from __future__ import annotations

import pytest

from benchmarks.__main__ import main


@pytest.mark.parametrize(
    "option",
    [
        "--spark-rounds",
        "--spark-rows",
        "--purge-rows",
        "--purge-chunk-rows",
        "--aio-consume-messages",
        "--scale-rows",
        "--tx-rounds",
        "--tx-backlog",
        "--tx-latency-messages",
    ],
)
@pytest.mark.parametrize("value", ["0", "-3", "x", "1.5"])
def test_counts_must_be_whole_and_positive(
    option: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["no-such-suite", option, value])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {option}:" in err
    assert "unknown suite" not in err  # refused on the option, before suites are looked at
