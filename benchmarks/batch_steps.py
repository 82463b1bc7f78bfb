"""What a batch send costs the client per message, step by step: ems's steps and the
floor's, on the same rows.

This part of the cost suite times each pure step of a send_batch of BATCH of the producer
suite's readings alone, in-process and without servers (time.process_time(), the best of
ROUNDS rounds of the same batches), next to the steps raw+redis runs for the same rows:

- ems: the caller's message, as the producer suite sends it: a plain (body, key, headers)
  tuple, the cheapest form send_batch takes (an ems.Record, whose constructor is a Python
  function, is timed beside it and left out of the sums); validation and routing by key
  (prepare_batch); the count per partition; the INSERT statement of the write
  (insert_statements: each row with its partition's fence, the token on the first); the
  results (a BatchMetadata: the write's partitions, its RecordMetadata made when read), and
  beside it, left out of the sums, the results read, every one;
- raw+redis: its count per partition; its rows placed at their offsets; its INSERT
  statement (ems's encoding, literals kept). Partitions are precomputed, bodies known
  valid, and no result is made: what it skips is what ems's API does.

So the cost model shows which of ems's per-message client CPU over the floor is its API's
(a message in, validation and routing, the results) and which its statement's.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass

from benchmarks.harness import BATCH, HEADERS, PARTITIONS, Reading, readings
from benchmarks.writers import batch_counts, placed_pairs, raw_statement
from ems.producer.partitioner import RoundRobin
from ems.producer.planning import metadata, partition_counts, prepare_batch
from ems.store.inserts import insert_statements
from ems.types import Placed, Record, TopicInfo

BATCHES = 100
ROUNDS = 7
#: The API's steps: what ems does per message that no layer of it can leave out while
#: send_batch takes messages and returns where each landed.
TUPLE_STEP = "the caller's message (a plain tuple)"
RESULTS_STEP = "results (a BatchMetadata, made when read)"
API_STEPS = (TUPLE_STEP, "validation and routing (prepare_batch)", RESULTS_STEP)
#: Steps timed beside the others and left out of the sums: the same messages as Records,
#: and the results read (made) every one, which a caller that reads them pays instead.
RECORD_STEP = "the caller's message as an ems.Record instead (not summed)"
READ_STEP = "results read, every RecordMetadata made (not summed)"
NOT_SUMMED = (RECORD_STEP, READ_STEP)


@dataclass(frozen=True)
class Step:
    system: str
    name: str
    micros: float  # client CPU per message, best of the rounds


def measure(rows: list[Reading] | None = None) -> list[Step]:
    """Each step's client CPU per message, ems's and raw+redis's, on the same batches."""
    found = rows or readings()
    batches = [found[i * BATCH : (i + 1) * BATCH] for i in range(len(found) // BATCH)]
    batches = batches[:BATCHES]
    info = TopicInfo(
        id=1,
        name="bench",
        partitions=PARTITIONS,
        retention_hours=1,
        max_body_bytes=1 << 20,
        created_at=dt.datetime(2026, 1, 1),
    )
    fences = tuple(range(PARTITIONS))
    round_robin = RoundRobin()

    def make_tuples() -> list[list[tuple[bytes, str, dict[str, str]]]]:
        return [[(r.body, r.key, HEADERS) for r in b] for b in batches]

    records = make_tuples()
    prepared = [prepare_batch(info, b, round_robin) for b in records]
    firsts = [dict.fromkeys(partition_counts(p), 1000) for p in prepared]
    placed = [Placed(info.id, p, f) for p, f in zip(prepared, firsts, strict=True)]
    counts = [batch_counts(b) for b in batches]
    pairs = [placed_pairs(b, f) for b, f in zip(batches, _firsts(counts), strict=True)]
    literals: dict[str, bytes] = {}

    def make_records() -> object:
        return [[Record(r.body, r.key, HEADERS) for r in b] for b in batches]

    def place_raw() -> object:
        return [placed_pairs(b, f) for b, f in zip(batches, _firsts(counts), strict=True)]

    steps: list[tuple[str, str, Callable[[], object]]] = [
        ("ems", TUPLE_STEP, make_tuples),
        ("ems", RECORD_STEP, make_records),
        (
            "ems",
            "validation and routing (prepare_batch)",
            lambda: [prepare_batch(info, b, round_robin) for b in records],
        ),
        ("ems", "count per partition", lambda: [partition_counts(p) for p in prepared]),
        ("ems", "statement", lambda: [insert_statements(w, 7, fences) for w in placed]),
        ("ems", RESULTS_STEP, lambda: [metadata(info.name, w) for w in placed]),
        ("ems", READ_STEP, lambda: [list(metadata(info.name, w)) for w in placed]),
        ("raw+redis", "count per partition", lambda: [batch_counts(b) for b in batches]),
        ("raw+redis", "rows placed at their offsets", place_raw),
        ("raw+redis", "statement", lambda: [raw_statement(info.id, p, literals) for p in pairs]),
    ]
    messages = len(batches) * BATCH
    best = {(system, name): float("inf") for system, name, _ in steps}
    for _ in range(ROUNDS):
        for system, name, step in steps:
            started = time.process_time()
            step()
            spent = (time.process_time() - started) / messages * 1e6
            best[(system, name)] = min(best[(system, name)], spent)
    return [Step(system, name, best[(system, name)]) for system, name, _ in steps]


def _firsts(counts: list[dict[int, int]]) -> list[dict[int, int]]:
    """Ranges starting at 1000 for each batch's partitions (placing moves them on)."""
    return [dict.fromkeys(c, 1000) for c in counts]


def render(steps: list[Step]) -> list[str]:
    lines = [
        "### What a batch send costs the client per message, step by step",
        "",
        f"Each pure step of a send_batch of {BATCH} of the readings above, timed alone "
        f"in-process over {BATCHES} batches (client CPU per message, best of {ROUNDS} "
        "rounds): ems's steps and raw+redis's for the same rows. raw+redis takes precomputed "
        "partitions and known-valid bodies, and returns nothing per message.",
        "",
        "| system | step | client CPU us per message |",
        "|---|---|---:|",
    ]
    totals: dict[str, float] = {}
    for s in steps:
        lines.append(f"| {s.system} | {s.name} | {s.micros:.3f} |")
        if s.name not in NOT_SUMMED:
            totals[s.system] = totals.get(s.system, 0.0) + s.micros
    api = sum(s.micros for s in steps if s.system == "ems" and s.name in API_STEPS)
    lines += [
        "",
        "Steps in all: "
        + "; ".join(f"{system} {total:.2f} us" for system, total in totals.items())
        + f". Of ems's, {api:.2f} us per message are its API's (the caller's message, "
        "validation and routing, the results), which raw+redis does not do: no layer of ems "
        "can leave them out while send_batch takes messages (a columnar batch call would). "
        "The results are made when read: a caller that reads every one pays the read line "
        "instead of the results line. The messages are plain tuples, as the producer suite "
        "sends them; as ems.Records they would cost the caller the Record line instead of "
        "the tuple line.",
        "",
    ]
    return lines
