"""The cost model's server work per message (benchmarks.cost.WORK) reads what the
server did: rows written and read by a round's statements show in its counters, and the
table renders each system's medians per message."""

from __future__ import annotations

from benchmarks.cost import WORK, Sample, render_work, server_work
from ems.config import Settings
from tests.conftest import connect

ROWS = 50


def test_a_rounds_writes_and_reads_show_in_the_server_work(settings: Settings) -> None:
    conn = connect(settings)
    try:
        with conn.cursor() as cur:
            # A table of its own (a temporary one writes no redo, and few pages).
            cur.execute("DROP TABLE IF EXISTS work_probe")
            cur.execute("CREATE TABLE work_probe (id INT PRIMARY KEY, v INT) ENGINE=InnoDB")
            before = server_work(settings.database_url)
            for i in range(ROWS):
                cur.execute("INSERT INTO work_probe VALUES (%s, %s)", (i, i))
            cur.execute("SELECT v FROM work_probe WHERE id >= 0 ORDER BY id")
            assert len(cur.fetchall()) == ROWS
            after = server_work(settings.database_url)
            cur.execute("DROP TABLE work_probe")
    finally:
        conn.close()
    done = {figure: after[figure] - before[figure] for figure in WORK}
    # Other tests share the server: their work can only add to these.
    assert done["rows written"] >= ROWS
    assert done["rows read"] >= ROWS
    assert done["page writes"] >= ROWS
    assert done["redo bytes"] > 0


def sample(messages: int, **work: int) -> Sample:
    return Sample(
        messages=messages,
        statements={},
        writes=0,
        cpu=0.0,
        server=None,
        wall=1.0,
        work={figure: work.get(figure.replace(" ", "_"), 0) for figure in WORK},
    )


def test_the_table_shows_the_median_per_message_of_each_system() -> None:
    rounds = [sample(100, rows_written=200), sample(100, rows_written=300)]
    results = {
        "single": {"ems": rounds, "raw": [sample(10, rows_read=5)]},
        "batch": {},
        "consume": {},
    }
    lines = render_work(results)  # type: ignore[arg-type]
    ems = next(line for line in lines if line.startswith("| single send | ems |"))
    raw = next(line for line in lines if line.startswith("| single send | raw |"))
    assert ems.split(" | ")[2:4] == ["0", "2.5"]  # rows read, rows written (median)
    assert raw.split(" | ")[2:4] == ["0.5", "0"]
