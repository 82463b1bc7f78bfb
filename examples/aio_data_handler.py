"""An asyncio data handler: a member of the `data-handlers` group on `iot.readings`.

Run: `python -m examples.aio_data_handler` (EMS_DATABASE_URL and EMS_REDIS_URL as for
every ems program); start more to share the partitions. Each reading is handled by an
`async def`, which may await its own I/O; SIGTERM (a Kubernetes pod stopping) finishes the
batch in hand, acks it, commits and leaves the group.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys

from ems import Delivery, Settings
from ems.aio import Consumer

TOPIC, GROUP = "iot.readings", "data-handlers"


async def store_reading(reading: dict[str, object], partition: int, offset: int) -> None:
    """Stands in for the service's own storage (an async database or HTTP call)."""
    await asyncio.sleep(0)
    line = json.dumps({"partition": partition, "offset": offset, **reading})
    # One write per line: members on several threads (--threads) share stdout.
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def handle(delivery: Delivery) -> None:
    # Returning acks the message; raising retries it by the group's backoff ladder and,
    # after the last attempt, moves it to the dead letters.
    reading = json.loads(delivery.body)
    await store_reading(reading, delivery.partition, delivery.offset)


async def main() -> None:
    consumer = Consumer(GROUP, TOPIC, handle, settings=Settings.from_env(), start="earliest")
    await consumer.run()  # until SIGTERM or SIGINT


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    asyncio.run(main())
