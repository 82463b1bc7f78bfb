"""The client behind a trusted reverse proxy (EMS_ADMIN_FORWARDED_ALLOW_IPS).

A request whose peer is a trusted proxy takes its scheme from X-Forwarded-Proto and its
client address from X-Forwarded-For, read from the right: each proxy appends the address
it was reached from, so the rightmost entries are the most trustworthy. The walk skips
the addresses of our own proxies (the listed networks) and stops at the first other
address, which is the client. "*" trusts any peer, but only for the one entry that peer
appended. A request from any other peer keeps its own address and scheme: what a client
writes in these headers never reaches the sign-in throttle or the cookie's Secure flag.
gunicorn applies the same list to the scheme (its forwarded_allow_ips).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable
from typing import Any

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text.strip())
    except ValueError:
        return None


class Trust:
    """Which peers and which forwarded hops are our own proxies."""

    def __init__(self, allow: Iterable[str]) -> None:
        items = tuple(allow)
        self.any_peer = "*" in items
        self.networks: tuple[Network, ...] = tuple(
            ipaddress.ip_network(item, strict=False) for item in items if item != "*"
        )

    def _listed(self, text: str) -> bool:
        address = _address(text)
        return address is not None and any(address in n for n in self.networks)

    def peer(self, text: str) -> bool:
        """Whether the connection's peer may speak for the client."""
        return _address(text) is not None and (self.any_peer or self._listed(text))

    def client(self, peer: str, forwarded_for: str | None) -> str:
        """The client address of a request from a trusted peer."""
        found = peer
        for hop in reversed((forwarded_for or "").split(",")):
            if _address(hop) is None:
                break  # garbage: nothing to its left can be believed
            found = hop.strip()
            if not self._listed(found):
                break
        return found


def _proto(value: str | None) -> str | None:
    last = (value or "").split(",")[-1].strip().lower()
    return last if last in ("http", "https") else None


class ForwardedFrom:
    """WSGI middleware: REMOTE_ADDR and wsgi.url_scheme from a trusted proxy's headers."""

    def __init__(self, app: Callable[..., Any], allow: Iterable[str]) -> None:
        self.app = app
        self.trust = Trust(allow)

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        peer = environ.get("REMOTE_ADDR") or ""
        if self.trust.peer(peer):
            environ["REMOTE_ADDR"] = self.trust.client(peer, environ.get("HTTP_X_FORWARDED_FOR"))
            scheme = _proto(environ.get("HTTP_X_FORWARDED_PROTO"))
            if scheme is not None:
                environ["wsgi.url_scheme"] = scheme
        return self.app(environ, start_response)
