"""The Helm chart rendered by Helm's own engine (helm-python-sdk), for the chart and
observability tests."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import helm_python as helm
import yaml

from tests.manifests import MANIFESTS, NAMESPACE

CHART = MANIFESTS / "helm" / "numagate"
MONITORING = {
    "serviceMonitor": {"enabled": True},
    "prometheusRule": {"enabled": True},
    "dashboard": {"enabled": True},
}


def render_chart(
    values: Mapping[str, Any] | None = None, *, name: str = "numagate", namespace: str = NAMESPACE
) -> list[dict[str, Any]]:
    """Every object the chart renders for ``values`` (NOTES.txt left out)."""
    with helm.Chart.load(str(CHART)) as chart:
        files = chart.render(dict(values or {}), name=name, namespace=namespace, is_install=True)
    return [
        doc
        for path, text in sorted(files.items())
        if not path.endswith("NOTES.txt")
        for doc in yaml.safe_load_all(text)
        if doc
    ]
