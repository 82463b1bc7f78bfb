"""Settings and scheduler options of the cleanup jobs: bad values are refused up front."""

from __future__ import annotations

import pytest

from ems.config import Settings
from ems.exceptions import InvalidPolicy, InvalidSetting, UnknownJob
from ems.maintenance.jobs import job
from ems.maintenance.scheduler import DEFAULT_INTERVALS, SchedulerConfig


def test_cleanup_settings_from_the_environment() -> None:
    s = Settings.from_env(
        {"EMS_PURGE_CHUNK_ROWS": "500", "EMS_PURGE_PAUSE": "0", "EMS_LOG_RETENTION_DAYS": "2"}
    )
    assert (s.purge_chunk_rows, s.purge_pause, s.log_retention_days) == (500, 0.0, 2.0)
    defaults = Settings.from_env({})
    assert (defaults.purge_chunk_rows, defaults.purge_pause) == (50, 10.0)
    with pytest.raises(InvalidSetting):
        Settings.from_env({"EMS_PURGE_PAUSE": "-1"})
    with pytest.raises(InvalidSetting):
        Settings.from_env({"EMS_LOG_RETENTION_DAYS": "0"})


def test_scheduler_options_are_checked() -> None:
    assert SchedulerConfig().checked().intervals == DEFAULT_INTERVALS
    with pytest.raises(InvalidPolicy, match="TTL"):
        SchedulerConfig(lease_ttl=2, renew_every=1.5).checked()
    with pytest.raises(InvalidPolicy, match="positive"):
        SchedulerConfig(intervals={"snapshots": 0}).checked()
    with pytest.raises(UnknownJob):
        SchedulerConfig(intervals={"vacuum": 5}).checked()
    assert SchedulerConfig(intervals={"alarms": 5}).checked().intervals["alarms"] == 5


def test_unknown_jobs() -> None:
    with pytest.raises(UnknownJob, match="purge-retention"):
        job("purge")
    assert job("alarms") is not None
