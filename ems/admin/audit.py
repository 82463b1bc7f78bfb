"""The console's entries in the audit trail: who (the principal, or "-"), from where
(the client address and user agent), did what to what, and how it ended."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from flask import g, request

from ems.admin.principal import NOBODY, Principal
from ems.admin.services import services
from ems.values.accounts import AuditEntry

log = logging.getLogger(__name__)

#: Characters of the user agent kept.
USER_AGENT_CHARS = 256


def current_principal() -> Principal | None:
    found = g.get("principal")
    return found if isinstance(found, Principal) else None


def record(
    action: str,
    target: str,
    outcome: str,
    *,
    params: Mapping[str, object] | None = None,
    detail: str | None = None,
    actor: str | None = None,
    before: str | None = None,
    after: str | None = None,
) -> None:
    """Append an entry for the current request. A trail that cannot be written is logged
    and does not turn the request into an error (a refusal stays a refusal). A refusal of
    an anonymous caller is sampled (ems.values.refusals): the one written says how many it
    stands for (params "refusals", and "other_refusals" of other addresses)."""
    principal = current_principal()
    address = request.remote_addr or NOBODY
    if principal is None and actor is None and action == "access" and outcome == "denied":
        admitted = services().refusals.admit(address, time.monotonic())
        if admitted is None:
            return
        params = {**(params or {}), "refusals": admitted.refusals}
        if admitted.other:
            params["other_refusals"] = admitted.other
    entry = AuditEntry(
        actor=actor or (principal.actor if principal else NOBODY),
        address=address,
        user_agent=(request.user_agent.string or "")[:USER_AGENT_CHARS],
        action=action,
        target=target,
        params=dict(params or {}),
        outcome=outcome,
        before=before,
        after=after,
        detail=detail,
    )
    try:
        services().audit.record(entry)
    except Exception:
        log.exception(
            "the audit trail could not be written: %s %s %s by %s",
            action,
            target,
            outcome,
            entry.actor,
        )
