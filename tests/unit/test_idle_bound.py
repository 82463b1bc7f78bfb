"""The one statement that bounds a session's idle transactions: ems's own sessions mark
it @ems_idle, an exactly-once batch on the service's connection @ems_batch."""

from __future__ import annotations

from ems.consumer.exactly_once import IDLE_UNBOUND, batch_bound
from ems.store.database import MAX_IDLE_BOUND, idle_bound_statement


def test_the_bound_sets_its_marker_and_the_seconds_in_one_statement() -> None:
    assert idle_bound_statement(5) == (
        "SET @ems_idle = 1 /*M!100300 , SESSION idle_transaction_timeout = 5 */"
    )
    assert batch_bound(7) == (
        "SET @ems_batch = 1 /*M!100300 , SESSION idle_transaction_timeout = 7 */"
    )


def test_the_bound_is_at_most_the_servers_largest() -> None:
    assert idle_bound_statement(MAX_IDLE_BOUND + 1).endswith(f"= {MAX_IDLE_BOUND} */")
    assert batch_bound(MAX_IDLE_BOUND * 2).endswith(f"= {MAX_IDLE_BOUND} */")


def test_a_batch_puts_back_the_marker_it_set() -> None:
    marker = batch_bound(1).split()[1]
    assert IDLE_UNBOUND.startswith(f"SET {marker} = NULL ")
