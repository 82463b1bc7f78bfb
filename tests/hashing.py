"""argon2id at its cheapest, for tests about something else than the hash.

The default parameters (argon2-cffi's PasswordHasher) cost about a tenth of a second of
CPU per account added and per sign-in. The console's tests are about who may do what, and
the throttle's tests about counting failures: they hash with CHEAP_HASHER. The tests of
the hash itself (tests/integration/test_accounts.py: the stored kind, a weaker hash
replaced, an unknown name verified against a hash of the real parameters) keep the
defaults.
"""

from __future__ import annotations

import pytest
from argon2 import PasswordHasher

from ems.ops import accounts as accounts_module

CHEAP_HASHER = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1)


def cheap_password_hashing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(accounts_module, "_hasher", CHEAP_HASHER)
    monkeypatch.setattr(accounts_module, "_dummy_hash", None)
