"""The documentation: README.md and the MkDocs site in docs/ (`make docs`).

The site builds with --strict and no warning, every page is in the nav, every relative link
leads to a file, and the pages that restate the code (configuration, command line, schema,
folder map) name everything the code has and nothing it lacks.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import yaml

import ems
from ems.cli.app import cli
from ems.config import WORKER_PREFIX
from ems.models import metadata
from ems.worker.options import OPTIONS as WORKER_OPTIONS

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
MKDOCS = ROOT / "mkdocs.yml"
README_MAX_LINES = 250

_LINK = re.compile(r"\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^```.*?^```", re.M | re.S)
_CODE_SPAN = re.compile(r"`[^`\n]*`")
_EXTERNAL = ("http://", "https://", "mailto:", "#")


def _pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def _nav_files(nav: Any) -> Iterator[str]:
    """The page files of an MkDocs nav: a list of paths, {title: path} and {title: [...]}."""
    if isinstance(nav, str):
        yield nav
    elif isinstance(nav, list):
        for item in nav:
            yield from _nav_files(item)
    elif isinstance(nav, dict):
        for value in nav.values():
            yield from _nav_files(value)


def _section(text: str, heading: str) -> str:
    """The lines under `heading` up to the next heading of its level or above (headings
    inside code blocks do not count)."""
    level = len(heading.split(" ", 1)[0])
    lines = text.splitlines()
    start = lines.index(heading)
    fenced = False
    for end in range(start + 1, len(lines)):
        line = lines[end]
        if line.startswith("```"):
            fenced = not fenced
        hashes = len(line) - len(line.lstrip("#"))
        if not fenced and 0 < hashes <= level and line[hashes : hashes + 1] == " ":
            return "\n".join(lines[start:end])
    return "\n".join(lines[start:])


def _table(text: str, heading: str) -> list[str]:
    return [line for line in _section(text, heading).splitlines() if line.startswith("|")]


def _code_block(text: str, heading: str) -> str:
    """The first fenced code block under `heading`, without its fences."""
    return _section(text, heading).split("```", 2)[1].split("\n", 1)[1]


def test_the_site_builds_strict_without_a_warning(tmp_path: Path) -> None:
    site = tmp_path / "site"
    build = ["build", "--strict", "--config-file", str(MKDOCS), "--site-dir", str(site)]
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", *build],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        # Material's notice about its successor is no warning about this site.
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "WARNING" not in output, output
    assert "ERROR" not in output, output
    for page in _pages():
        built = page.relative_to(DOCS).with_suffix("")
        index = site / "index.html" if built.name == "index" else site / built / "index.html"
        assert index.exists(), index


def test_the_build_is_strict_and_offline() -> None:
    config = yaml.safe_load(MKDOCS.read_text())
    assert config["strict"] is True
    assert config["theme"]["name"] == "material"
    assert config["theme"]["font"] is False  # no fonts from a CDN
    # Nothing that fetches: the search index, and the API reference read from this
    # checkout's source by static analysis (no object inventories loaded from elsewhere).
    search, mkdocstrings = config["plugins"]
    assert search == "search"
    handlers = mkdocstrings["mkdocstrings"]["handlers"]
    assert set(handlers) == {"python"}
    python = handlers["python"]
    assert python["paths"] == ["."]
    assert "inventories" not in python and "import" not in python
    assert set(config["validation"].values()) == {"warn"}


def test_the_api_reference_documents_the_public_names() -> None:
    """docs/reference.md renders every name ems exports and the modules ems.aio,
    ems.testing and ems.exceptions, and says that everything else is private."""
    text = (DOCS / "reference.md").read_text()
    directives = set(re.findall(r"^::: ([\w.]+)$", text, re.M))
    exported = {f"ems.{name}" for name in ems.__all__ if name != "exceptions"}
    assert directives == exported | {"ems.aio", "ems.testing", "ems.exceptions"}
    assert "Everything else is private" in text


def test_every_page_is_in_the_nav() -> None:
    nav = set(_nav_files(yaml.safe_load(MKDOCS.read_text())["nav"]))
    pages = {page.relative_to(DOCS).as_posix() for page in _pages()}
    assert pages - nav == set(), "pages missing from the nav of mkdocs.yml"
    assert nav - pages == set(), "nav entries without a page"


def test_the_readme_is_short() -> None:
    lines = len(README.read_text().splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move detail to docs/"


def test_every_relative_link_points_to_a_file() -> None:
    checked = 0
    for source in [README, *_pages()]:
        text = _CODE_SPAN.sub("", _FENCE.sub("", source.read_text()))
        for link in _LINK.findall(text):
            if link.startswith(_EXTERNAL):
                continue
            target = (source.parent / link.split("#", 1)[0]).resolve()
            assert target.exists(), f"{source.relative_to(ROOT)} links to missing {link}"
            checked += 1
    assert checked >= 20


def test_the_readme_configuration_table_is_the_guides() -> None:
    readme = _table(README.read_text(), "## Configuration")
    guide = _table((DOCS / "guide.md").read_text(), "## Configuration")
    assert readme == guide
    documented = set(re.findall(r"`(EMS_[A-Z0-9_]+)`", "\n".join(guide)))
    read = set(re.findall(r'"(EMS_[A-Z0-9_]+)"', (ROOT / "ems" / "config.py").read_text()))
    # config.py reads every EMS_WORKER_* variable by its prefix; the worker's table names them.
    read.remove(WORKER_PREFIX)
    read |= {option.env for option in WORKER_OPTIONS}
    assert documented == read


def test_the_readme_folder_map_is_the_development_pages() -> None:
    readme = _code_block(README.read_text(), "## Folders")
    development = _code_block((DOCS / "development.md").read_text(), "## Layout")
    assert readme == development


def _ignored_top_level() -> set[str]:
    lines = (ROOT / ".gitignore").read_text().splitlines()
    return {line.strip("/") for line in lines if re.fullmatch(r"/[\w.-]+/", line)}


def test_the_folder_map_names_every_folder_and_module() -> None:
    tree = _code_block(README.read_text(), "## Folders")
    ignored = _ignored_top_level()
    for path in ROOT.iterdir():
        name = path.name
        if not path.is_dir() or name.startswith((".", "_")) or name.endswith(".egg-info"):
            continue
        if name not in ignored:
            assert f"{name}/" in tree, name
    for package in ("ems", "spark"):
        for path in (ROOT / package).iterdir():
            if path.name.startswith("_") or path.name == "py.typed":
                continue
            name = f"{path.name}/" if path.is_dir() else path.name
            assert re.search(rf"(?<![\w/]){re.escape(name)}", tree), f"{package}/{name}"


def _subcommands(group: click.Group) -> dict[str, click.Command]:
    """A group's commands by name (the top-level group loads them on demand)."""
    ctx = click.Context(group)
    found = {name: group.get_command(ctx, name) for name in group.list_commands(ctx)}
    return {name: command for name, command in found.items() if command is not None}


def _commands(group: click.Group, path: tuple[str, ...]) -> Iterator[tuple[str, click.Command]]:
    """Every command that can be run, by its path: leaves, and groups that run themselves."""
    if group.invoke_without_command:
        yield " ".join(path), group
    for name, command in _subcommands(group).items():
        if isinstance(command, click.Group):
            yield from _commands(command, (*path, name))
        else:
            yield " ".join((*path, name)), command


def _options(command: click.Command) -> set[str]:
    names: set[str] = set()
    for param in command.params:
        if isinstance(param, click.Option) and not param.hidden:
            names.update(o for o in param.opts + param.secondary_opts if o.startswith("--"))
    return names


def _synopsis() -> dict[str, str]:
    """The synopsis of docs/cli.md by command path: each `ems ...` line with the indented
    lines that continue it, comments left out."""
    block = _code_block((DOCS / "cli.md").read_text(), "## Synopsis")
    entries: list[str] = []
    for line in block.splitlines():
        line = line.split(" # ", 1)[0]
        if line.startswith("ems "):
            entries.append(line)
        elif line.strip():
            assert line.startswith(" "), line
            entries[-1] += " " + line.strip()
    by_path: dict[str, str] = {}
    for entry in entries:
        command: click.Command = cli
        path: list[str] = []
        for word in entry.split()[1:]:
            if not isinstance(command, click.Group) or word not in _subcommands(command):
                break
            command = _subcommands(command)[word]
            path.append(word)
        key = " ".join(path)
        assert key not in by_path, f"two synopsis lines for ems {key}"
        by_path[key] = entry
    return by_path


def test_the_cli_synopsis_names_every_command_and_option() -> None:
    assert isinstance(cli, click.Group)
    commands = dict(_commands(cli, ()))
    synopsis = _synopsis()
    assert set(synopsis) == set(commands)
    for path, command in commands.items():
        written = set(re.findall(r"--[a-z][a-z0-9-]*", synopsis[path]))
        assert written == _options(command), f"ems {path}"


def test_the_readme_cheat_sheet_names_every_command() -> None:
    assert isinstance(cli, click.Group)
    sheet = _code_block(README.read_text(), "## Command line")
    for name in _subcommands(cli):
        assert f"ems {name} " in sheet or f"ems {name}\n" in sheet, name


def test_the_schema_overview_names_every_table() -> None:
    text = (DOCS / "schema-overview.md").read_text()
    named = set(re.findall(r"^\| `(\w+)`(?:, `(\w+)`)? \|", text, re.M))
    tables = {name for pair in named for name in pair if name}
    assert tables == set(metadata.tables) - {"log_summary_stage"}
    assert "`log_summary_stage`" in text


def test_the_transactions_pages_handlers_are_the_examples_as_the_tests_run_them() -> None:
    """Each route and handler printed in docs/transactions.md is, line for line, in an
    example that a test runs (examples/flask_orders.py, examples/order_service.py,
    examples/projection.py, examples/aio_projection.py)."""
    page = (ROOT / "docs" / "transactions.md").read_text()
    starts = ("@app.", "def handle", "async def handle")
    routes = [b for b in page.split("```python\n")[1:] if b.startswith(starts)]
    examples = "".join(
        (ROOT / "examples" / name).read_text()
        for name in ("flask_orders.py", "order_service.py", "projection.py", "aio_projection.py")
    )
    assert len(routes) == 4
    for block in routes:
        code = block.split("```", 1)[0]
        unindented = "\n".join(
            line[4:] if line.startswith("    ") else line for line in examples.splitlines()
        )
        assert code in examples or code in unindented, code


def test_the_spark_sources_example_is_the_one_the_tests_run() -> None:
    """The code under docs/spark.md's source heading is, line for line, in
    examples/spark_stream.py, which tests/spark/test_source.py runs and kills."""
    page = (DOCS / "spark.md").read_text()
    block = _code_block(page, '## The ems source: `spark.readStream.format("ems")`')
    example = (ROOT / "examples" / "spark_stream.py").read_text()
    unindented = "\n".join(line.removeprefix("    ") for line in example.splitlines())
    assert "import spark.source\n" in example
    assert block.removeprefix("import spark.source\n\n") in unindented


def test_the_spark_sinks_examples_are_the_ones_the_tests_run() -> None:
    """The code under docs/spark.md's sink and progress headings is, line for line, in
    examples/spark_sink.py, which tests/spark/test_sink.py runs and kills."""
    page = (DOCS / "spark.md").read_text()
    example = (ROOT / "examples" / "spark_sink.py").read_text()
    unindented = "\n".join(line.removeprefix("    ") for line in example.splitlines())
    for heading in ('## The ems sink: `df.writeStream.format("ems")`', "### Progress and lag"):
        assert _code_block(page, heading) in unindented, heading


def test_the_spark_queries_example_is_what_the_command_prints() -> None:
    """docs/spark.md's `ems spark queries` output is the command's rendering of the
    figures it shows (the command's own report function, on the positions it names)."""
    import datetime as dt

    from ems.cli.spark import _query_report
    from ems.store.stream_queries import QueryPosition
    from ems.stream_queries import describe_queries

    section = _section((DOCS / "spark.md").read_text(), _QUERIES_HEADING)
    command, output = re.findall(r"^```\w*\n(.*?)^```", section, re.M | re.S)
    assert command == "ems spark queries reading-windows\n"
    at = dt.datetime(2026, 11, 30, 10, 4, 12)
    positions = [
        QueryPosition(
            query="reading-windows",
            topic="iot.readings",
            partition=p,
            committed_offset=committed,
            committed_at=at,
            high_watermark=high,
        )
        for p, committed, high in ((0, 4418, 4431), (1, 4402, 4402))
    ]
    (described,) = describe_queries(positions)
    assert output == _query_report(described) + "\n"


_QUERIES_HEADING = "### A streaming query's position: `ems spark queries`"
