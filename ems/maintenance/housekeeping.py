"""Housekeeping jobs: the consumption log purge, due retries, in-flight rows of dead
clients, and the periodic captures (offset snapshots, topic watermarks)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import closing
from functools import partial

from ems.backend import mysql_backend
from ems.config import Settings
from ems.maintenance.checkpoint import checkpoint
from ems.producer import Producer
from ems.store import Store
from ems.store.maintenance import PURGED_STATES
from ems.store.time_index import MAX_ROWS_PER_PARTITION
from ems.values.login_limits import FORGET_SECONDS
from ems.wakeups import Publisher

#: Rows one statement of these jobs touches at most.
CHUNK = 10_000
#: In-flight rows reclaimed per transaction.
RECLAIM_CHUNK = 500
#: Rows the time-index job reads at most per run.
TIME_INDEX_ROWS = 500_000
#: Topic watermark captures are kept this long (ranking looks back one day).
WATERMARK_SECONDS = 8 * 86400
#: Job runs, autoscale decisions and cleared alarms are kept this long.
JOB_RUN_SECONDS = 30 * 86400
HISTORY_SECONDS = JOB_RUN_SECONDS
#: Jobs whose runs are pruned (including ones other modules register).
PRUNED_JOBS = (
    "purge-retention",
    "delete-consumed",
    "purge-log",
    "retry-due",
    "reclaim-inflight",
    "snapshots",
    "time-index",
    "alarms",
    "relay-outbox",
)


def _drain(step: Callable[[], int], chunk: int) -> int:
    """Run a chunked delete until a chunk comes back short, stopping at a checkpoint before
    each chunk if the run must end; the rows deleted."""
    total = 0
    while True:
        checkpoint()
        n = step()
        total += n
        if n < chunk:
            return total


def purge_log_rows(store: Store, older_than: float, chunk: int) -> dict[str, int]:
    """Delete done and dead consumption-log rows last updated more than older_than seconds
    ago; the rows deleted per state.

    The purge walks the log's primary key, never an index on state or age: per partition
    of each group that has log rows (found one index dive each), from its lowest offset
    up, in windows of `chunk` rows. Each window's bounds are read along the key (one range
    read of at most `chunk` rows); then one DELETE per purged state that the window holds
    old rows of removes them from the window's offset range, each its own short
    transaction. The partition ends at the first window of young rows only (updated since
    the cutoff): log rows are written in offset order, so what follows is young too. A
    young row among old ones (a message retried, replayed, resent or read again after an
    offset reset, its row updated late) does not stop it, nor do rows the purge keeps at
    the bottom (retry and start rows of old messages): a window with any old row leads to
    the next one. So a run reads at most one window per partition past the old rows. It
    remembers nothing for the next: the purged rows were at the bottom of each partition,
    so the next run starts there. checkpoint() runs before each window, so a run can be
    stopped. Retention is "kept at least older_than"."""
    maintenance = store.maintenance
    cutoff = maintenance.log_cutoff(older_than)
    counts = dict.fromkeys(PURGED_STATES, 0)
    found = maintenance.next_log_partition(None)
    while found is not None:
        group_id, partition = found
        start: int | None = None
        while True:
            checkpoint()
            window = maintenance.log_window(group_id, partition, start, chunk, cutoff)
            if window is None:
                break
            for state in PURGED_STATES:
                if window.purgeable[state]:
                    counts[state] += maintenance.purge_log(
                        group_id, partition, window.first, window.last, state, cutoff
                    )
            if window.young == window.rows or window.rows < chunk:
                break
            start = window.last + 1
        found = maintenance.next_log_partition(found)
    return counts


def purge_log(store: Store, settings: Settings) -> dict[str, int]:
    """Delete done and dead consumption-log rows older than log_retention_days (kept at
    least that long; see purge_log_rows), in windows of purge_chunk_rows (for deployments
    without the Spark compaction); also prunes the histories that would otherwise only
    grow: job runs, autoscale decisions (never one the group's cooldown or scale-down
    window still reads) and cleared alarms, older than HISTORY_SECONDS, the admin
    console's sign-in failure counters whose window has ended, its expired previews
    (the audit trail names the ones applied), the names of writes (message_write,
    the Spark sink's) older than HISTORY_SECONDS, and the positions of named streaming
    queries not committed for stream_query_retention (a dropped query's)."""
    chunk = min(settings.purge_chunk_rows, CHUNK)
    maintenance = store.maintenance
    counts = purge_log_rows(store, settings.log_retention_days * 86400, chunk)
    counts["job_runs"] = sum(
        _drain(partial(store.scheduler.prune_runs, job, JOB_RUN_SECONDS, chunk), chunk)
        for job in PRUNED_JOBS
    )
    counts["autoscale_decisions"] = _drain(
        partial(maintenance.prune_decisions, HISTORY_SECONDS, chunk), chunk
    )
    counts["alarms"] = _drain(partial(maintenance.prune_alarms, HISTORY_SECONDS, chunk), chunk)
    counts["login_failures"] = _drain(
        partial(store.accounts.prune_failures, FORGET_SECONDS, chunk), chunk
    )
    counts["admin_plans"] = _drain(partial(store.plans.prune, 0.0, chunk), chunk)
    counts["write_names"] = _drain(
        partial(store.messages.purge_writes, HISTORY_SECONDS, chunk), chunk
    )
    if settings.audit_retention_days:
        kept = settings.audit_retention_days * 86400.0
        counts["audit"] = _drain(partial(store.audit.prune, kept, chunk), chunk)
    if settings.stream_query_retention:
        stale = partial(store.stream_queries.prune, settings.stream_query_retention, chunk)
        counts["stream_query_positions"] = _drain(stale, chunk)
    return counts


def retry_due(store: Store, settings: Settings) -> dict[str, int]:
    """Wake every group with due retries, so its owners claim them at once (owners claim
    their partitions' due retries themselves; a claim held by a dead client lapses after
    the ack timeout and the retry is due again). Retries whose message no longer exists
    can never be claimed: they are dropped and their log rows marked dead."""
    orphans = _drain(partial(store.maintenance.drop_orphan_retries, RECLAIM_CHUNK), RECLAIM_CHUNK)
    due = store.maintenance.due_retries()
    with closing(Publisher(settings)) as publisher:
        for group_id in due:
            publisher.group(group_id)
    return {
        "due": sum(due.values()),
        "groups_woken": len(due),
        "due_unowned": store.maintenance.unowned_due() if due else 0,
        "orphans_dropped": orphans,
    }


def relay_outbox(store: Store, settings: Settings) -> dict[str, int]:
    """Move committed transactional sends left in the outbox into their topics: those
    whose producer died between its caller's commit and its relay's next pass (a live
    producer moves its own within milliseconds)."""
    with Producer(backend=mysql_backend(settings, store)) as producer:
        return {"moved": producer.relay()}


def reclaim_inflight(store: Store, settings: Settings) -> dict[str, int]:
    """In-flight log rows of clients without a live lease, older than the group's ack
    timeout: below the group's committed cursor (the stream will not bring them again)
    they move to the retry table due now; at or above it the log row is handed back
    (deleted), since the partition's next owner reads them from the stream again."""
    counts = {"requeued": 0, "handed_back": 0, "lost": 0}
    while True:
        checkpoint()
        ids = store.maintenance.stale_in_flight(RECLAIM_CHUNK)
        if not ids:
            return counts
        done = store.maintenance.reclaim(ids)
        counts["requeued"] += done.requeued
        counts["handed_back"] += done.handed_back
        counts["lost"] += done.lost
        if done.requeued + done.handed_back + done.lost == 0 or len(ids) < RECLAIM_CHUNK:
            return counts


def snapshots(store: Store, settings: Settings) -> dict[str, int]:
    """Capture committed offsets (for lag reports) and every partition's high watermark
    (for topic ranking); prune watermark captures older than 8 days."""
    marks = store.messages.all_high_watermarks()  # one scan serves both captures
    offsets = store.snapshots.capture(marks)
    watermarks = store.maintenance.capture_watermarks(marks)
    pruned = _drain(partial(store.maintenance.prune_watermarks, WATERMARK_SECONDS, CHUNK), CHUNK)
    return {"offset_rows": offsets, "watermark_rows": watermarks, "watermarks_pruned": pruned}


def time_index(store: Store, settings: Settings) -> dict[str, int]:
    """Extend the partitions' time index (offset resets by datetime) over the offsets
    that every row below them has filled, the partitions furthest behind first, reading
    at most TIME_INDEX_ROWS rows in one run; drop segments a purge passed."""
    indexed = 0
    budget = TIME_INDEX_ROWS
    for topic_id, partition, low in store.time_index.behind(store.messages.all_high_watermarks()):
        if budget <= 0:
            break
        checkpoint()
        rows = min(budget, MAX_ROWS_PER_PARTITION)
        indexed += store.time_index.extend(topic_id, partition, low, rows)
        budget -= rows
    return {"offsets_indexed": indexed}
