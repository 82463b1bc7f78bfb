"""The role matrix (pure): every role under every combination of read-only and hidden
bodies, capability by capability."""

from __future__ import annotations

import itertools

import pytest

from ems.admin.capabilities import (
    ACK_ALARMS,
    ALTER_TOPICS,
    CAPABILITIES,
    DOWNLOAD_BODIES,
    MANAGE_ACCOUNTS,
    MUTATIONS,
    PUBLIC,
    PURGE,
    READ,
    READ_ACCOUNTS,
    READ_BODIES,
    REPLAY,
    RESEND,
    RESET_OFFSETS,
    capabilities,
)
from ems.config import ADMIN_ROLES
from ems.values.accounts import ROLES

#: The whole matrix, written out: role -> what it holds with neither setting.
EXPECTED = {
    "viewer": {READ, READ_BODIES},
    "operator": {READ, READ_BODIES, DOWNLOAD_BODIES, ACK_ALARMS, RESEND, REPLAY, RESET_OFFSETS},
    "admin": {
        READ,
        READ_BODIES,
        DOWNLOAD_BODIES,
        ACK_ALARMS,
        RESEND,
        REPLAY,
        RESET_OFFSETS,
        PURGE,
        MANAGE_ACCOUNTS,
        READ_ACCOUNTS,
        ALTER_TOPICS,
    },
}


def test_the_names() -> None:
    assert {
        "read",
        "read_bodies",
        "download_bodies",
        "ack_alarms",
        "resend",
        "replay",
        "reset_offsets",
        "purge",
        "manage_accounts",
        "read_accounts",
        "alter_topics",
    } == CAPABILITIES
    assert PUBLIC == "public"
    assert PUBLIC not in CAPABILITIES
    assert {
        ACK_ALARMS,
        RESEND,
        REPLAY,
        RESET_OFFSETS,
        PURGE,
        MANAGE_ACCOUNTS,
        ALTER_TOPICS,
    } == MUTATIONS


@pytest.mark.parametrize(
    ("role", "read_only", "hide_bodies"),
    list(itertools.product(ADMIN_ROLES, (False, True), (False, True))),
)
def test_the_matrix(role: str, read_only: bool, hide_bodies: bool) -> None:
    held = capabilities(role, read_only=read_only, hide_bodies=hide_bodies)
    expected = set(EXPECTED[role])
    if read_only:
        expected -= MUTATIONS
    if hide_bodies and role == "viewer":
        expected.discard(READ_BODIES)
    assert held == expected
    assert isinstance(held, frozenset)
    assert PUBLIC not in held


def test_roles_grow_by_inclusion() -> None:
    held = [capabilities(r, read_only=False, hide_bodies=False) for r in ADMIN_ROLES]
    assert held[0] < held[1] < held[2]


def test_read_only_leaves_no_mutation_to_anyone() -> None:
    for role in ADMIN_ROLES:
        held = capabilities(role, read_only=True, hide_bodies=False)
        assert not held & MUTATIONS
        assert READ in held
    assert READ_ACCOUNTS in capabilities("admin", read_only=True, hide_bodies=True)


@pytest.mark.parametrize("role", ["", "Admin", "root", "admin ", "superuser"])
def test_an_unknown_role_holds_nothing(role: str) -> None:
    assert capabilities(role, read_only=False, hide_bodies=False) == frozenset()


def test_the_settings_know_the_roles_the_accounts_have() -> None:
    assert ROLES == ADMIN_ROLES
    assert set(EXPECTED) == set(ROLES)
