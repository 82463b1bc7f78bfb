"""The benchmark figures of docs/benchmarks.md, rendered from the results files `make bench`
writes.

Every figure on that page sits between a pair of markers, `<!-- bench:SUITE ... -->` and
`<!-- /bench:SUITE -->`. What lies between them is rendered from
benchmarks/results/SUITE-latest.md (the run's date and machine, then its tables and the
lines that read them) and is never edited by hand: `make bench` rewrites the blocks after
its suites run, `python -m benchmarks.docs_figures` rewrites them from the files as they
are, and `python -m benchmarks.docs_figures --check` fails when the page and the results
files disagree (tests/unit/test_bench_figures.py checks the same). A suite without a
results file yet (a new one, before its first run on a quiet machine) gets a block that
says so.

From a results file the block takes every paragraph and table of the chosen sections and
leaves out headings and bullet lists (a run's set-up, which the page describes in prose),
except a list that a paragraph introduces ("Checks:"), which is kept with a blank line
before it so that Markdown renders it as a list.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "benchmarks.md"
RESULTS = ROOT / "benchmarks" / "results"

PREAMBLE = ""


@dataclass(frozen=True)
class Source:
    """One suite's block: its title and which sections of its results file it shows."""

    title: str
    #: Section titles (the text after "### ") to show; PREAMBLE is what comes before the
    #: first one. None shows every section.
    sections: tuple[str, ...] | None = None


#: Suite -> what its block on the page shows, in page order.
SOURCES: Mapping[str, Source] = {
    "producer": Source("Producer", sections=(PREAMBLE, "What the write token costs")),
    "producer-compiled": Source(
        "Producer, compiled build", sections=(PREAMBLE, "Against the design's floor")
    ),
    "consumer": Source("Consumer"),
    "cost": Source("Cost model per operation"),
    "assignor": Source("Assignor"),
    "spark": Source("Spark jobs"),
    "spark-stream": Source("Spark Structured Streaming"),
    "purge": Source("Purge while publishing"),
    "purge-drop": Source("Dropping partitions instead of purging"),
    "faults": Source("Fault scenarios"),
    "ha": Source("High availability"),
    "admin": Source("Admin console"),
    "aio": Source("Asyncio SDK"),
    "aio-drivers": Source("Asyncio MySQL drivers"),
    "scale": Source("Scale with the data"),
    "memory": Source("Memory while draining"),
    "tx": Source("Transactional publishing"),
    "cli": Source("CLI start-up"),
}

_BLOCK = re.compile(
    r"(?P<open><!-- bench:(?P<suite>[a-z-]+)\b[^>]*-->)\n.*?\n<!-- /bench:(?P=suite) -->",
    re.DOTALL,
)
_DATE = re.compile(r"(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2})")
_FACTS = ("uname -m", "nproc", "MariaDB", "Redis", "CPU steal")
_NPROC = re.compile(r"\bnproc:? (\d+)")


class FiguresError(Exception):
    """The page or a results file is not in the shape the generator expects."""


def results_path(suite: str, results: Path = RESULTS) -> Path:
    return results / f"{suite}-latest.md"


def _paragraphs(lines: Iterable[str]) -> list[list[str]]:
    blocks: list[list[str]] = [[]]
    for line in lines:
        if line.strip():
            blocks[-1].append(line.rstrip())
        elif blocks[-1]:
            blocks.append([])
    return [block for block in blocks if block]


def _markdown(block: list[str]) -> str:
    """A paragraph's lines, with a blank line where a list starts after a line of text:
    Markdown (Python-Markdown, which the docs build uses) only starts a list after one."""
    lines: list[str] = []
    for line in block:
        if line.startswith("- ") and lines and not lines[-1].startswith("- "):
            lines.append("")
        lines.append(line)
    return "\n".join(lines)


def _sections(text: str) -> list[tuple[str, list[str]]]:
    """(title, lines) per "### " section; the lines before the first have title PREAMBLE."""
    sections: list[tuple[str, list[str]]] = [(PREAMBLE, [])]
    for line in text.splitlines():
        if line.startswith("### "):
            sections.append((line[4:].strip(), []))
        else:
            sections[-1][1].append(line)
    return sections


def _run_line(text: str) -> str:
    """'run of 2026-11-25 01:51 UTC; x86_64, nproc 2, MariaDB 10.11.19, Redis 7.0.15'."""
    date = _DATE.search(text)
    if date is None:
        raise FiguresError("results file has no run date")
    facts = []
    for line in text.splitlines():
        for name in _FACTS:
            prefix = f"- {name}: "
            if line.startswith(prefix):
                value = line[len(prefix) :].split(" (")[0].split("-MariaDB")[0]
                facts.append(value if name == "uname -m" else f"{name} {value}")
    nproc = _NPROC.search(text)
    if not any(fact.startswith("nproc") for fact in facts) and nproc:
        facts.append(f"nproc {nproc.group(1)}")
    machine = f"; {', '.join(facts)}" if facts else ""
    return f"Run of {date.group(1)} {date.group(2)} UTC{machine}."


def render_block(suite: str, text: str) -> str:
    """The block for one suite's results file text, markers included."""
    source = SOURCES[suite]
    parts = [f"**{source.title}.** {_run_line(text)}"]
    for title, lines in _sections(text):
        if source.sections is not None and title not in source.sections:
            continue
        shown = [block for block in _paragraphs(lines) if not block[0].startswith(("#", "- "))]
        if shown and title:
            parts.append(f"*{title}*")
        parts.extend(_markdown(block) for block in shown)
    if len(parts) == 1:
        raise FiguresError(f"{results_path(suite).name} has nothing to show")
    body = "\n\n".join(parts)
    return (
        f"<!-- bench:{suite} generated by `make bench` from "
        f"benchmarks/results/{suite}-latest.md; edits here are overwritten -->\n"
        f"{body}\n<!-- /bench:{suite} -->"
    )


def not_run_block(suite: str) -> str:
    """The block of a suite whose results file does not exist yet: it says so, and how
    to make it (a new suite's first figures come from a run on a quiet machine)."""
    return (
        f"<!-- bench:{suite} generated by `make bench` from "
        f"benchmarks/results/{suite}-latest.md; edits here are overwritten -->\n"
        f"**{SOURCES[suite].title}.** Not run yet: `make bench SUITES={suite}` writes "
        f"benchmarks/results/{suite}-latest.md and renders its figures here.\n"
        f"<!-- /bench:{suite} -->"
    )


def render(page: str, results: Path = RESULTS) -> str:
    """The page with every benchmark block rendered from its results file (or saying
    that the suite has not run yet)."""
    found: list[str] = []

    def replace(match: re.Match[str]) -> str:
        suite = match.group("suite")
        if suite not in SOURCES:
            raise FiguresError(f"{PAGE.name} has a block for unknown suite {suite!r}")
        found.append(suite)
        path = results_path(suite, results)
        if not path.exists():
            return not_run_block(suite)
        return render_block(suite, path.read_text())

    updated = _BLOCK.sub(replace, page)
    missing = [suite for suite in SOURCES if suite not in found]
    if missing:
        raise FiguresError(f"{PAGE.name} has no block for {', '.join(missing)}")
    return updated


def update(page: Path = PAGE, results: Path = RESULTS) -> bool:
    """Rewrite the page's blocks from the results files; True when anything changed."""
    before = page.read_text()
    after = render(before, results)
    if after != before:
        page.write_text(after)
    return after != before


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.docs_figures",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if the page differs from the results"
    )
    args = parser.parse_args(argv)
    name = PAGE.relative_to(ROOT)
    if args.check:
        if render(PAGE.read_text()) != PAGE.read_text():
            print(
                f"{name} benchmark figures differ from benchmarks/results; run "
                "`python -m benchmarks.docs_figures`",
                file=sys.stderr,
            )
            return 1
        return 0
    print(f"{name} updated" if update() else f"{name} already up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
