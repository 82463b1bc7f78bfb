"""Offset reset of a cluster group, preview then confirm: to the earliest or latest
offset, an offset or a datetime, for all partitions or chosen ones.

GET /reset?group=&topic= shows the form with the group's partitions. The preview (POST)
computes per partition the committed offset now and the new one, and keeps them as a
plan; the page shows how many messages each partition skips or replays and asks to type
the group's name. The apply (POST) writes exactly the previewed offsets, provided no
committed offset went back since the preview and every new offset is still stored (see
ems.ops.reset.drift and out_of_range); otherwise it changes nothing and shows a new
preview. Live members are paused while the reset lands (ems.ops.reset). Each with its
JSON twin under /api/v1/.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from typing import Any

from flask import Blueprint, Response, jsonify, render_template, request

from ems.admin import audit, forms, plans
from ems.admin.capabilities import READ, RESET_OFFSETS
from ems.admin.guard import requires
from ems.admin.serialize import to_json
from ems.admin.services import services
from ems.exceptions import GroupBusy, InvalidInput, NotFound, PlanChanged
from ems.ops.plans import IssuedPlan
from ems.ops.reset import ResetPlan, ResetResult, ResetTarget, changes
from ems.validation import check_name
from ems.values.plans import Plan, PlanAction

bp = Blueprint("resets", __name__)

TARGETS = ("earliest", "latest", "offset", "datetime", "shift")
ACTION: PlanAction = "reset_offsets"


@bp.get("/reset")
@requires(READ)
def form() -> str:
    group = check_name(request.args.get("group", ""), "group")
    detail = services().browser.group_detail(group, request.args.get("topic"))
    return render_template("reset.html", group=detail)


@bp.post("/reset/preview")
@requires(RESET_OFFSETS)
def preview() -> Response:
    issued, found = _preview(forms.sent())
    return _preview_page(issued, found)


@bp.post("/api/v1/reset/preview")
@requires(RESET_OFFSETS)
def api_preview() -> Response:
    issued, found = _preview(forms.sent())
    return jsonify(_preview_json(issued, found))


@bp.post("/reset/apply")
@requires(RESET_OFFSETS)
def apply() -> Response:
    plan, token, fields = plans.opened(ACTION)
    try:
        result = _apply(plan, token, plans.confirmation(fields))
    except plans.NotConfirmed as exc:
        return _preview_page(IssuedPlan(plan=plan, token=str(token)), _stored(plan), str(exc), 400)
    except PlanChanged as exc:
        issued, found = _again(plan, exc)
        notice = f"Nothing was changed: the group changed since the preview ({exc}). New preview:"
        return _preview_page(issued, found, notice, 409)
    return Response(render_template("reset_result.html", result=result))


@bp.post("/api/v1/reset/apply")
@requires(RESET_OFFSETS)
def api_apply() -> Response:
    plan, token, fields = plans.opened(ACTION)
    try:
        result = _apply(plan, token, plans.confirmation(fields))
    except PlanChanged as exc:
        return plans.refused(exc, _preview_json(*_again(plan, exc)))
    return jsonify({"applied": True, "result": to_json(result)})


# -- the steps -------------------------------------------------------------------------


def _preview(fields: Mapping[str, object]) -> tuple[IssuedPlan, ResetPlan]:
    group = check_name(forms.text(fields, "group"), "group")
    topic = forms.text(fields, "topic", required=False)
    target = _target(fields)
    partitions = _partitions(fields.get("partitions"))
    found = services().resets.plan(group, target, topic=topic, partition=partitions)
    return _issue(found, partitions), found


def _issue(found: ResetPlan, partitions: list[int] | None) -> IssuedPlan:
    body = {
        "group": found.group,
        "topic": found.topic,
        "target": {
            "kind": found.target.kind,
            "offset": found.target.offset,
            "at": None if found.target.at is None else found.target.at.isoformat(),
            "shift": found.target.shift,
        },
        "partitions": partitions,
        "before": {str(c.partition): c.current for c in found.changes},
        "new": {str(c.partition): c.new for c in found.changes},
        "members": list(found.members),
    }
    return plans.issue(ACTION, f"group:{found.group} topic:{found.topic}", body)


def _apply(plan: Plan, token: str | None, typed: str | None) -> ResetResult:
    body = plan.body
    claimed = plans.claim(token, ACTION, typed, body["group"])
    params = {"plan": claimed.id, "target": body["target"], "partitions": body["partitions"]}
    target_name = claimed.target
    try:
        result = services().resets.apply(
            body["group"],
            body["topic"],
            _stored_target(body["target"]),
            _offsets(body["new"]),
            _offsets(body["before"]),
        )
    except PlanChanged as exc:
        audit.record(ACTION, target_name, "refused", params=params, detail=str(exc))
        raise
    except GroupBusy as exc:
        audit.record(ACTION, target_name, "failed", params=params, detail=str(exc))
        raise
    audit.record(
        ACTION,
        target_name,
        "ok",
        params=params,
        before=_cursors({c.partition: c.current for c in result.changes}),
        after=_cursors({c.partition: c.new for c in result.changes}),
        detail=f"generation {result.generation}, waited {result.waited:g} s",
    )
    return result


def _again(plan: Plan, changed: PlanChanged) -> tuple[IssuedPlan, ResetPlan]:
    """A new preview of the same change, after the state moved under the old one;
    PlanChanged saying both why when the change is no longer possible at all."""
    body = plan.body
    try:
        found = services().resets.plan(
            body["group"],
            _stored_target(body["target"]),
            topic=body["topic"],
            partition=body["partitions"],
        )
    except (InvalidInput, NotFound) as exc:
        raise PlanChanged(
            f"nothing was changed: {changed}; the same reset cannot be previewed again: {exc}"
        ) from exc
    return _issue(found, body["partitions"]), found


# -- parsing ---------------------------------------------------------------------------


def _target(fields: Mapping[str, object]) -> ResetTarget:
    kind = forms.text(fields, "to")
    resets = services().resets
    if kind == "offset":
        offset = fields.get("offset")
        if not isinstance(offset, int) or isinstance(offset, bool):
            offset = forms.whole(forms.text(fields, "offset") or "", "offset")
        return resets.target(offset=offset)
    if kind == "datetime":
        return resets.target(when=forms.text(fields, "datetime"))
    if kind == "shift":
        shift = fields.get("shift")
        if not isinstance(shift, int) or isinstance(shift, bool):
            shift = forms.integer(forms.text(fields, "shift") or "", "shift")
        return resets.target(shift=shift)
    if kind == "earliest":
        return resets.target(earliest=True)
    if kind == "latest":
        return resets.target(latest=True)
    raise InvalidInput(f"to must be one of {', '.join(TARGETS)}")


def _partitions(value: object) -> list[int] | None:
    if isinstance(value, list):
        if not all(isinstance(p, int) and not isinstance(p, bool) for p in value):
            raise InvalidInput("partitions must be a list of partition numbers")
        return sorted(set(value)) or None
    if value is None or isinstance(value, str):
        return forms.partition_list(value)
    raise InvalidInput("partitions must be text such as 0, 2, 5-7, or a list of numbers")


def _stored_target(data: Mapping[str, Any]) -> ResetTarget:
    at = data.get("at")
    return ResetTarget(
        kind=data["kind"],
        offset=data.get("offset"),
        at=None if at is None else dt.datetime.fromisoformat(at),
        shift=data.get("shift"),
    )


def _offsets(data: Mapping[str, int]) -> dict[int, int]:
    return {int(p): int(o) for p, o in data.items()}


def _cursors(values: Mapping[int, int]) -> str:
    return json.dumps({str(p): o for p, o in sorted(values.items())})


def _stored(plan: Plan) -> ResetPlan:
    """The preview a plan holds, as the page shows it."""
    body = plan.body
    before, new = _offsets(body["before"]), _offsets(body["new"])
    return ResetPlan(
        group=body["group"],
        topic=body["topic"],
        target=_stored_target(body["target"]),
        changes=changes(before, new),
        members=tuple(body.get("members", ())),
    )


# -- answers ---------------------------------------------------------------------------


def _preview_page(
    issued: IssuedPlan, found: ResetPlan, notice: str | None = None, status: int = 200
) -> Response:
    page = render_template(
        "reset_preview.html", plan=found, issued=issued, notice=notice, word=found.group
    )
    return Response(page, status=status)


def _preview_json(issued: IssuedPlan, found: ResetPlan) -> dict[str, Any]:
    return {
        "plan": issued.token,
        "expires_at": to_json(issued.plan.expires_at),
        "confirm": found.group,
        "preview": to_json(found),
    }
