"""A local HTTP server that speaks the apps/v1 Deployment scale subresource, for testing
the kubernetes scale backend with the real client.

GET and PATCH /apis/apps/v1/namespaces/{ns}/deployments/{name}/scale answer with an
autoscaling/v1 Scale object; an unknown deployment gets 404 with a Status object, a
missing or wrong bearer token 401, a PATCH that is not a strategic-merge or merge patch
of {"spec": {"replicas": N}} 415 or 422. Every request is recorded.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

TOKEN = "ems-test-token"
_PATH = re.compile(r"^/apis/apps/v1/namespaces/([^/]+)/deployments/([^/]+)/scale$")
_PATCH_TYPES = ("application/strategic-merge-patch+json", "application/merge-patch+json")


@dataclass
class Seen:
    method: str
    path: str
    content_type: str | None
    body: Any


@dataclass
class FakeKubernetes:
    """The cluster's state: replicas per (namespace, deployment), and what was asked."""

    deployments: dict[tuple[str, str], int] = field(default_factory=dict)
    requests: list[Seen] = field(default_factory=list)
    #: An HTTP status every PATCH answers with instead of applying it (None: apply).
    fail_patches: int | None = None
    #: Seconds between applying a request and answering it, as a real API server's
    #: latency: the deployment has changed before the client hears so.
    answer_delay: float = 0.0
    port: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def patches(self) -> list[Seen]:
        return [r for r in self.requests if r.method == "PATCH"]

    def write_kubeconfig(self, path: Path, token: str = TOKEN) -> Path:
        """A kubeconfig whose current context points at this server (JSON is YAML)."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "tester", "user": {"token": token}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "tester"}}],
            "current-context": "fake",
        }
        path.write_text(json.dumps(config))
        return path


def scale_object(namespace: str, name: str, replicas: int) -> dict[str, Any]:
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{namespace}-{name}",
            "resourceVersion": "1",
            "creationTimestamp": "2026-11-22T00:00:00Z",
        },
        "spec": {"replicas": replicas},
        "status": {"replicas": replicas, "selector": f"app={name}"},
    }


def status_object(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


def _handler(state: FakeKubernetes) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self._serve("GET")

        def do_PATCH(self) -> None:
            self._serve("PATCH")

        def _serve(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            content_type = self.headers.get("Content-Type")
            with state.lock:
                state.requests.append(Seen(method, self.path, content_type, body))
                code, answer = self._answer(method, content_type, body)
            time.sleep(state.answer_delay)
            self._send(code, answer)

        def _answer(
            self, method: str, content_type: str | None, body: Any
        ) -> tuple[int, dict[str, Any]]:
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                return 401, status_object(401, "Unauthorized", "Unauthorized")
            match = _PATH.match(self.path.split("?")[0])
            if match is None:
                return 404, status_object(404, "NotFound", "the server could not find it")
            ns, name = match.groups()
            if (ns, name) not in state.deployments:
                message = f'deployments.apps "{name}" not found'
                return 404, status_object(404, "NotFound", message)
            if method == "PATCH":
                return self._patch(ns, name, content_type, body)
            return 200, scale_object(ns, name, state.deployments[ns, name])

        def _patch(
            self, ns: str, name: str, content_type: str | None, body: Any
        ) -> tuple[int, dict[str, Any]]:
            if content_type not in _PATCH_TYPES:
                return 415, status_object(415, "UnsupportedMediaType", f"{content_type}")
            replicas = (body or {}).get("spec", {}).get("replicas")
            if not isinstance(replicas, int) or replicas < 0:
                return 422, status_object(422, "Invalid", f"bad patch {body!r}")
            if state.fail_patches is not None:
                return state.fail_patches, status_object(state.fail_patches, "Failure", "no")
            state.deployments[ns, name] = replicas
            return 200, scale_object(ns, name, replicas)

        def _send(self, code: int, answer: dict[str, Any]) -> None:
            data = json.dumps(answer).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


@contextmanager
def serve(state: FakeKubernetes) -> Iterator[FakeKubernetes]:
    """Run the server on a free local port while the block runs."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
