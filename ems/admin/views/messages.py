"""Messages: a search (by id, by place, a partition by offset, a key or the messages of a
time range; keyset pages of at most 100 rows), a message's detail with its trace as a
timeline, and its raw body as a download. Each page with its JSON twin.

Bodies, keys and headers are shown only to a principal holding READ_BODIES (viewers lose
it under EMS_ADMIN_HIDE_BODIES): without it, keys show as hidden and a search by key is
refused, since its answer would tell the key. A topic of dots only is reached by the
query forms (/message?topic=...&partition=...&offset=...).
"""

from __future__ import annotations

import re
from typing import Any

from flask import Blueprint, Response, jsonify, render_template, request, url_for

from ems.admin import audit
from ems.admin.bodies import (
    KEY_CELL,
    error_text,
    format_size,
    key_text,
    message_json,
    message_view,
    preview,
)
from ems.admin.capabilities import DOWNLOAD_BODIES, READ, READ_BODIES
from ems.admin.forms import whole
from ems.admin.guard import may, refuse, requires
from ems.admin.search import Search, check_topic, parse_search
from ems.admin.serialize import to_json
from ems.admin.services import services
from ems.display import json_fields
from ems.exceptions import InvalidInput, InvalidOffset
from ems.ops.query import FoundMessage, MessagePage
from ems.ops.timeline import Event, timeline, without_errors
from ems.ops.trace import MessageTrace
from ems.values.messages import SUMMARY_HEAD, MessageSummary

bp = Blueprint("messages", __name__)

HIDDEN_KEYS = (
    "message bodies, keys and headers are hidden from viewers (EMS_ADMIN_HIDE_BODIES): "
    "a search by key is not open to your role"
)
NAME_THE_MESSAGE = "name the message: ?id=ID, or ?topic=NAME&partition=P&offset=O"


# -- search ----------------------------------------------------------------------------


@bp.get("/messages")
@requires(READ)
def page() -> str:
    search, found = _search()
    return render_template(
        "messages.html",
        search=search,
        found=found,
        next_link=_next_link(search, found),
        reveal=may(READ_BODIES),
        message_url=message_url,
        key_text=key_text,
        key_cell=KEY_CELL,
        preview=preview,
        format_size=format_size,
    )


@bp.get("/api/v1/messages")
@requires(READ)
def api() -> Response:
    search, found = _search()
    reveal = may(READ_BODIES)
    body: dict[str, Any] = {"kind": search.kind, "bodies_hidden": not reveal}
    if found is not None:
        body.update(
            topic=found.topic,
            since=to_json(found.since),
            until=to_json(found.until),
            key_partition=found.key_partition,
            items=[_item(found.topic, m, reveal) for m in found.items],
            next_after=found.next_after,
        )
    return jsonify(body)


def _search() -> tuple[Search, MessagePage | None]:
    if request.args.get("key") and not may(READ_BODIES):
        refuse(READ_BODIES, HIDDEN_KEYS)  # before anything else: the answer would tell of the key
    search = parse_search(request.args)
    return search, _run(search)


def _run(s: Search) -> MessagePage | None:
    query = services().messages
    if s.kind == "id" and s.message_id is not None:
        return _one(query.get_by_id(s.message_id))
    if s.topic is None:
        return None
    if s.kind == "place" and s.partition is not None and s.offset is not None:
        return _one(query.get(s.topic, s.partition, s.offset))
    if s.kind == "partition" and s.partition is not None:
        return query.partition_page(s.topic, s.partition, after=s.after, limit=s.limit)
    return query.search(
        s.topic,
        since=s.since,
        until=s.until,
        key=s.key,
        partition=s.partition,
        after=s.after,
        limit=s.limit,
    )


def _one(found: FoundMessage) -> MessagePage:
    m = found.message
    summary = MessageSummary(
        id=m.id,
        topic_id=m.topic_id,
        partition=m.partition,
        offset=m.offset,
        key=m.key,
        size=len(m.body),
        created_at=m.created_at,
        head=m.body[:SUMMARY_HEAD],
    )
    return MessagePage(topic=found.topic, since=None, until=None, items=(summary,), next_after=None)


def _next_link(search: Search, found: MessagePage | None) -> str | None:
    """The next page's link, with the window as resolved (an age such as 15m would move)."""
    if found is None or found.next_after is None:
        return None
    since, until = (None if t is None else f"{t.isoformat()}Z" for t in (found.since, found.until))
    return url_for("messages.page", **search.link_args(found.next_after, since, until))


def _item(topic: str, m: MessageSummary, reveal: bool) -> dict[str, Any]:
    item: dict[str, Any] = {
        "id": m.id,
        "topic": topic,
        "partition": m.partition,
        "offset": m.offset,
        "created_at": to_json(m.created_at),
        "size": m.size,
    }
    if reveal:
        return {**item, **json_fields("key", m.key, 0), "preview": preview(m.head, m.size)}
    return {**item, "key": None, "key_hidden": True, "preview": None}


# -- detail ------------------------------------------------------------------------------


@bp.get("/messages/<topic>/<partition>/<offset>")
@requires(READ)
def detail(topic: str, partition: str, offset: str) -> str:
    return _detail_page(_by_place(topic, partition, offset))


@bp.get("/messages/id/<message_id>")
@requires(READ)
def detail_by_id(message_id: str) -> str:
    return _detail_page(_by_id(message_id))


@bp.get("/message")
@requires(READ)
def detail_by_query() -> str:
    return _detail_page(_by_query())


@bp.get("/api/v1/messages/<topic>/<partition>/<offset>")
@requires(READ)
def api_detail(topic: str, partition: str, offset: str) -> Response:
    return _detail_json(_by_place(topic, partition, offset))


@bp.get("/api/v1/messages/id/<message_id>")
@requires(READ)
def api_detail_by_id(message_id: str) -> Response:
    return _detail_json(_by_id(message_id))


@bp.get("/api/v1/message")
@requires(READ)
def api_detail_by_query() -> Response:
    return _detail_json(_by_query())


Located = tuple[FoundMessage, MessageTrace]


def _by_place(topic: str, partition: str, offset: str) -> Located:
    name, p, o = _place(topic, partition, offset)
    found = services().messages.get(name, p, o)
    return found, services().tracer.trace(name, p, o)


def _place(topic: str, partition: str, offset: str) -> tuple[str, int, int]:
    p = whole(partition, "partition")
    return check_topic(topic), p, whole(offset, "offset", InvalidOffset)


def _by_id(message_id: str) -> Located:
    found = services().messages.get_by_id(whole(message_id, "id"))
    return found, services().tracer.trace_id(found.message.id)


def _by_query() -> Located:
    args = request.args
    if "id" in args:
        if {"topic", "partition", "offset"} & set(args):
            raise InvalidInput(NAME_THE_MESSAGE)
        return _by_id(args["id"])
    topic, partition, offset = (args.get(name) for name in ("topic", "partition", "offset"))
    if topic is None or partition is None or offset is None:
        raise InvalidInput(NAME_THE_MESSAGE)
    return _by_place(topic, partition, offset)


def _detail_page(located: Located) -> str:
    found, trace = located
    m = found.message
    reveal = may(READ_BODIES)
    shown = message_view(m.key, m.headers, m.body) if reveal else None
    return render_template(
        "message.html",
        topic=found.topic,
        message=m,
        size=format_size(len(m.body)),
        reveal=reveal,
        key=shown.key if shown else None,
        headers=shown.headers if shown else (),
        body=shown.body if shown else None,
        trace=trace,
        events=_events(trace, reveal),
        error_text=error_text,
        raw_url=message_url(found.topic, m.partition, m.offset, raw=True),
        search_url=url_for("messages.page", topic=found.topic, partition=m.partition),
    )


def _detail_json(located: Located) -> Response:
    found, trace = located
    m = found.message
    reveal = may(READ_BODIES)
    out: dict[str, Any] = {
        "id": m.id,
        "topic": found.topic,
        "partition": m.partition,
        "offset": m.offset,
        "created_at": to_json(m.created_at),
        "transactional": m.transactional,
        "size": len(m.body),
        "bodies_hidden": not reveal,
        "key": None,
        "headers": None,
        "body": None,
    }
    if reveal:
        out.update(message_json(m.key, m.headers, m.body))
    groups = [
        {name: to_json(getattr(g, name)) for name in ("group", "mode", "ordered", "state", "note")}
        | {"cursor": g.cursor}
        for g in trace.groups
    ]
    out["trace"] = {"groups": groups, "timeline": to_json(_events(trace, reveal))}
    return jsonify(out)


# -- raw body --------------------------------------------------------------------------


@bp.get("/messages/<topic>/<partition>/<offset>/raw")
@requires(DOWNLOAD_BODIES)
def raw(topic: str, partition: str, offset: str) -> Response:
    return _download(services().messages.get(*_place(topic, partition, offset)))


@bp.get("/messages/id/<message_id>/raw")
@requires(DOWNLOAD_BODIES)
def raw_by_id(message_id: str) -> Response:
    return _download(services().messages.get_by_id(whole(message_id, "id")))


@bp.get("/message/raw")
@requires(DOWNLOAD_BODIES)
def raw_by_query() -> Response:
    found, _ = _by_query()
    return _download(found)


def _download(found: FoundMessage) -> Response:
    m = found.message
    audit.record(
        "download",
        f"message:{found.topic}/{m.partition}/{m.offset}",
        "ok",
        params={"id": m.id, "size": len(m.body)},
    )
    response = Response(m.body, mimetype="application/octet-stream")
    name = safe_filename(found.topic, m.partition, m.offset)
    response.headers["Content-Disposition"] = f'attachment; filename="{name}"'
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def safe_filename(topic: str, partition: int, offset: int) -> str:
    """message-<topic>-<partition>-<offset>.bin, of letters, digits, '.', '_' and '-'
    only (a stored name is checked when made, but not every row was made that way)."""
    return _UNSAFE.sub("_", f"message-{topic}-{partition}-{offset}.bin")


# -- shared ------------------------------------------------------------------------------


def message_url(topic: str, partition: int, offset: int, *, raw: bool = False) -> str:
    """The link to a message's page (or its raw body). A topic of dots only would be
    resolved as a path segment by the browser, so it goes in the query."""
    if topic.strip("."):
        endpoint = "messages.raw" if raw else "messages.detail"
    else:
        endpoint = "messages.raw_by_query" if raw else "messages.detail_by_query"
    return url_for(endpoint, topic=topic, partition=partition, offset=offset)


#: What stands for an error text in a trace read without READ_BODIES.
HIDDEN_ERROR = "(error text hidden from viewers)"


def _events(trace: MessageTrace, reveal: bool) -> tuple[Event, ...]:
    """The trace's timeline; without READ_BODIES, without its error texts (they often
    quote the message)."""
    events = timeline(trace)
    return events if reveal else without_errors(events, HIDDEN_ERROR)
