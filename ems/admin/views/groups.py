"""Consumer groups: a page of groups by name, then topic (a literal prefix search, a
keyset cursor to the next page, at most 100 rows), each with its status as a word; and a
group's detail on one topic (`?topic=` when it consumes several): mode, generation,
leader, members with their load, and per partition owner, state, committed offset, high
watermark, lag, lag age and status. Each with its JSON twin."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify, render_template, request

from ems.admin.capabilities import READ
from ems.admin.guard import requires
from ems.admin.serialize import to_json
from ems.admin.services import services
from ems.admin.views.listing import listing, named, partition_page
from ems.values.browse import GroupDetail

bp = Blueprint("groups", __name__)


@bp.get("/groups")
@requires(READ)
def page() -> str:
    query = listing()
    found = services().browser.groups_page(query.prefix, query.after, query.limit)
    return render_template("groups.html", page=found, query=query)


@bp.get("/api/v1/groups")
@requires(READ)
def api() -> Response:
    query = listing()
    return jsonify(to_json(services().browser.groups_page(query.prefix, query.after, query.limit)))


@bp.get("/groups/<name>")
@requires(READ)
def detail(name: str | None = None) -> str:
    return render_template("group.html", group=_detail(name))


@bp.get("/api/v1/groups/<name>")
@requires(READ)
def api_detail(name: str | None = None) -> Response:
    return jsonify(to_json(_detail(name)))


# A name of dots only is reached by ?name= (see topics.py).
bp.add_url_rule("/group", "detail_by_query", detail)
bp.add_url_rule("/api/v1/group", "api_detail_by_query", api_detail)


def _detail(name: str | None) -> GroupDetail:
    after, limit = partition_page()
    return services().browser.group_detail(named(name), request.args.get("topic"), after, limit)
