"""Rebalance timings: a 4th member joins 3, then members die by SIGKILL.

A paced producer keeps every partition flowing; consumers stamp the wall time of the
last message they handled per partition into shared memory, so the parent can tell when
messages of a moved partition flow again.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from benchmarks.consumer_procs import Fleet, Watcher
from benchmarks.consumer_workers import GroupSpec, ems_consumer, paced_producer
from benchmarks.harness import PARTITIONS, BenchConfig

RATE = 1000.0
TTL = 10.0
RENEW_EVERY = 3.0
PRODUCER = 99


@dataclass(frozen=True, kw_only=True)
class Timing:
    case: str
    owned: float  # seconds until the partitions are owned (assigned) by their new owner
    flowing: float  # seconds until messages of those partitions are handled again
    partitions: int
    target: float

    @property
    def met(self) -> bool:
        return max(self.owned, self.flowing) <= self.target


def measure(cfg: BenchConfig) -> list[Timing]:
    fleet = Fleet()
    lasts: Any = fleet.ctx.Array("d", PARTITIONS, lock=False)
    watcher = Watcher(cfg.settings.database_url)
    group = f"bench-rebalance-{time.time_ns()}"
    spec = GroupSpec(
        cfg=cfg, group=group, workers=4, start="latest", lease_ttl=TTL, renew_every=RENEW_EVERY
    )
    try:
        fleet.spawn(PRODUCER, paced_producer, cfg, RATE, 3600.0, False, fleet.stop_producers)
        fleet.wait("ready", [PRODUCER], 60)
        clients: dict[int, str] = {}
        pids: dict[int, int] = {}
        for i in range(3):
            fleet.spawn(i, ems_consumer, spec, None, fleet.stop, lasts)
        for i, (pid, client, _) in fleet.wait("ready", range(3), 60).items():
            clients[i], pids[i] = client, pid
        ((group_id,),) = watcher.rows("SELECT id FROM consumer_group WHERE name = %s", (group,))

        def balanced(members: set[str]) -> bool:
            owners = watcher.owners(group_id)
            held = [c for c, s in owners.values() if s == "assigned"]
            counts = [held.count(c) for c in members]
            return (
                len(held) == PARTITIONS and set(held) == members and max(counts) - min(counts) <= 1
            )

        settled = watcher.until(lambda: balanced(set(clients.values())), 60, "3 members balanced")
        watcher.until(lambda: min(lasts) > settled, 30, "messages on every partition")

        # A 4th member joins.
        fleet.spawn(3, ems_consumer, spec, None, fleet.stop, lasts)
        _, new_client, joined = fleet.wait("ready", [3], 60)[3]
        clients[3] = new_client
        owned = watcher.until(lambda: balanced(set(clients.values())), 60, "4 members balanced")
        first = fleet.wait("first", [3], 60)[3]
        timings = [
            Timing(
                case="4th member joins 3 (from its join)",
                owned=owned - joined,
                flowing=first - joined,
                partitions=PARTITIONS // 4,
                target=2.0,
            )
        ]
        ((leader,),) = watcher.rows(
            "SELECT client_id FROM group_leader WHERE group_id = %s", (group_id,)
        )
        follower = next(i for i in range(3) if clients[i] != leader)
        timings.append(_kill(fleet, watcher, group_id, clients, follower, lasts, "a member"))
        leader_index = next(i for i, c in clients.items() if c == leader)
        timings.append(_kill(fleet, watcher, group_id, clients, leader_index, lasts, "the leader"))
        return timings
    finally:
        fleet.close()
        watcher.close()


def _kill(
    fleet: Fleet,
    watcher: Watcher,
    group_id: int,
    clients: dict[int, str],
    index: int,
    lasts: Any,
    who: str,
) -> Timing:
    victim = clients.pop(index)
    moved = [p for p, (c, _) in watcher.owners(group_id).items() if c == victim]
    killed = fleet.kill(index)

    def reowned() -> bool:
        owners = watcher.owners(group_id)
        return all(c in clients.values() and s == "assigned" for c, s in owners.values())

    owned = watcher.until(reowned, 3 * TTL, f"partitions of the killed {who} owned again")
    flowing = watcher.until(
        lambda: all(lasts[p] > killed for p in moved), 3 * TTL, "their messages flowing"
    )
    return Timing(
        case=f"SIGKILL of {who} ({len(clients) + 1} -> {len(clients)} members)",
        owned=owned - killed,
        flowing=flowing - killed,
        partitions=len(moved),
        target=TTL + 2.0,
    )
