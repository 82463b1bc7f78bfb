"""Streaming queries (named by the ems source's ems.query.name option): a page of queries
by name (a literal prefix search, a keyset cursor, at most 100), each with its topics,
partitions, total lag and last commit; and a query's partitions with their committed
offset, high watermark and lag. Each with its JSON twin."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify, render_template, url_for

from ems.admin.capabilities import READ
from ems.admin.guard import requires
from ems.admin.serialize import to_json
from ems.admin.services import services
from ems.admin.views.listing import listing, named
from ems.validation import NAME_RE

bp = Blueprint("stream_queries", __name__)


@bp.get("/streaming-queries")
@requires(READ)
def page() -> str:
    query = listing()
    found = services().stream_queries.page(query.prefix, query.after, query.limit)
    return render_template("stream_queries.html", page=found, query=query, link=query_url)


@bp.get("/api/v1/streaming-queries")
@requires(READ)
def api() -> Response:
    query = listing()
    found = services().stream_queries.page(query.prefix, query.after, query.limit)
    return jsonify(to_json(found))


@bp.get("/streaming-queries/<name>")
@requires(READ)
def detail(name: str | None = None) -> str:
    found = services().stream_queries.detail(named(name))
    return render_template("stream_query.html", q=found)


@bp.get("/api/v1/streaming-queries/<name>")
@requires(READ)
def api_detail(name: str | None = None) -> Response:
    return jsonify(to_json(services().stream_queries.detail(named(name))))


# A name of dots only, or one the source would refuse (a row written by hand), is reached
# by ?name=.
bp.add_url_rule("/streaming-query", "detail_by_query", detail)
bp.add_url_rule("/api/v1/streaming-query", "api_detail_by_query", api_detail)


def query_url(name: str) -> str:
    """The link to a query's page: in the path when its name is an ems name (not dots
    only), in the query string otherwise."""
    if NAME_RE.fullmatch(name) and name.strip("."):
        return url_for("stream_queries.detail", name=name)
    return url_for("stream_queries.detail_by_query", name=name)
