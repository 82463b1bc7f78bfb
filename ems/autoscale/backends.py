"""Where a scaling decision goes: `log` only records it; `kubernetes` patches the
Deployment's scale subresource with the official client.

Every failure of a backend is a ScaleBackendError: the leader records it with the
decision and carries on.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any, Protocol

from ems.exceptions import ScaleBackendError
from ems.values.autoscale import ScaleBackendName, ScalePolicy

if TYPE_CHECKING:
    from ems.config import Settings

log = logging.getLogger(__name__)

DEFAULT_NAMESPACE = "default"


class ScaleBackend(Protocol):
    name: ScaleBackendName

    def current(self, live_members: int) -> int:
        """The replicas running now."""

    def scale(self, current: int, desired: int) -> bool:
        """Set the replicas; whether the count changed. Raises ScaleBackendError."""


class LogBackend:
    """Records decisions only: the replicas are the group's live members."""

    name: ScaleBackendName = "log"

    def current(self, live_members: int) -> int:
        return live_members

    def scale(self, current: int, desired: int) -> bool:
        if desired != current:
            log.info("autoscale (log backend): %d -> %d replicas", current, desired)
        return desired != current


class KubernetesBackend:
    """Reads and patches apps/v1 Deployment `deployment` in `namespace` through its scale
    subresource. Configured from a kubeconfig file when one is given, else in-cluster
    (the pod's service account). Each request gives up after `timeout` seconds: the
    leader decides on the membership thread, which must get back to renewing."""

    name: ScaleBackendName = "kubernetes"

    def __init__(
        self, namespace: str, deployment: str, *, kubeconfig: str | None, timeout: float
    ) -> None:
        self.namespace = namespace
        self.deployment = deployment
        self.kubeconfig = kubeconfig
        self.timeout = timeout
        self._api: Any = None

    def current(self, live_members: int) -> int:
        scale = self._call("read", lambda api: api.read_namespaced_deployment_scale)
        return int(scale.spec.replicas or 0)

    def scale(self, current: int, desired: int) -> bool:
        if desired == current:
            return False
        body = {"spec": {"replicas": desired}}
        scale = self._call("patch", lambda api: api.patch_namespaced_deployment_scale, body)
        if int(scale.spec.replicas or 0) != desired:
            raise ScaleBackendError(
                f"deployment {self.namespace}/{self.deployment} kept "
                f"{scale.spec.replicas} replicas instead of {desired}"
            )
        log.info(
            "scaled deployment %s/%s: %d -> %d", self.namespace, self.deployment, current, desired
        )
        return True

    def _call(self, verb: str, method: Any, *body: object) -> Any:
        where = f"deployment {self.namespace}/{self.deployment}"
        try:
            api = self._client()
            return method(api)(
                self.deployment, self.namespace, *body, _request_timeout=self.timeout
            )
        except ScaleBackendError:
            raise
        except Exception as exc:  # the client raises its own and urllib3's errors
            raise ScaleBackendError(
                f"cannot {verb} the scale of {where}: {_describe(exc)}"
            ) from exc

    def _client(self) -> Any:
        if self._api is None:
            from kubernetes import client, config  # imported here: only this backend needs it

            configuration = client.Configuration()
            if self.kubeconfig:
                config.load_kube_config(  # type: ignore[no-untyped-call]
                    config_file=self.kubeconfig, client_configuration=configuration
                )
            else:
                config.load_incluster_config(  # type: ignore[no-untyped-call]
                    client_configuration=configuration
                )
            configuration.retries = False  # one attempt, bounded by the timeout
            self._api = client.AppsV1Api(client.ApiClient(configuration))
        return self._api


def _describe(exc: Exception) -> str:
    """The HTTP status and the API's Status message, or the error itself."""
    status = getattr(exc, "status", None)
    if not isinstance(status, int):
        return f"{type(exc).__name__}: {exc}"
    said = f"HTTP {status} {getattr(exc, 'reason', None) or ''}".strip()
    try:
        message = json.loads(getattr(exc, "body", None) or "{}").get("message")
    except (ValueError, AttributeError):
        message = None
    return f"{said}: {message}" if message else said


def backend_for(policy: ScalePolicy, settings: Settings) -> ScaleBackend:
    """The backend a policy names."""
    if policy.backend == "kubernetes":
        if not policy.deployment:
            raise ScaleBackendError("the kubernetes backend needs a deployment")
        return KubernetesBackend(
            policy.namespace or DEFAULT_NAMESPACE,
            policy.deployment,
            kubeconfig=settings.kubeconfig,
            timeout=settings.kube_timeout,
        )
    return LogBackend()
