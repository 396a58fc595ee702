"""The deployment manifests rendered with kustomize, for the manifest, Helm and observability
tests: one place for the renderers, object lookups and the shutdown-timing rule."""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import yaml

from tests.e2e.build import bin_dir
from tests.paths import ROOT
from webhook.config import parse_config

MANIFESTS = ROOT / "manifests"
NAMESPACE = "numagate-system"
# Kubernetes versions the manifests must be valid for: the oldest we support and the
# newest schema shipped with kubernetes-validate.
K8S_VERSIONS = ["1.30.0", kubernetes_validate.latest_version()]


def kubectl() -> Path:
    """The kubectl the end-to-end suite builds (tests/e2e/build.py): never one the machine
    may or may not carry."""
    path = bin_dir() / "kubectl"
    assert path.is_file(), f"{path} is missing: run `make e2e-build` (python3 tests/e2e/build.py)"
    return path


def kustomize(directory: Path) -> list[dict[str, Any]]:
    result = subprocess.run(
        [str(kubectl()), "kustomize", str(directory)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


@functools.cache
def rendered(name: str) -> tuple[dict[str, Any], ...]:
    return tuple(kustomize(MANIFESTS / name))


def with_components(tmp_path: Path, overlay: str, *components: str) -> list[dict[str, Any]]:
    """Render an overlay plus components, as a user's own kustomization would."""
    rel = lambda p: os.path.relpath(MANIFESTS / p, tmp_path)  # noqa: E731
    (tmp_path / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "resources": [rel(overlay)],
                "components": [rel(f"components/{c}") for c in components],
            }
        )
    )
    return kustomize(tmp_path)


def find(objs: tuple[dict[str, Any], ...] | list[dict[str, Any]], kind: str, name: str) -> dict:
    matches = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(matches) == 1, f"{kind}/{name}: {len(matches)} found"
    return matches[0]


def webhooks(objs) -> dict[str, dict[str, Any]]:
    return {
        w["name"]: {**w, "_kind": o["kind"]}
        for o in objs
        if o["kind"].endswith("WebhookConfiguration")
        for w in o["webhooks"]
    }


EXIT_MARGIN_SECONDS = 5  # time left for the process to exit after the grace period


def shutdown_budget(objs: tuple[dict[str, Any], ...] | list[dict[str, Any]]) -> dict[str, float]:
    """The numbers of the shutdown rule as a rendering sets them: the pod's grace period and
    preStop sleep, and the shutdown section of the ConfigMap's config (or its defaults, read
    by the real config parser)."""
    deploy = find(objs, "Deployment", "numagate")
    pod = deploy["spec"]["template"]["spec"]
    pre_stop = pod["containers"][0].get("lifecycle", {}).get("preStop", {})
    assert set(pre_stop) <= {"sleep"}, f"only a sleep preStop is accounted for: {pre_stop}"
    configmap = find(objs, "ConfigMap", "numagate-config")
    config = parse_config(yaml.safe_load(configmap["data"]["config.yaml"]))
    timeouts = [h["timeoutSeconds"] for h in webhooks(objs).values()]
    return {
        "terminationGracePeriodSeconds": pod.get("terminationGracePeriodSeconds", 30),
        "preStop": pre_stop.get("sleep", {}).get("seconds", 0),
        "delaySeconds": config.shutdown.delay_seconds,
        "gracePeriodSeconds": config.shutdown.grace_period_seconds,
        "maxTimeoutSeconds": max(timeouts or [10]),
    }


def check_shutdown_rule(budget: dict[str, float]) -> None:
    used = budget["preStop"] + budget["delaySeconds"] + budget["gracePeriodSeconds"]
    assert used + EXIT_MARGIN_SECONDS <= budget["terminationGracePeriodSeconds"], budget
    # A review in flight may run up to its webhook's timeout: the grace period covers it.
    assert budget["gracePeriodSeconds"] >= budget["maxTimeoutSeconds"], budget
