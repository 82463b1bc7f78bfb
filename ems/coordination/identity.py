"""Client identity: ip, pid, a random part and the thread id, so any client row in the
database can be traced back to one thread of one process on one host."""

from __future__ import annotations

import os
import socket
import threading
import uuid


def local_ip() -> str:
    """The address other hosts would see, without sending anything."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.255.255.255", 1))
            return str(probe.getsockname()[0])
        except OSError:
            return "127.0.0.1"


def client_id(ip: str | None = None) -> str:
    """`<ip>-<pid>-<12 hex>-<thread id>`; unique even when a pid is reused."""
    return f"{ip or local_ip()}-{os.getpid()}-{uuid.uuid4().hex[:12]}-{threading.get_ident()}"
