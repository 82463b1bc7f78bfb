"""What the listing pages share (topics, groups): the query parameters of a page (a
literal name prefix, a keyset cursor, a page size), checked before anything is read.
Bad input raises the operations layer's typed errors, which the console answers with a
400."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flask import request, url_for

from ems.admin.forms import page_limit
from ems.exceptions import InvalidName
from ems.ops.browse_input import DEFAULT_PAGE, GROUP_PARTITIONS, MAX_PAGE


@dataclass(frozen=True, kw_only=True, slots=True)
class Listing:
    """A listing's parameters: `prefix` ("" lists everything), `after` (None: from the
    start) and `limit` (1 to MAX_PAGE)."""

    prefix: str
    after: str | None
    limit: int

    def link_args(self, after: str | None) -> dict[str, str | int | None]:
        """The query of the page after `after` with the same prefix and size (None values
        are left out of the URL)."""
        return {
            "prefix": self.prefix or None,
            "after": after,
            "limit": None if self.limit == DEFAULT_PAGE else self.limit,
        }


def listing(default: int = DEFAULT_PAGE, maximum: int = MAX_PAGE) -> Listing:
    """The listing parameters of the current request (?prefix=&after=&limit=)."""
    args = request.args
    return Listing(
        prefix=args.get("prefix", ""),
        after=args.get("after"),
        limit=page_limit(args.get("limit"), default, maximum),
    )


def partition_page(most: int = GROUP_PARTITIONS) -> tuple[str | None, int]:
    """A detail's page of partitions (a group's, a streaming query's): ?after= (checked by
    the read model) and ?limit= (1 to `most`, the default)."""
    args = request.args
    return args.get("after"), page_limit(args.get("limit"), most, most)


def named(name: str | None) -> str:
    """The name of a detail page: from its path, or from ?name= (the form for names of
    dots only). InvalidName (a 400) when neither has one."""
    found = name if name is not None else request.args.get("name")
    if found is None:
        raise InvalidName("name the topic or group: /topic?name=... or /group?name=...")
    return found


def detail_url(endpoint: str, name: str, **args: Any) -> str:
    """The link to a topic's or group's detail page. A name of dots only ("." or "..")
    would be resolved as a path segment by the browser, so it goes in the query."""
    if name.strip("."):
        return url_for(endpoint, name=name, **args)
    return url_for(f"{endpoint}_by_query", name=name, **args)
