"""Two systems compared round by round (pure).

The suites run their systems in rounds, each round one run of every system back to back,
because this host runs in slow and fast phases that last longer than a round (eight drains
of the same backlog in a row measured 80,157-83,458 msg/s five times, then
104,564-110,522 three times). A ratio of the two systems' medians can set a run from a
fast phase against one from a slow phase; the ratio within a round compares runs made in
the same phase. So a suite judges one system against another by the median of the rounds'
ratios, and shows their range: how far the host moved the comparison.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Ratio:
    """One system's figure over another's: the median of the rounds' ratios and the
    lowest and highest of them."""

    median: float
    low: float
    high: float

    def __str__(self) -> str:
        return f"{self.median:.2f}x"

    def with_range(self) -> str:
        """The median and, when the rounds differ at the shown precision, their range."""
        low, high = f"{self.low:.2f}", f"{self.high:.2f}"
        return str(self) if low == high else f"{self} ({low}-{high})"


def paired(first: Sequence[float | None], second: Sequence[float | None]) -> Ratio | None:
    """first against second, round by round: first[i] / second[i] for the runs of round
    i; None unless both were measured, and not zero, in the same rounds (at least one):
    a round without both runs has no ratio, and leaving it out would change which rounds
    the median speaks for."""
    if not first or len(first) != len(second):
        return None
    ratios = []
    for a, b in zip(first, second, strict=True):
        if not a or not b:
            return None
        ratios.append(a / b)
    return Ratio(statistics.median(ratios), min(ratios), max(ratios))
