"""deploy/docker: the image lints clean and runs as a non-root user; the compose file
has every part, starts the API only after the migration succeeded, runs Proctor's
containers on a read-only root filesystem with the paths they write mounted, and holds no
secret in the clear."""

from __future__ import annotations

import re
import subprocess
from typing import Any

import pytest

from tests.deploy.tools import DOCKER, SECRET_SETTINGS, SHUTDOWN_GRACE_S, load_yaml, tool

DOCKERFILE = DOCKER / "Dockerfile"
APP_USER = "10001:10001"


@pytest.fixture(scope="module")
def services() -> dict[str, dict[str, Any]]:
    compose = load_yaml(DOCKER / "compose.yaml")
    return dict(compose["services"])


def _command(service: dict[str, Any]) -> str:
    command = service.get("command", [])
    return " ".join(command) if isinstance(command, list) else str(command)


def _app_services(services: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The services that run Proctor's image."""
    return {name: s for name, s in services.items() if "PROCTOR_IMAGE" in s.get("image", "")}


def _of_role(services: dict[str, dict[str, Any]], command: str) -> list[str]:
    return [name for name, s in services.items() if _command(s).startswith(command)]


def test_hadolint_passes_the_dockerfile() -> None:
    hadolint = tool("hadolint")
    result = subprocess.run(
        [str(hadolint), "--no-color", str(DOCKERFILE)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_is_multi_stage_and_runs_as_the_app_user() -> None:
    text = DOCKERFILE.read_text(encoding="utf-8")
    stages = re.findall(r"^FROM\s+\S+\s+AS\s+(\S+)", text, flags=re.MULTILINE | re.IGNORECASE)
    assert len(stages) >= 2, stages
    users = re.findall(r"^USER\s+(\S+)", text, flags=re.MULTILINE)
    assert users and users[-1] == APP_USER  # numeric: runAsNonRoot can check it
    assert "COPY --from=build" in text


def test_compose_has_every_part(services: dict[str, dict[str, Any]]) -> None:
    assert {"postgres", "redis", "proxy", "migrate", "scheduler"} <= services.keys()
    assert services["postgres"]["image"].startswith("postgres:")
    assert services["redis"]["image"].startswith("redis:")
    assert len(_of_role(services, "serve")) == 2
    assert len(_of_role(services, "judge worker --metrics-port")) == 2
    assert _command(services["migrate"]) == "db upgrade"
    assert "proctor db backup" in _command(services["scheduler"])


def test_api_and_workers_start_after_the_migration_succeeded(
    services: dict[str, dict[str, Any]],
) -> None:
    dependants = _of_role(services, "serve") + _of_role(services, "judge worker")
    for name in [*dependants, "scheduler"]:
        condition = services[name]["depends_on"]["migrate"]["condition"]
        assert condition == "service_completed_successfully", name
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert services["migrate"]["restart"] == "no"


def test_proxy_balances_over_both_api_replicas(services: dict[str, dict[str, Any]]) -> None:
    conf = (DOCKER / "nginx.conf").read_text(encoding="utf-8")
    upstream = re.search(r"upstream proctor \{(.*?)\}", conf, flags=re.DOTALL)
    assert upstream is not None
    servers = set(re.findall(r"server\s+([\w-]+):8000", upstream.group(1)))
    assert servers == set(_of_role(services, "serve"))
    assert "./nginx.conf:/etc/nginx/nginx.conf:ro" in services["proxy"]["volumes"]


def test_app_containers_are_read_only_and_unprivileged(
    services: dict[str, dict[str, Any]],
) -> None:
    apps = _app_services(services)
    assert apps.keys() == {
        "migrate",
        "api-1",
        "api-2",
        "worker-1",
        "worker-2",
        "run-worker",
        "scheduler",
    }
    for name, service in apps.items():
        assert service["read_only"] is True, name
        assert service["user"] == APP_USER, name
        assert service["cap_drop"] == ["ALL"], name
        mounted = [entry.split(":")[0] for entry in service["tmpfs"]]
        mounted += [entry.split(":")[1] for entry in service.get("volumes", [])]
        assert "/tmp" in mounted, name
        multiproc = service.get("environment", {}).get("PROMETHEUS_MULTIPROC_DIR")
        assert multiproc is None or multiproc in mounted, name


def test_api_keeps_its_audit_spool_and_stops_gracefully(
    services: dict[str, dict[str, Any]],
) -> None:
    for name in _of_role(services, "serve") + _of_role(services, "judge worker"):
        grace = int(services[name]["stop_grace_period"].removesuffix("s"))
        assert grace > SHUTDOWN_GRACE_S, name
    for name in _of_role(services, "serve"):
        spools = [
            v for v in services[name]["volumes"] if v.endswith(":/var/lib/proctor/audit-spool")
        ]
        assert len(spools) == 1, name
        assert services[name]["healthcheck"]["test"][-1].count("/readyz") == 1


def test_no_secret_in_the_clear(services: dict[str, dict[str, Any]]) -> None:
    """Every secret setting is interpolated from .env (required), never written here."""
    for name, service in _app_services(services).items():
        for variable, value in service.get("environment", {}).items():
            if variable in SECRET_SETTINGS:
                assert re.search(r"\$\{[A-Z_]+(:\?[^}]*|:-\[\])\}", str(value)), (name, variable)
    for line in (DOCKER / "env.example").read_text(encoding="utf-8").splitlines():
        variable, _, value = line.partition("=")
        if variable in SECRET_SETTINGS - {"PROCTOR_JUDGES"}:
            assert value == "", variable
    assert (DOCKER / ".gitignore").read_text(encoding="utf-8").split() == [".env"]
