"""The busiest topics of the last hour or day (?window=hour|day), from the watermark
captures the snapshots job takes (never a count of messages): at most 100, with both
windows' volumes and how much of the window the captures cover. With its JSON twin."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify, render_template, request

from ems.admin.capabilities import READ
from ems.admin.guard import requires
from ems.admin.serialize import to_json
from ems.admin.services import services
from ems.ops.ranking import Ranking, TopicRank

bp = Blueprint("ranking", __name__)


def _top() -> tuple[str, Ranking, list[TopicRank]]:
    window = request.args.get("window", "hour")
    ranking, top = services().ranker.top(window)
    return window, ranking, top


@bp.get("/ranking")
@requires(READ)
def page() -> str:
    window, ranking, top = _top()
    return render_template("ranking.html", window=window, ranking=ranking, top=top)


@bp.get("/api/v1/ranking")
@requires(READ)
def api() -> Response:
    window, ranking, top = _top()
    return jsonify(
        {
            "window": window,
            "newest_capture": to_json(ranking.newest_capture),
            "capture_age_seconds": ranking.capture_age_seconds,
            "topics": to_json(top),
        }
    )
