"""The alarm webhook: one HTTP POST with a JSON body per alarm notice, retried with
exponential backoff within a bounded number of attempts and short timeouts.

Standard library only (urllib.request): a webhook does not deserve a new dependency.
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from ems.display import json_time
from ems.values.alarms import AlarmRecord

#: Characters of an error kept in alarm.notify_error.
_ERROR_CHARS = 1000


@dataclass(frozen=True, kw_only=True, slots=True)
class NoticeResult:
    """How one notice went: the attempts made, and the last error (None: delivered)."""

    attempts: int
    error: str | None = None

    @property
    def delivered(self) -> bool:
        return self.error is None


class Notifier(Protocol):
    """Sends one alarm notice. Never raises: failures are reported in the result."""

    def send(self, payload: Mapping[str, object]) -> NoticeResult: ...


def payload(alarm: AlarmRecord) -> dict[str, object]:
    """The JSON body of an alarm's notice. status is "opened" or "cleared"; times as every JSON
    ems writes carries them (ems.display.json_time: '2026-11-22T10:00:00.123456Z')."""
    return {
        "id": alarm.id,
        "kind": alarm.kind,
        "status": "opened" if alarm.status == "open" else "cleared",
        "condition": alarm.condition_key,
        "group": alarm.group,
        "group_id": alarm.group_id,
        "topic": alarm.topic,
        "topic_id": alarm.topic_id,
        "partition": alarm.partition,
        "value": alarm.value,
        "threshold": alarm.threshold,
        "message": alarm.message,
        "opened_at": json_time(alarm.opened_at),
        "last_seen_at": json_time(alarm.last_seen_at),
        "cleared_at": json_time(alarm.cleared_at),
    }


class WebhookNotifier:
    """POSTs notices to url. Each send makes at most `attempts` tries, `timeout` seconds
    each, sleeping backoff, 2 x backoff, ... between them; any 2xx answer is success."""

    def __init__(
        self,
        url: str,
        *,
        attempts: int = 3,
        timeout: float = 2.0,
        backoff: float = 0.25,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.url = url
        self.attempts = max(1, attempts)
        self.timeout = timeout
        self.backoff = backoff
        self._sleep = sleep

    def send(self, payload: Mapping[str, object]) -> NoticeResult:
        body = json.dumps(payload).encode("utf-8")
        error = "not sent"
        for attempt in range(1, self.attempts + 1):
            if attempt > 1:
                self._sleep(self.backoff * 2 ** (attempt - 2))
            error = self._post(body) or ""
            if not error:
                return NoticeResult(attempts=attempt)
        return NoticeResult(attempts=self.attempts, error=error[:_ERROR_CHARS])

    def _post(self, body: bytes) -> str | None:
        """None on a 2xx answer, else what went wrong."""
        request = urllib.request.Request(
            self.url,
            data=body,
            method="POST",
            headers={"Content-Type": "application/json", "User-Agent": "ems-alarms"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                status = int(response.status)
        except urllib.error.HTTPError as exc:
            return f"HTTP {exc.code} {exc.reason}"
        # Refused, timed out, unresolvable, a bad URL, a garbled answer.
        except (OSError, ValueError, http.client.HTTPException) as exc:
            return f"{type(exc).__name__}: {exc}"
        return None if 200 <= status < 300 else f"HTTP {status}"
