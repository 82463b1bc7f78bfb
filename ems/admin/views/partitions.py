"""Adding partitions to a topic, preview then confirm (admins).

The preview (POST, from the topic's page) shows the counts, each old partition's high
watermark now, and the cluster groups that get the new partitions (an ordered group keeps
each key's order across the change: docs/partitions.md); it keeps the change as a plan
and asks to type the topic's name. The apply (POST) adds exactly the previewed partitions,
provided the topic still has the count the preview saw; otherwise it changes nothing and
shows a new preview. Each with its JSON twin under /api/v1/; every apply is audited.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flask import Blueprint, Response, jsonify, render_template

from ems.admin import audit, forms, plans
from ems.admin.capabilities import ALTER_TOPICS
from ems.admin.guard import requires
from ems.admin.serialize import to_json
from ems.admin.services import services
from ems.exceptions import InvalidInput, NotFound, PlanChanged
from ems.ops.plans import IssuedPlan
from ems.partitions import PartitionPlan
from ems.types import PartitionsAdded
from ems.validation import check_name
from ems.values.plans import Plan, PlanAction

bp = Blueprint("partitions", __name__)

ACTION: PlanAction = "add_partitions"


@bp.post("/partitions/preview")
@requires(ALTER_TOPICS)
def preview() -> Response:
    return _preview_page(*_preview(forms.sent()))


@bp.post("/api/v1/partitions/preview")
@requires(ALTER_TOPICS)
def api_preview() -> Response:
    return jsonify(_preview_json(*_preview(forms.sent())))


@bp.post("/partitions/apply")
@requires(ALTER_TOPICS)
def apply() -> Response:
    plan, token, fields = plans.opened(ACTION)
    try:
        change = _apply(plan, token, plans.confirmation(fields))
    except plans.NotConfirmed as exc:
        issued = IssuedPlan(plan=plan, token=str(token))
        return _preview_page(issued, _stored(plan), str(exc), 400)
    except PlanChanged as exc:
        issued, found = _again(plan, exc)
        notice = f"Nothing was changed: the topic changed since the preview ({exc}). New preview:"
        return _preview_page(issued, found, notice, 409)
    page = render_template("partitions_result.html", topic=plan.body["topic"], change=change)
    return Response(page)


@bp.post("/api/v1/partitions/apply")
@requires(ALTER_TOPICS)
def api_apply() -> Response:
    plan, token, fields = plans.opened(ACTION)
    try:
        change = _apply(plan, token, plans.confirmation(fields))
    except PlanChanged as exc:
        return plans.refused(exc, _preview_json(*_again(plan, exc)))
    return jsonify({"applied": True, "result": to_json(change)})


def _preview(fields: Mapping[str, object]) -> tuple[IssuedPlan, PartitionPlan]:
    topic = check_name(forms.text(fields, "topic"), "topic")
    found = services().topic_admin.plan_partitions(topic, _count(fields.get("partitions")))
    return _issue(found), found


def _count(value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        return forms.whole(value, "partitions")
    raise InvalidInput("partitions must be a whole number")


def _issue(found: PartitionPlan) -> IssuedPlan:
    body = {
        "topic": found.topic,
        "before": found.before,
        "after": found.after,
        "watermarks": list(found.watermarks),
        "groups": [list(g) for g in found.groups],
    }
    return plans.issue(ACTION, f"topic:{found.topic}", body)


def _apply(plan: Plan, token: str | None, typed: str | None) -> PartitionsAdded:
    body = plan.body
    claimed = plans.claim(token, ACTION, typed, body["topic"])
    params = {"plan": claimed.id, "partitions": body["after"]}
    try:
        change = services().topic_admin.add_partitions(
            body["topic"], body["after"], expected=body["before"]
        )
    except (PlanChanged, InvalidInput, NotFound) as exc:
        audit.record(ACTION, claimed.target, "refused", params=params, detail=str(exc))
        if isinstance(exc, PlanChanged):
            raise
        raise PlanChanged(str(exc)) from exc
    audit.record(
        ACTION,
        claimed.target,
        "ok",
        params=params,
        before=str(change.before),
        after=str(change.after),
        detail=f"watermarks {list(change.watermarks)}",
    )
    return change


def _again(plan: Plan, changed: PlanChanged) -> tuple[IssuedPlan, PartitionPlan]:
    """A new preview of the same count, after the topic moved under the old one;
    PlanChanged saying both why when it is no longer possible at all."""
    body = plan.body
    try:
        found = services().topic_admin.plan_partitions(body["topic"], body["after"])
    except (InvalidInput, NotFound) as exc:
        raise PlanChanged(
            f"nothing was changed: {changed}; the same change cannot be previewed again: {exc}"
        ) from exc
    return _issue(found), found


def _stored(plan: Plan) -> PartitionPlan:
    body = plan.body
    return PartitionPlan(
        topic=body["topic"],
        before=int(body["before"]),
        after=int(body["after"]),
        watermarks=tuple(int(w) for w in body["watermarks"]),
        groups=tuple((str(n), bool(o)) for n, o in body["groups"]),
    )


def _preview_page(
    issued: IssuedPlan, found: PartitionPlan, notice: str | None = None, status: int = 200
) -> Response:
    page = render_template("partitions_preview.html", plan=found, issued=issued, notice=notice)
    return Response(page, status=status)


def _preview_json(issued: IssuedPlan, found: PartitionPlan) -> dict[str, Any]:
    return {
        "plan": issued.token,
        "expires_at": to_json(issued.plan.expires_at),
        "confirm": found.topic,
        "preview": to_json(found),
    }
