"""Who a request acts as (pure): a signed-in user, an API token, or a group a trusted
proxy names, each with its role and what that role may do here."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

Via = Literal["session", "token", "proxy"]

#: What a request without a principal is recorded as in the audit trail.
NOBODY = "-"


@dataclass(frozen=True, kw_only=True, slots=True)
class Principal:
    #: The user's name, the token's name, or the group value the proxy sent.
    name: str
    role: str
    via: Via
    capabilities: frozenset[str]
    #: The signed-in user's id (sessions only).
    user_id: int | None = None

    @property
    def actor(self) -> str:
        """How the audit trail names it: "alice", "token:ci", "proxy:sre"."""
        return self.name if self.via == "session" else f"{self.via}:{self.name}"

    def may(self, capability: str) -> bool:
        return capability in self.capabilities


def bearer_secret(authorization: str) -> str | None:
    """The secret of an `Authorization: Bearer <secret>` header; None for any other
    scheme or an empty secret."""
    scheme, _, secret = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    return secret.strip() or None


def trusted_role(roles: Iterable[tuple[str, str]], value: str) -> str | None:
    """The role EMS_ADMIN_TRUSTED_ROLES gives the header's value (compared whole and
    exactly, spaces around it aside); None: the value has no access."""
    value = value.strip()
    return next((role for group, role in roles if group == value), None)
