"""Previews kept as plans: issued to one actor for one action, open until they expire,
claimed at most once even by applies racing each other, and only their token's hash
stored."""

from __future__ import annotations

import threading

import pytest

from ems.config import Settings
from ems.exceptions import PlanExpired
from ems.ops.plans import Plans, token_hash
from ems.store import Store
from tests.integration import seed


@pytest.fixture
def plans(settings: Settings, store: Store) -> Plans:
    return Plans(settings, store=store)


def test_a_plan_is_claimed_once(plans: Plans, store: Store) -> None:
    issued = plans.issue("otto", "resend", "dead letters of group:billing", {"ids": [1, 2]})
    assert plans.open(issued.token, "otto", "resend").body == {"ids": [1, 2]}
    claimed = plans.claim(issued.token, "otto", "resend")
    assert claimed.id == issued.plan.id
    with pytest.raises(PlanExpired, match="applied already"):
        plans.claim(issued.token, "otto", "resend")
    stored = seed.sql(store, "SELECT token_hash, used_at IS NOT NULL FROM admin_plan")
    assert stored == [(token_hash(issued.token), 1)]
    assert issued.token not in str(seed.sql(store, "SELECT * FROM admin_plan"))


def test_a_plan_is_its_actors_for_its_action(plans: Plans) -> None:
    issued = plans.issue("otto", "resend", "t", {})
    with pytest.raises(PlanExpired, match="someone else"):
        plans.claim(issued.token, "ada", "resend")
    with pytest.raises(PlanExpired, match="another change"):
        plans.claim(issued.token, "otto", "purge")
    assert plans.claim(issued.token, "otto", "resend").actor == "otto"


def test_an_expired_plan_is_refused(plans: Plans) -> None:
    issued = plans.issue("otto", "purge", "t", {}, lifetime=-1.0)
    with pytest.raises(PlanExpired, match="expired"):
        plans.open(issued.token, "otto", "purge")


def test_racing_applies_claim_a_plan_once(settings: Settings, plans: Plans) -> None:
    issued = plans.issue("otto", "reset_offsets", "group:g", {})
    wins: list[int] = []
    losses: list[str] = []
    start = threading.Barrier(8)

    def apply() -> None:
        with Plans(settings) as mine:
            start.wait()
            try:
                wins.append(mine.claim(issued.token, "otto", "reset_offsets").id)
            except PlanExpired as exc:
                losses.append(str(exc))

    threads = [threading.Thread(target=apply) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wins == [issued.plan.id]
    assert len(losses) == 7
