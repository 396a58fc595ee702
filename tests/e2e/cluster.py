"""What the end-to-end tests put into the control plane: the CRDs, a small cluster of kwok
nodes of mixed topology policies with their NRTs, numagate installed from its own
manifests (webhooks pointed at a local ``numagate serve``), and object builders."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.controlplane import ControlPlane, fake_node, free_port, wait_until
from tests.launch import ServeProcess, http, start_process
from tests.paths import ROOT

CRDS = Path(__file__).resolve().parent / "crds"
MANIFESTS = ROOT / "manifests"
NAMESPACE = "numagate-system"
KOORD_LABEL = "node.koordinator.sh/numa-topology-policy"
KOORD_SPEC = "scheduling.koordinator.sh/numa-topology-spec"
VOLCANO_KEY = "volcano.sh/numa-topology-policy"
TEST_NS = "e2e"  # the namespace the tests create their pods in
USAGE_NS = "e2e-usage"  # opted out (numagate.io/ignore): pods that use a node's CPUs

# name -> (Koordinator label or None, kubelet policy in the NRT, available CPUs per NUMA)
NODES: dict[str, tuple[str | None, str, int]] = {
    "single-a": ("SingleNUMANode", "single-numa-node", 8),
    "single-busy": ("SingleNUMANode", "single-numa-node", 1),
    "restricted-a": ("Restricted", "restricted", 8),
    "restricted-b": ("Restricted", "restricted", 8),
    "none-a": (None, "none", 8),
}
# CPUs per NUMA node (2 per node), memory per NUMA node.
NUMA_CPUS = 8
NUMA_MEMORY_GI = 32


def nrt(name: str, policy: str, available_cpu: int, scope: str = "container") -> dict[str, Any]:
    """A NodeResourceTopology as node-feature-discovery's topology-updater writes it."""
    zones = []
    for i in range(2):
        zones.append({
            "name": f"node-{i}", "type": "Node",
            "costs": [{"name": f"node-{j}", "value": 10 if i == j else 21} for j in range(2)],
            "resources": [
                {"name": "cpu", "capacity": str(NUMA_CPUS), "allocatable": str(NUMA_CPUS),
                 "available": str(available_cpu)},
                {"name": "memory", "capacity": f"{NUMA_MEMORY_GI}Gi",
                 "allocatable": f"{NUMA_MEMORY_GI}Gi", "available": f"{NUMA_MEMORY_GI}Gi"},
            ],
        })  # fmt: skip
    return {
        "apiVersion": "topology.node.k8s.io/v1alpha2",
        "kind": "NodeResourceTopology",
        "metadata": {"name": name},
        "attributes": [
            {"name": "topologyManagerPolicy", "value": policy},
            {"name": "topologyManagerScope", "value": scope},
        ],
        "zones": zones,
    }


def pod(name: str, *, cpu: str = "2", memory: str = "1Gi", annotations: dict[str, str] | None = None,
        node_selector: dict[str, str] | None = None, scheduler: str | None = None,
        labels: dict[str, str] | None = None, namespace: str = TEST_NS) -> dict[str, Any]:  # fmt: skip
    """A Guaranteed pod (requests = limits) of one container."""
    resources = {"cpu": cpu, "memory": memory}
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "app",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": resources, "limits": resources},
            }
        ],
    }
    if node_selector:
        spec["nodeSelector"] = node_selector
    if scheduler:
        spec["schedulerName"] = scheduler
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if annotations:
        meta["annotations"] = annotations
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def koord(policy: str, exclusive: str | None = None) -> dict[str, str]:
    doc: dict[str, str] = {"numaTopologyPolicy": policy}
    if exclusive is not None:
        doc["singleNUMANodeExclusive"] = exclusive
    return {KOORD_SPEC: json.dumps(doc)}


def usage_pod(node: str, cpu: int, index: int) -> dict[str, Any]:
    """A pod already bound to ``node`` (kwok runs it): what the node's CPUs are used by."""
    doc = pod(f"usage-{node}-{index}", cpu=str(cpu), namespace=USAGE_NS)
    doc["spec"]["nodeName"] = node
    return doc


@dataclass
class Install:
    """numagate installed from manifests/base into the control plane, and what each step
    answered (the install test asserts on it)."""

    plane: ControlPlane
    workdir: Path
    port: int
    rendered: list[dict[str, Any]]
    dry_run: subprocess.CompletedProcess[str]
    applied: subprocess.CompletedProcess[str]
    injected: subprocess.CompletedProcess[str]
    sa_kubeconfig: Path
    config: Path
    serve: ServeProcess | None = None
    serve_args: list[str] = field(default_factory=list)
    # Started with the install (bookmarks come about once a minute: tests/e2e/watches.py).
    watches: Any = None

    @property
    def ca(self) -> Path:
        return self.workdir / "certs" / "ca.crt"

    def start_serve(self, *extra: str) -> ServeProcess:
        """``numagate serve`` on the fixed port the webhooks' URLs name, as the
        ServiceAccount; ready once /readyz says the inventory is synced."""
        self.stop_serve()
        self.serve_args = ["--port", str(self.port), "--cert-dir", str(self.workdir / "certs"),
                           "--config", str(self.config), "--kubeconfig", str(self.sa_kubeconfig),
                           *extra]  # fmt: skip
        self.serve = start_process(self.serve_args, cwd=self.workdir, ca=self.ca, timeout=60)
        wait_until(lambda: http(self.port, self.ca, "GET", "/readyz", name="127.0.0.1")[0] == 200,
                   60, "numagate /readyz (inventory synced)")  # fmt: skip
        return self.serve

    def stop_serve(self) -> None:
        if self.serve is not None:
            self.serve.stop()
            self.serve = None

    def numagate(self, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        """The numagate CLI against the control plane (admin kubeconfig in $KUBECONFIG)."""
        return subprocess.run([sys.executable, "-m", "webhook", *args], input=input, text=True,
                              capture_output=True, env=self.plane.env(), cwd=self.workdir,
                              timeout=120)  # fmt: skip


def apply(plane: ControlPlane, docs: list[dict[str, Any]] | dict[str, Any], *extra: str,
          check: bool = True) -> subprocess.CompletedProcess[str]:  # fmt: skip
    items = docs if isinstance(docs, list) else [docs]
    return plane.kubectl("apply", *extra, "-f", "-", input=yaml.safe_dump_all(items), check=check)


def create(plane: ControlPlane, doc: dict[str, Any], *extra: str,
           check: bool = False) -> subprocess.CompletedProcess[str]:  # fmt: skip
    return plane.kubectl("create", *extra, "-f", "-", input=json.dumps(doc), check=check)


def get(
    plane: ControlPlane, kind: str, name: str, namespace: str | None = TEST_NS
) -> dict[str, Any]:
    args = ["get", kind, name, "-o", "json"] + (["-n", namespace] if namespace else [])
    return json.loads(plane.kubectl(*args).stdout)


def install_crds(plane: ControlPlane) -> None:
    plane.kubectl("apply", "-f", str(CRDS))
    plane.kubectl("wait", "--for", "condition=Established", "--timeout", "60s",
                  "crd/noderesourcetopologies.topology.node.k8s.io",
                  "crd/numatopologies.nodeinfo.volcano.sh", "crd/jobs.batch.volcano.sh")  # fmt: skip


def create_nodes(plane: ControlPlane) -> None:
    """The mixed-policy nodes, their NRTs, and the pods that keep `single-busy` busy."""
    docs: list[dict[str, Any]] = []
    for name, (label, policy, available) in NODES.items():
        labels = {KOORD_LABEL: label} if label else {}
        docs.append(
            fake_node(name, labels, cpu=str(2 * NUMA_CPUS), memory=f"{2 * NUMA_MEMORY_GI}Gi")
        )
        docs.append(nrt(name, policy, available))
    apply(plane, docs)
    for name in NODES:
        wait_until(lambda n=name: plane.node_ready(n), 60, f"node {name} Ready")
    plane.create_namespace(USAGE_NS, {"numagate.io/ignore": "true"})
    # single-busy: 14 of 16 CPUs used (7 per NUMA node, as its NRT says), so kube-scheduler
    # sees no room either.
    apply(plane, [usage_pod("single-busy", 7, i) for i in range(2)])


def webhooks_to_url(docs: list[dict[str, Any]], port: int) -> list[dict[str, Any]]:
    """The rendered manifests with every webhook's clientConfig a URL on 127.0.0.1 (as
    controller-runtime's envtest does): the apiserver cannot reach a Service here."""
    out = copy.deepcopy(docs)
    for doc in out:
        if doc["kind"].endswith("WebhookConfiguration"):
            for hook in doc["webhooks"]:
                client = hook["clientConfig"]
                url = f"https://127.0.0.1:{port}{client['service'].get('path', '/')}"
                hook["clientConfig"] = {
                    "url": url,
                    **({"caBundle": client["caBundle"]} if "caBundle" in client else {}),
                }
    return out


def serve_config(rendered: list[dict[str, Any]], path: Path) -> Path:
    """The shipped ConfigMap's configuration, with no shutdown delay (tests restart it)."""
    cm = next(
        d
        for d in rendered
        if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "numagate-config"
    )
    config = yaml.safe_load(cm["data"]["config.yaml"])
    config["shutdown"] = {"delaySeconds": 0.0, "gracePeriodSeconds": 5.0}
    path.write_text(yaml.safe_dump(config))
    return path


def install(plane: ControlPlane, workdir: Path) -> Install:
    """numagate from manifests/base: server-side dry run, apply, certificates, caBundle
    injection, a ServiceAccount token, then ``numagate serve`` as that ServiceAccount."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    rendered = [
        d
        for d in yaml.safe_load_all(plane.kubectl("kustomize", str(MANIFESTS / "base")).stdout)
        if d
    ]
    docs = webhooks_to_url(rendered, port)
    text = yaml.safe_dump_all(docs)
    (workdir / "numagate.yaml").write_text(text)
    # A server-side dry run creates nothing, so the namespaced objects of a first install
    # are refused ("namespaces numagate-system not found"): the Namespace goes first.
    namespaces = [d for d in docs if d["kind"] == "Namespace"]
    plane.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(namespaces))
    dry_run = plane.kubectl("apply", "--dry-run=server", "-f", "-", input=text, check=False)
    applied = plane.kubectl("apply", "-f", "-", input=text, check=False)
    certs = workdir / "certs"
    gen = subprocess.run([sys.executable, "-m", "webhook", "certs", "generate", "--service", "numagate",
                          "--namespace", NAMESPACE, "--out", str(certs), "--ip", "127.0.0.1"],
                         capture_output=True, text=True, env=plane.env())  # fmt: skip
    assert gen.returncode == 0, gen.stderr
    injected = subprocess.run([sys.executable, "-m", "webhook", "certs", "inject", "--ca-file",
                               str(certs / "ca.crt"), "--mutating", "numagate", "--validating",
                               "numagate", "--kubeconfig", str(plane.kubeconfig)],
                              capture_output=True, text=True, env=plane.env())  # fmt: skip
    token = plane.kubectl(
        "create", "token", "numagate", "-n", NAMESPACE, "--duration", "6h"
    ).stdout.strip()
    sa_kubeconfig = plane.write_token_kubeconfig(workdir / "sa.kubeconfig", token,
                                                 "system:serviceaccount:numagate-system:numagate")  # fmt: skip
    result = Install(plane, workdir, port, rendered, dry_run, applied, injected, sa_kubeconfig,
                     serve_config(rendered, workdir / "config.yaml"))  # fmt: skip
    result.start_serve()
    return result


def selector_matches(term: dict[str, Any], node: dict[str, Any]) -> bool:
    """One nodeSelectorTerm against a Node, as the scheduler evaluates it (AND of all)."""
    labels = node["metadata"].get("labels", {})
    for expr in term.get("matchExpressions", []):
        key, op, values = expr["key"], expr["operator"], expr.get("values", [])
        ok = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[op]
        if not ok:
            return False
    for expr in term.get("matchFields", []):
        assert expr["key"] == "metadata.name", expr
        name = node["metadata"]["name"]
        if (name in expr["values"]) != (expr["operator"] == "In"):
            return False
    return True


def required_terms(stored_pod: dict[str, Any]) -> list[dict[str, Any]]:
    affinity = stored_pod["spec"].get("affinity", {}).get("nodeAffinity", {})
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution", {})
    return list(required.get("nodeSelectorTerms", []))


def selected_nodes(plane: ControlPlane, stored_pod: dict[str, Any]) -> set[str]:
    """The cluster's nodes (of NODES) the pod's required node affinity selects."""
    terms = required_terms(stored_pod)
    nodes = json.loads(plane.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    return {n["metadata"]["name"] for n in nodes if n["metadata"]["name"] in NODES
            and any(selector_matches(t, n) for t in terms)}  # fmt: skip


def webhook_calls(plane: ControlPlane, webhook: str) -> float:
    """How often the apiserver called ``webhook`` (its own admission metric's count)."""
    total = 0.0
    for line in plane.get("/metrics").decode().splitlines():
        if line.startswith("apiserver_admission_webhook_admission_duration_seconds_count{") \
                and f'name="{webhook}"' in line:  # fmt: skip
            total += float(line.rsplit(" ", 1)[1])
    return total


def clean_pods(plane: ControlPlane, namespace: str = TEST_NS) -> None:
    """Remove every pod of ``namespace`` at once (force: no kubelet waits for it)."""
    plane.kubectl("delete", "pods", "--all", "-n", namespace, "--grace-period=0", "--force",
                  "--wait=false", check=False)  # fmt: skip
