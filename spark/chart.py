"""PNG charts of lag over time, one file per consumer group."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from pathlib import Path


def chart_name(label: str) -> str:
    return "lag-" + re.sub(r"[^A-Za-z0-9._-]+", "_", label) + ".png"


def write_lag_charts(
    series: Mapping[str, Sequence[tuple[dt.datetime, int]]], directory: str
) -> list[str]:
    """One PNG per group label: total lag (messages) against capture time (UTC)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import dates as mdates
    from matplotlib import pyplot as plt

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for label, points in sorted(series.items()):
        fig, ax = plt.subplots(figsize=(8, 3.5), dpi=100)
        times = [t for t, _ in points]
        # matplotlib plots datetimes through its unit converters; its stubs do not say so.
        ax.plot(times, [lag for _, lag in points], marker=".", linewidth=1.5)  # type: ignore[arg-type]
        locator = mdates.AutoDateLocator()  # type: ignore[no-untyped-call]
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))  # type: ignore[no-untyped-call]
        ax.set_title(f"lag of {label}")
        ax.set_xlabel("captured at (UTC)")
        ax.set_ylabel("lag (messages)")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        fig.tight_layout()
        path = out / chart_name(label)
        fig.savefig(path)
        plt.close(fig)
        written.append(str(path))
    return written
