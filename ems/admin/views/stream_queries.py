"""Streaming queries (named by the ems source's ems.query.name option): a page of queries
by name (a literal prefix search, a keyset cursor, at most 100), each with its topics,
partitions, total lag, last commit and offsets skipped; and a query's figures with a page
of its partitions (a keyset cursor, at most 100), each with its committed offset, high
watermark, lag and offsets skipped. Each with its JSON twin."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, jsonify, render_template, url_for

from ems.admin.capabilities import READ
from ems.admin.guard import requires
from ems.admin.serialize import to_json
from ems.admin.services import services
from ems.admin.views.listing import listing, named, partition_page
from ems.ops.browse_input import QUERY_PARTITIONS
from ems.ops.stream_queries import StreamQueryDetail
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
    return render_template("stream_query.html", q=_detail(name), link=query_url)


@bp.get("/api/v1/streaming-queries/<name>")
@requires(READ)
def api_detail(name: str | None = None) -> Response:
    return jsonify(to_json(_detail(name)))


# A name of dots only, or one the source would refuse (a row written by hand), is reached
# by ?name=.
bp.add_url_rule("/streaming-query", "detail_by_query", detail)
bp.add_url_rule("/api/v1/streaming-query", "api_detail_by_query", api_detail)


def _detail(name: str | None) -> StreamQueryDetail:
    after, limit = partition_page(QUERY_PARTITIONS)
    return services().stream_queries.detail(named(name), after, limit)


def query_url(name: str, **args: Any) -> str:
    """The link to a query's page (with `args` in its query string): the name in the
    path when it is an ems name (not dots only), in the query string otherwise."""
    if NAME_RE.fullmatch(name) and name.strip("."):
        return url_for("stream_queries.detail", name=name, **args)
    return url_for("stream_queries.detail_by_query", name=name, **args)
