"""deploy/kubernetes: every manifest of the base, and the example overlay as kustomize
renders it, validates strictly against the Kubernetes schemas of a pinned version; the
API is probed on /healthz and /readyz, every container is sized, unprivileged and on a
read-only root filesystem with its writable paths mounted; Secrets are referred to, never
defined."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes_validate import utils as kubernetes_schemas  # type: ignore[import-untyped]

from tests.deploy.tools import (
    KUBERNETES,
    SECRET_SETTINGS,
    SHUTDOWN_GRACE_S,
    load_yaml,
    load_yaml_documents,
    tool,
)

KUBERNETES_VERSION = "1.33.0"
"""The oldest Kubernetes the manifests are written for (autoscaling/v2, policy/v1)."""
BASE = KUBERNETES / "base"
OVERLAY = KUBERNETES / "overlays" / "example"
Resource = dict[str, Any]


def _base_resources() -> list[Resource]:
    return [
        doc
        for path in sorted(BASE.glob("*.yaml"))
        if path.name != "kustomization.yaml"
        for doc in load_yaml_documents(path.read_text(encoding="utf-8"))
    ]


@pytest.fixture(scope="module")
def rendered() -> list[Resource]:
    """The example overlay as ``kubectl kustomize`` (kustomize built in) renders it."""
    kubectl = tool("kubectl")
    result = subprocess.run(
        [str(kubectl), "kustomize", str(OVERLAY)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    return load_yaml_documents(result.stdout)


def _validate(resources: list[Resource]) -> list[str]:
    errors = []
    for resource in resources:
        try:
            kubernetes_schemas.validate(resource, KUBERNETES_VERSION, strict=True)
        except kubernetes_schemas.ValidationError as error:
            errors.append(f"{resource['kind']}/{resource['metadata']['name']}: {error}")
    return errors


def _named(resources: list[Resource], kind: str, name: str) -> Resource:
    (found,) = [r for r in resources if r["kind"] == kind and r["metadata"]["name"] == name]
    return found


def _pod_specs(resources: list[Resource]) -> Iterator[tuple[str, Resource]]:
    for resource in resources:
        if resource["kind"] in {"Deployment", "Job"}:
            yield resource["metadata"]["name"], resource["spec"]["template"]["spec"]


def test_the_strict_schema_check_refuses_a_wrong_manifest() -> None:
    """The check itself can fail: an unknown field and a wrong type are refused."""
    deployment = _named(_base_resources(), "Deployment", "proctor-api")
    broken = {**deployment, "spec": {**deployment["spec"], "replica": 2}}
    assert _validate([broken])
    broken = {**deployment, "spec": {**deployment["spec"], "replicas": "two"}}
    assert _validate([broken])


def test_base_manifests_validate() -> None:
    resources = _base_resources()
    assert len(resources) >= 10
    assert _validate(resources) == []


def test_kustomization_lists_every_base_file() -> None:
    listed = set(load_yaml(BASE / "kustomization.yaml")["resources"])
    files = {path.name for path in BASE.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == files


def test_overlay_renders_and_validates(rendered: list[Resource]) -> None:
    assert _validate(rendered) == []
    kinds = sorted({r["kind"] for r in rendered})
    assert kinds == sorted(
        {
            "ConfigMap",
            "Deployment",
            "HorizontalPodAutoscaler",
            "Ingress",
            "Job",
            "NetworkPolicy",
            "PodDisruptionBudget",
            "Service",
            "ServiceAccount",
        }
    )
    assert {r["metadata"].get("namespace") for r in rendered} == {"proctor"}
    for name, pod in _pod_specs(rendered):
        images = {c["image"] for c in pod["containers"]}
        assert images == {"registry.example.org/proctor:0.1.0"}, name


def test_api_probes_scaling_and_disruption_budget() -> None:
    resources = _base_resources()
    api = _named(resources, "Deployment", "proctor-api")
    (container,) = api["spec"]["template"]["spec"]["containers"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    labels = api["spec"]["template"]["metadata"]["labels"]
    hpa = _named(resources, "HorizontalPodAutoscaler", "proctor-api")
    assert hpa["spec"]["scaleTargetRef"]["name"] == "proctor-api"
    assert hpa["spec"]["minReplicas"] >= 2
    pdb = _named(resources, "PodDisruptionBudget", "proctor-api")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    service = _named(resources, "Service", "proctor-api")
    assert service["spec"]["selector"].items() <= labels.items()


def test_containers_are_sized_unprivileged_and_read_only() -> None:
    for name, pod in _pod_specs(_base_resources()):
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        assert pod["automountServiceAccountToken"] is False, name
        volumes = {v["name"] for v in pod["volumes"]}
        for container in pod["containers"]:
            assert container["resources"]["requests"].keys() >= {"cpu", "memory"}, name
            security = container["securityContext"]
            assert security["readOnlyRootFilesystem"] is True, name
            assert security["allowPrivilegeEscalation"] is False, name
            mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
            assert "/tmp" in mounts, name
            assert set(mounts.values()) <= volumes, name
            env = {e["name"]: e for e in container.get("env", [])}
            if "PROMETHEUS_MULTIPROC_DIR" in env:
                assert env["PROMETHEUS_MULTIPROC_DIR"]["value"] in mounts, name


def test_grace_period_covers_the_shutdown_grace() -> None:
    for name, pod in _pod_specs(_base_resources()):
        if name != "proctor-migrate":
            assert pod["terminationGracePeriodSeconds"] > SHUTDOWN_GRACE_S, name
    config = _named(_base_resources(), "ConfigMap", "proctor-config")
    assert float(config["data"]["PROCTOR_SHUTDOWN_GRACE_S"]) == SHUTDOWN_GRACE_S


def test_secrets_are_referred_to_never_defined(rendered: list[Resource]) -> None:
    for resources in (_base_resources(), rendered):
        assert [r for r in resources if r["kind"] == "Secret"] == []
        config = _named(resources, "ConfigMap", "proctor-config")
        assert SECRET_SETTINGS.isdisjoint(config["data"])
        for name, pod in _pod_specs(resources):
            for container in pod["containers"]:
                for entry in container.get("env", []):
                    if entry["name"] in SECRET_SETTINGS:
                        assert "value" not in entry, (name, entry["name"])
                        assert entry["valueFrom"]["secretKeyRef"]["key"] == entry["name"]


def test_only_the_migration_job_sees_the_owner() -> None:
    for name, pod in _pod_specs(_base_resources()):
        env = {e["name"] for c in pod["containers"] for e in c.get("env", [])}
        assert ("PROCTOR_MIGRATION_DATABASE_URL" in env) == (name == "proctor-migrate"), name


def test_worker_metrics_are_reachable_from_monitoring_only() -> None:
    policies = [r for r in _base_resources() if r["kind"] == "NetworkPolicy"]
    deny = _named(policies, "NetworkPolicy", "proctor-default-deny")
    assert deny["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert "ingress" not in deny["spec"]
    worker = _named(policies, "NetworkPolicy", "proctor-worker-metrics")
    (rule,) = worker["spec"]["ingress"]
    assert [p["port"] for p in rule["ports"]] == [9100]
    assert all("namespaceSelector" in peer for peer in rule["from"])
    worker_pod = _named(_base_resources(), "Deployment", "proctor-worker")
    (container,) = worker_pod["spec"]["template"]["spec"]["containers"]
    assert container["args"][-2:] == ["--metrics-port", "9100"]


def test_the_autoscaler_alone_sets_the_api_replicas() -> None:
    api = _named(_base_resources(), "Deployment", "proctor-api")
    assert "replicas" not in api["spec"]


def test_run_workers_reach_the_api_service_and_the_api_lets_them_in() -> None:
    resources = _base_resources()
    workers = _named(resources, "Deployment", "proctor-run-worker")
    pod = workers["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    assert container["args"] == ["run-worker"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    service = _named(resources, "Service", "proctor-api")
    (port,) = service["spec"]["ports"]
    assert env["PROCTOR_RUN_API_URL"] == f"http://{service['metadata']['name']}:{port['port']}"
    labels = pod["metadata"]["labels"]
    api_labels = _named(resources, "Deployment", "proctor-api")["spec"]["template"]["metadata"][
        "labels"
    ]
    egress = _named(resources, "NetworkPolicy", "proctor-run-worker-egress")["spec"]
    assert egress["podSelector"]["matchLabels"].items() <= labels.items()
    (rule,) = egress["egress"]
    assert rule["to"][0]["podSelector"]["matchLabels"].items() <= api_labels.items()
    assert [p["port"] for p in rule["ports"]] == [port["port"]]
    ingress = _named(resources, "NetworkPolicy", "proctor-api-ingress")["spec"]["ingress"]
    peers = [peer for rule in ingress for peer in rule["from"] if "podSelector" in peer]
    assert any(peer["podSelector"]["matchLabels"].items() <= labels.items() for peer in peers)
    pdb = _named(resources, "PodDisruptionBudget", "proctor-run-worker")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
