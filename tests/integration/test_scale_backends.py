"""The kubernetes scale backend, with the real client, against a local server that
speaks the apps/v1 scale API (tests/fake_kubernetes.py)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ems.autoscale.backends import KubernetesBackend
from ems.exceptions import ScaleBackendError
from tests.fake_kubernetes import FakeKubernetes, serve

PATCH_TYPES = ("application/strategic-merge-patch+json", "application/merge-patch+json")


@pytest.fixture
def cluster() -> Iterator[FakeKubernetes]:
    with serve(FakeKubernetes(deployments={("prod", "handlers"): 2})) as state:
        yield state


def backend(config: Path, name: str = "handlers") -> KubernetesBackend:
    return KubernetesBackend("prod", name, kubeconfig=str(config), timeout=2.0)


def test_reads_and_patches_the_deployment_scale(cluster: FakeKubernetes, tmp_path: Path) -> None:
    scaler = backend(cluster.write_kubeconfig(tmp_path / "config"))
    assert scaler.current(live_members=7) == 2
    assert scaler.scale(2, 5) is True
    assert cluster.deployments["prod", "handlers"] == 5
    (patch,) = cluster.patches()
    assert patch.path == "/apis/apps/v1/namespaces/prod/deployments/handlers/scale"
    assert patch.content_type in PATCH_TYPES
    assert patch.body == {"spec": {"replicas": 5}}
    assert scaler.current(live_members=0) == 5


def test_no_change_sends_no_patch(cluster: FakeKubernetes, tmp_path: Path) -> None:
    scaler = backend(cluster.write_kubeconfig(tmp_path / "config"))
    assert scaler.scale(2, 2) is False
    assert cluster.requests == []


def test_an_unknown_deployment_is_a_backend_error(cluster: FakeKubernetes, tmp_path: Path) -> None:
    scaler = backend(cluster.write_kubeconfig(tmp_path / "config"), name="missing")
    with pytest.raises(ScaleBackendError, match=r'404.*deployments.apps "missing" not found'):
        scaler.current(live_members=1)
    with pytest.raises(ScaleBackendError, match="404"):
        scaler.scale(1, 3)
    assert cluster.deployments == {("prod", "handlers"): 2}


def test_a_refused_patch_changes_nothing(cluster: FakeKubernetes, tmp_path: Path) -> None:
    cluster.fail_patches = 500
    scaler = backend(cluster.write_kubeconfig(tmp_path / "config"))
    with pytest.raises(ScaleBackendError, match=r"cannot patch.*HTTP 500"):
        scaler.scale(2, 4)
    assert cluster.deployments["prod", "handlers"] == 2


def test_a_wrong_token_is_a_backend_error(cluster: FakeKubernetes, tmp_path: Path) -> None:
    scaler = backend(cluster.write_kubeconfig(tmp_path / "config", token="wrong"))
    with pytest.raises(ScaleBackendError, match="401"):
        scaler.scale(2, 4)
    assert cluster.deployments["prod", "handlers"] == 2


def test_an_unreachable_api_fails_within_the_timeout(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    state = FakeKubernetes(port=port)
    scaler = backend(state.write_kubeconfig(tmp_path / "config"))
    started = time.monotonic()
    with pytest.raises(ScaleBackendError, match="cannot read"):
        scaler.current(live_members=1)
    assert time.monotonic() - started < 5


def test_a_missing_configuration_is_a_backend_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ScaleBackendError):
        backend(tmp_path / "absent").current(live_members=1)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    in_cluster = KubernetesBackend("prod", "handlers", kubeconfig=None, timeout=1.0)
    with pytest.raises(ScaleBackendError, match="cannot read"):
        in_cluster.current(live_members=1)
