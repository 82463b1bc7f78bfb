"""Declarative base with a naming convention, and shared column types."""

from __future__ import annotations

import datetime as dt
from typing import Annotated

from sqlalchemy import BigInteger, DateTime, Integer, MetaData, String, text
from sqlalchemy.dialects import mysql
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

TABLE_ARGS = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4", "mysql_collate": "utf8mb4_bin"}

# Microsecond timestamps; every default and expiry comes from the database clock.
Timestamp = DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")
BigId = BigInteger().with_variant(mysql.BIGINT(unsigned=True), "mysql", "mariadb")

bigint_pk = Annotated[int, mapped_column(BigId, primary_key=True, autoincrement=True)]
name_str = Annotated[str, mapped_column(String(128), nullable=False)]
NOW6 = text("CURRENT_TIMESTAMP(6)")
created_ts = Annotated[dt.datetime, mapped_column(Timestamp, nullable=False, server_default=NOW6)]
timestamp = Annotated[dt.datetime, mapped_column(Timestamp, nullable=False)]
optional_ts = Annotated[dt.datetime | None, mapped_column(Timestamp, nullable=True)]


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class GroupMessageRef:
    """Columns that name one message as seen by one consumer group."""

    group_id: Mapped[int] = mapped_column(BigId, nullable=False)
    topic_id: Mapped[int] = mapped_column(BigId, nullable=False)
    partition_no: Mapped[int] = mapped_column(Integer, nullable=False)
    offset_no: Mapped[int] = mapped_column(BigInteger, nullable=False)
