"""The group leader's autoscaling step, run from its membership round.

Every `interval` seconds the leader reads the group's policy (no policy, or a disabled
one: nothing happens), the live members' reports, the lag and the last change, takes the
decision (ems.autoscale.policy.decide), hands it to the backend and records it in
autoscale_decision, fenced by its epoch: a deposed leader records nothing and changes
nothing on Kubernetes either, because the change is made while the leader row is held
at its epoch (no takeover can happen between the check and the PATCH).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from ems.autoscale.backends import ScaleBackend, backend_for
from ems.autoscale.policy import decide
from ems.exceptions import EmsError, ScaleBackendError
from ems.groups import lag
from ems.store.errors import NotLeader
from ems.values.autoscale import Recommendation, ScaleDecision, ScaleInputs, ScalePolicy

if TYPE_CHECKING:
    from ems.config import Settings
    from ems.store import Store
    from ems.types import GroupInfo, TopicInfo

log = logging.getLogger(__name__)

Leader = tuple[str, int]


class Autoscaler:
    """Decides and applies the replicas of one cluster group, as its leader."""

    def __init__(self, store: Store, group: GroupInfo, settings: Settings) -> None:
        self.store = store
        self.group = group
        self.settings = settings
        self.interval = settings.autoscale_interval
        self._next_run = 0.0
        self._epoch: int | None = None
        #: Recommendations taken by this leader: (monotonic time, replicas).
        self._history: list[tuple[float, int]] = []
        self._backend: tuple[tuple[object, ...], ScaleBackend] | None = None

    def maybe_run(self, client_id: str, epoch: int) -> ScaleDecision | None:
        """Run a step when the interval has passed since the last one. NotLeader
        propagates (the caller steps down); other failures are logged, never raised."""
        now = time.monotonic()
        if now < self._next_run:
            return None
        self._next_run = now + self.interval
        try:
            return self.run((client_id, epoch))
        except NotLeader:
            raise
        except EmsError as exc:
            log.warning("autoscaling of group %s failed: %s", self.group.name, exc)
            return None

    def run(self, leader: Leader) -> ScaleDecision | None:
        """One step now: the decision recorded, or None without an enabled policy."""
        gid = self.group.id
        policy = self.store.autoscale.policy(gid)
        if policy is None or not policy.enabled:
            return None
        self._seed(leader[1], policy)
        backend = self._backend_for(policy)
        reports = [r for r in self.store.autoscale.reports(gid) if r.live]
        try:
            current = backend.current(len(reports))
        except ScaleBackendError as exc:
            return self._record_failure(leader, backend, len(reports), exc)
        topic = self.store.topics.by_ids([self.group.topic_id]).get(self.group.topic_id)
        inputs = ScaleInputs(
            current=current,
            members=[r.load() for r in reports],
            total_lag=self._lag(policy, topic),
            partitions=0 if topic is None else topic.partitions,
            history=self._recent(policy),
            since_last_change=self.store.autoscale.since_last_change(gid),
        )
        decision = decide(policy, inputs)
        self._history.append((time.monotonic(), decision.recommendation))
        return self._apply(leader, backend, decision)

    def _apply(
        self, leader: Leader, backend: ScaleBackend, decision: ScaleDecision
    ) -> ScaleDecision:
        if not decision.changes:
            self.store.autoscale.record(
                self.group.id, leader, decision, applied=False, backend=backend.name
            )
            return decision

        def change() -> tuple[bool, str | None]:
            try:
                return backend.scale(decision.current, decision.desired), None
            except ScaleBackendError as exc:
                log.warning("autoscaling of group %s not applied: %s", self.group.name, exc)
                return False, str(exc)

        self.store.autoscale.apply_as_leader(
            self.group.id, leader, decision, backend=backend.name, change=change
        )
        return decision

    def _record_failure(
        self, leader: Leader, backend: ScaleBackend, live: int, exc: ScaleBackendError
    ) -> ScaleDecision:
        log.warning("autoscaling of group %s: %s", self.group.name, exc)
        decision = ScaleDecision(
            current=live,
            desired=live,
            recommendation=live,
            reason="no decision: the backend's replica count could not be read",
        )
        self.store.autoscale.record(
            self.group.id, leader, decision, applied=False, backend=backend.name, error=str(exc)
        )
        return decision

    def _seed(self, epoch: int, policy: ScalePolicy) -> None:
        """A new leader starts from the decisions recorded within the window (their
        desired replicas: at least what was recommended, so it errs towards holding)."""
        if epoch == self._epoch:
            return
        self._epoch = epoch
        now = time.monotonic()
        recent = self.store.autoscale.recent(self.group.id, policy.scale_down_window_seconds)
        self._history = [(now - r.age_seconds, r.replicas) for r in recent]

    def _recent(self, policy: ScalePolicy) -> list[Recommendation]:
        now = time.monotonic()
        window = policy.scale_down_window_seconds
        self._history = [(t, n) for t, n in self._history if now - t <= window]
        return [Recommendation(age_seconds=now - t, replicas=n) for t, n in self._history]

    def _backend_for(self, policy: ScalePolicy) -> ScaleBackend:
        """The policy's backend, kept while the policy names the same target (so the
        Kubernetes client and its connections are reused)."""
        key = (policy.backend, policy.namespace, policy.deployment)
        if self._backend is None or self._backend[0] != key:
            self._backend = (key, backend_for(policy, self.settings))
        return self._backend[1]

    def _lag(self, policy: ScalePolicy, topic: TopicInfo | None) -> int | None:
        if policy.lag_threshold is None or topic is None:
            return None  # not worth the reads
        committed = self.store.groups.offsets(self.group.id)
        marks = self.store.messages.high_watermarks(topic)
        return sum(lag(marks.get(p, 0), o) for p, o in committed.items())


def autoscaler_for(store: Store, group: GroupInfo, settings: Settings) -> Autoscaler | None:
    """The autoscaler a cluster member runs when it leads; None when turned off
    (autoscale_interval 0) or for broadcast groups, which have no leader."""
    if settings.autoscale_interval <= 0 or group.mode != "cluster":
        return None
    return Autoscaler(store, group, settings)
