"""docker/compose.yaml and docker/Dockerfile, checked without a Docker engine: the compose
file against the Compose Specification's schema and by parsing it, the Galera nodes'
start-up script by running it."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from ems.config import Settings
from ems.store.nodes import settings_problems
from tests.faults.servers import free_port

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
DOCKERFILE = DOCKER / "Dockerfile"
IGNORE_FILE = DOCKER / "Dockerfile.dockerignore"
EMS_NAME = re.compile(r"\bEMS_[A-Z0-9_]+")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return dict(compose["services"])


@pytest.fixture(scope="module")
def ems_services(services: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The services built from docker/Dockerfile."""
    built = {
        name: svc
        for name, svc in services.items()
        if isinstance(svc.get("build"), dict)
        and Path(svc["build"].get("dockerfile", "")).name == "Dockerfile"
    }
    assert {"migrate", "demo"} <= built.keys()
    return built


@pytest.fixture(scope="module")
def dockerfile() -> list[str]:
    """Dockerfile instructions, one per entry, with continuation lines joined."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    return [line.strip() for line in text.splitlines() if line.strip() and line[0] != "#"]


def _environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {str(k): str(v) for k, v in env.items()}


def _instructions(dockerfile: list[str], keyword: str) -> list[str]:
    return [line.split(None, 1)[1] for line in dockerfile if line.split()[0].upper() == keyword]


def test_services_exist(services: dict[str, dict[str, Any]]) -> None:
    assert {"mysql", "redis", "migrate", "demo"} <= services.keys()


def test_no_obsolete_version_key(compose: dict[str, Any]) -> None:
    assert "version" not in compose


def test_server_images(services: dict[str, dict[str, Any]]) -> None:
    assert services["mysql"]["image"].startswith("mysql:8.4")
    assert services["redis"]["image"].startswith("redis:7")


@pytest.mark.parametrize("name", ["mysql", "redis"])
def test_servers_have_healthchecks(services: dict[str, dict[str, Any]], name: str) -> None:
    test = services[name].get("healthcheck", {}).get("test")
    assert test, f"{name} has no healthcheck test"
    command = " ".join(test) if isinstance(test, list) else test
    assert {"mysql": "mysqladmin ping", "redis": "redis-cli ping"}[name] in command


def test_mysql_settings(services: dict[str, dict[str, Any]]) -> None:
    mysql = services["mysql"]
    env = _environment(mysql)
    assert env["MYSQL_DATABASE"] == "ems"
    assert "MYSQL_ROOT_PASSWORD" in env or "MYSQL_ALLOW_EMPTY_PASSWORD" in env
    command = mysql["command"]
    command = " ".join(command) if isinstance(command, list) else command
    assert "--character-set-server=utf8mb4" in command
    assert "--collation-server=utf8mb4_bin" in command
    assert mysql.get("volumes"), "mysql data should live in a named volume"


def test_ems_services_reach_the_compose_servers(
    services: dict[str, dict[str, Any]], ems_services: dict[str, dict[str, Any]]
) -> None:
    password = _environment(services["mysql"]).get("MYSQL_ROOT_PASSWORD")
    for name, service in ems_services.items():
        if "ha" in service.get("profiles", ()):
            continue  # test_the_ha_profile_reaches_the_cluster_and_the_sentinels
        env = _environment(service)
        db = urlsplit(env["EMS_DATABASE_URL"])
        assert db.scheme == "mysql+pymysql", name
        assert db.hostname == "mysql", name
        assert db.path == "/" + _environment(services["mysql"])["MYSQL_DATABASE"], name
        assert (db.password or None) == (password or None), f"{name}: root password differs"
        assert urlsplit(env["EMS_REDIS_URL"]).hostname == "redis", name


def test_every_ems_variable_is_read_by_config() -> None:
    known = set(EMS_NAME.findall((ROOT / "ems" / "config.py").read_text()))
    named = set(EMS_NAME.findall((DOCKER / "compose.yaml").read_text()))
    assert named, "compose names no EMS_* variable"
    assert named <= known, f"not read by ems/config.py: {sorted(named - known)}"


def test_migrate_waits_for_mysql(services: dict[str, dict[str, Any]]) -> None:
    migrate = services["migrate"]
    assert migrate["command"] == ["db", "upgrade"]
    assert migrate["depends_on"]["mysql"]["condition"] == "service_healthy"
    assert migrate.get("restart") == "no"


def test_demo_waits_for_servers_and_migration(services: dict[str, dict[str, Any]]) -> None:
    demo = services["demo"]
    assert demo["command"][0] == "demo"
    depends = demo["depends_on"]
    assert depends["mysql"]["condition"] == "service_healthy"
    assert depends["redis"]["condition"] == "service_healthy"
    assert depends["migrate"]["condition"] == "service_completed_successfully"


def test_admin_console_serves_on_the_host_loopback_with_a_health_check(
    services: dict[str, dict[str, Any]],
) -> None:
    admin = services["admin"]
    assert admin["command"][:2] == ["admin", "serve"]
    port = admin["command"][admin["command"].index("--port") + 1]
    # Published on the host's loopback only: the console is not exposed to the network.
    assert admin["ports"] == [f"127.0.0.1:{port}:{port}"]
    probe = " ".join(admin["healthcheck"]["test"])
    assert f"127.0.0.1:{port}/healthz" in probe
    assert "EMS_ADMIN_SECRET_KEY" in _environment(admin)
    assert admin["profiles"] == ["admin"], "started only when asked for"
    depends = admin["depends_on"]
    assert depends["migrate"]["condition"] == "service_completed_successfully"
    assert depends["mysql"]["condition"] == depends["redis"]["condition"] == "service_healthy"


def test_build_paths_exist(ems_services: dict[str, dict[str, Any]]) -> None:
    for name, service in ems_services.items():
        context = (DOCKER / service["build"]["context"]).resolve()
        assert context == ROOT, f"{name}: build context should be the repo root"
        assert (context / service["build"]["dockerfile"]).resolve() == DOCKERFILE


def test_dockerfile_base_user_and_entrypoint(dockerfile: list[str]) -> None:
    assert any(image.startswith("python:3.11") for image in _instructions(dockerfile, "FROM"))
    users = _instructions(dockerfile, "USER")
    assert users, "the image runs as root"
    assert users[-1].split(":")[0] not in ("root", "0")
    assert _instructions(dockerfile, "ENTRYPOINT")[-1] in ('["ems"]', "ems")


def test_dockerfile_keeps_migrations_next_to_the_package(dockerfile: list[str]) -> None:
    # migrate.py looks for alembic.ini at Path(__file__).parents[2]: ems must be imported
    # from the copied tree (editable install), not from site-packages.
    copied = " ".join(_instructions(dockerfile, "COPY"))
    for path in ("alembic.ini", "migrations", "ems", "pyproject.toml"):
        assert re.search(rf"(^|\s){re.escape(path)}/?(\s|$)", copied), f"{path} not copied"
    installs = [run for run in _instructions(dockerfile, "RUN") if "pip install" in run]
    assert any(re.search(r"\s(-e|--editable)\s+\.(\s|$)", run) for run in installs)


def test_dockerignore_lets_copied_files_through(dockerfile: list[str]) -> None:
    lines = [ln.strip() for ln in IGNORE_FILE.read_text().splitlines()]
    patterns = [ln for ln in lines if ln and not ln.startswith("#")]
    assert "*" in patterns, "the ignore file should be an allowlist (start from '*')"
    allowed = {p[1:].rstrip("/") for p in patterns if p.startswith("!")}
    for copy in _instructions(dockerfile, "COPY"):
        for source in copy.split()[:-1]:
            if not source.startswith("--"):
                assert source.rstrip("/") in allowed, f"{source} is excluded from the context"


def _ha(services: dict[str, dict[str, Any]], prefix: str) -> dict[str, dict[str, Any]]:
    return {n: s for n, s in services.items() if n.startswith(prefix)}


def _flags(service: dict[str, Any]) -> dict[str, str]:
    return dict(arg.lstrip("-").partition("=")[::2] for arg in service["command"])


def test_the_ha_profile_runs_three_galera_nodes_with_what_ems_requires(
    services: dict[str, dict[str, Any]],
) -> None:
    nodes = _ha(services, "galera-")
    assert sorted(nodes) == ["galera-1", "galera-2", "galera-3"]
    for name, node in nodes.items():
        assert node["profiles"] == ["ha"], name
        flags = _flags(node)
        settings = {k.replace("-", "_"): v for k, v in flags.items()}
        assert settings_problems(settings) == [], name
        assert flags["wsrep-cluster-address"] == "gcomm://" + ",".join(sorted(nodes)), name
        assert node.get("volumes") and node.get("healthcheck"), name
        # Whether to start a new cluster is decided at each start, by the start-up script.
        assert "wsrep-new-cluster" not in _flags(node), name
        assert node["entrypoint"] == nodes["galera-1"]["entrypoint"], name
        others = sorted(set(nodes) - {name})
        assert _environment(node)["GALERA_PEERS"].split() == [f"{n}:4567" for n in others]
    assert nodes["galera-2"]["depends_on"]["galera-1"]["condition"] == "service_healthy"
    assert nodes["galera-3"]["depends_on"]["galera-2"]["condition"] == "service_healthy"


def test_the_ha_profile_watches_a_redis_master_and_replica_with_three_sentinels(
    services: dict[str, dict[str, Any]],
) -> None:
    replica = " ".join(services["redis-replica"]["command"])
    assert "--replicaof redis-master 6379" in replica
    sentinels = _ha(services, "sentinel-")
    assert len(sentinels) == 3
    for name, sentinel in sentinels.items():
        script = sentinel["command"][-1]
        assert "sentinel monitor ems redis-master 6379 2" in script, name
        assert sentinel["profiles"] == ["ha"], name


def test_the_ha_profile_reaches_the_cluster_and_the_sentinels(
    services: dict[str, dict[str, Any]], ems_services: dict[str, dict[str, Any]]
) -> None:
    ha = {n: s for n, s in ems_services.items() if "ha" in s.get("profiles", ())}
    assert sorted(ha) == ["demo-ha", "migrate-ha"]
    root_password = _environment(services["galera-1"])["MARIADB_ROOT_PASSWORD"]
    for name, service in ha.items():
        settings = Settings.from_env(_environment(service))
        nodes = [urlsplit(url) for url in settings.database_nodes]
        assert [n.hostname for n in nodes] == ["galera-1", "galera-2", "galera-3"], name
        assert {n.password for n in nodes} == {root_password}, name
        target = settings.redis_sentinel
        assert target is not None and target.service == "ems", name
        assert {host for host, _ in target.sentinels} == set(_ha(services, "sentinel-")), name


CHECK_JSONSCHEMA = Path(sys.executable).with_name("check-jsonschema")


def _check_compose_schema(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CHECK_JSONSCHEMA, "--builtin-schema", "vendor.compose-spec", path],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_compose_file_follows_the_compose_specification() -> None:
    checked = _check_compose_schema(DOCKER / "compose.yaml")
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.parametrize(
    ("good", "bad", "why"),
    [
        ("condition: service_healthy", "condition: service_heathy", "is not one of"),
        ('profiles: ["ha"]', 'profile: ["ha"]', "'profile' w"),
    ],
)
def test_the_schema_check_refuses_a_misspelt_compose_file(
    tmp_path: Path, good: str, bad: str, why: str
) -> None:
    broken = tmp_path / "compose.yaml"
    broken.write_text((DOCKER / "compose.yaml").read_text().replace(good, bad, 1))
    checked = _check_compose_schema(broken)
    assert checked.returncode == 1
    assert why in checked.stdout


@pytest.mark.parametrize("profile", [None, "admin", "ha"])
def test_every_reference_resolves_in_each_profile(
    compose: dict[str, Any], services: dict[str, dict[str, Any]], profile: str | None
) -> None:
    """What `docker compose --profile P config` resolves beyond the schema: each started
    service's dependencies start with it, and its named volumes are declared."""
    started = {n for n, s in services.items() if not s.get("profiles") or profile in s["profiles"]}
    declared = set(compose.get("volumes") or {})
    for name in started:
        service = services[name]
        assert set(service.get("depends_on") or {}) <= started, name
        for volume in service.get("volumes") or ():
            source = volume.split(":", 1)[0]
            if not source.startswith((".", "/")):
                assert source in declared, f"{name}: volume {source} is not declared"


# -- the Galera nodes' start-up script -------------------------------------------------


def _unescaped(text: str) -> str:
    """A string as compose hands it to the container: $$ is a literal $; a lone $ would be
    interpolated from the host's environment, which the script must not depend on."""
    assert "$" not in text.replace("$$", ""), f"unescaped $ in {text!r}"
    return text.replace("$$", "$")


@pytest.fixture
def peer() -> Iterator[str]:
    """A node that answers on its group-communication port."""
    with socket.create_server(("127.0.0.1", 0)) as listening:
        yield f"127.0.0.1:{listening.getsockname()[1]}"


def _nobody() -> str:
    """An address where no node answers."""
    return f"127.0.0.1:{free_port()}"


def _start_node(service: dict[str, Any], datadir: Path, peers: list[str]) -> list[str]:
    """Run the node's entrypoint and command as its container would, with the data volume
    at `datadir` and the image's docker-entrypoint.sh replaced by a stub; the arguments
    that reached docker-entrypoint.sh."""
    mount = next(v.split(":", 1)[1] for v in service["volumes"])
    bin_dir = datadir.parent / "bin"
    bin_dir.mkdir(exist_ok=True)
    stub = bin_dir / "docker-entrypoint.sh"
    stub.write_text('#!/bin/sh\nprintf \'%s\\n\' "$@" > "$ARGS_OUT"\n')
    stub.chmod(0o755)
    out = datadir.parent / "args"
    argv = [_unescaped(part).replace(mount, str(datadir)) for part in service["entrypoint"]]
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "GALERA_PEERS": " ".join(peers),
        "ARGS_OUT": str(out),
    }
    subprocess.run([*argv, *service["command"]], env=env, check=True, timeout=30)
    args = out.read_text().splitlines()
    assert [a for a in args if a != "--wsrep-new-cluster"] == service["command"]
    return args


@pytest.mark.parametrize(
    ("state", "answers", "bootstraps"),
    [
        (None, False, True),  # first start of the first node
        (None, True, False),  # a joiner's first start, or a disk replaced: state transfer
        ("safe_to_bootstrap: 0", False, False),  # restart or crash: join
        ("safe_to_bootstrap: 0", True, False),
        ("safe_to_bootstrap: 1", False, True),  # the last node to leave starts it again
        ("safe_to_bootstrap: 1", True, False),
    ],
)
@pytest.mark.parametrize("node", ["galera-1", "galera-3"])
def test_a_node_starts_a_new_cluster_only_when_it_may_and_no_other_node_answers(
    services: dict[str, dict[str, Any]],
    tmp_path: Path,
    peer: str,
    node: str,
    state: str | None,
    answers: bool,
    bootstraps: bool,
) -> None:
    datadir = tmp_path / "data"
    datadir.mkdir()
    if state is not None:
        (datadir / "grastate.dat").write_text(
            f"# GALERA saved state\nversion: 2.1\nuuid: 9132ecbf\nseqno: 3\n{state}\n"
        )
    peers = [_nobody(), peer if answers else _nobody()]
    args = _start_node(services[node], datadir, peers)
    assert ("--wsrep-new-cluster" in args) == bootstraps
