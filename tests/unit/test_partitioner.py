from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ems.producer.partitioner import RoundRobin, murmur2, partition_for_key

# Kafka's UtilsTest.testMurmur2 vectors: a key lands where a Kafka producer would put it.
KAFKA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


def test_murmur2_matches_kafka() -> None:
    for data, expected in KAFKA_VECTORS.items():
        assert murmur2(data) == expected, data


def test_partition_matches_kafka_to_positive_modulo() -> None:
    # toPositive(-790332482) = 1357151166; 1357151166 % 50 = 16
    assert partition_for_key(b"foobar", 50) == 16


@given(st.binary(max_size=300), st.integers(min_value=1, max_value=4096))
def test_partition_in_range_and_stable(key: bytes, partitions: int) -> None:
    p = partition_for_key(key, partitions)
    assert 0 <= p < partitions
    assert partition_for_key(key, partitions) == p


def test_round_robin_cycles_per_topic() -> None:
    rr = RoundRobin()
    assert [rr.next(1, 3) for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    assert rr.next(2, 3) == 0
