"""Preview, then confirm, then apply: the console's side of ems.ops.plans.

A change is previewed (the view computes what it would do, and keeps it as a plan issued
to the signed-in actor), the page shows the preview with the plan's token and asks to
type a word (the group's or topic's name); the apply claims the plan, checks the word,
and the operation applies exactly what was previewed, provided the state still matches.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flask import Response, jsonify

from ems.admin import forms
from ems.admin.audit import current_principal
from ems.admin.services import services
from ems.exceptions import InvalidInput, PlanChanged
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


def opened(action: PlanAction) -> tuple[Plan, str | None, Mapping[str, object]]:
    """The plan an apply form or JSON body names (reopened for the signed-in actor), its
    token, and the fields sent."""
    fields = forms.sent()
    token = forms.text(fields, "plan")
    return reopen(token, action), token, fields


def confirmation(fields: Mapping[str, object]) -> str | None:
    """The word typed in the confirm field, if any."""
    return forms.text(fields, "confirm", required=False)


def refused(changed: PlanChanged, preview: Mapping[str, object]) -> Response:
    """The API's answer to an apply refused because the state moved: a 409 with the new
    preview to confirm instead."""
    answer = jsonify({"error": f"nothing was changed: {changed}", **preview})
    answer.status_code = 409
    return answer


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
