"""The admin console's accounts: users with argon2-hashed passwords and a role, sign-in
with a throttle on guessing, API tokens stored as the hash of their secret, and the
audit trail.

Passwords are hashed with argon2id (argon2-cffi's PasswordHasher and its defaults); a
sign-in that finds a hash of weaker parameters writes a new one. Token secrets are
"ems_" and 32 random bytes (URL-safe base64), shown once: only their SHA-256 is stored,
a fast hash being enough for a secret nobody can guess. Neither a password nor a secret
is logged, stored in clear or put in an exception's message.

Sign-ins are throttled per client address and account ("pair:<ip> <name>", exponential
back-off) and per client address ("address:<ip>", a rate limit across accounts), never per
account alone: see ems.values.login_limits. An attempt is admitted and counted in one
locked step before its password is checked, and refused with LoginThrottled (and not
counted) while a scope waits; a right password clears its pair and takes its count back. A wrong
password and an unknown name fail alike (LoginRefused, "wrong name or password"), and an
unknown name still costs one argon2 verification, so neither the answer nor its time
tells whether the account exists.
"""

from __future__ import annotations

import builtins
import hashlib
import re
import secrets

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from ems.config import Settings
from ems.exceptions import InvalidInput, PlanChanged
from ems.ops.query import check_id
from ems.store import Store
from ems.store.client import StoreClient
from ems.validation import ACCOUNT_NAME_RE, MAX_PASSWORD, check_account_name, check_password
from ems.values.account_errors import LoginRefused, LoginThrottled, UnknownToken, UnknownUser
from ems.values.accounts import AuditEntry, AuditFilter, Token, User, UserState, check_role
from ems.values.browse import Page
from ems.values.login_limits import LoginLimits, admit

TOKEN_PREFIX = "ems_"
#: Random bytes of a token secret.
TOKEN_BYTES = 32
_SECRET_RE = re.compile(r"ems_[A-Za-z0-9_-]{43}")
#: Characters of a client address kept in its throttle scope and in the audit trail.
ADDRESS_CHARS = 64
#: Users or tokens one page lists, at most.
MAX_ACCOUNT_PAGE = 100
#: Most entries one audit search returns.
MAX_AUDIT_LIMIT = 500

_hasher = PasswordHasher()
_dummy_hash: str | None = None


def _dummy() -> str:
    """A hash of the same parameters as real ones, verified against for unknown names."""
    global _dummy_hash
    if _dummy_hash is None:
        _dummy_hash = _hasher.hash(secrets.token_urlsafe(16))
    return _dummy_hash


def token_hash(secret: str) -> str:
    """The SHA-256 hex digest a token's secret is stored as."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def address_scope(address: str) -> str:
    return f"address:{address[:ADDRESS_CHARS]}"


def pair_scope(address: str, name: str) -> str:
    """The (address, account) scope: a name is at most 64 characters and has no space,
    and the scope column holds 128."""
    return f"pair:{address[: ADDRESS_CHARS - 6]} {name}"


def _password_text(password: object) -> str | None:
    """The password as a verifiable text, or None when it cannot be one."""
    if not isinstance(password, str) or not password or len(password) > MAX_PASSWORD:
        return None
    try:
        password.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return password


class Accounts(StoreClient):
    """Users, sign-in and API tokens of the admin console (and `ems admin`)."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        store: Store | None = None,
        limits: LoginLimits | None = None,
    ) -> None:
        super().__init__(settings, store=store)
        self.limits = limits or LoginLimits()

    # -- users ---------------------------------------------------------------------------

    def add_user(self, name: str, role: str, password: str) -> User:
        """A new user; InvalidName, InvalidRole, InvalidPassword, UserExists."""
        check_account_name(name)
        checked_role = check_role(role)
        check_password(password, name)
        return self.store.accounts.add_user(name, checked_role, _hasher.hash(password))

    def users(self) -> builtins.list[User]:
        """Every user, by name."""
        return self.store.accounts.users()

    def users_page(self, after: str | None = None, limit: int = MAX_ACCOUNT_PAGE) -> Page[User]:
        """Users by name after `after` (a name; InvalidName otherwise), at most `limit`
        (1 to MAX_ACCOUNT_PAGE)."""
        limit = _page_limit(limit)
        if after is not None:
            check_account_name(after, "cursor")
        found = self.store.accounts.users(after, limit + 1)
        return Page(items=tuple(found[:limit]), next_after=_next(found, limit))

    def admin_count(self) -> int:
        """How many users are admins now."""
        return self.store.accounts.admin_count()

    def user(self, user_id: int) -> User:
        found = self.store.accounts.user(check_id(user_id, "user"))
        if found is None:
            raise UnknownUser(f"no user with id {user_id}")
        return found

    def user_named(self, name: str) -> User:
        found = self.store.accounts.user_named(check_account_name(name))
        if found is None:
            raise UnknownUser(f"no user {name!r}")
        return found

    def set_role(self, name: str, role: str, expect: UserState | None = None) -> User:
        """Give the user another role; its sessions end (the session epoch grows) unless
        the role is the one it has. LastAdmin when it is the last admin and the role is
        not admin; PlanChanged when `expect` is given and the user is not in that state
        (checked under the same locks as the change)."""
        check_account_name(name)
        return self.store.accounts.set_role(name, check_role(role), expect)

    def set_password(self, name: str, password: str) -> User:
        """A new password; the user's sessions end (the session epoch grows)."""
        check_account_name(name)
        check_password(password, name)
        return self.store.accounts.set_password(name, _hasher.hash(password))

    def remove_user(self, name: str, expect: UserState | None = None) -> User:
        """Delete the user and return it as it was; UnknownUser, or LastAdmin when it is
        the last admin, or PlanChanged when `expect` is given and does not hold."""
        return self.store.accounts.remove_user(check_account_name(name), expect)

    def has_admin(self) -> bool:
        return self.store.accounts.has_admin()

    # -- sign-in -------------------------------------------------------------------------

    def authenticate(self, name: str, password: str, address: str) -> User:
        """The user whose name and password these are. LoginThrottled when this address
        (for this account, or across accounts) has failed too often lately, before the
        password is checked; LoginRefused for a wrong name or password, alike."""
        address = address if isinstance(address, str) and address else "-"
        known_form = isinstance(name, str) and ACCOUNT_NAME_RE.fullmatch(name) is not None
        by_address = address_scope(address)
        scopes = [by_address] + ([pair_scope(address, name)] if known_form else [])
        limits = self.limits
        wait = self.store.accounts.admit(scopes, lambda c, now: admit(c, now, limits))
        if wait > 0:
            raise LoginThrottled(wait)
        found = self.store.accounts.credentials(name) if known_form else None
        text = _password_text(password)
        stored = found[1] if found is not None else None
        if not self._verify(stored, text) or found is None or text is None:
            raise LoginRefused()
        user, hashed = found
        self.store.accounts.forgive(pair_scope(address, user.name), by_address)
        if _hasher.check_needs_rehash(hashed):
            self.store.accounts.rehash(user.id, hashed, _hasher.hash(text))
        return user

    @staticmethod
    def _verify(stored: str | None, password: str | None) -> bool:
        """Whether the password matches the stored hash; with no hash (or no usable
        password) the same work is spent on a dummy hash, and the answer is False."""
        try:
            matched = _hasher.verify(stored or _dummy(), password or "-")
        except (VerificationError, InvalidHashError):
            return False
        return matched and stored is not None and password is not None

    # -- tokens --------------------------------------------------------------------------

    def create_token(self, name: str, role: str, created_by: str) -> tuple[Token, str]:
        """A new token and its secret, which is not stored and cannot be shown again;
        InvalidName, InvalidRole, TokenExists."""
        check_account_name(name, "token name")
        checked_role = check_role(role)
        if not isinstance(created_by, str) or not created_by:
            raise InvalidInput("a token is created by someone: name them")
        secret = TOKEN_PREFIX + secrets.token_urlsafe(TOKEN_BYTES)
        token = self.store.accounts.add_token(
            name, checked_role, token_hash(secret), created_by[:64]
        )
        return token, secret

    def tokens(self) -> builtins.list[Token]:
        """Every token, revoked ones too, by name."""
        return self.store.accounts.tokens()

    def tokens_page(self, after: str | None = None, limit: int = MAX_ACCOUNT_PAGE) -> Page[Token]:
        """Tokens by name after `after`, revoked ones too, at most `limit`."""
        limit = _page_limit(limit)
        if after is not None:
            check_account_name(after, "cursor")
        found = self.store.accounts.tokens(after, limit + 1)
        return Page(items=tuple(found[:limit]), next_after=_next(found, limit))

    def token_named(self, name: str) -> Token:
        found = self.store.accounts.token_named(check_account_name(name, "token name"))
        if found is None:
            raise UnknownToken(f"no token {name!r}")
        return found

    def revoke_token_id(self, name: str, token_id: int) -> Token:
        """Revoke token `name` provided it is still the live token of this id;
        PlanChanged (nothing revoked) when it is gone, revoked, or another token."""
        check_account_name(name, "token name")
        found = self.store.accounts.token_named(name)
        if found is None or found.id != token_id:
            raise PlanChanged(f"token {name!r} is not the one previewed any more")
        if not self.store.accounts.revoke_token_id(token_id):
            raise PlanChanged(f"token {name!r} was revoked since the preview")
        return self.token_named(name)

    def revoke_token(self, name: str) -> Token:
        """Revoke the token for good (revoking it again changes nothing); UnknownToken."""
        found = self.store.accounts.revoke_token(check_account_name(name, "token name"))
        if found is None:
            raise UnknownToken(f"no token {name!r}")
        return found

    def token_for(self, secret: str) -> Token | None:
        """The live token whose secret this is; None for anything else (unknown, revoked,
        malformed). Marks it used, at most once a minute."""
        if not isinstance(secret, str) or _SECRET_RE.fullmatch(secret) is None:
            return None
        return self.store.accounts.use_token(token_hash(secret))


def _page_limit(limit: object) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_ACCOUNT_PAGE:
        raise InvalidInput(f"limit must be an integer from 1 to {MAX_ACCOUNT_PAGE}")
    return limit


def _next(found: builtins.list[User] | builtins.list[Token], limit: int) -> str | None:
    return found[limit - 1].name if len(found) > limit else None


class AuditLog(StoreClient):
    """The append-only audit trail of the admin console and `ems admin`."""

    def __init__(self, settings: Settings | None = None, *, store: Store | None = None) -> None:
        super().__init__(settings, store=store)

    def record(self, entry: AuditEntry) -> None:
        """Append the entry; texts too long for their columns are cut, params written as
        JSON (values JSON cannot hold as their text)."""
        self.store.audit.insert(entry)

    def search(self, query: AuditFilter) -> builtins.list[AuditEntry]:
        """Matching entries, newest first, at most query.limit (and never more than
        MAX_AUDIT_LIMIT)."""
        limit = query.limit
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidInput(f"limit must be a positive integer, not {limit!r}")
        if query.before_id is not None:
            check_id(query.before_id, "audit entry")
        return self.store.audit.search(query, min(limit, MAX_AUDIT_LIMIT))
