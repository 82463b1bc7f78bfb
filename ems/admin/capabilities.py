"""What each role may do in the console (pure).

Every view names one capability; a request reaches the view only when its principal holds
it. Roles grow by inclusion: a viewer reads everything (message bodies too, unless
EMS_ADMIN_HIDE_BODIES hides them from viewers), an operator also downloads raw message
bodies, acknowledges alarms, resends dead letters, replays and resets offsets, an admin
also purges, adds partitions to topics, sees the console's accounts and manages them.
Read-only mode takes every mutation away from everyone, admins included (an admin still
sees the accounts). An unknown role holds nothing.
"""

from __future__ import annotations

from typing import Final

#: Pages and API reads.
READ: Final = "read"
#: Message bodies, keys and headers (off for viewers when bodies are hidden: operators and
#: admins resend and replay messages, so they see what they act on).
READ_BODIES: Final = "read_bodies"
#: A message body as raw bytes (a file download): operators and admins, not a change.
DOWNLOAD_BODIES: Final = "download_bodies"
ACK_ALARMS: Final = "ack_alarms"
RESEND: Final = "resend"
REPLAY: Final = "replay"
RESET_OFFSETS: Final = "reset_offsets"
PURGE: Final = "purge"
MANAGE_ACCOUNTS: Final = "manage_accounts"
#: Add partitions to a topic (admins: it moves keys to other partitions for good).
ALTER_TOPICS: Final = "alter_topics"
#: The list of accounts and tokens: admins only, and not a change (read-only keeps it).
READ_ACCOUNTS: Final = "read_accounts"
#: Not a capability anyone holds: the mark of the views anyone may reach (/healthz,
#: /login, /logout, static files).
PUBLIC: Final = "public"

#: What changes state; read-only mode removes them all.
MUTATIONS: Final = frozenset(
    {ACK_ALARMS, RESEND, REPLAY, RESET_OFFSETS, PURGE, MANAGE_ACCOUNTS, ALTER_TOPICS}
)
#: Every capability a view may require, PUBLIC aside.
CAPABILITIES: Final = frozenset({READ, READ_BODIES, DOWNLOAD_BODIES, READ_ACCOUNTS, *MUTATIONS})

_VIEWER = frozenset({READ, READ_BODIES})
_OPERATOR = _VIEWER | {DOWNLOAD_BODIES, ACK_ALARMS, RESEND, REPLAY, RESET_OFFSETS}
_ADMIN = _OPERATOR | {PURGE, MANAGE_ACCOUNTS, READ_ACCOUNTS, ALTER_TOPICS}
_BY_ROLE: Final = {"viewer": _VIEWER, "operator": _OPERATOR, "admin": _ADMIN}


def capabilities(role: str, *, read_only: bool, hide_bodies: bool) -> frozenset[str]:
    """The capabilities of `role` under the console's settings."""
    held = _BY_ROLE.get(role, frozenset())
    if read_only:
        held -= MUTATIONS
    if hide_bodies and role == "viewer":
        held -= {READ_BODIES}
    return held


def is_mutation(capability: str) -> bool:
    return capability in MUTATIONS
