"""Message data with hostile values (a right-to-left override, an escape sequence, a
script tag, a NUL, a key that is not UTF-8) reads the same on a message's page, a dead
letter's page, the dead-letter list, the search results and their JSON twins: escaped
text or hex, base64 keys, never raw; from the one helper, ems.admin.bodies."""

from __future__ import annotations

import json

from flask.testing import FlaskClient

from ems.admin.bodies import body_view, error_text, message_json, preview
from ems.store import Store
from tests.admin.conftest import bearer
from tests.integration import seed

RTL = "\u202e"
SCRIPT = "<script>alert(1)</script>"
BAD_KEY = b"\xff\xfe\x00k"
BODY = f"pay {RTL}dlrow{RTL} {SCRIPT}\nline two".encode()
ESCAPES = b"\x1b[2Jcleared\x00"
HEADERS = {"h": f"a{RTL}b\nc {SCRIPT}"}
ERROR = f"ValueError: {RTL}txet{SCRIPT}\x1b[31m"


def test_the_helper_escapes_what_a_reader_cannot_see() -> None:
    view = body_view(BODY)
    assert view.kind == "escaped" and RTL not in view.text and "\\u202e" in view.text
    assert view.text.split("\n")[1] == "line two"  # lines stay lines
    assert body_view(ESCAPES).kind == "binary"
    shown = message_json(BAD_KEY, HEADERS, BODY)
    assert shown["key_encoding"] == "base64" and shown["key"] == "//4Aaw=="
    assert shown["body"]["kind"] == "escaped"
    assert RTL not in preview(BODY) and "\\n" in preview(BODY)
    assert error_text(ERROR) == "ValueError: \\u202etxet" + SCRIPT + "\\x1b[31m"


def _dead_letter(store: Store) -> int:
    topic = store.topics.create("t", 1, 24, 1024)
    seed.messages(store, topic, 0, range(2), age_hours=1)
    group = seed.group(store, "g", topic)
    seed.sql(
        store,
        "INSERT INTO dead_message (group_id, topic_id, partition_no, offset_no, message_id, "
        "msg_key, headers, body, attempts, last_error, last_traceback) "
        "VALUES (%s, %s, 0, 1, %s, %s, %s, %s, 3, %s, %s)",
        (
            group.id,
            topic.id,
            seed.message_id(store, topic, 0, 1),
            BAD_KEY,
            json.dumps(HEADERS),
            BODY,
            ERROR,
            f"Traceback\n  {ERROR}\n",
        ),
    )
    return int(seed.sql(store, "SELECT MAX(id) FROM dead_message")[0][0])


def _clean(page: str) -> None:
    assert RTL not in page and "\x1b" not in page and "\x00" not in page
    assert SCRIPT not in page and "\ufffd" not in page


def test_dead_letter_pages_and_api_show_hostile_values_escaped(
    client: FlaskClient, store: Store, tokens: dict[str, str]
) -> None:
    dead_id = _dead_letter(store)
    viewer = bearer(tokens["viewer"])
    page = client.get(f"/dead-letters/{dead_id}", headers=viewer).get_data(as_text=True)
    _clean(page)
    assert "//4Aaw==" in page and "\\u202edlrow" in page and "\\u202etxet" in page
    assert 'id="message-link" href="/messages/t/0/1"' in page
    listing = client.get("/dead-letters", headers=viewer).get_data(as_text=True)
    _clean(listing)
    assert "\\u202etxet" in listing
    found = client.get(f"/api/v1/dead-letters/{dead_id}", headers=viewer).get_json()
    assert found["key"] == "//4Aaw==" and found["key_encoding"] == "base64"
    assert found["body"]["kind"] == "escaped" and RTL not in found["body"]["text"]
    assert found["message_url"] == "/messages/t/0/1"
    message = client.get("/messages/t/0/1", headers=viewer).get_data(as_text=True)
    _clean(message)
    assert f'href="/dead-letters/{dead_id}"' in message  # the trace links back


def test_message_pages_and_search_show_hostile_values_escaped(
    client: FlaskClient, store: Store, tokens: dict[str, str]
) -> None:
    topic = store.topics.create("h", 1, 24, 1024)
    seed.sql(
        store,
        "INSERT INTO message (topic_id, partition_no, offset_no, msg_key, headers, body) "
        "VALUES (%s, 0, 0, %s, %s, %s), (%s, 0, 1, NULL, NULL, %s)",
        (topic.id, BAD_KEY, json.dumps(HEADERS), BODY, topic.id, ESCAPES),
    )
    viewer = bearer(tokens["viewer"])
    for path in ("/messages/h/0/0", "/messages/h/0/1", "/messages?topic=h&partition=0"):
        page = client.get(path, headers=viewer).get_data(as_text=True)
        _clean(page)
    results = client.get("/messages?topic=h&partition=0", headers=viewer).get_data(as_text=True)
    assert "pay \\u202edlrow" in results and "base64:" in results
    items = client.get("/api/v1/messages?topic=h&partition=0", headers=viewer).get_json()["items"]
    assert [i["key_encoding"] for i in items] == ["base64", None]
    assert RTL not in items[0]["preview"] and items[1]["preview"] == "\\x1b[2Jcleared\\x00"
    detail = client.get("/api/v1/messages/h/0/0", headers=viewer).get_json()
    assert detail["body"]["kind"] == "escaped" and detail["key"] == "//4Aaw=="
