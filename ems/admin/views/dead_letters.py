"""Dead letters: a filtered page of them (group, topic, error text, time, resent or not;
keyset by id, at most 100 rows), one dead letter in full, and three changes, each
preview then confirm: resend to the topic (RESEND), replay to the failed group only
(REPLAY), purge (PURGE).

A preview acts on the dead letters checked on the page, or on those matching the filter
now (at most MAX_PLAN, listed by id): the apply acts on exactly those and never on dead
letters that arrived later, and reports what happened to each. Each route has its JSON
twin under /api/v1/.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from flask import Blueprint, Response, jsonify, render_template, request
from werkzeug.datastructures import MultiDict

from ems.admin import audit, forms, plans
from ems.admin.bodies import error_text, message_json, message_view
from ems.admin.capabilities import PURGE, READ, READ_BODIES, REPLAY, RESEND
from ems.admin.guard import may, refuse, requires
from ems.admin.serialize import to_json
from ems.admin.services import services
from ems.admin.views.messages import message_url
from ems.exceptions import InvalidInput, PlanChanged
from ems.ops.dead_letter_plans import (
    MAX_PLAN,
    DeadLetterPreview,
    How,
    all_done,
    confirm_word,
    summary,
)
from ems.ops.dead_letters import DeadLetterPage, ResendOutcome
from ems.ops.plans import IssuedPlan
from ems.ops.query import check_id
from ems.values.plans import Plan, PlanAction
from ems.values.rows import DeadLetter, DeadLetterFilter

bp = Blueprint("dead_letters", __name__)

#: Rows of a page, at most (and by default).
PAGE = 100
#: Characters of an error substring filter.
ERROR_CHARS = 256
#: Dead letters an error search reads at most (the newest, at or below `below`): a
#: substring of a text column has no index to use, so the cost is bounded by rows read.
ERROR_SCAN = 20_000
FILTERS = ("group", "topic", "error", "since", "until", "resent", "below")
#: action (URL and plan) -> (how, capability, what the page calls it)
CHANGES: dict[PlanAction, tuple[How, str, str]] = {
    "resend": ("publish", RESEND, "Resend to the topic"),
    "replay": ("requeue", REPLAY, "Replay to the failed group"),
    "purge": ("purge", PURGE, "Purge"),
}


# -- reading ---------------------------------------------------------------------------


@bp.get("/dead-letters")
@requires(READ)
def page() -> str:
    args = request.args
    found = _page(args)
    return render_template(
        "dead_letters.html",
        page=found,
        reveal=may(READ_BODIES),
        error_text=error_text,
        args=_kept(args),
        changes=CHANGES,
        max_plan=MAX_PLAN,
        searched=searched(found.selection),
    )


@bp.get("/api/v1/dead-letters")
@requires(READ)
def api() -> Response:
    found = _page(request.args)
    bodies = may(READ_BODIES)
    return jsonify(
        {
            "dead_letters": [_letter_json(d, bodies, listed=True) for d in found.letters],
            "next_after": found.letters[-1].id if found.more and found.letters else None,
            "searched": searched(found.selection),
        }
    )


@bp.get("/dead-letters/<int:dead_id>")
@requires(READ)
def detail(dead_id: int) -> str:
    letter = services().dead_letters.show(check_id(dead_id, "dead letter"))
    reveal = may(READ_BODIES)
    return render_template(
        "dead_letter.html",
        letter=letter,
        changes=CHANGES,
        reveal=reveal,
        shown=_shown_letter(letter) if reveal else None,
        error=error_text(letter.last_error) if reveal else None,
        traceback=error_text(letter.last_traceback) if reveal else None,
        message_link=_message_link(letter),
    )


@bp.get("/api/v1/dead-letters/<int:dead_id>")
@requires(READ)
def api_detail(dead_id: int) -> Response:
    letter = services().dead_letters.show(check_id(dead_id, "dead letter"))
    return jsonify(_letter_json(letter, may(READ_BODIES)))


# -- changes ---------------------------------------------------------------------------


def _register(action: PlanAction, how: How, capability: str) -> None:
    def preview() -> Response:
        issued, found = _preview(action, how, forms.sent())
        return Response(render_template("dead_letters_preview.html", **found, issued=issued))

    def api_preview() -> Response:
        issued, found = _preview(action, how, forms.sent())
        return jsonify(_preview_json(issued, found))

    def apply() -> Response:
        plan, token, fields = plans.opened(action)
        try:
            outcomes = _apply(action, how, plan, token, plans.confirmation(fields))
        except plans.NotConfirmed as exc:
            shown = {**_shown(action, _stored(plan, how)), "notice": str(exc)}
            same = IssuedPlan(plan=plan, token=str(token))
            page = render_template("dead_letters_preview.html", **shown, issued=same)
            return Response(page, status=400)
        except PlanChanged as exc:
            fresh, found = _again(action, how, plan, exc)
            page = render_template("dead_letters_preview.html", **found, issued=fresh)
            return Response(page, status=409)
        page = render_template(
            "dead_letters_result.html",
            action=action,
            title=CHANGES[action][2],
            outcomes=outcomes,
            **_result(outcomes, how),
        )
        return Response(page)

    def api_apply() -> Response:
        plan, token, fields = plans.opened(action)
        try:
            outcomes = _apply(action, how, plan, token, plans.confirmation(fields))
        except PlanChanged as exc:
            return plans.refused(exc, _preview_json(*_again(action, how, plan, exc)))
        return jsonify({**_result(outcomes, how), "outcomes": to_json(outcomes)})

    for rule, endpoint, view in (
        (f"/dead-letters/{action}/preview", f"{action}_preview", preview),
        (f"/api/v1/dead-letters/{action}/preview", f"api_{action}_preview", api_preview),
        (f"/dead-letters/{action}/apply", f"{action}_apply", apply),
        (f"/api/v1/dead-letters/{action}/apply", f"api_{action}_apply", api_apply),
    ):
        bp.add_url_rule(rule, endpoint, requires(capability)(view), methods=["POST"])


def _result(outcomes: list[ResendOutcome], how: How) -> dict[str, Any]:
    """What an apply did: whether every item succeeded, and the summary line."""
    return {"succeeded": all_done(outcomes, how), "summary": summary(outcomes, how)}


def _preview(
    action: PlanAction, how: How, fields: Mapping[str, object]
) -> tuple[IssuedPlan | None, dict[str, Any]]:
    selection = _selection(fields)
    found = services().dead_letter_changes.preview(selection, how)
    return _issue(action, found), {**_shown(action, found), "searched": searched(selection)}


def _issue(action: PlanAction, found: DeadLetterPreview) -> IssuedPlan | None:
    """A plan for this preview; None when it would change nothing."""
    if not any(o.action.startswith("would") for o in found.outcomes):
        return None
    body = {"state": {str(i): s for i, s in found.state.items()}, "more": found.more}
    target = f"{len(found.letters)} dead letters: {confirm_word(found.letters)}"
    return plans.issue(action, target, body)


def _state(plan: Plan) -> dict[int, str | None]:
    return {int(i): s for i, s in plan.body["state"].items()}


def _apply(
    action: PlanAction, how: How, plan: Plan, token: str | None, typed: str | None
) -> list[ResendOutcome]:
    state = _state(plan)
    claimed = plans.claim(token, action, typed, _stored(plan, how).word)
    params = {"plan": claimed.id, "ids": sorted(state)}
    try:
        outcomes = services().dead_letter_changes.apply(state, how)
    except PlanChanged as exc:
        audit.record(f"dlq.{action}", claimed.target, "refused", params=params, detail=str(exc))
        raise
    said = summary(outcomes, how)
    outcome = "ok" if all_done(outcomes, how) else "failed"
    audit.record(f"dlq.{action}", claimed.target, outcome, params=params, after=said)
    return outcomes


def _again(
    action: PlanAction, how: How, plan: Plan, changed: PlanChanged
) -> tuple[IssuedPlan | None, dict[str, Any]]:
    """A new preview of those dead letters of the refused plan that still exist."""
    found = _stored(plan, how)
    shown = _shown(action, found)
    shown["notice"] = f"Nothing was changed: {changed}. New preview:"
    return _issue(action, found), shown


def _stored(plan: Plan, how: How) -> DeadLetterPreview:
    """The dead letters of a plan as they are now (those still there)."""
    ids = tuple(sorted(_state(plan)))
    return services().dead_letter_changes.preview(DeadLetterFilter(ids=ids), how)


def _shown(action: PlanAction, found: DeadLetterPreview) -> dict[str, Any]:
    return {
        "action": action,
        "title": CHANGES[action][2],
        "preview": found,
        "word": found.word,
        "notice": None,
        "max_plan": MAX_PLAN,
        "searched": None,
    }


# -- parsing ---------------------------------------------------------------------------


def _page(args: Mapping[str, object]) -> DeadLetterPage:
    if args.get("error") and not may(READ_BODIES):
        refuse(READ_BODIES, HIDDEN_ERRORS)  # the answer would tell of the error texts
    after = forms.text(args, "after", required=False)
    limit = forms.text(args, "limit", required=False)
    size = forms.whole(limit, "limit") if limit else PAGE
    if not 1 <= size <= PAGE:
        raise InvalidInput(f"limit must be from 1 to {PAGE}")
    selection = _filter(args)
    if after is not None:
        selection = replace(selection, after_id=forms.whole(after, "after"))
    return services().dead_letters.list(selection, size)


def _filter(fields: Mapping[str, object]) -> DeadLetterFilter:
    error = forms.text(fields, "error", required=False)
    if error is not None and len(error) > ERROR_CHARS:
        raise InvalidInput(f"the error text to look for has at most {ERROR_CHARS} characters")
    resent = forms.text(fields, "resent", required=False)
    if resent not in (None, "any", "yes", "no"):
        raise InvalidInput("resent must be any, yes or no")
    return services().dead_letters.filter(
        group=forms.text(fields, "group", required=False),
        topic=forms.text(fields, "topic", required=False),
        since=forms.text(fields, "since", required=False),
        until=forms.text(fields, "until", required=False),
        error=error,
        resent=None if resent in (None, "any") else resent == "yes",
        scan=ERROR_SCAN,
        below=_below(fields),
    )


def _below(fields: Mapping[str, object]) -> int | None:
    below = forms.text(fields, "below", required=False)
    return None if below is None else forms.whole(below, "below")


def searched(selection: DeadLetterFilter) -> dict[str, Any] | None:
    """What a bounded error search read, when older dead letters were left unsearched:
    the window's ids and the `below` that searches the ones before it; else None."""
    if not selection.partial:
        return None
    return {
        "newest": ERROR_SCAN,
        "above_id": selection.floor_id,
        "up_to_id": selection.ceiling_id,
        "next_below": selection.floor_id,
    }


def _selection(fields: Mapping[str, object]) -> DeadLetterFilter:
    """The dead letters checked (field "id", repeated; or a JSON list "ids"), or with
    scope=matching those matching the filter fields."""
    scope = forms.text(fields, "scope", required=False) or "selected"
    if scope == "matching":
        return _filter(fields)
    if scope != "selected":
        raise InvalidInput("scope must be selected or matching")
    ids = _ids(fields)
    if not ids:
        raise InvalidInput("select at least one dead letter, or act on all matching")
    if len(ids) > MAX_PLAN:
        raise InvalidInput(f"select at most {MAX_PLAN} dead letters at once")
    return services().dead_letters.select(ids)


def _ids(fields: Mapping[str, object]) -> list[int]:
    if isinstance(fields, MultiDict):
        values: list[object] = list(fields.getlist("id"))
    else:
        given = fields.get("ids", [])
        values = given if isinstance(given, list) else [given]
    ids = []
    for v in values[: MAX_PLAN + 1]:
        if isinstance(v, int) and not isinstance(v, bool):
            ids.append(v)
        elif isinstance(v, str):
            ids.append(forms.whole(v.strip(), "a dead letter id"))
        else:
            raise InvalidInput("dead letter ids must be numbers")
    return ids


def _kept(args: Mapping[str, object]) -> dict[str, str]:
    """The filter fields of the page, for its links and its forms."""
    return {k: str(args[k]) for k in FILTERS if args.get(k)}


# -- answers ---------------------------------------------------------------------------


#: What stands for the message data (and error texts, which often quote it) of a dead
#: letter to a role without READ_BODIES.
HIDDEN_ERRORS = (
    "error texts are hidden from viewers with the message bodies they quote "
    "(EMS_ADMIN_HIDE_BODIES): a search by error text is not open to your role"
)
HIDDEN = "bodies, keys, headers and error texts are hidden from viewers (EMS_ADMIN_HIDE_BODIES)"


def _shown_letter(d: DeadLetter) -> Any:
    return message_view(d.key, d.headers, d.body, size=d.body_size)


def _message_link(d: DeadLetter) -> str | None:
    """The page of the dead letter's message and its trace (none once its topic is gone)."""
    return None if d.topic is None else message_url(d.topic, d.partition, d.offset)


def _letter_json(d: DeadLetter, bodies: bool, *, listed: bool = False) -> dict[str, Any]:
    """A dead letter for the API, its message data as the message API shows it; a
    listing's leave out the traceback (not read there)."""
    found: dict[str, Any] = to_json(d)
    if listed:
        del found["last_traceback"]
    found["body_size"] = d.body_size
    found["message_url"] = _message_link(d)
    if bodies:
        found.update(message_json(d.key, d.headers, d.body, size=d.body_size))
    else:
        found.update(key=None, headers=None, body=None, last_error=None, hidden=HIDDEN)
        if not listed:
            found["last_traceback"] = None
    return found


def _preview_json(issued: IssuedPlan | None, found: Mapping[str, Any]) -> dict[str, Any]:
    preview: DeadLetterPreview = found["preview"]
    return {
        "plan": None if issued is None else issued.token,
        "expires_at": None if issued is None else to_json(issued.plan.expires_at),
        "confirm": found["word"] if issued is not None else None,
        "ids": [d.id for d in preview.letters],
        "more": preview.more,
        "searched": found.get("searched"),
        "outcomes": to_json(preview.outcomes),
    }


for _action, (_how, _capability, _) in CHANGES.items():
    _register(_action, _how, _capability)
