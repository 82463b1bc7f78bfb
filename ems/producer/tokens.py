"""Write tokens: 63 random bits per write (see Producer._commit), telling a write of ours
from another's at the same offset. Not a secret, so not the OS's randomness per write (a
system call on every publish): a generator seeded by the OS once per process, and again in
a forked child, which would otherwise repeat its parent's tokens."""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from functools import partial

_tokens = random.Random(os.urandom(32))


def _reseed() -> None:
    _tokens.seed(os.urandom(32))


os.register_at_fork(after_in_child=_reseed)


#: write_token() -> a fresh write token. Thread-safe (one C call under the GIL), and no
#: Python frame: every publish takes one. The fork hook re-seeds the same generator.
write_token: Callable[[], int] = partial(_tokens.getrandbits, 63)
