"""Wake-up payloads: which partitions have news, up to which offset."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ems.wakeups import parse_messages


def test_payload_names_the_last_offset_per_partition() -> None:
    assert parse_messages("3:17,0:4,3:9") == {3: 17, 0: 4}


def test_malformed_parts_are_skipped() -> None:
    assert parse_messages("x:1,2:,:5,-1:3,4:8,,7") == {4: 8}


@given(st.dictionaries(st.integers(0, 4095), st.integers(0, 2**62)))
def test_what_a_producer_publishes_reads_back(news: dict[int, int]) -> None:
    payload = ",".join(f"{p}:{o}" for p, o in news.items())
    assert parse_messages(payload) == news
