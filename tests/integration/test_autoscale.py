"""Autoscaling against the real servers: members' reports on their lease renewals, the
leader's fenced decisions with the log and kubernetes backends, and consumers in threads
that scale a fake Deployment."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ems import Consumer, Producer, TopicAdmin
from ems.autoscale.backends import KubernetesBackend
from ems.autoscale.step import Autoscaler, autoscaler_for
from ems.backend import mysql_backend
from ems.config import Settings
from ems.consumer.groups import ensure_group
from ems.store import Store
from ems.store import autoscale as autoscale_store
from ems.store.errors import NotLeader
from ems.types import GroupInfo
from ems.values.autoscale import ScalePolicy
from tests import sql
from tests.fake_kubernetes import FakeKubernetes, serve
from tests.integration import seed

OPTIONS = seed.options(None)
K8S = ScalePolicy(backend="kubernetes", namespace="prod", deployment="handlers")


@pytest.fixture
def group(settings: Settings, store: Store) -> GroupInfo:
    topic = TopicAdmin(settings, store=store).create("t", 8)
    return ensure_group(store, "g", topic, OPTIONS)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[FakeKubernetes, str]]:
    with serve(FakeKubernetes(deployments={("prod", "handlers"): 1})) as state:
        yield state, str(state.write_kubeconfig(tmp_path / "kubeconfig"))


#: Seconds a joined member's lease lasts: longer than any test takes on a busy machine (a
#: member whose lease ended reports nothing, and a scaler step then sees no load).
_MEMBER_TTL = 600


def join(store: Store, group: GroupInfo, *loads: tuple[float, float]) -> list[str]:
    """Members c0, c1, ... reporting (load msg/s, cpu %); c0 leads."""
    names = [f"c{i}" for i in range(len(loads))]
    for name, (load, cpu) in zip(names, loads, strict=True):
        store.leases.register(group.id, name, "h", 1, ttl=_MEMBER_TTL)
        assert store.leases.renew(name, _MEMBER_TTL, cpu_percent=cpu, load_rate=load)
    return names


#: The leader row's lease made to end that many seconds from now.
_LASTING = (
    "UPDATE group_leader SET lease_expires_at = NOW(6) + INTERVAL %s SECOND WHERE group_id = %s"
)


def lead(store: Store, group: GroupInfo, client: str = "c0", ttl: float = 600) -> tuple[str, int]:
    """Take the leader row; by default for longer than any test takes on a busy machine
    (a scaler step that outlived its leader's lease is refused, rightly)."""
    epoch = store.leases.lead(group.id, client, ttl)
    assert epoch is not None
    return client, epoch


def test_a_renewal_stores_the_report_and_a_bare_renewal_keeps_it(
    store: Store, group: GroupInfo
) -> None:
    store.leases.register(group.id, "a", "h", 1, ttl=10)
    (fresh,) = store.autoscale.reports(group.id)
    assert (fresh.cpu_percent, fresh.load_rate, fresh.reported_at) == (None, None, None)
    assert store.leases.renew("a", 10, cpu_percent=42.5, load_rate=120.0)
    (reported,) = store.autoscale.reports(group.id)
    assert (reported.cpu_percent, reported.load_rate) == (42.5, 120.0)
    assert reported.reported_at is not None and reported.live
    time.sleep(0.01)
    assert store.leases.renew("a", 10)
    (kept,) = store.autoscale.reports(group.id)
    assert (kept.cpu_percent, kept.load_rate, kept.reported_at) == (
        42.5,
        120.0,
        reported.reported_at,
    )


def test_the_leader_records_the_hpa_decision_with_the_log_backend(
    settings: Settings, store: Store, group: GroupInfo
) -> None:
    store.autoscale.set_policy(group.id, ScalePolicy(target_load=1000, max_replicas=10))
    join(store, group, (3000, 10), (3000, 10))
    leader = lead(store, group)
    decision = Autoscaler(store, group, settings).run(leader)
    assert decision is not None and (decision.current, decision.desired) == (2, 6)
    (row,) = store.autoscale.decisions(group.id)
    assert (row.current_replicas, row.desired_replicas, row.applied) == (2, 6, True)
    assert (row.backend, row.leader_epoch, row.error) == ("log", leader[1], None)
    assert "2 -> 6" in row.reason


def test_without_an_enabled_policy_nothing_is_decided(
    settings: Settings, store: Store, group: GroupInfo
) -> None:
    join(store, group, (3000, 10))
    scaler = Autoscaler(store, group, settings)
    assert scaler.run(lead(store, group)) is None
    store.autoscale.set_policy(group.id, ScalePolicy(enabled=False))
    assert scaler.run(lead(store, group)) is None
    assert store.autoscale.decisions(group.id) == []


def test_within_the_cooldown_the_next_decision_holds(
    settings: Settings, store: Store, group: GroupInfo
) -> None:
    store.autoscale.set_policy(group.id, ScalePolicy(target_load=1000))
    join(store, group, (3000, 10), (3000, 10))
    scaler = Autoscaler(store, group, settings)
    scaler.run(lead(store, group))
    held = scaler.run(lead(store, group))
    assert held is not None and held.desired == 2 and "cooldown" in held.reason
    latest, first = store.autoscale.decisions(group.id)
    assert (first.applied, latest.applied) == (True, False)
    assert latest.desired_replicas == 2


def test_the_lag_above_its_threshold_adds_a_replica(
    settings: Settings, store: Store, group: GroupInfo
) -> None:
    with Producer(backend=mysql_backend(settings, store)) as producer:
        for i in range(30):
            producer.send("t", f"m{i}")
    store.autoscale.set_policy(group.id, ScalePolicy(target_load=1000, lag_threshold=20))
    join(store, group, (1000, 10), (1000, 10))
    decision = Autoscaler(store, group, settings).run(lead(store, group))
    assert decision is not None and decision.desired == 3
    assert "lag 30 above 20" in decision.reason


def test_a_deposed_leader_records_nothing_and_scales_nothing(
    settings: Settings,
    store: Store,
    group: GroupInfo,
    cluster: tuple[FakeKubernetes, str],
) -> None:
    fake, kubeconfig = cluster
    store.autoscale.set_policy(group.id, K8S)
    join(store, group, (5000, 10), (5000, 10))
    old = lead(store, group, "c0", ttl=0.2)
    time.sleep(0.3)
    new = lead(store, group, "c1")
    assert new[1] == old[1] + 1
    scaler = Autoscaler(store, group, settings.with_(kubeconfig=kubeconfig))
    with pytest.raises(NotLeader):
        scaler.run(old)
    assert store.autoscale.decisions(group.id) == []
    assert fake.patches() == [] and fake.deployments["prod", "handlers"] == 1
    decision = scaler.run(new)
    assert decision is not None and decision.desired == 5
    assert fake.deployments["prod", "handlers"] == 5
    (row,) = store.autoscale.decisions(group.id)
    assert (row.leader_epoch, row.backend, row.applied) == (new[1], "kubernetes", True)


def test_kubernetes_failures_are_recorded_not_raised(
    settings: Settings,
    store: Store,
    group: GroupInfo,
    cluster: tuple[FakeKubernetes, str],
) -> None:
    fake, kubeconfig = cluster
    fake.fail_patches = 500
    store.autoscale.set_policy(group.id, K8S)
    join(store, group, (5000, 10))
    scaler = Autoscaler(store, group, settings.with_(kubeconfig=kubeconfig))
    leader = lead(store, group)
    scaler.run(leader)
    (refused,) = store.autoscale.decisions(group.id)
    assert (refused.current_replicas, refused.desired_replicas) == (1, 5)
    assert not refused.applied and "HTTP 500" in (refused.error or "")
    store.autoscale.set_policy(group.id, ScalePolicy(backend="kubernetes", deployment="gone"))
    scaler.run(leader)
    unread = store.autoscale.decisions(group.id)[0]
    assert not unread.applied and "404" in (unread.error or "")
    assert unread.reason.startswith("no decision")
    assert fake.deployments["prod", "handlers"] == 1


def test_a_broadcast_group_or_a_zero_interval_has_no_autoscaler(
    settings: Settings, store: Store, group: GroupInfo
) -> None:
    assert autoscaler_for(store, group, settings) is not None
    assert autoscaler_for(store, group, settings.with_(autoscale_interval=0.0)) is None
    broadcast = ensure_group(
        store,
        "b",
        store.topics.get("t"),
        dataclasses.replace(OPTIONS, broadcast=True),
    )
    assert autoscaler_for(store, broadcast, settings) is None


# -- consumers in threads ----------------------------------------------------------------


class Feed:
    """Publishes a few messages every 50 ms until stopped."""

    def __init__(self, settings: Settings) -> None:
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(settings,))
        self.thread.start()

    def _run(self, settings: Settings) -> None:
        with Producer(settings) as producer:
            i = 0
            while not self.stopping.wait(0.05):
                for _ in range(5):
                    producer.send("t", f"m{i}", key=f"k{i}")
                    i += 1

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=10)


@pytest.fixture
def consumers(settings: Settings, group: GroupInfo) -> Iterator[Callable[..., list[Consumer]]]:
    started: list[tuple[Consumer, threading.Thread]] = []
    feed: list[Feed] = []

    def start(n: int, run_settings: Settings) -> list[Consumer]:
        for _ in range(n):
            c = Consumer("g", "t", lambda d: None, settings=run_settings, **FAST)
            t = threading.Thread(target=c.run, kwargs={"handle_signals": False})
            t.start()
            started.append((c, t))
        feed.append(Feed(settings))
        return [c for c, _ in started]

    yield start
    for f in feed:
        f.stop()
    for c, t in started:
        c.stop()
        t.join(timeout=15)
        assert not t.is_alive()


FAST: dict[str, Any] = {"lease_ttl": 3.0, "renew_every": 0.3, "start": "earliest"}


def wait_for(check: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_consumers_report_load_and_the_leader_records_decisions(
    settings: Settings,
    store: Store,
    group: GroupInfo,
    consumers: Callable[..., list[Consumer]],
) -> None:
    policy = ScalePolicy(target_load=5, max_replicas=3, cooldown_seconds=0)
    store.autoscale.set_policy(group.id, policy)
    consumers(2, settings.with_(autoscale_interval=0.3))

    def reported() -> bool:
        live = [r for r in store.autoscale.reports(group.id) if r.live]
        return len(live) == 2 and all((r.load_rate or 0) > 0 for r in live)

    wait_for(reported)
    assert all(r.cpu_percent is not None for r in store.autoscale.reports(group.id))
    wait_for(lambda: any(d.desired_replicas == 3 for d in store.autoscale.decisions(group.id)))
    leader = store.leases.leader(group.id)
    assert leader is not None
    decisions = store.autoscale.decisions(group.id, 100)
    assert {d.leader_epoch for d in decisions} == {leader.epoch}
    scaled = [d for d in decisions if d.desired_replicas == 3]
    assert scaled[-1].current_replicas == 2 and scaled[-1].applied


def test_consumers_scale_the_fake_deployment(
    settings: Settings,
    store: Store,
    group: GroupInfo,
    consumers: Callable[..., list[Consumer]],
    cluster: tuple[FakeKubernetes, str],
) -> None:
    fake, kubeconfig = cluster
    policy = ScalePolicy(
        backend="kubernetes", namespace="prod", deployment="handlers", target_load=5
    )
    store.autoscale.set_policy(group.id, dataclasses.replace(K8S, target_load=5.0))
    assert store.autoscale.policy(group.id) == policy
    fake.answer_delay = 0.3
    consumers(2, settings.with_(autoscale_interval=0.3, kubeconfig=kubeconfig))
    wait_for(lambda: fake.deployments["prod", "handlers"] > 1)
    # The decision commits with the change, once the API server has answered the patch.
    wait_for(lambda: any(d.applied for d in store.autoscale.decisions(group.id, 100)))
    scaled = [d for d in store.autoscale.decisions(group.id, 100) if d.applied]
    assert len(scaled) == 1 and scaled[0].backend == "kubernetes"
    assert fake.deployments["prod", "handlers"] == scaled[0].desired_replicas
    (patch,) = fake.patches()
    assert patch.body == {"spec": {"replicas": scaled[0].desired_replicas}}


def test_a_failing_backend_never_stops_the_member(
    settings: Settings,
    store: Store,
    group: GroupInfo,
    consumers: Callable[..., list[Consumer]],
    cluster: tuple[FakeKubernetes, str],
) -> None:
    fake, kubeconfig = cluster
    fake.fail_patches = 503
    store.autoscale.set_policy(group.id, dataclasses.replace(K8S, target_load=5.0))
    consumers(1, settings.with_(autoscale_interval=0.3, kubeconfig=kubeconfig))
    wait_for(lambda: any(d.error for d in store.autoscale.decisions(group.id)))
    (member,) = store.autoscale.reports(group.id)
    wait_for(lambda: store.autoscale.reports(group.id)[0].reported_at != member.reported_at)
    assert store.autoscale.reports(group.id)[0].live
    failed = [d for d in store.autoscale.decisions(group.id, 100) if d.error]
    assert "HTTP 503" in (failed[0].error or "") and not any(d.applied for d in failed)
    assert fake.deployments["prod", "handlers"] == 1


def test_a_leader_deposed_before_its_patch_does_not_scale(
    settings: Settings,
    store: Store,
    group: GroupInfo,
    cluster: tuple[FakeKubernetes, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another member takes the leadership over right before the old leader's PATCH goes
    out: either the PATCH is not sent, or the takeover waits until it is done, so the
    replicas are never changed by a member that no longer leads."""
    fake, kubeconfig = cluster
    store.autoscale.set_policy(group.id, K8S)
    join(store, group, (5000, 10), (5000, 10))
    old = lead(store, group, "c0")
    taken: list[float] = []
    patched: list[float] = []
    scale = KubernetesBackend.scale
    held = autoscale_store.hold

    def held_briefly(cursor: Any, group_id: int, client_id: str, epoch: int) -> None:
        # The lease is made to run out soon after the leader holds its row, however long
        # the step took to get here: renewed for a short while right before the hold (from
        # another session, while nobody holds the row), longer each time it lapsed first.
        for lasting in (2, 4, 8, 16, 32):
            sql.run(store, _LASTING, (lasting, group_id))
            with contextlib.suppress(NotLeader):
                return held(cursor, group_id, client_id, epoch)
        raise AssertionError("the leader's hold never came within 32 s of its renewal")

    def take_over() -> None:
        lead(store, group, "c1")
        taken.append(time.monotonic())

    def deposed_first(backend: KubernetesBackend, current: int, desired: int) -> bool:
        seed.wait_until(lambda: store.leases.leader(group.id).expires_in <= 0, 60)
        rival = threading.Thread(target=take_over)
        rival.start()
        # The takeover either completes or waits on the leader row.
        seed.wait_until(lambda: bool(taken) or seed.lock_waits(store) > 0)
        applied = scale(backend, current, desired)
        patched.append(time.monotonic())
        rival_threads.append(rival)
        return applied

    rival_threads: list[threading.Thread] = []
    monkeypatch.setattr(KubernetesBackend, "scale", deposed_first)
    monkeypatch.setattr(autoscale_store, "hold", held_briefly)
    scaler = Autoscaler(store, group, settings.with_(kubeconfig=kubeconfig))
    with contextlib.suppress(NotLeader):  # told it was deposed, once its PATCH is done
        scaler.run(old)
    assert rival_threads, "the leader's step never reached its PATCH"
    for rival in rival_threads:
        rival.join(60)
    assert taken, "the rival never took the leadership over"
    if fake.patches():
        assert patched and taken[0] > patched[0], "a deposed leader scaled the Deployment"
