"""The demo inventory and a Volcano pod manifest written as files, as `numagate explain`
reads them."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.paths import ROOT

DEMO = ROOT / "webhook" / "data" / "demo-inventory.yaml"

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "p",
        "namespace": "default",
        "annotations": {"volcano.sh/numa-topology-policy": "restricted"},
    },
    "spec": {
        "schedulerName": "volcano",
        "containers": [{"name": "c", "resources": {"limits": {"cpu": "2", "memory": "2Gi"}}}],
    },
}


def write_demo_files(tmp_path: Path, manifest: dict | None = None) -> tuple[Path, Path]:
    """The demo inventory and a pod manifest, as explain reads them."""
    inv = tmp_path / "inventory.yaml"
    inv.write_text(DEMO.read_text())
    pod_file = tmp_path / "pod.yaml"
    pod_file.write_text(yaml.safe_dump(manifest or POD))
    return inv, pod_file
