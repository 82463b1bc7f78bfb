"""Previews of console changes, each applied at most once.

A change the console makes (an offset reset; a dead-letter resend, replay or purge) goes
preview, then apply. The preview is computed from the state as it is, shown to the
operator, and kept here as a plan: what will change and the state it was computed from,
issued to one actor under a random token that only the actor's page holds (the store keeps
its SHA-256). The apply names the token: the plan is claimed (once, before it expires, by
the actor it was issued to, for the action it was issued for), and the operation then
checks that the state still matches before it changes anything; when it does not, nothing
changes and the console shows a new preview. A second apply of the same plan, a plan
shown to another user, or an old tab finds PlanExpired.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import Any

from ems.exceptions import InvalidInput, PlanExpired
from ems.store.client import StoreClient
from ems.values.plans import PLAN_ACTIONS, Plan, PlanAction

#: Seconds a preview may be applied for.
PLAN_LIFETIME = 600.0
#: Characters of a token (URL-safe base64 of 32 random bytes).
TOKEN_CHARS = 43


@dataclass(frozen=True, kw_only=True, slots=True)
class IssuedPlan:
    plan: Plan
    #: Handed to the actor once; the store keeps only its hash.
    token: str


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def check_token(token: object) -> str:
    """A plan token as issued: URL-safe base64 of TOKEN_CHARS characters (PlanExpired
    otherwise: a page can only hold what the console issued)."""
    if (
        not isinstance(token, str)
        or len(token) != TOKEN_CHARS
        or not token.isascii()
        or not all(c.isalnum() or c in "-_" for c in token)
    ):
        raise PlanExpired("this preview is unknown: preview the change again")
    return token


def _action(action: object) -> PlanAction:
    for known in PLAN_ACTIONS:
        if action == known:
            return known
    raise InvalidInput(f"unknown plan action {action!r}")


class Plans(StoreClient):
    """Issues, reopens and claims the previews of console changes."""

    def issue(
        self,
        actor: str,
        action: PlanAction,
        target: str,
        body: dict[str, Any],
        lifetime: float = PLAN_LIFETIME,
    ) -> IssuedPlan:
        """Keep a preview for `actor` and hand out its token."""
        token = secrets.token_urlsafe(32)
        plan = self.store.plans.add(
            token_hash(token), actor, _action(action), target[:255], body, lifetime
        )
        return IssuedPlan(plan=plan, token=token)

    def open(self, token: object, actor: str, action: PlanAction) -> Plan:
        """The open plan this token names, issued to `actor` for `action`, without claiming
        it (to show its confirm form again); PlanExpired when there is none."""
        found = self.store.plans.get(token_hash(check_token(token)))
        if found is None:
            raise PlanExpired("this preview is unknown: preview the change again")
        plan, live = found
        if plan.actor != actor or plan.action != action:
            raise PlanExpired("this preview was issued to someone else or for another change")
        if plan.used_at is not None:
            raise PlanExpired("this preview was applied already: preview the change again")
        if not live:
            raise PlanExpired("this preview expired: preview the change again")
        return plan

    def claim(self, token: object, actor: str, action: PlanAction) -> Plan:
        """The plan, marked used: it applies once. PlanExpired as for open(), or when
        another apply claimed it first."""
        plan = self.open(token, actor, action)
        if not self.store.plans.claim(plan.id, actor, action):
            raise PlanExpired("this preview was applied already: preview the change again")
        return plan
