"""The console's blueprints, one per resource; each serves its HTML pages and its part
of the JSON API (/api/v1/...)."""

from __future__ import annotations

from flask import Blueprint

from ems.admin.views import (
    alarms,
    assets,
    audit_log,
    auth,
    autoscale,
    groups,
    health,
    overview,
    topics,
    users,
)

BLUEPRINTS: tuple[Blueprint, ...] = (
    health.bp,
    assets.bp,
    auth.bp,
    overview.bp,
    users.bp,
    topics.bp,
    groups.bp,
    alarms.bp,
    autoscale.bp,
    audit_log.bp,
)
