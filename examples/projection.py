"""An exactly-once projection (docs/transactions.md): IoT readings counted per project in
the service's own table, and an alert published for each reading over its threshold,
both in the transaction that settles the reading. A crash, a rebalance or a lost
connection can make a batch run twice; its counts and alerts commit once.

    EMS_DATABASE_URL=mysql+pymysql://root@127.0.0.1:3306/ems \\
    PROJECTION_DATABASE_URL=mysql+pymysql://root@127.0.0.1:3306/app \\
    python examples/projection.py

The projection's database lives on the server of ems's database (any schema of it).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable

from sqlalchemy import BigInteger, Float, String, create_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker

import ems

READINGS = "iot.readings"
ALERTS = "iot.alerts"
THRESHOLD = 80.0


class Base(DeclarativeBase):
    pass


class ProjectStats(Base):
    __tablename__ = "project_stats"

    project_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    readings: Mapped[int] = mapped_column(BigInteger)
    total: Mapped[float] = mapped_column(Float)


def handler(producer: ems.Producer) -> Callable[[ems.Delivery, Session], None]:
    def handle(delivery: ems.Delivery, session: Session) -> None:
        reading = json.loads(delivery.body)
        project, value = str(reading["project_id"]), float(reading["value"])
        stats = session.get(ProjectStats, project, with_for_update=True)
        if stats is None:
            stats = ProjectStats(project_id=project, readings=0, total=0.0)
            session.add(stats)
        stats.readings += 1
        stats.total += value
        if value > THRESHOLD:  # consume, transform, produce: in the same transaction
            alert = json.dumps({"project_id": project, "value": value, "offset": delivery.offset})
            producer.send(ALERTS, alert, key=project, transaction=session)

    return handle


def main(max_messages: int | None = None) -> int:
    """Run the projection until SIGTERM (or max_messages); the number handled."""
    engine = create_engine(os.environ["PROJECTION_DATABASE_URL"])
    Base.metadata.create_all(engine)
    admin = ems.TopicAdmin()
    try:
        admin.create(READINGS, partitions=4, exist_ok=True)
        admin.create(ALERTS, partitions=1, exist_ok=True)
    finally:
        admin.close()
    try:
        with ems.Producer() as producer:
            consumer = ems.Consumer(
                "projection",
                READINGS,
                handler(producer),
                start="earliest",
                transactional=sessionmaker(engine),
            )
            return consumer.run(max_messages)
    finally:
        engine.dispose()


if __name__ == "__main__":
    main()
