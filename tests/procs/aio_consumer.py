"""An asyncio consumer child process for the group tests (`python -m tests.procs.aio_consumer`).

  URL GROUP TOPIC OUTFILE TTL RENEW BATCH

The async twin of tests.procs.consumer, with the same arguments and output: runs a
cluster member of ems.aio.Consumer until SIGTERM; its handler appends one line per
handled message, "time partition offset body", flushed at once.
"""

from __future__ import annotations

import asyncio
import sys
import time

from ems import Delivery, Settings
from ems.aio import Consumer


async def main(argv: list[str]) -> None:
    url, group, topic, outfile, ttl, renew, batch = argv
    settings = Settings(database_url=url, gap_timeout=1.0)
    with open(outfile, "a", buffering=1) as out:

        async def handle(d: Delivery) -> None:
            await asyncio.sleep(0)  # a handler that awaits, as real ones do
            out.write(f"{time.time():.6f} {d.partition} {d.offset} {d.body.decode()}\n")

        consumer = Consumer(
            group,
            topic,
            handle,
            settings=settings,
            start="earliest",
            lease_ttl=float(ttl),
            renew_every=float(renew),
            batch_size=int(batch),
        )
        await consumer.start()
        print(consumer.client_id, flush=True)
        await consumer.run()
    print("left", flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
