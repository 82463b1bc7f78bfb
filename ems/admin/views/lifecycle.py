"""Topic alter, topic delete, group delete and a streaming query's drop, preview then
confirm (admins: topic alter takes the ALTER_TOPICS capability, as adding partitions does;
the deletes take PURGE, as every change that deletes data).

Each preview (POST) computes what the change does from the state as it is and keeps it as
a plan; the page shows it and asks to type the topic's or group's name. The apply (POST)
claims the plan and makes exactly the previewed change, provided the state still holds:
the topic is the one previewed (not deleted and made again meanwhile), and for a delete
no group has gained live members (unless the preview forced it), and a streaming query
has not committed since (it runs, and would record its positions again). Otherwise nothing
changes and the page says why. Each apply is in the audit trail; each route has its JSON
twin under /api/v1/. A delete runs in the request: a large topic's takes a while (its
rows go in chunks, resting as the purges do); a request cut off leaves a delete that the
next one finishes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from flask import Blueprint, Response, jsonify, render_template

from ems.admin import audit, forms, plans
from ems.admin.capabilities import ALTER_TOPICS, PURGE
from ems.admin.guard import requires
from ems.admin.serialize import to_json
from ems.admin.services import services
from ems.exceptions import InUse, NotFound, PlanChanged
from ems.groups import utc
from ems.ops.plans import IssuedPlan
from ems.validation import check_name
from ems.values.plans import Plan, PlanAction

bp = Blueprint("lifecycle", __name__)

ALTER: PlanAction = "topic_alter"
DELETE_TOPIC: PlanAction = "topic_delete"
DELETE_GROUP: PlanAction = "group_delete"
DROP_QUERY: PlanAction = "stream_query_drop"
#: The form field (and the plan's key) naming what each change is to: the word to type.
_NAMED_BY: dict[PlanAction, str] = {DELETE_GROUP: "group", DROP_QUERY: "query"}


# -- routes ------------------------------------------------------------------------------


@bp.post("/topics/alter/preview")
@requires(ALTER_TOPICS)
def alter_preview() -> Response:
    return _page(_alter_preview(forms.sent()))


@bp.post("/api/v1/topics/alter/preview")
@requires(ALTER_TOPICS)
def api_alter_preview() -> Response:
    return jsonify(_json(_alter_preview(forms.sent())))


@bp.post("/topics/delete/preview")
@requires(PURGE)
def delete_preview() -> Response:
    return _page(_topic_delete_preview(forms.sent()))


@bp.post("/api/v1/topics/delete/preview")
@requires(PURGE)
def api_delete_preview() -> Response:
    return jsonify(_json(_topic_delete_preview(forms.sent())))


@bp.post("/groups/delete/preview")
@requires(PURGE)
def group_delete_preview() -> Response:
    return _page(_group_delete_preview(forms.sent()))


@bp.post("/api/v1/groups/delete/preview")
@requires(PURGE)
def api_group_delete_preview() -> Response:
    return jsonify(_json(_group_delete_preview(forms.sent())))


@bp.post("/streaming-queries/drop/preview")
@requires(PURGE)
def query_drop_preview() -> Response:
    return _page(_query_drop_preview(forms.sent()))


@bp.post("/api/v1/streaming-queries/drop/preview")
@requires(PURGE)
def api_query_drop_preview() -> Response:
    return jsonify(_json(_query_drop_preview(forms.sent())))


def _applied(action: PlanAction) -> Response:
    plan, token, fields = plans.opened(action)
    try:
        outcome = _apply(plan, token, plans.confirmation(fields))
    except plans.NotConfirmed as exc:
        issued = IssuedPlan(plan=plan, token=str(token))
        return _page(issued, notice=str(exc), status=400)
    return Response(render_template("lifecycle_result.html", plan=plan, outcome=outcome))


def _api_applied(action: PlanAction) -> Response:
    plan, token, fields = plans.opened(action)
    outcome = _apply(plan, token, plans.confirmation(fields))
    return jsonify({"applied": True, "action": plan.action, "result": outcome})


@bp.post("/topics/alter/apply")
@requires(ALTER_TOPICS)
def alter_apply() -> Response:
    return _applied(ALTER)


@bp.post("/api/v1/topics/alter/apply")
@requires(ALTER_TOPICS)
def api_alter_apply() -> Response:
    return _api_applied(ALTER)


@bp.post("/topics/delete/apply")
@requires(PURGE)
def delete_apply() -> Response:
    return _applied(DELETE_TOPIC)


@bp.post("/api/v1/topics/delete/apply")
@requires(PURGE)
def api_delete_apply() -> Response:
    return _api_applied(DELETE_TOPIC)


@bp.post("/groups/delete/apply")
@requires(PURGE)
def group_delete_apply() -> Response:
    return _applied(DELETE_GROUP)


@bp.post("/api/v1/groups/delete/apply")
@requires(PURGE)
def api_group_delete_apply() -> Response:
    return _api_applied(DELETE_GROUP)


@bp.post("/streaming-queries/drop/apply")
@requires(PURGE)
def query_drop_apply() -> Response:
    return _applied(DROP_QUERY)


@bp.post("/api/v1/streaming-queries/drop/apply")
@requires(PURGE)
def api_query_drop_apply() -> Response:
    return _api_applied(DROP_QUERY)


# -- previews ----------------------------------------------------------------------------


def _alter_preview(fields: Mapping[str, object]) -> IssuedPlan:
    name = check_name(forms.text(fields, "topic"), "topic")
    retention = _optional_whole(fields, "retention_hours")
    max_body = _optional_whole(fields, "max_body_bytes")
    admin = services().topic_admin
    info = admin.get(name)
    # Checked as the apply will check them (as create does), before anything is kept.
    admin.check_alter(retention_hours=retention, max_body_bytes=max_body)
    body = {
        "topic": name,
        "topic_id": info.id,
        "before": {"retention_hours": info.retention_hours, "max_body_bytes": info.max_body_bytes},
        "after": {
            "retention_hours": info.retention_hours if retention is None else retention,
            "max_body_bytes": info.max_body_bytes if max_body is None else max_body,
        },
    }
    return plans.issue(ALTER, f"topic:{name}", body)


def _topic_delete_preview(fields: Mapping[str, object]) -> IssuedPlan:
    name = check_name(forms.text(fields, "topic"), "topic")
    force = _flag(fields, "force")
    detail = services().browser.topic_detail(name)
    live = {g.name: g.live_members for g in detail.groups if g.live_members}
    info = services().topic_admin.get(name)
    body = {
        "topic": name,
        "topic_id": info.id,
        "force": force,
        "partitions": info.partitions,
        "stored_offsets": detail.summary.stored_offsets,
        "groups": sorted({g.name for g in detail.groups}),
        "live": live,
    }
    return plans.issue(DELETE_TOPIC, f"topic:{name}", body)


def _group_delete_preview(fields: Mapping[str, object]) -> IssuedPlan:
    name = check_name(forms.text(fields, "group"), "group")
    described = services().group_admin.describe(name)
    live = sum(1 for d in described for m in d.members if m.live)
    body = {
        "group": name,
        "topics": [d.topic for d in described],
        "live": live,
        "retries_waiting": sum(d.retries_waiting for d in described),
        "dead_letters": sum(d.dead_letters for d in described),
    }
    return plans.issue(DELETE_GROUP, f"group:{name}", body)


def _query_drop_preview(fields: Mapping[str, object]) -> IssuedPlan:
    name = forms.text(fields, "query") or ""
    totals = services().stream_queries.totals(name)
    body = {
        "query": name,
        "partitions": totals.partitions,
        "topics": list(totals.topics),
        "topic_count": totals.topic_count,
        "committed_at": to_json(utc(totals.committed_at)),
    }
    return plans.issue(DROP_QUERY, f"streaming query:{name}", body)


# -- the apply ---------------------------------------------------------------------------


def _apply(plan: Plan, token: str | None, typed: str | None) -> dict[str, Any]:
    body = plan.body
    claimed = plans.claim(token, plan.action, typed, _word(plan))
    params = {"plan": claimed.id, **{k: v for k, v in body.items() if k in ("force", "after")}}
    try:
        outcome = _change(claimed)
    except (PlanChanged, InUse) as exc:
        audit.record(plan.action, claimed.target, "refused", params=params, detail=str(exc))
        raise
    audit.record(
        plan.action,
        claimed.target,
        "ok",
        params=params,
        before=json.dumps(body.get("before", {"exists": True})),
        after=json.dumps(body.get("after", {"exists": False})),
        detail=outcome.get("detail"),
    )
    return outcome


def _change(plan: Plan) -> dict[str, Any]:
    body = plan.body
    if plan.action == DROP_QUERY:
        return _drop_query(body)
    if plan.action == DELETE_GROUP:
        done = services().group_admin.delete(body["group"])
        return {**to_json(asdict(done)), "detail": f"{done.total_rows} rows deleted"}
    admin = services().topic_admin
    try:
        current = admin.get(body["topic"])
    except NotFound as exc:
        raise PlanChanged(f"nothing was changed: {exc}") from exc
    if current.id != body["topic_id"]:
        raise PlanChanged("nothing was changed: the topic was deleted and made again")
    if plan.action == ALTER:
        after = body["after"]
        info = admin.alter(body["topic"], **after)
        return {**to_json(asdict(info)), "detail": json.dumps(after)}
    done = admin.delete(body["topic"], force=bool(body["force"]))
    return {**to_json(asdict(done)), "detail": f"{done.total_rows} rows deleted"}


def _drop_query(body: Mapping[str, Any]) -> dict[str, Any]:
    queries = services().stream_queries
    try:
        current = queries.totals(body["query"])
    except NotFound as exc:
        raise PlanChanged(f"nothing was changed: {exc}") from exc
    if to_json(utc(current.committed_at)) != body["committed_at"]:
        raise PlanChanged(
            "nothing was changed: the query committed a micro-batch since the preview (it "
            "runs, and would record its positions again at its next commit)"
        )
    dropped = queries.drop(body["query"])
    return {"query": body["query"], "partitions": dropped, "detail": f"{dropped} partitions"}


# -- parsing and answers -----------------------------------------------------------------


def _optional_whole(fields: Mapping[str, object], name: str) -> int | None:
    value = fields.get(name)
    if value is None or value == "":
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return forms.whole(forms.text(fields, name) or "", name.replace("_", " "))


def _flag(fields: Mapping[str, object], name: str) -> bool:
    value = fields.get(name)
    return value is True or value in ("1", "on", "true", "yes")


def _word(plan: Plan) -> str:
    """What the confirm asks to type: the name of the topic, group or query."""
    return str(plan.body[_NAMED_BY.get(plan.action, "topic")])


def _page(issued: IssuedPlan, notice: str | None = None, status: int = 200) -> Response:
    plan = issued.plan
    word = _word(plan)
    page = render_template(
        "lifecycle_preview.html", plan=plan, issued=issued, word=word, notice=notice
    )
    return Response(page, status=status)


def _json(issued: IssuedPlan) -> dict[str, Any]:
    plan = issued.plan
    word = _word(plan)
    return {
        "plan": issued.token,
        "action": plan.action,
        "expires_at": to_json(plan.expires_at),
        "confirm": word,
        "preview": plan.body,
    }
