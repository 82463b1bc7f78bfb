"""Account changes, for admins (MANAGE_ACCOUNTS), each preview then confirm: add a user,
change a user's role, remove a user, create an API token, revoke one.

POST .../preview takes the user's or token's `name` (and `role` where the change takes
one), says what will change and issues a plan bound to the state it read (see
ems.ops.account_plans); the page asks to type the name. POST .../apply takes `plan` and
`confirm` (and for a new user `password` and, on the form, `password_again`): it claims
the plan and applies it while the state still holds, else changes nothing and answers 409
with a new preview. A password is checked before the plan is claimed and never kept
anywhere but as the account's argon2 hash; a new token's secret is in the apply's answer
only. Each route has its JSON twin under /api/v1/; every apply and refusal is audited.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flask import Blueprint, Response, jsonify, render_template, url_for

from ems.admin import audit, auth, forms, plans
from ems.admin.audit import current_principal
from ems.admin.capabilities import MANAGE_ACCOUNTS
from ems.admin.guard import requires
from ems.admin.serialize import to_json
from ems.admin.services import services
from ems.admin.views.users import token_json, user_json
from ems.exceptions import (
    AlreadyExists,
    EmsError,
    InvalidInput,
    InvalidPassword,
    NotFound,
    PlanChanged,
)
from ems.ops.account_plans import (
    AUDIT_ACTIONS,
    AccountChanges,
    AccountPreview,
    AccountResult,
    Kind,
    check_new_password,
)
from ems.ops.plans import IssuedPlan
from ems.validation import MIN_PASSWORD
from ems.values.account_errors import LastAdmin, NoChange
from ems.values.plans import Plan, PlanAction

bp = Blueprint("account_changes", __name__)

#: action -> (URL path, what the page calls it)
CHANGES: dict[PlanAction, tuple[str, str]] = {
    "user_add": ("/users/add", "Add user"),
    "user_role": ("/users/role", "Change role"),
    "user_remove": ("/users/remove", "Remove user"),
    "token_create": ("/tokens/create", "Create token"),
    "token_revoke": ("/tokens/revoke", "Revoke token"),
}


def _changes() -> AccountChanges:
    return AccountChanges(services().accounts)


def _me() -> int | None:
    """The signed-in user's id (None for an API token or a proxy group)."""
    principal = current_principal()
    return None if principal is None else principal.user_id


def _kind(action: PlanAction) -> Kind:
    return "token" if action.startswith("token_") else "user"


# -- routes ----------------------------------------------------------------------------


def _register(action: PlanAction, path: str) -> None:
    def preview() -> Response:
        issued, found = _preview(action, forms.sent())
        return _preview_page(issued, found)

    def api_preview() -> Response:
        issued, found = _preview(action, forms.sent())
        return jsonify(_preview_json(issued, found))

    def apply() -> Response:
        plan, token, fields = plans.opened(action)
        try:
            result = _apply(action, plan, token, fields, twice=True)
        except (plans.NotConfirmed, InvalidPassword) as exc:
            same = IssuedPlan(plan=plan, token=str(token))
            return _preview_page(same, _stored(action, plan), str(exc), 400)
        except PlanChanged as exc:
            issued, found = _again(action, plan)
            notice = f"Nothing was changed: {exc}. New preview:"
            return _preview_page(issued, found, notice, 409)
        signed_out = _sign_out_if_mine(result)
        page = render_template(
            "account_result.html", result=result, signed_out=signed_out, title=CHANGES[action][1]
        )
        return Response(page)

    def api_apply() -> Response:
        plan, token, fields = plans.opened(action)
        try:
            result = _apply(action, plan, token, fields, twice=False)
        except PlanChanged as exc:
            return plans.refused(exc, _preview_json(*_again(action, plan)))
        return jsonify(_result_json(result, _sign_out_if_mine(result)))

    for rule, endpoint, view in (
        (f"{path}/preview", f"{action}_preview", preview),
        (f"/api/v1{path}/preview", f"api_{action}_preview", api_preview),
        (f"{path}/apply", f"{action}_apply", apply),
        (f"/api/v1{path}/apply", f"api_{action}_apply", api_apply),
    ):
        bp.add_url_rule(rule, endpoint, requires(MANAGE_ACCOUNTS)(view), methods=["POST"])


for _action, (_path, _) in CHANGES.items():
    _register(_action, _path)


# -- the steps -------------------------------------------------------------------------


def _preview(action: PlanAction, fields: Mapping[str, object]) -> tuple[IssuedPlan, AccountPreview]:
    name = forms.text(fields, "name") or ""
    role = forms.text(fields, "role", required=False)
    try:
        found = _changes().preview(action, name, role, _me())
    except (InvalidInput, AlreadyExists, NotFound) as exc:
        if _rule_refusal(exc):
            audit.record(
                AUDIT_ACTIONS[action],
                f"{_kind(action)}:{name}",
                "refused",
                params={"step": "preview", "role": role},
                detail=str(exc),
            )
        raise
    return _issue(found), found


def _rule_refusal(exc: EmsError) -> bool:
    """A refusal by the accounts' rules (the last admin, a taken name, nothing to
    change), worth the audit trail; malformed input is not."""
    return isinstance(exc, LastAdmin | NoChange | AlreadyExists)


def _issue(found: AccountPreview) -> IssuedPlan:
    body = {**found.body, "changes": list(found.changes)}
    return plans.issue(found.action, found.target, body)


def _apply(
    action: PlanAction,
    plan: Plan,
    token: str | None,
    fields: Mapping[str, object],
    *,
    twice: bool,
) -> AccountResult:
    """Check the password (a new user's), claim the plan once the name is typed, apply;
    audit the outcome, whatever it is."""
    body = plan.body
    target = plan.target
    params: dict[str, object] = {"plan": plan.id}
    if "role" in body:
        params["role"] = body["role"]
    name = AUDIT_ACTIONS[action]
    try:
        password = _password(action, body["name"], fields, twice)
        typed = forms.text(fields, "confirm", required=False)
        plans.claim(token, action, typed, body["name"])
        result = _changes().apply(action, body, _actor(), password)
    except (InvalidInput, PlanChanged) as exc:
        audit.record(name, target, "refused", params=params, detail=str(exc))
        raise
    except EmsError as exc:
        audit.record(name, target, "failed", params=params, detail=str(exc))
        raise
    audit.record(
        name,
        target,
        "ok",
        params=params,
        before=result.before,
        after=result.after,
        detail=" ".join(result.changes),
    )
    return result


def _password(
    action: PlanAction, name: str, fields: Mapping[str, object], twice: bool
) -> str | None:
    """A new user's password from the confirm form (typed twice on the page); None for
    the other changes. InvalidPassword names no part of it."""
    if action != "user_add":
        return None
    password, again = fields.get("password"), fields.get("password_again")
    if twice and again is None:
        raise InvalidPassword("type the password twice")
    return check_new_password(name, password, again)


def _actor() -> str:
    principal = current_principal()
    assert principal is not None, "a change is made by someone: the guard let nobody in"
    return principal.actor


def _again(action: PlanAction, plan: Plan) -> tuple[IssuedPlan, AccountPreview]:
    found = _changes().again(action, plan.body, _me())
    return _issue(found), found


def _stored(action: PlanAction, plan: Plan) -> AccountPreview:
    """The preview a plan holds, as its page showed it."""
    body = plan.body
    return AccountPreview(
        action=action,
        kind=_kind(action),
        name=body["name"],
        changes=tuple(body.get("changes", ())),
        body=body,
    )


def _sign_out_if_mine(result: AccountResult) -> bool:
    """End the session when the change was to the signed-in user's own account (a role
    change or a removal ends it anyway); whether it did."""
    me = _me()
    mine = result.user is not None and result.user.id == me and result.action != "user_add"
    if mine:
        auth.sign_out()
    return mine


# -- answers ---------------------------------------------------------------------------


def _preview_page(
    issued: IssuedPlan, found: AccountPreview, notice: str | None = None, status: int = 200
) -> Response:
    page = render_template(
        "account_preview.html",
        preview=found,
        issued=issued,
        notice=notice,
        title=CHANGES[found.action][1],
        apply_url=_url(found.action, "apply"),
        min_password=MIN_PASSWORD,
    )
    return Response(page, status=status)


def _url(action: PlanAction, step: str) -> str:
    return url_for(f"account_changes.{action}_{step}")


def _preview_json(issued: IssuedPlan, found: AccountPreview) -> dict[str, Any]:
    return {
        "plan": issued.token,
        "expires_at": to_json(issued.plan.expires_at),
        "confirm": found.name,
        "preview": {
            "action": found.action,
            "target": found.target,
            "name": found.name,
            "changes": list(found.changes),
        },
    }


def _result_json(result: AccountResult, signed_out: bool) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "applied": True,
        "action": result.action,
        "changes": list(result.changes),
        "user": None if result.user is None else user_json(result.user),
        "token": None if result.token is None else token_json(result.token),
        "signed_out": signed_out,
    }
    if result.secret is not None:
        answer["secret"] = result.secret
    return answer
