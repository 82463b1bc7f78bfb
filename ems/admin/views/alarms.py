"""Alarms: a page of open, closed or all alarms (of one group, or of the groups whose name
starts with a prefix; newest first, a keyset cursor to the next page, at most 100 rows),
and acknowledging up to 100 of them at once (operators and admins, never in read-only
mode), each with its outcome and an entry in the audit trail. Each with its JSON twin."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flask import Blueprint, Response, jsonify, render_template, request

from ems.admin import audit, forms
from ems.admin.capabilities import ACK_ALARMS, READ
from ems.admin.forms import optional_whole, page_limit, whole
from ems.admin.guard import requires
from ems.admin.principal import NOBODY
from ems.admin.serialize import to_json
from ems.admin.services import services
from ems.alarms.desk import DEFAULT_PAGE, MAX_PAGE, check_ack_ids, state_text
from ems.exceptions import InvalidCursor, InvalidInput
from ems.values.alarms import AckResult, AlarmPage

bp = Blueprint("alarms", __name__)

#: Digits of the largest id (2**64 - 1).


@dataclass(frozen=True, kw_only=True, slots=True)
class AlarmQuery:
    """A listing's parameters: ?state=open|closed|all&group=NAME&prefix=P&before=ID&limit=N."""

    state: str
    group: str | None
    prefix: str
    before: int | None
    limit: int

    def link_args(self, before: int | None) -> dict[str, str | int | None]:
        """The query of the page before the alarm `before`, filters kept (None values are
        left out of the URL)."""
        return {
            "state": None if self.state == "open" else self.state,
            "group": self.group,
            "prefix": self.prefix or None,
            "before": before,
            "limit": None if self.limit == DEFAULT_PAGE else self.limit,
        }


def alarm_query() -> AlarmQuery:
    """The listing parameters of the current request; the desk checks their values."""
    args = request.args
    limit = page_limit(args.get("limit"), DEFAULT_PAGE, MAX_PAGE)
    return AlarmQuery(
        state=args.get("state") or "open",
        group=args.get("group") or None,
        prefix=args.get("prefix", ""),
        before=optional_whole(args.get("before"), "before (an alarm id)", InvalidCursor),
        limit=limit,
    )


def _page(query: AlarmQuery) -> AlarmPage:
    return services().alarms.page(
        state=query.state,
        group=query.group,
        prefix=query.prefix,
        before=query.before,
        limit=query.limit,
    )


@bp.get("/alarms")
@requires(READ)
def page() -> str:
    query = alarm_query()
    return render_template("alarms.html", page=_page(query), query=query)


@bp.get("/api/v1/alarms")
@requires(READ)
def api() -> Response:
    found = _page(alarm_query())
    return jsonify({"items": to_json(found.items), "next_before": found.next_before})


# -- acknowledging -----------------------------------------------------------------------


def _form_ids() -> list[int]:
    return [whole(text.strip(), "an alarm id") for text in request.form.getlist("id")]


def _requested_ids() -> tuple[int, ...]:
    """The alarm ids of the request: form fields `id` (the page's checkboxes), or a JSON
    body {"ids": [...]}. InvalidInput when they are missing, malformed or too many."""
    if request.is_json:
        body = forms.json_body()
        if not isinstance(body, dict) or "ids" not in body:
            raise InvalidInput('send the alarm ids as a JSON object: {"ids": [1, 2]}')
        return check_ack_ids(body["ids"])
    return check_ack_ids(_form_ids())


def _acknowledge() -> list[AckResult]:
    """Acknowledge the requested alarms (every id checked before the first is touched),
    one audit entry each, written as soon as it is done."""
    ids = _requested_ids()
    principal = audit.current_principal()
    by = principal.actor if principal else NOBODY
    results = []
    for alarm_id in ids:
        result = services().alarms.acknowledge_one(alarm_id, by)
        audit.record(
            "alarm.ack",
            f"alarm:{alarm_id}",
            "ok" if result.ok else "refused",
            params={"id": alarm_id, "outcome": result.outcome, "request": list(ids)},
            detail=result.message,
            before=state_text(result.before),
            after=state_text(result.after),
        )
        results.append(result)
    return results


# No automatic OPTIONS answer: create_app refuses a mutation that answers a safe method.
@bp.post("/alarms/ack")
@requires(ACK_ALARMS)
def ack() -> str:
    results = _acknowledge()
    return render_template("alarms_ack.html", results=results, ok=all(r.ok for r in results))


@bp.post("/api/v1/alarms/ack")
@requires(ACK_ALARMS)
def api_ack() -> Response:
    results = _acknowledge()
    return jsonify(
        {
            "ok": all(r.ok for r in results),
            "acknowledged": sum(r.ok for r in results),
            "results": [_result(r) for r in results],
        }
    )


def _result(result: AckResult) -> dict[str, Any]:
    return {
        "id": result.id,
        "outcome": result.outcome,
        "message": result.message,
        "alarm": to_json(result.after),
    }
