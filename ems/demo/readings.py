"""What a gateway sends: a device's temperature reading, keyed by its project."""

from __future__ import annotations

import datetime as dt
import json
import random

from ems.types import Record

DEVICES_PER_PROJECT = 20


def reading(rng: random.Random, projects: int) -> dict[str, object]:
    project = rng.randrange(1, projects + 1)
    return {
        "project_id": project,
        "device": f"gw-{project}-{rng.randrange(DEVICES_PER_PROJECT)}",
        "ts": dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds"),
        "temperature": round(rng.gauss(21.0, 4.0), 2),
    }


def readings(rng: random.Random, projects: int, count: int) -> list[Record]:
    batch = (reading(rng, projects) for _ in range(count))
    return [Record(json.dumps(r), key=str(r["project_id"])) for r in batch]


def parse(body: bytes) -> tuple[int, float]:
    """A handler's view of a reading: (project, temperature); ValueError when malformed."""
    data = json.loads(body)
    return int(data["project_id"]), float(data["temperature"])
