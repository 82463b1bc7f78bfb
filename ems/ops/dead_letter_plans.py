"""Dead-letter changes as the console makes them: previewed on an explicit list of ids,
applied on exactly that list, with an outcome per dead letter.

A preview takes the dead letters selected (by id, or those matching a filter now, at most
MAX_PLAN) and says what would happen to each: published to its topic, requeued to its
group, purged, skipped (resent before) or failed (its topic or group was deleted, its
message purged). It records each one's state (resent or not). The apply acts only on those
ids, never on dead letters that arrived later: when one of them is gone or was resent
since the preview, it changes nothing and raises PlanChanged. It then works in locked
chunks as a CLI resend does; a dead letter that changed between the check and its chunk
is skipped and said so, and a failure is the outcome of the dead letters it concerns,
never hidden behind a count.
"""

from __future__ import annotations

import builtins
import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from ems.exceptions import EmsError, PlanChanged
from ems.ops.dead_letters import (
    RESEND_CHUNK,
    Action,
    DeadLetters,
    ResendOutcome,
    by_topic,
)
from ems.store.dead_letters import LockedDeadLetters
from ems.values.rows import DeadLetter, DeadLetterFilter, Orphaned

How = Literal["publish", "requeue", "purge"]
#: Dead letters one preview lists and its apply acts on, at most.
MAX_PLAN = 1000
#: A dead letter's state as a preview saw it: when it was resent (ISO 8601), or None.
State = Mapping[int, str | None]

_DONE: dict[How, Action] = {"publish": "published", "requeue": "requeued", "purge": "purged"}
_WOULD: dict[How, Action] = {
    "publish": "would publish",
    "requeue": "would requeue",
    "purge": "would purge",
}
_VERB = {"publish": "resent", "requeue": "replayed", "purge": "purged"}


@dataclass(frozen=True, kw_only=True, slots=True)
class DeadLetterPreview:
    how: How
    #: The dead letters the apply acts on, in id order (bodies cut to a prefix).
    letters: tuple[DeadLetter, ...]
    #: What would happen to each, in the same order.
    outcomes: tuple[ResendOutcome, ...]
    #: More matched than MAX_PLAN: the apply acts on the listed ones only.
    more: bool

    @property
    def state(self) -> dict[int, str | None]:
        return state_of(self.letters)

    @property
    def word(self) -> str:
        """What the confirm form asks to type (see confirm_word)."""
        return confirm_word(self.letters)


# -- pure ------------------------------------------------------------------------------


def state_of(letters: Sequence[DeadLetter]) -> dict[int, str | None]:
    return {d.id: _when(d.resent_at) for d in letters}


def _when(at: dt.datetime | None) -> str | None:
    return None if at is None else at.isoformat()


def blocker(d: DeadLetter, orphan: Orphaned | None, how: How) -> str | None:
    """Why this dead letter cannot go where `how` sends it; None when it can."""
    if how == "purge" or orphan is None:
        return None
    if orphan.topic_gone:
        return "its topic was deleted"
    if how == "requeue" and orphan.group_gone:
        return "its group was deleted"
    if how == "requeue" and orphan.message_gone:
        return "its message was purged by retention; resend it to the topic instead"
    return None


def planned(d: DeadLetter, orphan: Orphaned | None, how: How) -> ResendOutcome:
    """What an apply would do with this dead letter, as of now."""
    why = blocker(d, orphan, how)
    if why is not None:
        return _outcome(d, "failed", why)
    if how != "purge" and d.resent_at is not None:
        return _outcome(d, "skipped", f"resent at {_shown(d.resent_at)} already")
    return _outcome(d, _WOULD[how])


def changed_since(expected: State, found: Sequence[DeadLetter], how: How) -> list[str]:
    """How the dead letters found differ from the preview's: gone, or (unless purged,
    where only being there counts) resent since."""
    now = {d.id: d for d in found}
    problems = []
    gone = [i for i in sorted(expected) if i not in now]
    if gone:
        problems.append(f"dead letters {_ids(gone)} are gone")
    if how != "purge":
        resent = [
            i for i in sorted(expected) if i in now and _when(now[i].resent_at) != expected[i]
        ]
        if resent:
            problems.append(f"dead letters {_ids(resent)} were resent since the preview")
    return problems


def summary(outcomes: Sequence[ResendOutcome], how: How) -> str:
    """One line: "2 resent, 1 skipped, 1 failed: id 42, its topic was deleted"."""
    done = sum(1 for o in outcomes if o.action == _DONE[how])
    parts = [f"{done} {_VERB[how]}"]
    skipped = sum(1 for o in outcomes if o.action == "skipped")
    if skipped:
        parts.append(f"{skipped} skipped")
    failed = [o for o in outcomes if o.action == "failed"]
    text = ", ".join(parts)
    if failed:
        first = failed[0]
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        text += f", {len(failed)} failed: id {first.dead_id}, {first.reason}{more}"
    return text


def confirm_word(letters: Sequence[DeadLetter]) -> str:
    """What the confirm form asks to type: the group's name when the dead letters are all
    one group's, else the topic's when all one topic's, else their number."""
    if not letters:
        return "0"
    groups = {d.group for d in letters}
    if len(groups) == 1 and None not in groups:
        return str(next(iter(groups)))
    topics = {d.topic for d in letters}
    if len(topics) == 1 and None not in topics:
        return str(next(iter(topics)))
    return str(len(letters))


def all_done(outcomes: Sequence[ResendOutcome], how: How) -> bool:
    return bool(outcomes) and all(o.action == _DONE[how] for o in outcomes)


def _outcome(d: DeadLetter, action: Action, reason: str | None = None) -> ResendOutcome:
    return ResendOutcome(
        dead_id=d.id,
        action=action,
        topic=d.topic,
        group=d.group,
        reason=reason,
    )


def _shown(at: dt.datetime) -> str:
    return at.isoformat(sep=" ", timespec="seconds") + " UTC"


def _ids(ids: Sequence[int]) -> str:
    return ", ".join(map(str, ids[:20])) + (" ..." if len(ids) > 20 else "")


# -- I/O -------------------------------------------------------------------------------


class DeadLetterChanges:
    """Preview and apply on explicit ids, over a DeadLetters (its store and producer)."""

    def __init__(self, letters: DeadLetters) -> None:
        self.letters = letters
        self.store = letters.store

    def preview(self, selection: DeadLetterFilter, how: How) -> DeadLetterPreview:
        rows = self.store.dead_letters.matching(selection, MAX_PLAN + 1)
        more, rows = len(rows) > MAX_PLAN, rows[:MAX_PLAN]
        orphans = {o.id: o for o in self.store.dead_letters.orphaned([d.id for d in rows])}
        return DeadLetterPreview(
            how=how,
            letters=tuple(rows),
            outcomes=tuple(planned(d, orphans.get(d.id), how) for d in rows),
            more=more,
        )

    def apply(self, expected: State, how: How) -> builtins.list[ResendOutcome]:
        """Act on exactly these dead letters; PlanChanged (nothing changed) when one is
        gone or was resent since the preview. An outcome per dead letter, in id order."""
        ids = sorted(expected)
        if not ids or len(ids) > MAX_PLAN:
            raise PlanChanged(f"a change acts on 1 to {MAX_PLAN} dead letters, not {len(ids)}")
        found = self.store.dead_letters.matching(DeadLetterFilter(ids=tuple(ids)), len(ids))
        problems = changed_since(expected, found, how)
        if problems:
            raise PlanChanged("; ".join(problems))
        outcomes: builtins.list[ResendOutcome] = []
        for start in range(0, len(ids), RESEND_CHUNK):
            chunk = ids[start : start + RESEND_CHUNK]
            orphans = {o.id: o for o in self.store.dead_letters.orphaned(chunk)}
            with self.store.dead_letters.locked(chunk) as batch:
                outcomes += self._chunk(batch, {i: expected[i] for i in chunk}, orphans, how)
        return sorted(outcomes, key=lambda o: o.dead_id)

    def _chunk(
        self,
        batch: LockedDeadLetters,
        expected: State,
        orphans: Mapping[int, Orphaned],
        how: How,
    ) -> builtins.list[ResendOutcome]:
        outcomes = []
        todo = []
        seen = {d.id for d in batch.rows}
        for i in sorted(set(expected) - seen):
            outcomes.append(
                ResendOutcome(
                    dead_id=i,
                    action="skipped",
                    topic=None,
                    group=None,
                    reason="gone since the preview",
                )
            )
        for d in batch.rows:
            if how != "purge" and _when(d.resent_at) != expected[d.id]:
                outcomes.append(_outcome(d, "skipped", "resent since the preview"))
                continue
            now = planned(d, orphans.get(d.id), how)
            if now.action.startswith("would"):
                todo.append(d)
            else:
                outcomes.append(now)
        if how == "purge":
            batch.delete([d.id for d in todo])
            return outcomes + [_outcome(d, "purged") for d in todo]
        if how == "requeue":
            return outcomes + self._requeue(batch, todo)
        return outcomes + self._publish(batch, todo)

    def _requeue(
        self, batch: LockedDeadLetters, todo: Sequence[DeadLetter]
    ) -> builtins.list[ResendOutcome]:
        outcomes = []
        for d in todo:
            if batch.requeue(d, f"resent from dead letter {d.id}: {d.last_error}"):
                batch.mark([d.id])
                outcomes.append(_outcome(d, "requeued"))
            else:
                why = "its message was purged by retention; resend it to the topic instead"
                outcomes.append(_outcome(d, "failed", why))
        return outcomes

    def _publish(
        self, batch: LockedDeadLetters, todo: Sequence[DeadLetter]
    ) -> builtins.list[ResendOutcome]:
        outcomes = []
        for topic, letters in by_topic(todo).items():  # a deleted topic is a blocker
            try:
                published = self.letters.publish_to(topic, letters)
            except EmsError as exc:
                outcomes += [_outcome(d, "failed", f"not published: {exc}") for d in letters]
                continue
            batch.mark([d.id for d in letters])
            outcomes += published
        return outcomes
