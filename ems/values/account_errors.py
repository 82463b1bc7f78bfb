"""The errors of the admin console's accounts: users, roles, API tokens and sign-in.

The store raises some of them (the last admin, a name taken), the operations the others,
and the console and the `ems admin` commands answer them; this module sits on the ground
floor so that all of them can import it (the console may not import the store). They are
operators' errors, not the SDK's: ems.exceptions keeps what a caller of the SDK catches.
Each is an EmsError under the public tree (InvalidInput, NotFound, AlreadyExists), so the
console's status codes and the CLI's exit codes follow from the base class.
"""

from __future__ import annotations

import math

from ems.exceptions import AlreadyExists, EmsError, InvalidInput, NotFound

__all__ = [
    "InvalidRole",
    "LastAdmin",
    "LoginRefused",
    "LoginThrottled",
    "NoChange",
    "TokenExists",
    "UnknownToken",
    "UnknownUser",
    "UserExists",
]


class InvalidRole(InvalidInput):
    """A role is viewer, operator or admin."""


class LastAdmin(InvalidInput):
    """The last admin cannot be removed or given another role: nobody could manage the
    accounts any more. Make another user admin first."""


class NoChange(InvalidInput):
    """The change asked for is the state already (the role the user has, a token revoked
    before): there is nothing to do."""


class UnknownUser(NotFound):
    """No admin user has this name (or id)."""


class UnknownToken(NotFound):
    """No API token has this name."""


class UserExists(AlreadyExists):
    """An admin user with this name already exists."""


class TokenExists(AlreadyExists):
    """An API token with this name already exists (a revoked token keeps its name)."""


class LoginRefused(EmsError):
    """wrong name or password"""


class LoginThrottled(EmsError):
    """Too many failed sign-ins; try again later."""

    def __init__(self, retry_after: float, message: str | None = None) -> None:
        #: Seconds until a sign-in is allowed again.
        self.retry_after = float(retry_after)
        super().__init__(
            message
            or f"too many failed sign-ins; try again in {math.ceil(self.retry_after)} seconds"
        )
