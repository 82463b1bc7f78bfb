"""The admin console's accounts on the real server: users and roles, the last admin,
argon2 hashes, sign-in and its throttle (the clock moved by ageing the counters' rows),
API tokens stored as a hash only.

Passwords are hashed at argon2id's cheapest (tests/hashing.py) except in the tests that
ask for default_hashing: those are about the hash and its parameters."""

from __future__ import annotations

import hashlib
import itertools
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from argon2 import PasswordHasher

from ems.config import Settings
from ems.exceptions import InvalidInput, InvalidName, InvalidPassword
from ems.ops.accounts import Accounts
from ems.store import Store
from ems.values.account_errors import (
    InvalidRole,
    LastAdmin,
    LoginRefused,
    LoginThrottled,
    TokenExists,
    UnknownToken,
    UnknownUser,
    UserExists,
)
from ems.values.login_limits import (
    ADDRESS_LIMIT,
    BASE_DELAY,
    FREE_FAILURES,
    MAX_DELAY,
    WINDOW_SECONDS,
    LoginLimits,
    backoff_delay,
)
from tests import sql as db
from tests.hashing import cheap_password_hashing

PASSWORD = "correct horse battery"
OTHER = "another long password"


@pytest.fixture
def default_hashing() -> None:
    """This test hashes with the product's argon2id parameters."""


@pytest.fixture(autouse=True)
def _hashing(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if "default_hashing" not in request.fixturenames:
        cheap_password_hashing(monkeypatch)


@pytest.fixture
def accounts(settings: Settings, store: Store) -> Iterator[Accounts]:
    with Accounts(settings, store=store) as a:
        yield a


def rows(store: Store, sql: str, **params: Any) -> list[Any]:
    return db.rows(store, sql, params or None)


def execute(store: Store, sql: str, **params: Any) -> None:
    db.run(store, sql, params or None)


def count(store: Store, table: str) -> int:
    return int(rows(store, f"SELECT COUNT(*) FROM {table}")[0][0])


def failures(store: Store) -> dict[str, int]:
    counted = rows(store, "SELECT scope, failures FROM admin_login_failure WHERE failures > 0")
    return {r[0]: int(r[1]) for r in counted}


def age_failures(store: Store, seconds: float) -> None:
    """Move every failure window into the past, as if `seconds` had passed."""
    execute(
        store,
        "UPDATE admin_login_failure SET first_at = first_at - INTERVAL :us MICROSECOND, "
        "last_at = last_at - INTERVAL :us MICROSECOND",
        us=int(seconds * 1_000_000),
    )


# -- users ---------------------------------------------------------------------------------


def test_users_are_added_listed_and_found(accounts: Accounts) -> None:
    bob = accounts.add_user("bob", "viewer", PASSWORD)
    alice = accounts.add_user("alice@example.com", "admin", OTHER)
    assert (bob.name, bob.role, bob.session_epoch) == ("bob", "viewer", 0)
    assert bob.created_at == bob.updated_at
    assert [u.name for u in accounts.users()] == ["alice@example.com", "bob"]
    assert accounts.user(alice.id) == alice
    assert accounts.user_named("bob") == bob
    with pytest.raises(UnknownUser):
        accounts.user(alice.id + bob.id + 1)
    with pytest.raises(UnknownUser):
        accounts.user_named("carol")


def test_the_stored_hash_is_argon2id_and_holds_no_password(
    accounts: Accounts, store: Store, default_hashing: None
) -> None:
    accounts.add_user("alice", "admin", PASSWORD)
    (stored,) = rows(store, "SELECT password_hash FROM admin_user WHERE name = 'alice'")[0]
    assert stored.startswith("$argon2id$")
    assert PASSWORD not in stored
    assert PasswordHasher().verify(stored, PASSWORD)
    # The same password twice makes two hashes (each has its own salt).
    accounts.add_user("bob", "viewer", PASSWORD)
    (other,) = rows(store, "SELECT password_hash FROM admin_user WHERE name = 'bob'")[0]
    assert other != stored


def test_a_name_is_taken_once(accounts: Accounts, store: Store) -> None:
    accounts.add_user("alice", "admin", PASSWORD)
    with pytest.raises(UserExists):
        accounts.add_user("alice", "viewer", OTHER)
    assert [(u.name, u.role) for u in accounts.users()] == [("alice", "admin")]


@pytest.mark.parametrize("name", ["", "a" * 65, "has space", "semi;colon", "ünicode", "a/b"])
def test_bad_names_are_refused(accounts: Accounts, store: Store, name: str) -> None:
    with pytest.raises(InvalidName):
        accounts.add_user(name, "viewer", PASSWORD)
    with pytest.raises(InvalidName):
        accounts.create_token(name, "viewer", "alice")
    with pytest.raises(InvalidName):
        accounts.user_named(name)
    assert count(store, "admin_user") == count(store, "admin_token") == 0


@pytest.mark.parametrize(
    "password", ["", "short", "elevenchars", "x" * 1025, "alice.example", "ALICE.EXAMPLE"]
)
def test_bad_passwords_are_refused_without_showing_them(
    accounts: Accounts, store: Store, password: str
) -> None:
    with pytest.raises(InvalidPassword) as raised:
        accounts.add_user("alice.example", "admin", password)
    if password:
        assert password not in str(raised.value)
    assert count(store, "admin_user") == 0


def test_bad_roles_are_refused(accounts: Accounts, store: Store) -> None:
    with pytest.raises(InvalidRole):
        accounts.add_user("alice", "root", PASSWORD)
    with pytest.raises(InvalidRole):
        accounts.create_token("ci", "Admin", "alice")
    assert count(store, "admin_user") == count(store, "admin_token") == 0
    accounts.add_user("alice", "admin", PASSWORD)
    with pytest.raises(InvalidRole):
        accounts.set_role("alice", "superuser")
    assert accounts.user_named("alice").role == "admin"


def test_changes_to_unknown_users_are_refused(accounts: Accounts) -> None:
    with pytest.raises(UnknownUser):
        accounts.set_role("nobody", "admin")
    with pytest.raises(UnknownUser):
        accounts.set_password("nobody", PASSWORD)
    with pytest.raises(UnknownUser):
        accounts.remove_user("nobody")
    with pytest.raises(InvalidInput):
        accounts.user(-1)


def test_a_role_change_ends_the_sessions(accounts: Accounts) -> None:
    accounts.add_user("alice", "admin", PASSWORD)
    bob = accounts.add_user("bob", "viewer", PASSWORD)
    promoted = accounts.set_role("bob", "operator")
    assert (promoted.role, promoted.session_epoch) == ("operator", bob.session_epoch + 1)
    assert promoted.updated_at > bob.updated_at
    # The same role again changes nothing, so sessions live on.
    assert accounts.set_role("bob", "operator") == promoted


def test_a_password_change_ends_the_sessions_and_the_old_password(accounts: Accounts) -> None:
    bob = accounts.add_user("bob", "viewer", PASSWORD)
    changed = accounts.set_password("bob", OTHER)
    assert changed.session_epoch == bob.session_epoch + 1
    assert accounts.authenticate("bob", OTHER, "10.0.0.1").id == bob.id
    with pytest.raises(LoginRefused):
        accounts.authenticate("bob", PASSWORD, "10.0.0.1")
    with pytest.raises(InvalidPassword):
        accounts.set_password("bob", "bob")
    assert accounts.user_named("bob").session_epoch == changed.session_epoch


def test_the_last_admin_stays(accounts: Accounts) -> None:
    assert not accounts.has_admin()
    accounts.add_user("alice", "admin", PASSWORD)
    accounts.add_user("bob", "viewer", PASSWORD)
    assert accounts.has_admin()
    with pytest.raises(LastAdmin):
        accounts.set_role("alice", "operator")
    with pytest.raises(LastAdmin):
        accounts.remove_user("alice")
    assert accounts.user_named("alice").role == "admin"
    # With a second admin either may go.
    accounts.set_role("bob", "admin")
    accounts.set_role("alice", "viewer")
    with pytest.raises(LastAdmin):
        accounts.remove_user("bob")
    accounts.remove_user("alice")
    assert [(u.name, u.role) for u in accounts.users()] == [("bob", "admin")]
    # A non-admin may always go.
    accounts.add_user("carol", "viewer", PASSWORD)
    accounts.remove_user("carol")
    assert accounts.has_admin()


def demote(
    settings: Settings, name: str, start: threading.Barrier, errors: list[BaseException]
) -> None:
    """Make the user a viewer on a store of its own, once the other thread is ready too."""
    with Accounts(settings) as own:
        start.wait()
        try:
            own.set_role(name, "viewer")
        except LastAdmin as exc:
            errors.append(exc)


def test_two_admins_demoted_at_once_leave_one(settings: Settings, accounts: Accounts) -> None:
    """The admins' rows are locked before the count: of two concurrent demotions of the
    last two admins, one is refused."""
    for attempt in range(3):
        a, b = f"a{attempt}", f"b{attempt}"
        accounts.add_user(a, "admin", PASSWORD)
        accounts.add_user(b, "admin", PASSWORD)
        for u in accounts.users():
            if u.role == "admin" and u.name not in (a, b):
                accounts.set_role(u.name, "viewer")
        start = threading.Barrier(2)
        errors: list[BaseException] = []
        threads = [
            threading.Thread(target=demote, args=(settings, n, start, errors)) for n in (a, b)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert len(errors) == 1
        assert [u.name for u in accounts.users() if u.role == "admin"] in ([a], [b])


# -- sign-in -------------------------------------------------------------------------------


def test_sign_in_with_the_right_password(accounts: Accounts, store: Store) -> None:
    alice = accounts.add_user("alice", "admin", PASSWORD)
    assert accounts.authenticate("alice", PASSWORD, "10.0.0.1") == alice
    assert failures(store) == {}


def test_a_wrong_password_and_an_unknown_name_fail_alike(
    accounts: Accounts, store: Store, monkeypatch: pytest.MonkeyPatch, default_hashing: None
) -> None:
    accounts.add_user("alice", "admin", PASSWORD)
    verified: list[str] = []
    original = PasswordHasher.verify

    def spy(self: PasswordHasher, hash: str, password: str | bytes) -> bool:
        verified.append(hash)
        return original(self, hash, password)

    monkeypatch.setattr(PasswordHasher, "verify", spy)
    with pytest.raises(LoginRefused) as wrong:
        accounts.authenticate("alice", OTHER, "10.0.0.1")
    with pytest.raises(LoginRefused) as unknown:
        accounts.authenticate("mallory", PASSWORD, "10.0.0.1")
    assert str(wrong.value) == str(unknown.value) == "wrong name or password"
    assert OTHER not in str(wrong.value) and PASSWORD not in str(unknown.value)
    # The unknown name costs an argon2 verification too, against a hash of the same kind.
    assert len(verified) == 2
    assert all(h.startswith("$argon2id$") for h in verified)
    assert failures(store) == {
        "pair:10.0.0.1 alice": 1,
        "pair:10.0.0.1 mallory": 1,
        "address:10.0.0.1": 2,
    }


@pytest.mark.parametrize("password", ["", "x" * 5000, "bad\udcff surrogate", None])
def test_unusable_passwords_are_refused_as_wrong(
    accounts: Accounts, store: Store, password: Any
) -> None:
    accounts.add_user("alice", "admin", PASSWORD)
    with pytest.raises(LoginRefused):
        accounts.authenticate("alice", password, "10.0.0.1")
    assert failures(store) == {"pair:10.0.0.1 alice": 1, "address:10.0.0.1": 1}


def test_a_malformed_name_counts_against_the_address_only(accounts: Accounts, store: Store) -> None:
    with pytest.raises(LoginRefused):
        accounts.authenticate("x" * 500, PASSWORD, "10.0.0.1")
    assert failures(store) == {"address:10.0.0.1": 1}


def fail(accounts: Accounts, name: str, address: str, times: int = 1) -> None:
    for _ in range(times):
        with pytest.raises(LoginRefused):
            accounts.authenticate(name, OTHER, address)


def test_a_pair_backs_off_exponentially(accounts: Accounts, store: Store) -> None:
    accounts.add_user("alice", "admin", PASSWORD)
    fail(accounts, "alice", "10.0.0.1", FREE_FAILURES)
    waits = []
    for n in range(4):
        with pytest.raises(LoginThrottled) as throttled:
            accounts.authenticate("alice", PASSWORD, "10.0.0.1")
        waits.append(throttled.value.retry_after)
        # The wait passes (the counters aged past it): one more guess is checked.
        age_failures(store, backoff_delay(FREE_FAILURES + n, LoginLimits()))
        fail(accounts, "alice", "10.0.0.1")
    # Each wait is twice the last (less the few milliseconds each step took).
    assert waits[0] == pytest.approx(BASE_DELAY, abs=0.5)
    for shorter, longer in itertools.pairwise(waits):
        assert longer == pytest.approx(2 * shorter, abs=0.5)
    # A throttled attempt is not counted.
    assert failures(store)["pair:10.0.0.1 alice"] == FREE_FAILURES + 4
    assert backoff_delay(100, LoginLimits()) == MAX_DELAY


def test_another_address_still_signs_in(accounts: Accounts, store: Store) -> None:
    """An attacker's failures never keep the account's owner out from another address."""
    accounts.add_user("alice", "admin", PASSWORD)
    fail(accounts, "alice", "10.6.6.6", FREE_FAILURES)
    with pytest.raises(LoginThrottled):
        accounts.authenticate("alice", PASSWORD, "10.6.6.6")
    assert accounts.authenticate("alice", PASSWORD, "192.168.1.1").name == "alice"
    # Nor from many addresses: each has its own pair.
    for i in range(30):
        fail(accounts, "alice", f"10.7.0.{i}")
    assert accounts.authenticate("alice", PASSWORD, "192.168.1.1").name == "alice"


def test_a_quiet_pair_is_forgotten(accounts: Accounts, store: Store) -> None:
    accounts.add_user("alice", "admin", PASSWORD)
    fail(accounts, "alice", "10.0.0.1", FREE_FAILURES)
    age_failures(store, MAX_DELAY + 1)
    fail(accounts, "alice", "10.0.0.1")
    assert failures(store)["pair:10.0.0.1 alice"] == 1


def test_an_address_is_throttled_after_its_limit(accounts: Accounts, store: Store) -> None:
    accounts.add_user("alice", "admin", PASSWORD)
    for i in range(ADDRESS_LIMIT):
        fail(accounts, f"guess{i}", "10.9.9.9")
    with pytest.raises(LoginThrottled) as throttled:
        accounts.authenticate("alice", PASSWORD, "10.9.9.9")
    assert 0 < throttled.value.retry_after <= WINDOW_SECONDS
    assert accounts.authenticate("alice", PASSWORD, "10.0.0.1").name == "alice"
    age_failures(store, WINDOW_SECONDS)
    assert accounts.authenticate("alice", PASSWORD, "10.9.9.9").name == "alice"


def test_a_success_clears_the_pair_and_takes_its_count_back(
    accounts: Accounts, store: Store
) -> None:
    accounts.add_user("alice", "admin", PASSWORD)
    fail(accounts, "alice", "10.0.0.1", 2)
    accounts.authenticate("alice", PASSWORD, "10.0.0.1")
    assert failures(store) == {"address:10.0.0.1": 2}


def test_a_failure_after_the_window_starts_a_new_one(accounts: Accounts, store: Store) -> None:
    for i in range(4):
        fail(accounts, f"nobody{i}", "10.0.0.1")
    age_failures(store, WINDOW_SECONDS + 1)
    fail(accounts, "nobody", "10.0.0.1")
    assert failures(store)["address:10.0.0.1"] == 1


def guess(
    settings: Settings,
    limits: LoginLimits,
    name: str,
    address: str,
    start: threading.Barrier,
    outcomes: list[str],
) -> None:
    with Accounts(settings, limits=limits) as own:
        start.wait()
        try:
            own.authenticate(name, OTHER, address)
        except LoginRefused:
            outcomes.append("checked")
        except LoginThrottled:
            outcomes.append("throttled")


def parallel_guesses(
    settings: Settings, limits: LoginLimits, targets: list[tuple[str, str]]
) -> list[str]:
    start = threading.Barrier(len(targets))
    outcomes: list[str] = []
    threads = [
        threading.Thread(target=guess, args=(settings, limits, name, address, start, outcomes))
        for name, address in targets
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(outcomes) == len(targets)
    return outcomes


def test_parallel_guesses_get_no_more_checks_than_the_pair_allows(
    settings: Settings, accounts: Accounts, store: Store
) -> None:
    """16 guesses at once from one address at one account: the check and the count are
    one step, so exactly FREE_FAILURES passwords are checked."""
    accounts.add_user("alice", "admin", PASSWORD)
    outcomes = parallel_guesses(settings, LoginLimits(), [("alice", "10.0.0.1")] * 16)
    assert outcomes.count("checked") == FREE_FAILURES
    assert failures(store)["pair:10.0.0.1 alice"] == FREE_FAILURES


def test_parallel_guesses_get_no_more_checks_than_the_address_allows(
    settings: Settings, accounts: Accounts, store: Store
) -> None:
    """16 guesses at once from one address at 16 accounts, with an address limit of 5."""
    limits = LoginLimits(address_limit=5)
    targets = [(f"user{i}", "10.0.0.2") for i in range(16)]
    outcomes = parallel_guesses(settings, limits, targets)
    assert outcomes.count("checked") == 5
    assert failures(store)["address:10.0.0.2"] == 5


def test_a_weaker_hash_is_replaced_at_sign_in(
    accounts: Accounts, store: Store, default_hashing: None
) -> None:
    alice = accounts.add_user("alice", "admin", PASSWORD)
    weak = PasswordHasher(time_cost=1, memory_cost=8192, parallelism=1).hash(PASSWORD)
    execute(store, "UPDATE admin_user SET password_hash = :h WHERE name = 'alice'", h=weak)
    assert accounts.authenticate("alice", PASSWORD, "10.0.0.1").session_epoch == 0
    (stored,) = rows(store, "SELECT password_hash FROM admin_user WHERE name = 'alice'")[0]
    assert stored != weak
    assert not PasswordHasher().check_needs_rehash(stored)
    assert accounts.authenticate("alice", PASSWORD, "10.0.0.1") == alice


# -- tokens --------------------------------------------------------------------------------


def test_a_token_is_stored_as_the_hash_of_its_secret(accounts: Accounts, store: Store) -> None:
    token, secret = accounts.create_token("ci", "operator", "alice")
    assert secret.startswith("ems_") and len(secret) == 47
    assert (token.name, token.role, token.created_by) == ("ci", "operator", "alice")
    assert token.last_used_at is None and token.revoked_at is None
    stored = db.dicts(store, "SELECT * FROM admin_token")
    assert len(stored) == 1
    assert stored[0]["token_hash"] == hashlib.sha256(secret.encode()).hexdigest()
    assert not any(secret in str(value) for value in stored[0].values())
    assert not any(secret[4:20] in str(value) for value in stored[0].values())
    _, other_secret = accounts.create_token("backup", "viewer", "alice")
    assert other_secret != secret
    assert [t.name for t in accounts.tokens()] == ["backup", "ci"]


def test_a_secret_finds_its_token_and_marks_it_used(accounts: Accounts, store: Store) -> None:
    token, secret = accounts.create_token("ci", "operator", "alice")
    found = accounts.token_for(secret)
    assert found is not None and found.id == token.id
    assert found.last_used_at is not None
    # Within a minute the use is not written again.
    again = accounts.token_for(secret)
    assert again is not None and again.last_used_at == found.last_used_at
    execute(store, "UPDATE admin_token SET last_used_at = last_used_at - INTERVAL 61 SECOND")
    later = accounts.token_for(secret)
    assert later is not None and later.last_used_at is not None
    assert later.last_used_at >= found.last_used_at  # written anew (else 61 s older)


@pytest.mark.parametrize(
    "secret",
    ["", "ems_", "ems_short", "xyz_" + "A" * 43, "ems_" + "A" * 43, "ems_" + "!" * 43, None, 42],
)
def test_anything_but_a_live_secret_finds_nothing(accounts: Accounts, secret: Any) -> None:
    accounts.create_token("ci", "operator", "alice")
    assert accounts.token_for(secret) is None


def test_a_revoked_token_finds_nothing(accounts: Accounts) -> None:
    _, secret = accounts.create_token("ci", "operator", "alice")
    revoked = accounts.revoke_token("ci")
    assert revoked.revoked_at is not None and revoked.revoked
    assert accounts.token_for(secret) is None
    assert accounts.revoke_token("ci") == revoked  # again: unchanged
    assert [t.revoked for t in accounts.tokens()] == [True]
    with pytest.raises(UnknownToken):
        accounts.revoke_token("nope")
    with pytest.raises(TokenExists):
        accounts.create_token("ci", "viewer", "alice")
