"""Wake-up payloads: which partitions have news, up to which offset."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ems.offsets.resp import parse
from ems.wakeups import messages_commands, parse_messages, partition_channel


def test_payload_names_the_last_offset_per_partition() -> None:
    assert parse_messages("3:17,0:4,3:9") == {3: 17, 0: 4}


def test_malformed_parts_are_skipped() -> None:
    assert parse_messages("x:1,2:,:5,-1:3,4:8,,7") == {4: 8}


@given(st.dictionaries(st.integers(0, 4095), st.integers(0, 2**62)))
def test_what_a_producer_publishes_reads_back(news: dict[int, int]) -> None:
    payload = ",".join(f"{p}:{o}" for p, o in news.items())
    assert parse_messages(payload) == news


@given(st.dictionaries(st.integers(0, 4095), st.integers(0, 2**62), min_size=1, max_size=40))
def test_one_write_publishes_the_whole_news_on_the_topic_and_each_partition_on_its_own(
    news: dict[int, int],
) -> None:
    """Read back as Redis would: PUBLISH commands in order, each (channel, payload)."""
    channel = "ems:db:wake:topic:7"
    found = _publishes(messages_commands(channel, news))
    assert parse_messages(found[0][1]) == news and found[0][0] == channel
    assert found[1:] == [(partition_channel(channel, p), f"{p}:{o}") for p, o in news.items()]


def _publishes(packed: bytes) -> list[tuple[str, str]]:
    out, pos = [], 0
    while pos < len(packed):
        reply, pos = parse(packed, pos)
        assert isinstance(reply, list) and reply[0] == b"PUBLISH" and len(reply) == 3
        channel, payload = reply[1], reply[2]
        assert isinstance(channel, bytes) and isinstance(payload, bytes)
        out.append((channel.decode(), payload.decode()))
    return out
