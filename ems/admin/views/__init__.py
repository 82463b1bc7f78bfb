"""The console's blueprints, one per resource; each serves its HTML pages and its part
of the JSON API (/api/v1/...)."""

from __future__ import annotations

from flask import Blueprint

from ems.admin.views import (
    account_changes,
    alarms,
    assets,
    audit_log,
    auth,
    autoscale,
    charts,
    dead_letters,
    groups,
    health,
    lifecycle,
    messages,
    overview,
    partitions,
    ranking,
    resets,
    stream_queries,
    topics,
    users,
)

BLUEPRINTS: tuple[Blueprint, ...] = (
    health.bp,
    assets.bp,
    auth.bp,
    overview.bp,
    users.bp,
    account_changes.bp,
    topics.bp,
    partitions.bp,
    ranking.bp,
    groups.bp,
    stream_queries.bp,
    resets.bp,
    lifecycle.bp,
    dead_letters.bp,
    messages.bp,
    charts.bp,
    alarms.bp,
    autoscale.bp,
    audit_log.bp,
)
