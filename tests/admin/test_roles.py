"""The role matrix on every route: each principal (viewer, operator, admin; by session,
API token and trusted proxy header) under every mode (normal, read-only, hidden bodies)
reaches what its role allows and gets 403 elsewhere."""

from __future__ import annotations

import pytest
from flask import Flask
from flask.testing import FlaskClient

from ems.admin.capabilities import PUBLIC, READ_BODIES, RESEND
from ems.admin.guard import required, requires
from ems.consumer.groups import ensure_group
from ems.store import Store
from tests.admin.conftest import MakeApp, bearer, csrf_token, login
from tests.integration import seed

EVERYONE = {"viewer", "operator", "admin"}
#: Every private route, with the capability it needs and the roles that reach it in
#: every mode (nothing here changes state, so read-only and hidden bodies change nothing).
ROUTES = {
    "/": ("read", EVERYONE),
    "/api/v1/overview": ("read", EVERYONE),
    "/users": ("read_accounts", {"admin"}),
    "/api/v1/users": ("read_accounts", {"admin"}),
    "/api/v1/tokens": ("read_accounts", {"admin"}),
    "/topics": ("read", EVERYONE),
    "/api/v1/topics": ("read", EVERYONE),
    "/topics/<name>": ("read", EVERYONE),
    "/api/v1/topics/<name>": ("read", EVERYONE),
    "/groups": ("read", EVERYONE),
    "/api/v1/groups": ("read", EVERYONE),
    "/groups/<name>": ("read", EVERYONE),
    "/api/v1/groups/<name>": ("read", EVERYONE),
    "/topic": ("read", EVERYONE),
    "/api/v1/topic": ("read", EVERYONE),
    "/group": ("read", EVERYONE),
    "/api/v1/group": ("read", EVERYONE),
    "/streaming-queries": ("read", EVERYONE),
    "/api/v1/streaming-queries": ("read", EVERYONE),
    "/streaming-queries/<name>": ("read", EVERYONE),
    "/api/v1/streaming-queries/<name>": ("read", EVERYONE),
    "/streaming-query": ("read", EVERYONE),
    "/api/v1/streaming-query": ("read", EVERYONE),
    "/reset": ("read", EVERYONE),
    "/dead-letters": ("read", EVERYONE),
    "/api/v1/dead-letters": ("read", EVERYONE),
    "/dead-letters/<int:dead_id>": ("read", EVERYONE),
    "/api/v1/dead-letters/<int:dead_id>": ("read", EVERYONE),
    "/messages": ("read", EVERYONE),
    "/api/v1/messages": ("read", EVERYONE),
    "/messages/<topic>/<partition>/<offset>": ("read", EVERYONE),
    "/api/v1/messages/<topic>/<partition>/<offset>": ("read", EVERYONE),
    "/messages/id/<message_id>": ("read", EVERYONE),
    "/api/v1/messages/id/<message_id>": ("read", EVERYONE),
    "/message": ("read", EVERYONE),
    "/api/v1/message": ("read", EVERYONE),
    "/messages/<topic>/<partition>/<offset>/raw": ("download_bodies", {"operator", "admin"}),
    "/messages/id/<message_id>/raw": ("download_bodies", {"operator", "admin"}),
    "/message/raw": ("download_bodies", {"operator", "admin"}),
    "/groups/<name>/lag": ("read", EVERYONE),
    "/api/v1/groups/<name>/lag": ("read", EVERYONE),
    "/group/lag": ("read", EVERYONE),
    "/api/v1/group/lag": ("read", EVERYONE),
    "/topics/<name>/volume": ("read", EVERYONE),
    "/api/v1/topics/<name>/volume": ("read", EVERYONE),
    "/topic/volume": ("read", EVERYONE),
    "/api/v1/topic/volume": ("read", EVERYONE),
    "/ranking": ("read", EVERYONE),
    "/api/v1/ranking": ("read", EVERYONE),
    "/alarms": ("read", EVERYONE),
    "/api/v1/alarms": ("read", EVERYONE),
    "/autoscale": ("read", EVERYONE),
    "/api/v1/autoscale": ("read", EVERYONE),
    "/audit": ("read_accounts", {"admin"}),
    "/api/v1/audit": ("read_accounts", {"admin"}),
}
#: Every private route that changes state (POST only), with the capability it needs and
#: the roles that reach it outside read-only mode (in read-only mode: nobody). The matrix
#: posts an empty form: a role that may reach the route gets anything but 401/403 (an
#: empty form is a 400), the others a 403, and nothing changes.
OPERATORS = {"operator", "admin"}
CHANGES: dict[str, tuple[str, set[str]]] = {
    "/reset/preview": ("reset_offsets", OPERATORS),
    "/api/v1/reset/preview": ("reset_offsets", OPERATORS),
    "/reset/apply": ("reset_offsets", OPERATORS),
    "/api/v1/reset/apply": ("reset_offsets", OPERATORS),
    **{
        f"{api}/dead-letters/{action}/{step}": (capability, allowed)
        for action, capability, allowed in (
            ("resend", "resend", OPERATORS),
            ("replay", "replay", OPERATORS),
            ("purge", "purge", {"admin"}),
        )
        for api in ("", "/api/v1")
        for step in ("preview", "apply")
    },
    **{
        f"{api}/{path}/{step}": ("manage_accounts", {"admin"})
        for path in ("users/add", "users/role", "users/remove", "tokens/create", "tokens/revoke")
        for api in ("", "/api/v1")
        for step in ("preview", "apply")
    },
    "/alarms/ack": ("ack_alarms", OPERATORS),
    "/api/v1/alarms/ack": ("ack_alarms", OPERATORS),
    **{
        f"{api}/{path}/{step}": (capability, {"admin"})
        for path, capability in (
            ("topics/alter", "alter_topics"),
            ("topics/delete", "purge"),
            ("groups/delete", "purge"),
            ("streaming-queries/drop", "purge"),
            ("partitions", "alter_topics"),
        )
        for api in ("", "/api/v1")
        for step in ("preview", "apply")
    },
}
#: What the rules' variables are filled with when the matrix visits them (the fixtures
#: seed a topic and a group of these names).
ARGUMENTS = {
    "<name>": "matrix",
    "<int:dead_id>": "4343",
    "<topic>": "matrix",
    "<partition>": "0",
    "<offset>": "0",
    "<message_id>": "4242",
}
#: The rules that take their message by query.
MESSAGE_QUERY = {"/message", "/api/v1/message", "/message/raw"}
MODES = {
    "normal": {},
    "read-only": {"admin_read_only": True},
    "hide-bodies": {"admin_hide_bodies": True},
}
#: The chart rules that take the name from ?name=.
BY_QUERY = {"/group/lag", "/api/v1/group/lag", "/topic/volume", "/api/v1/topic/volume"}
BY_QUERY |= {"/streaming-query", "/api/v1/streaming-query"}
NAMES = {"viewer": "vera", "operator": "otto", "admin": "ada"}


def test_the_table_covers_every_private_route(app: Flask) -> None:
    private, changing = {}, {}
    for rule in app.url_map.iter_rules():
        capability = required(app.view_functions[rule.endpoint])
        if capability == PUBLIC:
            continue
        assert rule.methods is not None
        methods = rule.methods - {"HEAD", "OPTIONS"}
        if methods == {"GET"}:
            private[rule.rule] = capability
        else:
            assert methods == {"POST"}, rule.rule
            changing[rule.rule] = capability
    assert private == {path: needs for path, (needs, _) in ROUTES.items()}
    assert changing == {path: needs for path, (needs, _) in CHANGES.items()}


@pytest.fixture(autouse=True)
def _matrix_objects(store: Store) -> None:
    """A topic, a group and a streaming query named "matrix", for the rules that name
    one, a message at offset 0 of its partition 0 (id 4242) and a dead letter (id 4343)."""
    topic = store.topics.create("matrix", 1, 24, 1024)
    group = ensure_group(store, "matrix", topic, seed.options())
    store.stream_queries.record("matrix", [(topic.id, 0, 0)])
    seed.sql(
        store,
        "INSERT INTO dead_message (id, group_id, topic_id, partition_no, offset_no, message_id, "
        "body, attempts) VALUES (4343, %s, %s, 0, 0, 1, 'x', 1)",
        (group.id, topic.id),
    )
    seed.sql(
        store,
        "INSERT INTO message (id, topic_id, partition_no, offset_no, body) "
        "VALUES (%s, %s, 0, 0, 'm')",
        (ARGUMENTS["<message_id>"], topic.id),
    )


def _filled(rule: str) -> str:
    """The path the matrix visits for a rule (the ?name= forms get the name there)."""
    if rule in {"/topic", "/api/v1/topic", "/group", "/api/v1/group"} | BY_QUERY:
        return f"{rule}?name={ARGUMENTS['<name>']}"
    if rule == "/reset":
        return f"{rule}?group={ARGUMENTS['<name>']}"
    if rule in MESSAGE_QUERY:
        return f"{rule}?topic={ARGUMENTS['<topic>']}&partition=0&offset=0"
    for variable, value in ARGUMENTS.items():
        rule = rule.replace(variable, value)
    return rule


def _check(
    client: FlaskClient,
    role: str,
    headers: dict[str, str] | None = None,
    *,
    read_only: bool = False,
) -> None:
    for rule, (_, allowed) in CHANGES.items():
        path = _filled(rule)
        response = client.post(path, headers=headers or {}, data={})
        may = role in allowed and not read_only
        if may:
            assert response.status_code not in {401, 403}, (role, path, response.status_code)
        else:
            assert response.status_code == 403, (role, path, response.status_code)
    for rule, (_, allowed) in ROUTES.items():
        path = _filled(rule)
        response = client.get(path, headers=headers or {})
        expected = 200 if role in allowed else 403
        assert response.status_code == expected, (role, path, response.status_code)
        if path.startswith("/api/"):
            assert response.is_json
            if expected == 403:
                assert set(response.get_json()) == {"error"}


@pytest.mark.parametrize("mode", MODES)
def test_tokens(make_app: MakeApp, tokens: dict[str, str], mode: str) -> None:
    client = make_app(**MODES[mode]).test_client()
    for role, secret in tokens.items():
        _check(client, role, bearer(secret), read_only=mode == "read-only")


@pytest.mark.parametrize("mode", MODES)
def test_sessions(make_app: MakeApp, users: dict[str, str], mode: str) -> None:
    app = make_app(**MODES[mode])
    for role, name in NAMES.items():
        client = app.test_client()
        assert login(client, name).status_code == 302
        _check(client, role, {"X-CSRFToken": csrf_token(client)}, read_only=mode == "read-only")
        page = client.get("/").get_data(as_text=True)
        assert ("Read-only mode" in page) == (mode == "read-only")
        assert (">Users</a>" in page) == (role == "admin")


@pytest.mark.parametrize("mode", MODES)
def test_a_trusted_proxy_header(make_app: MakeApp, mode: str) -> None:
    app = make_app(
        admin_trusted_header="X-Groups",
        admin_trusted_roles=(("readers", "viewer"), ("ops", "operator"), ("sre", "admin")),
        **MODES[mode],
    )
    client = app.test_client()
    for group, role in (("readers", "viewer"), ("ops", "operator"), ("sre", "admin")):
        headers = {"X-Groups": group, "X-CSRFToken": csrf_token(client)}
        _check(client, role, headers, read_only=mode == "read-only")
    for value in ("", "dev", "SRE", "sre,ops"):
        for rule in ROUTES:
            response = client.get(_filled(rule), headers={"X-Groups": value})
            assert response.status_code == 403, (value, rule)
        for rule in CHANGES:
            response = client.post(_filled(rule), headers={"X-Groups": value})
            assert response.status_code == 403, (value, rule)


def test_the_trusted_header_is_ignored_when_off(app: Flask, tokens: dict[str, str]) -> None:
    client = app.test_client()
    response = client.get("/api/v1/users", headers={"X-Groups": "sre"})
    assert response.status_code == 401


@pytest.fixture
def probe_app(make_app: MakeApp) -> MakeApp:
    """An app with two probe views: one needs READ_BODIES, one (POST) RESEND."""

    def make(**changes: object) -> Flask:
        app = make_app(**changes)
        app.add_url_rule(
            "/api/v1/probe/bodies", "bodies", requires(READ_BODIES)(lambda: {"ok": True})
        )
        app.add_url_rule(
            "/api/v1/probe/resend",
            "resend",
            requires(RESEND)(lambda: {"ok": True}),
            methods=["POST"],
        )
        return app

    return make


@pytest.mark.parametrize("mode", MODES)
def test_read_only_and_hidden_bodies_through_the_guard(
    probe_app: MakeApp, tokens: dict[str, str], mode: str
) -> None:
    client = probe_app(**MODES[mode]).test_client()
    for role, secret in tokens.items():
        bodies = client.get("/api/v1/probe/bodies", headers=bearer(secret)).status_code
        hidden = mode == "hide-bodies" and role == "viewer"
        assert bodies == (403 if hidden else 200), (role, mode)
        resend = client.post("/api/v1/probe/resend", headers=bearer(secret)).status_code
        may = role in {"operator", "admin"} and mode != "read-only"
        assert resend == (200 if may else 403), (role, mode)


def test_a_session_needs_the_csrf_header_to_change_state(
    probe_app: MakeApp, users: dict[str, str], tokens: dict[str, str]
) -> None:
    client = probe_app().test_client()
    login(client, "otto")
    refused = client.post("/api/v1/probe/resend")
    assert refused.status_code == 400
    assert "CSRF" in refused.get_json()["error"]
    wrong = client.post("/api/v1/probe/resend", headers={"X-CSRFToken": "forged"})
    assert wrong.status_code == 400
    token = csrf_token(client)
    assert client.post("/api/v1/probe/resend", headers={"X-CSRFToken": token}).status_code == 200
    # An API token needs none: a browser never sends one by itself.
    plain = probe_app().test_client()
    assert plain.post("/api/v1/probe/resend", headers=bearer(tokens["operator"])).status_code == 200
