"""Which cluster node a process writes through (ems.store.nodes), driven without servers:
the vetting's statements are answered by hand."""

from __future__ import annotations

import time

import pytest

from ems.exceptions import ClusterMisconfigured
from ems.store.nodes import NodeSet

URLS = [f"mysql+pymysql://root@db{i}:3306/ems" for i in range(3)]
SETTINGS = [("ROW", 2, "ON")]
SYNCED = [("wsrep_ready", "ON"), ("wsrep_cluster_status", "Primary"), ("wsrep_local_state", "4")]


def _vet(
    nodes: NodeSet, index: int, status: list[tuple[object, ...]], sent: list[str] | None = None
) -> str | None:
    """Run node `index`'s vetting, answering its settings read, its status read and its
    catch-up read; the statements go to `sent`."""
    vetting = nodes.vet(index)
    statement = next(vetting)
    try:
        while True:
            if sent is not None:
                sent.append(statement)
            if "@@binlog_format" in statement:
                answer: list[tuple[object, ...]] = SETTINGS
            elif "SHOW GLOBAL STATUS" in statement:
                answer = status
            else:
                answer = [(1,)]
            statement = vetting.send(answer)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


def test_a_usable_node_becomes_current_and_older_connections_stale() -> None:
    nodes = NodeSet(URLS)
    born = time.monotonic()
    assert _vet(nodes, 1, SYNCED) is None
    assert nodes.current == 1 and nodes.candidates() == [1, 2, 0]
    assert nodes.stale(born) and not nodes.stale(time.monotonic())


def test_a_connection_opened_without_catch_up_skips_only_the_causal_read() -> None:
    nodes = NodeSet(URLS)
    sent: list[str] = []
    assert _vet(nodes, 1, SYNCED, sent) is None
    assert "wsrep_sync_wait" in sent[-1]
    sent.clear()
    with nodes.without_catch_up():
        assert _vet(nodes, 2, SYNCED, sent) is None
    assert not any("wsrep_sync_wait" in statement for statement in sent)
    assert nodes.current == 2  # still vetted: usable, and the node to write through
    assert _vet(nodes, 2, SYNCED, sent) is None
    assert "wsrep_sync_wait" in sent[-1]  # only within the block
    with nodes.without_catch_up():
        assert "not ready" in (_vet(nodes, 0, [("wsrep_ready", "OFF")]) or "")


def test_a_node_out_of_the_primary_component_stays_behind() -> None:
    nodes = NodeSet(URLS)
    status = [("wsrep_ready", "OFF"), ("wsrep_cluster_status", "non-Primary")]
    assert "not ready" in (_vet(nodes, 1, status) or "")
    assert nodes.current == 0 and nodes.switched_at == 0.0


def test_a_misconfigured_node_is_refused() -> None:
    nodes = NodeSet(URLS)
    vetting = nodes.vet(2)
    next(vetting)
    with pytest.raises(ClusterMisconfigured, match="binlog_format is MIXED, needs ROW"):
        vetting.send([("MIXED", 2, "ON")])


def test_away_from_the_first_node_the_search_starts_from_it_again_when_due() -> None:
    nodes = NodeSet(URLS, failback_every=0.05)
    assert _vet(nodes, 1, SYNCED) is None
    made = time.monotonic()
    assert not nodes.stale(made)
    time.sleep(0.06)
    assert nodes.stale(made)  # due: the next connection is a new one...
    assert nodes.candidates() == [0, 1, 2]  # ...which searches from the first node
    assert not nodes.stale(made)  # once per period
    assert nodes.candidates() == [1, 2, 0]


def test_on_the_first_node_or_with_fail_back_off_nothing_is_due() -> None:
    never = NodeSet(URLS, failback_every=0.0)
    assert _vet(never, 2, SYNCED) is None
    assert never.first_again_at == float("inf")
    home = NodeSet(URLS, failback_every=0.01)
    assert _vet(home, 0, SYNCED) is None
    time.sleep(0.02)
    assert not home.stale(time.monotonic()) and home.candidates() == [0, 1, 2]
