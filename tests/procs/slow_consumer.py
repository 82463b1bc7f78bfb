"""A consumer child process whose handler takes its time (`python -m tests.procs.slow_consumer`).

  URL GROUP TOPIC OUTFILE TTL RENEW BATCH DELAY

Like tests.procs.consumer, but the handler sleeps DELAY seconds per message before it
writes its line ("time partition offset attempt body"), so a test can catch members in the
middle of a batch.
"""

from __future__ import annotations

import sys
import time

from ems import Consumer, Delivery, Settings


def main(argv: list[str]) -> None:
    url, group, topic, outfile, ttl, renew, batch, delay = argv
    settings = Settings(database_url=url, gap_timeout=1.0)
    pause = float(delay)
    with open(outfile, "a", buffering=1) as out:

        def handle(d: Delivery) -> None:
            time.sleep(pause)
            out.write(f"{time.time():.6f} {d.partition} {d.offset} {d.attempt} {d.body.decode()}\n")

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
