"""Times on the console's pages (pure): `<time datetime="2026-11-25T10:00:00Z">2026-11-25
10:00:00 UTC</time>`, UTC with the zone named; admin.js says how long ago on hover.

The `utc` filter returns markup, so it belongs in text, never in an attribute value (a
test reads the templates for that); `utc_text` is the plain text for attributes."""

from __future__ import annotations

import datetime as dt

from markupsafe import Markup

from ems.display import format_utc


def iso_z(value: dt.datetime) -> str:
    """A stored time (naive is UTC; aware converted) as ISO 8601 ending in Z."""
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
    return value.isoformat(timespec="seconds") + "Z"


def utc_time(value: dt.datetime | None, *, missing: str = "—") -> Markup:
    """A <time> element for a stored time (format_utc's text); `missing` (escaped) for
    None."""
    if value is None:
        return Markup("{}").format(missing)
    return Markup('<time datetime="{}">{}</time>').format(iso_z(value), format_utc(value))
