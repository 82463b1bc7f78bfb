"""Topics: a page of topics by name (a literal prefix search, a keyset cursor to the next
page, at most 100 rows), and a topic's detail: its settings, its partitions with their
watermarks and stored offsets, and the groups consuming it. Each with its JSON twin.
A topic of dots only is reached by /topic?name=... (see listing.detail_url)."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify, render_template

from ems.admin.capabilities import READ
from ems.admin.guard import requires
from ems.admin.serialize import to_json
from ems.admin.services import services
from ems.admin.views.listing import listing, named

bp = Blueprint("topics", __name__)


@bp.get("/topics")
@requires(READ)
def page() -> str:
    query = listing()
    found = services().browser.topics_page(query.prefix, query.after, query.limit)
    return render_template("topics.html", page=found, query=query)


@bp.get("/api/v1/topics")
@requires(READ)
def api() -> Response:
    query = listing()
    return jsonify(to_json(services().browser.topics_page(query.prefix, query.after, query.limit)))


@bp.get("/topics/<name>")
@requires(READ)
def detail(name: str | None = None) -> str:
    return render_template("topic.html", topic=services().browser.topic_detail(named(name)))


@bp.get("/api/v1/topics/<name>")
@requires(READ)
def api_detail(name: str | None = None) -> Response:
    return jsonify(to_json(services().browser.topic_detail(named(name))))


# A name of dots only ("." or "..") is valid, but a browser or curl resolves it as a path
# segment before sending: these forms take the name from ?name= instead.
bp.add_url_rule("/topic", "detail_by_query", detail)
bp.add_url_rule("/api/v1/topic", "api_detail_by_query", api_detail)
