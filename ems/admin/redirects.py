"""Where the console sends a browser after signing in (pure): only to one of its own
pages, so a crafted link cannot make the login form an open redirect."""

from __future__ import annotations

from urllib.parse import urlsplit

HOME = "/"
_MAX = 2000


def safe_next(target: object) -> str:
    """`target` when it is a path on this site ("/groups?x=1"); HOME for anything else:
    other hosts ("//evil", "https://evil"), backslash tricks ("/\\evil"), control
    characters, the login page itself."""
    if not isinstance(target, str) or not target or len(target) > _MAX:
        return HOME
    if not target.startswith("/") or target.startswith(("//", "/\\")):
        return HOME
    if any(ord(c) < 0x20 or ord(c) == 0x7F or c == "\\" for c in target):
        return HOME
    parts = urlsplit(target)
    if parts.scheme or parts.netloc:
        return HOME
    if parts.path in ("/login", "/logout"):
        return HOME
    return target
