"""The ems exception tree. Everything ems raises is an EmsError.

This module holds what a caller of ems catches: the SDK's errors (bad input, missing
objects, unreachable servers, a send past its deadline) and the operations' (plans, jobs,
Spark). Errors with another audience live with the code that raises and catches them,
each a subclass of a class here: the store's control flow (a stale cursor commit, a
deposed leader, a taken offset) in ems.store.errors, which the SDK handles itself, and the
console's accounts and sign-in in ems.values.account_errors.

Docstrings are the default messages. Driver errors (PyMySQL, redis-py) are translated
once, at the store and allocator boundary, into these classes.
"""

from __future__ import annotations

from typing import TypeVar

_E = TypeVar("_E", bound=BaseException)


def caused(error: _E, cause: BaseException | None) -> _E:
    """`error` with `cause` as its __cause__: `raise caused(error, cause)` is `raise error
    from cause`, also in a module compiled by mypyc (setup.py's opt-in build), which
    ignores a raise statement's `from`. The modules it compiles use this instead
    (tests/unit/test_compiled_source.py)."""
    error.__cause__ = cause  # also sets __suppress_context__, as `from` does
    return error


class EmsError(Exception):
    """An ems operation failed."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "").strip())


# -- bad input: nothing was changed ---------------------------------------------------


class InvalidInput(EmsError, ValueError):
    """The input is not valid; nothing was changed."""


class InvalidName(InvalidInput):
    """A name must match [A-Za-z0-9._-]{1,128}."""


class InvalidPartitionCount(InvalidInput):
    """A topic has between 1 and 4096 partitions."""


class PartitionsNotAdded(InvalidPartitionCount):
    """Partitions can only be added to a topic: the new count must exceed the current one."""


class InvalidBody(InvalidInput):
    """A message body must be bytes or str."""


class BodyTooLarge(InvalidInput):
    """The message body is larger than the topic's max body size."""


class InvalidKey(InvalidInput):
    """A message key must be str or bytes of at most 255 bytes."""


class InvalidHeaders(InvalidInput):
    """Message headers must be a mapping of str to str."""


class InvalidSetting(InvalidInput):
    """A setting is not valid."""


class UnknownDatabase(InvalidSetting):
    """The database EMS_DATABASE_URL names does not exist on the server: run `ems db
    create`, then `ems db upgrade`."""


class DatabaseAccessDenied(InvalidSetting):
    """The server refused the user of EMS_DATABASE_URL (a wrong user or password, or a
    user without access to that database): raised at once, never waited for as a lost
    server would be."""


class SchemaOutOfDate(InvalidInput):
    """The database has no ems schema, or not the newest one: run `ems db upgrade`."""


class InvalidOffset(InvalidInput):
    """An offset must be a non-negative integer."""


class InvalidHandler(InvalidInput):
    """The message handler is not callable."""


class HandlerNotFound(InvalidHandler):
    """A handler path is `package.module:callable` (or `package.module:object.attribute`),
    importable from the current directory or sys.path, and names something that exists."""


class HandlerImportFailed(InvalidHandler):
    """Importing the handler's module raised an exception."""


class GroupConflict(InvalidInput):
    """The group exists with other settings (mode, ordering or retry policy)."""


class InvalidCutoff(InvalidInput):
    """A compaction cutoff must lie in the past."""


class InvalidWindow(InvalidInput):
    """A report window must be a positive duration ending no later than now."""


class InvalidDatetime(InvalidInput):
    """A datetime must be ISO 8601 (2026-11-22T10:00:00, with or without a UTC offset; a
    value without one is UTC) or a relative age such as 15m, 2h or 7d."""


class OffsetOutOfRange(InvalidInput):
    """The offset lies outside [earliest stored offset, high watermark]."""


class ConflictingOptions(InvalidInput):
    """The options contradict each other (or a required choice is missing)."""


class InvalidPolicy(InvalidInput):
    """An alarm, autoscaling or cleanup setting is not valid."""


class InvalidAccount(InvalidInput):
    """A MySQL account is USER@HOST with USER matching `[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}`
    and HOST matching `[A-Za-z0-9%_.:/-]{1,255}`: both are written into GRANT statements,
    which take no placeholders for accounts."""


class InvalidPassword(InvalidInput):
    """A password has 12 to 1024 characters and is not the account's name."""


class InvalidCursor(InvalidInput):
    """A page cursor must be the next_after of an earlier page (or a name to list after)."""


class UnsupportedGroup(InvalidInput):
    """The operation does not apply to this kind of group (broadcast groups keep their
    cursors in memory; ordered groups take no out-of-order redelivery)."""


class InvalidTransaction(InvalidInput):
    """A transactional send was given what cannot carry it: neither a SQLAlchemy Session
    or Connection nor a PyMySQL connection, or one in autocommit."""


class ForeignTransaction(InvalidTransaction):
    """A transactional send's connection reaches another server than the one that holds
    this ems database: its transaction cannot hold ems's rows."""


class InvalidSchedule(InvalidInput):
    """A scheduled send takes delay= (seconds or a timedelta, from 0 up to EMS_MAX_DELAY)
    or deliver_at= (a datetime with its time zone, at most EMS_MAX_DELAY ahead), not
    both."""


# -- lookups ---------------------------------------------------------------------------


class NotFound(EmsError, LookupError):
    """The object does not exist."""


class UnknownTopic(NotFound):
    """The topic does not exist."""


class UnknownPartition(NotFound):
    """The topic has no such partition."""


class UnknownGroup(NotFound):
    """The consumer group does not exist."""


class TopicDeleting(UnknownTopic):
    """The topic is being deleted: it takes no message and no consumer. Running the delete
    again finishes it."""


class GroupDeleting(UnknownGroup):
    """The consumer group is being deleted: no consumer can join it. Running the delete
    again finishes it."""


class UnknownStreamQuery(NotFound):
    """No streaming query of that name has recorded a position (the ems source records
    one only for queries given the ems.query.name option)."""


class UnknownMessage(NotFound):
    """No such message (it may have been purged by retention)."""


class UnknownDeadLetter(NotFound):
    """No such dead letter."""


class UnknownJob(NotFound):
    """No such cleanup job."""


class UnknownAlarm(NotFound):
    """No such alarm."""


class UnknownAccount(NotFound):
    """No MySQL account has this user and host; create it first (CREATE USER)."""


class MessagePurged(UnknownMessage):
    """The dead letter's original message was purged by retention, so it cannot go back
    to its group's retry table; resend it to the topic instead. Nothing was changed."""


class OffsetsPurged(UnknownMessage):
    """Offsets a stream still had to read were purged by retention (a Spark query started
    from, or restarted at, offsets below the partition's low watermark). Nothing was read
    past them; start again from offsets still stored, or let the query skip the purged
    range (option failOnDataLoss=false)."""


class AlreadyExists(EmsError):
    """The object already exists."""


class TopicExists(AlreadyExists):
    """A topic with this name already exists."""


class PlanRefused(EmsError):
    """A previewed change was not applied: its preview expired, was applied already, was
    issued to someone else, or the state it was computed from changed. Nothing was changed;
    preview again."""


class PlanExpired(PlanRefused):
    """The preview is unknown, expired, or was applied already."""


class PlanChanged(PlanRefused):
    """The state the preview was computed from changed before the apply."""


# -- servers ---------------------------------------------------------------------------


class ServerUnavailable(EmsError, ConnectionError):
    """A server could not be reached after bounded retries."""


class DatabaseUnavailable(ServerUnavailable):
    """The MySQL server could not be reached."""


class DatabaseReadOnly(DatabaseUnavailable):
    """The MySQL server refuses writes (read_only: a failover or maintenance in progress).
    Nothing of the statement was written; like an unreachable server, it passes, so
    callers retry."""


class RedisUnavailable(ServerUnavailable):
    """The Redis server could not be reached."""


class RedisOutcomeUnknown(RedisUnavailable):
    """The connection to Redis failed after a command that must not run twice (an offset
    allocation) may have reached it; whether Redis ran it is unknown, so it was not sent
    again. The producer re-seeds its counters from MySQL and allocates anew."""


class SendTimeout(ServerUnavailable):
    """A send could not be completed within its bound (EMS_SEND_TIMEOUT): it retried
    through a lost or failing-over Redis or database node, or a server taking no writes,
    and the server did not come back in time. The last failure is its __cause__. The
    messages may or may not be stored: an insert whose reply was lost may have committed;
    a send that returned is always stored, and one message is never stored twice."""


class SparkUnavailable(ServerUnavailable):
    """Spark cannot start here: pyspark or a Java runtime is missing."""


class JdbcDriverMissing(SparkUnavailable):
    """The JDBC driver jar for MySQL was not found (install libmariadb-java or set
    EMS_JDBC_JAR)."""


class SparkJobFailed(EmsError):
    """A Spark job failed; a rerun resumes where it stopped."""


class JobAlreadyRunning(EmsError):
    """Another run of this job holds its lock."""


class RedisReplyError(EmsError):
    """Redis answered a command with an error (out of memory, read-only replica, a
    refused password, a counter that holds no integer)."""


class StoreError(EmsError):
    """The database rejected a statement."""


class ClusterMisconfigured(StoreError):
    """A node of the database cluster lacks a setting ems needs (see the message)."""


class LockConflict(StoreError):
    """A deadlock or lock-wait timeout; the statement may be retried."""


class OffsetConflict(StoreError):
    """Offsets could not be allocated without conflict after repeated attempts."""


class GroupBusy(EmsError):
    """The group could not be paused within the timeout: its members did not release their
    partitions. Nothing was changed, and the group was resumed."""


class InUse(EmsError):
    """The object has consumers with live leases; nothing was changed."""


class TopicInUse(InUse):
    """A group subscribed to the topic has members with live leases, so the topic is not
    deleted (stop them, wait for their leases to expire, or force the delete). Nothing was
    changed."""


class GroupInUse(InUse):
    """The group has members with live leases, so it is not deleted (stop them, or wait for
    their leases to expire). Nothing was changed."""


class JobInterrupted(EmsError):
    """The cleanup job stopped at a chunk boundary: its scheduler is shutting down. What
    it did so far stays done; the next run carries on."""


class ScaleBackendError(EmsError):
    """The autoscaling backend (e.g. the Kubernetes API) rejected or failed the change."""


# -- processes -------------------------------------------------------------------------


class WorkersFailing(EmsError):
    """A worker process kept failing soon after its start: the supervisor gave up."""
