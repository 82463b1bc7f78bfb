"""The nodes of one database and the one ems writes through.

A database URL may name the nodes of a Galera cluster (ems.urls). Galera takes writes on
every node, but two clients writing the same rows through two nodes meet only at commit,
in certification, where one of them is refused (error 1213): ems's own clients would
refuse each other's lease renewals, cursor commits and log updates. So ems writes
through one node at a time, the first usable one in the order the URL gives, and every
client that sees the same cluster picks the same node.

Each new connection goes to the current node; when that node is unreachable or unusable
(not in the primary component, not synced) the next ones are tried, in order, and the
first usable one becomes current. The pools are renewed when a statement finds its node
gone (ems.store.database, ems.store.engine), so every later connection follows.

A node that just became current may not yet have applied every write the cluster
committed through the old one (Galera applies asynchronously after certification). Each
new connection to a cluster node therefore waits once for its node to catch up (a causal
read: wsrep_sync_wait) before it is handed out; afterwards this node commits every write
ems makes, so its reads see them. The one exception is the lease renewal's connection
(NodeSet.without_catch_up): a renewal is a conditional write, which certification refuses
when a write it had not seen changed its row, and after the writer node dies the causal
read waits for the very eviction that holds every commit, so a renewal judged after it
would find a lease expired that held when the renewal was sent.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import contextmanager, suppress
from functools import partial
from typing import Any

import pymysql
from sqlalchemy.engine import make_url

from ems.exceptions import ClusterMisconfigured
from ems.store import driver

#: What a cluster node must run with for ems: row-based replication (Galera replicates
#: nothing else) and interleaved auto-increment locks (Galera requires them).
REQUIRED = {"binlog_format": "ROW", "innodb_autoinc_lock_mode": "2", "wsrep_on": "ON"}
#: wsrep_local_state 4: Synced. A joiner (1), a donor (2) or a joined node still catching
#: up (3) is passed over.
SYNCED = "4"
_STATUS = (
    "SHOW GLOBAL STATUS WHERE Variable_name IN "
    "('wsrep_ready', 'wsrep_cluster_status', 'wsrep_local_state')"
)
#: NULL for wsrep_on on a server without Galera (MySQL, or MariaDB built without it).
_SETTINGS = (
    "SELECT @@binlog_format, @@innodb_autoinc_lock_mode, (SELECT VARIABLE_VALUE "
    "FROM information_schema.GLOBAL_VARIABLES WHERE VARIABLE_NAME = 'WSREP_ON')"
)
#: Wait until this node has applied every write the cluster committed before now.
_CATCH_UP = "SET STATEMENT wsrep_sync_wait = 1 FOR SELECT 1"

Rows = list[tuple[Any, ...]]
#: Vetting a node: yields statements, is sent their rows, returns why the node is
#: unusable (None: usable). Written once, driven by a blocking and an asyncio driver.
Vetting = Generator[str, Rows, "str | None"]
Connect = Callable[[str, int], Any]


class NodeSet:
    """The nodes of one database, in order, and the index of the current one."""

    def __init__(self, urls: Sequence[str], failback_every: float = 0.0) -> None:
        parsed = [make_url(url) for url in urls]
        self.addresses = [(url.host or "127.0.0.1", url.port or 3306) for url in parsed]
        self.current = 0
        #: time.monotonic() when the current node last changed: a connection made before
        #: then may go to the old node, and is closed rather than used (see stale()).
        self.switched_at = 0.0
        #: Away from the first node, the search starts from it again this often (0:
        #: never), so the processes of a deployment come back together on it.
        self.failback_every = failback_every
        self.first_again_at = math.inf
        #: Nodes whose settings were checked (set.add is atomic: no lock needed).
        self._checked: set[int] = set()
        #: Per thread: whether the connections it opens now skip the catch-up.
        self._local = threading.local()

    @property
    def cluster(self) -> bool:
        return len(self.addresses) > 1

    def candidates(self) -> list[int]:
        """Node indexes in the order to try them: the current node, then the next ones;
        from the first node when a fail-back is due (see stale())."""
        n = len(self.addresses)
        start = self.current
        if self._failback_due():
            start = 0
            self.first_again_at = time.monotonic() + self.failback_every
        return [(start + step) % n for step in range(n)]

    def _failback_due(self) -> bool:
        return self.current != 0 and time.monotonic() >= self.first_again_at

    @contextmanager
    def without_catch_up(self) -> Iterator[None]:
        """Connections this thread opens meanwhile skip the causal read that waits until
        their node has applied every write the cluster committed (see the module's
        docstring). Only for statements that stay correct on a node still catching up:
        a conditional write that Galera refuses at commit (certification) when a write
        it had not seen changed its row, such as the lease renewal."""
        self._local.blind = True
        try:
            yield
        finally:
            self._local.blind = False

    def where(self, index: int) -> str:
        host, port = self.addresses[index]
        return f"{host}:{port}"

    def vet(self, index: int) -> Vetting:
        """Whether node `index` can take ems's writes; on the first visit its settings are
        checked too (ClusterMisconfigured). A usable node is made current once it has
        caught up with the cluster."""
        if index not in self._checked:
            (row,) = yield _SETTINGS
            found = dict(zip(REQUIRED, (None if v is None else str(v) for v in row), strict=True))
            check_settings(found, self.where(index))
            self._checked.add(index)
        status = {str(name).lower(): str(value) for name, value in (yield _STATUS)}
        problem = node_problem(status)
        if problem is None:
            if not getattr(self._local, "blind", False):
                yield _CATCH_UP
            if index != self.current:
                self.current = index
                self.switched_at = time.monotonic()
                every = self.failback_every
                self.first_again_at = self.switched_at + every if index and every else math.inf
        return problem

    def stale(self, born: float) -> bool:
        """Whether a connection made at time.monotonic() `born` may go to a node other
        than the current one. Using it would put a second writer on the cluster: once the
        old node is back in the primary component, its writes would meet this process's
        own in certification. Away from the first node, every connection also counts as
        stale once a fail-back is due: the next one made searches from the first node."""
        # _failback_due() written out: every statement's connection is checked so.
        return born < self.switched_at or (
            self.current != 0 and time.monotonic() >= self.first_again_at
        )

    def connect(self, connect: Connect) -> Any:
        """A driver connection to the current node, or to the next usable one in order.
        Raises the driver's OperationalError when no node answers and is usable."""
        if not self.cluster:
            return connect(*self.addresses[0])
        problems = []
        for index in self.candidates():
            try:
                conn = connect(*self.addresses[index])
            except pymysql.err.OperationalError as exc:
                problems.append(f"{self.where(index)}: {exc.args[-1]}")
                continue
            try:
                problem = _drive(self.vet(index), partial(_rows, conn))
            except pymysql.err.Error as exc:
                problem = str(exc.args[-1])
            except ClusterMisconfigured:
                _close(conn)
                raise
            if problem is None:
                return conn
            _close(conn)
            problems.append(f"{self.where(index)}: {problem}")
        raise pymysql.err.OperationalError(2003, unusable(problems))


def usable_node_url(urls: Sequence[str], connect_timeout: float) -> str:
    """The URL of the node ems would write through now: the only one, or the first
    usable node of a cluster (for a tool that takes one URL, such as Alembic). Raises the
    driver's OperationalError when none is usable."""
    if len(urls) == 1:
        return urls[0]
    nodes = NodeSet(urls)
    first = make_url(urls[0])

    def connect(host: str, port: int) -> Any:
        return driver.connect(
            host=host,
            port=port,
            user=first.username or "root",
            password=first.password or "",
            connect_timeout=max(1, int(connect_timeout)),
        )

    _close(nodes.connect(connect))
    return urls[nodes.current]


def unusable(problems: Sequence[str]) -> str:
    return "no node of the database cluster is usable: " + "; ".join(problems)


def _drive(vetting: Vetting, run: Callable[[str], Rows]) -> str | None:
    try:
        statement = next(vetting)
        while True:
            statement = vetting.send(run(statement))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


def _rows(conn: Any, sql: str) -> Rows:
    with conn.cursor() as cursor:
        cursor.execute(sql)
        return list(cursor.fetchall())


def node_problem(status: dict[str, str]) -> str | None:
    """Why a Galera node with this wsrep status cannot take writes, or None."""
    if status.get("wsrep_ready") != "ON":
        return "not ready (wsrep_ready OFF)"
    if status.get("wsrep_cluster_status") != "Primary":
        return f"not in the primary component ({status.get('wsrep_cluster_status')})"
    if status.get("wsrep_local_state") != SYNCED:
        return f"not synced (wsrep_local_state {status.get('wsrep_local_state')})"
    return None


def settings_problems(found: dict[str, str | None]) -> list[str]:
    """The required settings a node does not have, as `name is X, needs Y`."""
    return [
        f"{name} is {found.get(name)}, needs {needed}"
        for name, needed in REQUIRED.items()
        if str(found.get(name)).upper() != needed
    ]


def check_settings(found: dict[str, str | None], where: str) -> None:
    """Refuse a cluster node that lacks a required setting, with what to change."""
    if found.get("wsrep_on") is None:
        raise ClusterMisconfigured(
            f"{where} is not a Galera node (it has no wsrep_on); a database URL with "
            "several hosts names the nodes of one Galera cluster"
        )
    problems = settings_problems(found)
    if problems:
        raise ClusterMisconfigured(
            f"{where} cannot serve ems as a cluster node: " + "; ".join(problems)
        )


def _close(conn: Any) -> None:
    with suppress(Exception):
        conn.close()
