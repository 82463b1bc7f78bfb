"""The fault suite's own process handling: whatever state a test leaves its children in,
stopping them ends every one, so none outlives its test holding a session and its locks
(a member left stopped by a failed test once held a lock that made every later test of
the private server time out in its set-up)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from ems.config import Settings
from tests import forked
from tests.faults.test_transactions import Services

pytestmark = pytest.mark.faults


def test_stopping_the_services_ends_a_child_a_failed_test_left_stopped(tmp_path: Path) -> None:
    services = Services(Settings(), tmp_path)
    child = forked.spawn("tests.faults.idle_child", [], env=dict(os.environ), stdout=forked.PIPE)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        services.procs["running"] = child
        child.send_signal(signal.SIGSTOP)  # the test failed while it was paused
        services.stop()
        assert child.poll() == 3  # its own exit, on SIGTERM
    finally:
        child.kill()
        child.wait(timeout=60)
        if child.stdout is not None:
            child.stdout.close()
