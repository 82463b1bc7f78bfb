"""The outbox of transactional publishing, and the row that names an ems installation.

A transactional send writes its messages into message_outbox inside the caller's own
transaction, without offsets: an open transaction then holds nothing but its own rows, and
no partition waits on it. After the commit a relay moves them into the message table with
offsets (ems.producer.relay), deleting them in the same transaction.
"""

from __future__ import annotations

from sqlalchemy import JSON, BigInteger, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from ems.models.base import TABLE_ARGS, Base, BigId, bigint_pk, created_ts, optional_ts
from ems.models.messages import Body, Key


class MessageOutbox(Base):
    """A message published in a caller's transaction and not yet given its offset.

    Its partition is chosen at send time (by key, else round robin), as for any send.
    The relay reads a topic's committed rows in id order (AUTO_INCREMENT: the order of the
    sends, within a transaction and between transactions that did not overlap). A
    scheduled send's row carries deliver_at (UTC, compared with the database clock): the
    relay moves it once that time has come, due rows in (deliver_at, id) order.
    """

    __tablename__ = "message_outbox"
    __table_args__ = (Index(None, "topic_id", "deliver_at", "id"), TABLE_ARGS)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    topic_id: Mapped[int] = mapped_column(BigId, nullable=False)
    partition_no: Mapped[int] = mapped_column(Integer, nullable=False)
    msg_key: Mapped[bytes | None] = mapped_column(Key, nullable=True)
    headers: Mapped[dict[str, str] | None] = mapped_column(JSON(none_as_null=True), nullable=True)
    body: Mapped[bytes] = mapped_column(Body, nullable=False)
    created_at: Mapped[created_ts]
    #: When the relay may move it (a send with delay= or deliver_at=); NULL: at once.
    deliver_at: Mapped[optional_ts]


class OutboxRelay(Base):
    """One row per topic that ever had transactional sends: relays of the topic take it
    FOR UPDATE SKIP LOCKED, so one moves its rows at a time (their order kept) while the
    others go on to other topics."""

    __tablename__ = "outbox_relay"
    __table_args__ = (TABLE_ARGS,)

    topic_id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=False)
    moved: Mapped[int] = mapped_column(BigInteger, nullable=False, server_default="0")
    moved_at: Mapped[optional_ts]


class Installation(Base):
    """The single row that names this ems database: a transactional send checks that the
    caller's connection reaches it (the same server, or a node of the same cluster)."""

    __tablename__ = "installation"
    __table_args__ = (TABLE_ARGS,)

    id: Mapped[bigint_pk]
    uuid: Mapped[str] = mapped_column(String(36), nullable=False)
    created_at: Mapped[created_ts]
