"""Write tokens come from a generator seeded once per process: a forked child must not
repeat its parent's (two producers would then recognise each other's writes as theirs)."""

from __future__ import annotations

import json
import os

from ems.producer.tokens import write_token


def test_tokens_are_63_bit_and_do_not_repeat() -> None:
    tokens = [write_token() for _ in range(10_000)]
    assert all(0 <= t < 2**63 for t in tokens)
    assert len(set(tokens)) == len(tokens)


def test_a_forked_child_draws_other_tokens_than_its_parent() -> None:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next tokens, then out without pytest's teardown
        os.write(write, json.dumps([write_token() for _ in range(8)]).encode())
        os._exit(0)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    child = json.loads(os.read(read, 65536))
    os.close(read)
    parent = [write_token() for _ in range(8)]
    assert os.waitstatus_to_exitcode(status) == 0
    assert len(child) == 8 and not set(child) & set(parent)
