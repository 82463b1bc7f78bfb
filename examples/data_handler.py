"""A data handler for `ems worker`: a plain function of one delivery.

Run: `ems worker examples.data_handler:store_reading --group data-handlers --topic
iot.readings` from the repository's root (EMS_DATABASE_URL and EMS_REDIS_URL as for every
ems program). Returning acks the message; raising retries it by the group's backoff
ladder and, after the last attempt, moves it to the dead letters.
"""

from __future__ import annotations

import json
import sys

from ems import Delivery


def store_reading(delivery: Delivery) -> None:
    reading = json.loads(delivery.body)  # a malformed reading raises: retried, then dead
    line = json.dumps({"partition": delivery.partition, "offset": delivery.offset, **reading})
    # One write per line: handlers on several threads (--threads) share stdout, and
    # print() writes the text and its newline apart, so two lines could run together.
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
