"""The audit trail, for admins (it holds client addresses and user agents): searchable by
actor, action, target prefix and time range (ISO 8601 or ages such as 2h), newest first,
a keyset cursor to the next page, at most 100 entries. With its JSON twin."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from flask import Blueprint, Response, jsonify, render_template, request

from ems.admin.capabilities import READ_ACCOUNTS
from ems.admin.forms import optional_whole, page_limit
from ems.admin.guard import requires
from ems.admin.serialize import to_json
from ems.admin.services import services
from ems.exceptions import InvalidCursor
from ems.ops.audit_search import audit_filter
from ems.ops.browse_input import DEFAULT_PAGE, MAX_PAGE
from ems.values.accounts import AuditPage

bp = Blueprint("audit_log", __name__)

#: The search fields, as the page's form and the API name them.
FIELDS = ("actor", "action", "target", "since", "until")


@dataclass(frozen=True, kw_only=True, slots=True)
class AuditQuery:
    """A search as given: its texts ("" filters nothing), the cursor and the page size."""

    terms: Mapping[str, str]
    before: int | None
    limit: int

    def link_args(self, before: int | None) -> dict[str, str | int | None]:
        """The query of the page before the entry `before`, search kept."""
        args: dict[str, str | int | None] = {k: v or None for k, v in self.terms.items()}
        args["before"] = before
        args["limit"] = None if self.limit == DEFAULT_PAGE else self.limit
        return args


def audit_query() -> AuditQuery:
    args = request.args
    return AuditQuery(
        terms={name: args.get(name, "") for name in FIELDS},
        before=optional_whole(args.get("before"), "before", InvalidCursor),
        limit=page_limit(args.get("limit"), DEFAULT_PAGE, MAX_PAGE),
    )


def _page(query: AuditQuery) -> AuditPage:
    search = services().audit_search
    t = query.terms
    found = audit_filter(
        actor=t["actor"],
        action=t["action"],
        target_prefix=t["target"],
        since=t["since"],
        until=t["until"],
        before_id=query.before,
        limit=query.limit,
        now=search.now(),
    )
    return search.page(found)


def params_text(params: Mapping[str, object]) -> str:
    """An entry's params as compact JSON text (printed escaped, never as markup)."""
    return json.dumps(dict(params), ensure_ascii=False, sort_keys=True, default=str)


@bp.get("/audit")
@requires(READ_ACCOUNTS)
def page() -> str:
    query = audit_query()
    return render_template("audit.html", page=_page(query), query=query, params_text=params_text)


@bp.get("/api/v1/audit")
@requires(READ_ACCOUNTS)
def api() -> Response:
    found = _page(audit_query())
    return jsonify({"items": to_json(found.items), "next_before": found.next_before})
