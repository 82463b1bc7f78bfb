"""What the run leases (compaction, migrations) share: who holds one, whether that holder
is known to be gone, and the thread that renews a lease while its block runs."""

from __future__ import annotations

import logging
import os
import secrets
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from sqlalchemy.exc import SQLAlchemyError

from ems.exceptions import EmsError
from ems.service import Service

log = logging.getLogger(__name__)


def holder_name() -> str:
    """This process as a lease holder: host, pid and a nonce (two runs in one process
    are two holders)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


def gone_from_this_host(holder: str) -> bool:
    """Whether `holder` (holder_name()'s form) names a process of this host that no
    longer runs: a run killed here, whose lease need not be waited out. A holder of
    another host, or a pid that runs (perhaps reused), is not known to be gone."""
    host, _, rest = holder.partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


@contextmanager
def renewing(renew: Callable[[], bool], every: float, what: str) -> Iterator[None]:
    """Call renew() every `every` seconds from a thread while the block runs. renew()
    returns False once the lease is someone else's (logged; renewals stop); a failed
    call is logged and tried again at the next turn (a lease outlives a few)."""

    def loop() -> None:
        while not renewer.stopping.wait(every):
            try:
                if not renew():
                    log.error("the %s was lost (another run took it after it lapsed)", what)
                    return
            except (EmsError, SQLAlchemyError) as exc:
                log.warning("could not renew the %s: %s", what, exc)

    renewer = Service(f"ems {what}", loop)
    renewer.start()
    try:
        yield
    finally:
        renewer.stop_and_join()
