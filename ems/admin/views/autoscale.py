"""Autoscaling: a page of the groups that have a policy, by group then topic name (a
literal prefix, a keyset cursor to the next page, at most 20), each with its policy, the
replica range it allows, its live members and its latest decisions (time, from and to,
reason). With its JSON twin. The page changes nothing (`ems autoscale set` does)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, jsonify, render_template

from ems.admin.capabilities import READ
from ems.admin.guard import requires
from ems.admin.serialize import to_json
from ems.admin.services import services
from ems.admin.views.listing import Listing, listing
from ems.autoscale.admin import AutoscaleStatus
from ems.ops.autoscale import MAX_GROUPS, live_members
from ems.values.browse import Page

bp = Blueprint("autoscale", __name__)


def _page(query: Listing) -> Page[AutoscaleStatus]:
    return services().autoscale.page(query.prefix, query.after, query.limit)


@bp.get("/autoscale")
@requires(READ)
def page() -> str:
    query = listing(MAX_GROUPS, MAX_GROUPS)
    return render_template(
        "autoscale.html", page=_page(query), query=query, live_members=live_members
    )


@bp.get("/api/v1/autoscale")
@requires(READ)
def api() -> Response:
    found = _page(listing(MAX_GROUPS, MAX_GROUPS))
    return jsonify({"items": [_status(s) for s in found.items], "next_after": found.next_after})


def _status(found: AutoscaleStatus) -> dict[str, Any]:
    out: dict[str, Any] = to_json(found)
    out["live_members"] = live_members(found)
    for member, report in zip(out["members"], found.members, strict=True):
        member["live"] = report.live
    return out
