"""A Flask order service with Flask-SQLAlchemy: the order row and its "order.created" event
in one MySQL transaction, through `db.session`.

Run: `flask --app examples.flask_orders run` with EMS_DATABASE_URL and EMS_REDIS_URL as for
every ems program and ORDERS_DATABASE_URL naming the service's own database on the same
server (e.g. mysql+pymysql://user:pw@db/shop). An order refused after its send is rolled
back, event and all.
"""

from __future__ import annotations

import json
import os

from flask import Flask, request
from flask_sqlalchemy import SQLAlchemy
from sqlalchemy import Integer, Numeric, String
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

import ems

TOPIC = "order.created"


class Base(DeclarativeBase):
    pass


db = SQLAlchemy(model_class=Base)


class Order(db.Model):  # type: ignore[name-defined,misc]
    __tablename__ = "orders"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    customer: Mapped[str] = mapped_column(String(64))
    total: Mapped[float] = mapped_column(Numeric(12, 2))


def create_app(producer: ems.Producer | None = None) -> Flask:
    app = Flask(__name__)
    app.config["SQLALCHEMY_DATABASE_URI"] = os.environ["ORDERS_DATABASE_URL"]
    db.init_app(app)
    with app.app_context():
        db.create_all()
    # One producer per process, shared by every request (it is thread-safe).
    app.extensions["ems"] = producer or ems.Producer(ems.Settings.from_env())

    @app.post("/orders")
    def create_order() -> tuple[dict[str, object], int]:
        body = request.get_json()
        order = Order(customer=str(body["customer"]), total=float(body["total"]))
        db.session.add(order)
        db.session.flush()  # the order's id
        event = json.dumps({"id": order.id, "customer": order.customer, "total": body["total"]})
        app.extensions["ems"].send(TOPIC, event, key=str(order.id), transaction=db.session)
        if order.total > 10_000:  # a check after the send: nothing of it is published
            db.session.rollback()
            return {"error": "orders over 10,000 need approval"}, 422
        db.session.commit()
        return {"id": order.id}, 201

    return app
