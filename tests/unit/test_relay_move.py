"""The relay's move statements (ems.store.outbox): each partition's first row carries its
fence, and the rows go in partition order, as the producer's do and as fencers take
fences."""

from __future__ import annotations

from ems.store.outbox import lowest_places, move_statements


def test_a_moves_rows_go_in_partition_order_each_partitions_first_with_its_fence() -> None:
    places = [(11, 1, 7), (12, 0, 3), (13, 1, 8)]  # (outbox id, partition, offset)
    insert, delete = move_statements(5, places, [40, 41])
    # Partition 0's row first; partition 1's in the order they were read.
    ordered = "[12,0,3,40],[11,1,7,41],[13,1,8,null]"
    assert ordered in insert and ordered in delete
    assert insert.startswith("INSERT INTO message (") and "fence) SELECT" in insert
    assert ", r.f FROM" in insert and "partition_low" not in insert
    assert lowest_places(places) == {1: 7, 0: 3}
