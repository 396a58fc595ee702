"""Issue 26, item 1: the CRDs and numagate's own manifests (kustomize base and the Helm
chart) applied to a real kube-apiserver: server-side dry run, then for real; the caBundle
set by `numagate certs inject`."""

from __future__ import annotations

import base64
import json

import yaml

from tests.e2e.cluster import NAMESPACE, NODES, Install, create, get, nrt, webhooks_to_url
from tests.e2e.controlplane import ControlPlane
from tests.manifests_helm import render_chart


def test_the_crds_are_served_and_their_schemas_enforced(installed: Install) -> None:
    plane = installed.plane
    names = json.loads(plane.kubectl("get", "noderesourcetopologies", "-o", "json").stdout)
    assert {item["metadata"]["name"] for item in names["items"]} >= set(NODES)
    broken = nrt("broken", "none", 1)
    del broken["zones"]
    out = create(plane, broken)
    assert out.returncode != 0 and "zones: Required value" in out.stderr, out.stderr
    numatopo = {"apiVersion": "nodeinfo.volcano.sh/v1alpha1", "kind": "Numatopology",
                "metadata": {"name": "e2e-numatopo"},
                "spec": {"policies": {"TopologyManagerPolicy": "single-numa-node"}}}  # fmt: skip
    assert create(plane, numatopo).returncode == 0
    stored = get(plane, "numatopology", "e2e-numatopo", None)
    assert stored["spec"]["policies"] == {"TopologyManagerPolicy": "single-numa-node"}
    plane.kubectl("delete", "numatopology", "e2e-numatopo")


def test_the_kustomize_base_applies_server_side(installed: Install) -> None:
    assert installed.dry_run.returncode == 0, installed.dry_run.stderr
    assert "(server dry run)" in installed.dry_run.stdout
    assert installed.applied.returncode == 0, installed.applied.stderr
    plane = installed.plane
    for doc in installed.rendered:
        meta = doc["metadata"]
        args = ["get", doc["kind"].lower(), meta["name"], "-o", "name"]
        if "namespace" in meta:
            args += ["-n", meta["namespace"]]
        assert plane.kubectl(*args).stdout.strip(), doc["kind"]


def test_certs_inject_set_the_ca_bundle_of_every_webhook(installed: Install) -> None:
    assert installed.injected.returncode == 0, installed.injected.stderr
    ca = base64.b64encode(installed.ca.read_bytes()).decode()
    for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
        stored = get(installed.plane, kind, "numagate", None)
        for hook in stored["webhooks"]:
            assert hook["clientConfig"]["caBundle"] == ca, hook["name"]
            assert hook["clientConfig"]["url"].startswith(f"https://127.0.0.1:{installed.port}/")


def test_the_helm_chart_applies_server_side(installed: Install) -> None:
    plane: ControlPlane = installed.plane
    ca = base64.b64encode(installed.ca.read_bytes()).decode()
    values = {"certificates": {"mode": "external", "external": {"caBundle": ca}}}
    docs = webhooks_to_url(render_chart(values, name="numagate-helm", namespace="numagate-helm"),
                           installed.port)  # fmt: skip
    plane.create_namespace("numagate-helm")
    text = yaml.safe_dump_all(docs)
    dry = plane.kubectl("apply", "--dry-run=server", "-f", "-", input=text, check=False)
    assert dry.returncode == 0, dry.stderr
    assert plane.kubectl("get", "clusterrole", "numagate-helm", check=False).returncode != 0
    try:
        real = plane.kubectl("apply", "-f", "-", input=text, check=False)
        assert real.returncode == 0, real.stderr
        stored = get(plane, "validatingwebhookconfiguration", "numagate-helm", None)
        assert all(h["clientConfig"]["caBundle"] == ca for h in stored["webhooks"])
        role = get(plane, "clusterrole", "numagate-helm", None)
        shipped = get(plane, "clusterrole", "numagate", None)
        assert role["rules"] == shipped["rules"]  # the chart and the base grant the same
    finally:
        # Two registrations would call numagate twice per pod for the rest of the session.
        plane.kubectl("delete", "mutatingwebhookconfiguration,validatingwebhookconfiguration",
                      "numagate-helm", "--ignore-not-found")  # fmt: skip


def test_the_shipped_namespace_is_the_one_serve_watches_config_in(installed: Install) -> None:
    cm = get(installed.plane, "configmap", "numagate-config", NAMESPACE)
    assert yaml.safe_load(cm["data"]["config.yaml"])["namespace"] == NAMESPACE
