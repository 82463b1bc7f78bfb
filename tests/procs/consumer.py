"""A consumer child process for the group tests (`python -m tests.procs.consumer`).

  URL GROUP TOPIC OUTFILE TTL RENEW BATCH

Runs a cluster consumer until SIGTERM; its handler appends one line per handled message,
"time partition offset body", flushed at once so a kill -9 loses no line of a message
the handler finished.
"""

from __future__ import annotations

import sys
import time

from ems import Consumer, Delivery, Settings


def main(argv: list[str]) -> None:
    url, group, topic, outfile, ttl, renew, batch = argv
    settings = Settings(database_url=url, gap_timeout=1.0)
    with open(outfile, "a", buffering=1) as out:

        def handle(d: Delivery) -> None:
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
        print(consumer.client_id, flush=True)
        consumer.run()
    print("left", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
