"""Preview, then confirm, then apply: the console's side of ems.ops.plans.

A change is previewed (the view computes what it would do, and keeps it as a plan issued
to the signed-in actor), the page shows the preview with the plan's token and asks to
type a word (the group's or topic's name); the apply claims the plan, checks the word,
and the operation applies exactly what was previewed, provided the state still matches.
"""

from __future__ import annotations

from typing import Any

from ems.admin.audit import current_principal
from ems.admin.services import services
from ems.exceptions import InvalidInput
from ems.ops.plans import IssuedPlan
from ems.values.plans import Plan, PlanAction


class NotConfirmed(InvalidInput):
    """The confirm field does not hold the word the preview asked for."""


def _actor() -> str:
    principal = current_principal()
    assert principal is not None, "a change is made by someone: the guard let nobody in"
    return principal.actor


def issue(action: PlanAction, target: str, body: dict[str, Any]) -> IssuedPlan:
    return services().plans.issue(_actor(), action, target, body)


def reopen(token: object, action: PlanAction) -> Plan:
    return services().plans.open(token, _actor(), action)


def claim(token: object, action: PlanAction, typed: str | None, word: str) -> Plan:
    """The plan, claimed for this apply, once the typed word matches (NotConfirmed
    before anything is claimed otherwise)."""
    reopen(token, action)
    check_confirmed(typed, word)
    return services().plans.claim(token, _actor(), action)


def check_confirmed(typed: str | None, word: str) -> None:
    """The confirm field must hold `word` exactly (spaces around it aside)."""
    if typed is None or typed.strip() != word:
        raise NotConfirmed(f"type {word!r} exactly to confirm; nothing was changed")
