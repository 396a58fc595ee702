"""Benchmark inputs: a large cluster inventory and realistic AdmissionReviews.

Everything is deterministic (a seeded ``random.Random``), so two runs measure the same
bytes. The inventory is written as the Kubernetes objects ``kubectl get
nodes,noderesourcetopologies,numatopologies -o yaml`` would print (docs/contracts.md: Inventory input); the reviews
are ``admission.k8s.io/v1`` AdmissionReviews as the apiserver sends them (webhook-anchors
1.1), each carrying a Pod of 4-10 KB (containers, env, volumes, probes) in one of the three
dialects (Koordinator, Volcano, HAMi) or none (kubelet only).

Run as a script to write the files into a directory::

    python benchmarks/gen.py OUT_DIR [--nodes 10000]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import uuid
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

KOORD_LABEL = "node.koordinator.sh/numa-topology-policy"
KOORD_SPELLING = {
    "none": "",
    "best-effort": "BestEffort",
    "restricted": "Restricted",
    "single-numa-node": "SingleNUMANode",
}
POLICIES = ("none", "best-effort", "restricted", "single-numa-node")
GiB = 1024**3


@dataclass(frozen=True)
class Shape:
    """One hardware shape: NUMA nodes, CPUs and memory per NUMA node, GPUs per NUMA node."""

    name: str
    numa: int
    cpus: int  # per NUMA node
    mem_gib: int  # per NUMA node
    gpus: int = 0  # nvidia.com/gpu per NUMA node
    weight: int = 1


# A mix seen in real fleets: 2-socket general purpose, sub-NUMA clustering (4 NUMA nodes),
# an 8-NUMA EPYC, and GPU boxes with 4 GPUs per socket.
SHAPES = (
    Shape("gp-2x32", 2, 32, 128, weight=5),
    Shape("snc-4x24", 4, 24, 96, weight=2),
    Shape("epyc-8x16", 8, 16, 64, weight=1),
    Shape("gpu-2x48", 2, 48, 512, gpus=4, weight=2),
)

# How nodes export their topology (the dialect of the node side).
EXPORTERS = ("nrt-attributes", "nrt-koordinator", "numatopology")
EXPORTER_WEIGHTS = (5, 3, 2)


# ----------------------------------------------------------------------------- inventory


def _pick_shape(rng: random.Random) -> Shape:
    return rng.choices(SHAPES, weights=[s.weight for s in SHAPES])[0]


def _zone(shape: Shape, i: int, free_fraction: float) -> dict[str, Any]:
    cpu_alloc = shape.cpus - 1  # one CPU per NUMA node reserved for the system
    mem_alloc = shape.mem_gib - 3
    cpu_free = max(0, int(cpu_alloc * free_fraction))
    mem_free = max(0, int(mem_alloc * free_fraction))
    resources = [
        {"name": "cpu", "capacity": str(shape.cpus), "allocatable": str(cpu_alloc),
         "available": str(cpu_free)},
        {"name": "memory", "capacity": f"{shape.mem_gib}Gi", "allocatable": f"{mem_alloc}Gi",
         "available": f"{mem_free}Gi"},
    ]  # fmt: skip
    if shape.gpus:
        free_gpus = round(shape.gpus * free_fraction)
        resources.append(
            {"name": "nvidia.com/gpu", "capacity": str(shape.gpus),
             "allocatable": str(shape.gpus), "available": str(free_gpus)}
        )  # fmt: skip
    costs = [{"name": f"node-{j}", "value": 10 if j == i else 21} for j in range(shape.numa)]
    return {"name": f"node-{i}", "type": "Node", "costs": costs, "resources": resources}


def node_object(
    name: str, shape: Shape, exporter: str, policy: str, *, labelled: bool = False
) -> dict[str, Any]:
    cpus = shape.numa * shape.cpus
    mem = shape.numa * shape.mem_gib
    capacity = {"cpu": str(cpus), "memory": f"{mem}Gi", "pods": "110",
                "ephemeral-storage": "420Gi"}  # fmt: skip
    allocatable = {"cpu": str(cpus - shape.numa), "memory": f"{mem - 3 * shape.numa}Gi",
                   "pods": "110", "ephemeral-storage": "400Gi"}  # fmt: skip
    if shape.gpus:
        capacity["nvidia.com/gpu"] = allocatable["nvidia.com/gpu"] = str(shape.gpus * shape.numa)
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": shape.name,
        "topology.kubernetes.io/zone": f"zone-{zlib.crc32(name.encode()) % 3}",
    }
    if exporter == "nrt-koordinator" or labelled:
        labels[KOORD_LABEL] = KOORD_SPELLING[policy]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {"capacity": capacity, "allocatable": allocatable},
    }


def nrt_object(name: str, shape: Shape, policy: str, free: float, *, koord: bool) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "topology.node.k8s.io/v1alpha2",
        "kind": "NodeResourceTopology",
        "metadata": {"name": name},
        "zones": [_zone(shape, i, free) for i in range(shape.numa)],
    }
    if koord:
        # koordlet writes the deprecated topologyPolicies list (upstream-schedulers.md).
        koord_policy = {"none": "None", "best-effort": "BestEffort", "restricted": "Restricted",
                        "single-numa-node": "SingleNUMANodePodLevel"}[policy]  # fmt: skip
        obj["topologyPolicies"] = [koord_policy]
    else:
        obj["attributes"] = [
            {"name": "topologyManagerPolicy", "value": policy},
            {"name": "topologyManagerScope", "value": "container"},
            {"name": "cpuManagerPolicy", "value": "static"},
        ]
    return obj


def numatopology_object(name: str, shape: Shape, policy: str, free: float) -> dict[str, Any]:
    """Volcano's per-node CRD: cpusets as strings, policies in kubelet spelling."""
    per = shape.cpus
    cpu_detail: dict[str, Any] = {}
    allocatable_ranges = []
    for n in range(shape.numa):
        first = n * per
        free_cpus = max(0, int(per * free))
        if free_cpus:
            allocatable_ranges.append(f"{first}-{first + free_cpus - 1}")
        for c in range(per):
            cpu_detail[str(first + c)] = {"numa": n, "socket": n % 2, "core": c}
    return {
        "apiVersion": "nodeinfo.volcano.sh/v1alpha1",
        "kind": "Numatopology",
        "metadata": {"name": name},
        "spec": {
            "policies": {"CPUManagerPolicy": "static", "TopologyManagerPolicy": policy},
            "numares": {
                "cpu": {"allocatable": ",".join(allocatable_ranges), "capacity": per * shape.numa}
            },
            "cpuDetail": cpu_detail,
        },
    }


def inventory_objects(
    nodes: int = 10_000, *, seed: int = 7, labelled: bool = False
) -> Iterator[dict[str, Any]]:
    """``nodes`` Nodes with mixed shapes, exporters, policies and usage. ``labelled``: every
    Node carries Koordinator's policy label (as where koordlet labels every node), so that
    mutate's label affinity selects exactly the compatible nodes and validate judges a
    mutated pod without it (the ``judged`` stream of benchmarks/server_count.py)."""
    rng = random.Random(seed)
    for i in range(nodes):
        name = f"node-{i:05d}"
        shape = _pick_shape(rng)
        exporter = rng.choices(EXPORTERS, weights=EXPORTER_WEIGHTS)[0]
        policy = rng.choice(POLICIES)
        free = rng.choice((1.0, 1.0, 0.75, 0.5, 0.25, 0.0))
        yield node_object(name, shape, exporter, policy, labelled=labelled)
        if exporter in ("nrt-attributes", "nrt-koordinator"):
            yield nrt_object(name, shape, policy, free, koord=exporter == "nrt-koordinator")
        elif exporter == "numatopology":
            yield numatopology_object(name, shape, policy, free)


def write_inventory(path: Path, nodes: int = 10_000, *, seed: int = 7) -> Path:
    """Multi-document YAML, as ``kubectl get -o yaml`` of each object would print."""
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    with path.open("w", encoding="utf-8") as out:
        yaml.dump_all(inventory_objects(nodes, seed=seed), out, Dumper=dumper, sort_keys=False)
    return path


# ----------------------------------------------------------------------------- pods


def _env(rng: random.Random, count: int) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_NAMESPACE",
         "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
    ]  # fmt: skip
    for k in range(count):
        env.append({"name": f"APP_SETTING_{k:02d}", "value": f"value-{rng.getrandbits(48):012x}"})
    env.append(
        {"name": "DB_PASSWORD",
         "valueFrom": {"secretKeyRef": {"name": "db-credentials", "key": "password"}}}
    )  # fmt: skip
    return env


def _probe(port: int, path: str) -> dict[str, Any]:
    return {
        "httpGet": {"path": path, "port": port, "scheme": "HTTP"},
        "initialDelaySeconds": 5,
        "periodSeconds": 10,
        "timeoutSeconds": 1,
        "failureThreshold": 3,
    }


def _resources(cpu: str, memory: str, extra: dict[str, str] | None = None) -> dict[str, Any]:
    amounts = {"cpu": cpu, "memory": memory, **(extra or {})}
    return {"requests": dict(amounts), "limits": dict(amounts)}


def _container(name: str, image: str, resources: dict[str, Any], env: list[dict[str, Any]],
               mounts: list[dict[str, Any]], port: int | None) -> dict[str, Any]:  # fmt: skip
    c: dict[str, Any] = {
        "name": name,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "resources": resources,
        "env": env,
        "volumeMounts": mounts,
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
        },
    }
    if port is not None:
        c["ports"] = [{"name": "http", "containerPort": port, "protocol": "TCP"}]
        c["readinessProbe"] = _probe(port, "/readyz")
        c["livenessProbe"] = _probe(port, "/healthz")
    return c


def _volumes(rng: random.Random, count: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    volumes: list[dict[str, Any]] = [
        {"name": "kube-api-access",
         "projected": {"defaultMode": 420, "sources": [
             {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
             {"configMap": {"name": "kube-root-ca.crt",
                            "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
             {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {
                 "apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}},
        {"name": "scratch", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}},
    ]  # fmt: skip
    mounts: list[dict[str, Any]] = [
        {"name": "kube-api-access", "readOnly": True,
         "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"},
        {"name": "scratch", "mountPath": "/scratch"},
    ]  # fmt: skip
    for k in range(count):
        kind = rng.choice(("configMap", "secret"))
        name = f"{kind.lower()}-{k}"
        ref = {"name": f"app-{kind.lower()}-{k}"} if kind == "configMap" else {"secretName": name}
        volumes.append({"name": name, kind: {**ref, "defaultMode": 420}})
        mounts.append({"name": name, "mountPath": f"/etc/app/{name}", "readOnly": True})
    return volumes, mounts


DIALECTS = ("koordinator", "volcano", "hami", "kubelet")


def _dialect_bits(dialect: str, rng: random.Random) -> tuple[dict[str, str], str | None, str]:
    """(annotations, schedulerName, policy) for a pod of ``dialect``."""
    policy = rng.choice(("single-numa-node", "restricted", "best-effort"))
    if dialect == "koordinator":
        spelling = {"single-numa-node": "SingleNUMANode", "restricted": "Restricted",
                    "best-effort": "BestEffort"}[policy]  # fmt: skip
        return (
            {
                "scheduling.koordinator.sh/numa-topology-spec": json.dumps(
                    {"numaTopologyPolicy": spelling}
                ),
                "scheduling.koordinator.sh/resource-spec": json.dumps(
                    {"preferredCPUBindPolicy": "FullPCPUs"}
                ),
            },
            "koord-scheduler",
            policy,
        )
    if dialect == "volcano":
        return (
            {"volcano.sh/numa-topology-policy": policy, "scheduling.k8s.io/group-name": "pg-1"},
            "volcano",
            policy,
        )
    if dialect == "hami":
        return (
            {"hami.io/node-scheduler-policy": "binpack", "hami.io/gpu-scheduler-policy": "spread"},
            "hami-scheduler",
            policy,
        )
    return {}, None, policy


def pod_object(
    rng: random.Random,
    *,
    dialect: str,
    name: str,
    env_count: int = 14,
    volume_count: int = 4,
    app_cpu: str = "4",
    app_memory: str = "8Gi",
    gpus: int = 0,
) -> dict[str, Any]:
    """A production-looking Pod: app + sidecar + init container, env, volumes, probes."""
    annotations, scheduler, _ = _dialect_bits(dialect, rng)
    annotations = {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": "9090",
        "kubectl.kubernetes.io/default-container": "app",
        **annotations,
    }
    volumes, mounts = _volumes(rng, volume_count)
    extra = {"nvidia.com/gpu": str(gpus)} if gpus else None
    app = _container(
        "app",
        f"registry.example.com/team/app:v1.{rng.randint(0, 99)}.{rng.randint(0, 9)}",
        _resources(app_cpu, app_memory, extra),
        _env(rng, env_count),
        mounts,
        8080,
    )
    sidecar = _container(
        "metrics-exporter",
        "registry.example.com/observability/exporter:2.4.1",
        _resources("1", "512Mi"),
        _env(rng, env_count // 3),
        mounts[:1],
        9090,
    )
    init = _container(
        "migrate",
        "registry.example.com/team/migrate:v3",
        _resources("1", "256Mi"),
        _env(rng, env_count // 3),
        mounts[:2],
        None,
    )
    spec: dict[str, Any] = {
        "initContainers": [init],
        "containers": [app, sidecar],
        "volumes": volumes,
        "serviceAccountName": "app",
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": False,
        "priority": 0,
        "securityContext": {"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "tolerations": [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
             "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
             "effect": "NoExecute", "tolerationSeconds": 300},
        ],
    }  # fmt: skip
    if scheduler:
        spec["schedulerName"] = scheduler
    rs = f"{name}-{rng.getrandbits(32):08x}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": f"{rs}-",
            "namespace": "prod",
            "labels": {"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "shop",
                       "pod-template-hash": rs.rsplit("-", 1)[1], "tier": "backend"},
            "annotations": annotations,
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs,
                                 "uid": str(uuid.UUID(int=rng.getrandbits(128))),
                                 "controller": True, "blockOwnerDeletion": True}],
        },
        "spec": spec,
    }  # fmt: skip


def admission_review(pod: dict[str, Any], *, uid: str, operation: str = "CREATE") -> dict[str, Any]:
    """The AdmissionReview the apiserver posts for a Pod CREATE (webhook-anchors 1.1)."""
    gvk = {"group": "", "version": "v1", "kind": "Pod"}
    gvr = {"group": "", "version": "v1", "resource": "pods"}
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": gvk,
            "resource": gvr,
            "requestKind": gvk,
            "requestResource": gvr,
            "name": "",
            "namespace": pod["metadata"].get("namespace", "default"),
            "operation": operation,
            "userInfo": {
                "username": "system:serviceaccount:kube-system:replicaset-controller",
                "uid": "3c1f2a0e-8d0b-4b8f-9a34-1f0e8c1d2b3a",
                "groups": [
                    "system:serviceaccounts",
                    "system:serviceaccounts:kube-system",
                    "system:authenticated",
                ],
            },
            "object": pod,
            "oldObject": None,
            "dryRun": False,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    }


def realistic_pods(count: int = 12, *, seed: int = 11) -> list[dict[str, Any]]:
    """``count`` Pods cycling through the dialects, sized 4-10 KB each."""
    rng = random.Random(seed)
    pods = []
    for k in range(count):
        dialect = DIALECTS[k % len(DIALECTS)]
        pods.append(
            pod_object(
                rng,
                dialect=dialect,
                name=f"{dialect}-svc-{k}",
                env_count=rng.randint(4, 36),
                volume_count=rng.randint(1, 8),
                app_cpu=rng.choice(("2", "4", "8")),
                app_memory=rng.choice(("4Gi", "8Gi", "16Gi")),
                gpus=2 if dialect == "hami" else 0,
            )
        )
    return pods


def impossible_pod(*, seed: int = 13) -> dict[str, Any]:
    """A kubelet-only (default scheduler) Guaranteed pod wanting more whole CPUs than any
    node has: every node is compatible, so the kernel evaluates all of them and none fits
    (the full scan)."""
    rng = random.Random(seed)
    return pod_object(rng, dialect="kubelet", name="too-big", app_cpu="400", app_memory="64Gi")


def review_bodies(pods: list[dict[str, Any]], *, prefix: str) -> list[bytes]:
    out = []
    for k, pod in enumerate(pods):
        uid = str(uuid.UUID(int=(zlib.crc32(prefix.encode()) << 64) | k))
        out.append(json.dumps(admission_review(pod, uid=uid), separators=(",", ":")).encode())
    return out


_UID_LABEL = b'"uid":"'
_TIER_LABEL = b'"tier":"'


def vary(body: bytes, n: int, *, unique: bool = False) -> bytes:
    """What benchmarks/wrk/review.lua sends for its ``n``-th request of ``body``: the first
    ``"uid"`` value replaced by a fresh uid (every review has its own); with ``unique`` the
    ``tier`` label's value too (every review is a different pod)."""
    start = body.index(_UID_LABEL) + len(_UID_LABEL)
    end = body.index(b'"', start)
    out = body[:start] + f"00000000-0000-4000-8000-{n:012x}".encode() + body[end:]
    if unique:
        start = out.index(_TIER_LABEL, start) + len(_TIER_LABEL)
        end = out.index(b'"', start)
        out = out[:start] + f"t0-{n}".encode() + out[end:]
    return out


# ---- bodies as the real kube-apiserver sends them ----------------------------------------
# benchmarks/record_bodies.py recorded them byte for byte; a template marks with MARK what
# changes on every request (benchmarks/wrk/review.lua and vary_template fill it in).
APISERVER_BODIES = Path(__file__).resolve().parent.parent / "tests/fixtures/reviews/apiserver-raw"
MARK = b"@@N@@"
_ACCESS_VOLUME = re.compile(rb"kube-api-access-[a-z0-9]{5}")


def apiserver_template(body: bytes) -> bytes:
    """A recorded body with MARK where each create differs: the request uid, the pod's name
    (request.name and metadata.name, when it has one: a ReplicaSet's replica has only
    generateName at admission) and the suffix of the service-account token volume that the
    apiserver's ServiceAccount admission plugin names at random for each pod."""
    review = json.loads(body)
    request = review["request"]
    out = body.replace(f'"uid":"{request["uid"]}"'.encode(), b'"uid":"' + MARK + b'"', 1)
    name = request.get("name")
    if name:
        out = out.replace(f'"name":"{name}"'.encode(), f'"name":"{name}-'.encode() + MARK + b'"')
    out = _ACCESS_VOLUME.sub(b"kube-api-access-" + MARK, out)
    if out.count(MARK) < 2:
        raise ValueError("a recorded body without its uid or its token volume")
    return out


def vary_template(template: bytes, n: int) -> bytes:
    """The ``n``-th request of a template: every MARK replaced by a per-request token."""
    return template.replace(MARK, f"{n:x}".encode())


def apiserver_templates(webhook: str, which: str) -> list[bytes]:
    """Templates of the recorded ``{webhook}-{which}.json`` (which: pod, replica, unique:
    see apiserver_unique_templates)."""
    if which == "unique":
        return apiserver_unique_templates(webhook)
    return [apiserver_template((APISERVER_BODIES / f"{webhook}-{which}.json").read_bytes())]


# What the every-pod-different apiserver stream varies between its pods, cycling: the app
# container's CPU and memory, the QoS class (requests equal to limits, requests only, none),
# a second container, a label; each pod a ReplicaSet's replica or a named pod as recorded.
_UNIQUE_CPU = ("1", "2", "500m", "4", "1500m", "8")
_UNIQUE_MEMORY = ("1Gi", "2Gi", "512Mi", "4Gi", "3Gi")
_UNIQUE_QOS = ("Guaranteed", "Guaranteed", "Burstable", "BestEffort")
UNIQUE_LABEL = "numagate.bench/request"


def _unique_pod(pod: dict[str, Any], k: int) -> None:
    """Vary ``pod`` in place as the ``k``-th pod of the every-pod-different stream."""
    cpu, memory = _UNIQUE_CPU[k % len(_UNIQUE_CPU)], _UNIQUE_MEMORY[k % len(_UNIQUE_MEMORY)]
    qos = _UNIQUE_QOS[k % len(_UNIQUE_QOS)]
    containers = pod["spec"]["containers"]
    app = containers[0]
    amounts = {"cpu": cpu, "memory": memory}
    app["resources"] = {
        "Guaranteed": {"limits": amounts, "requests": dict(amounts)},
        "Burstable": {"requests": amounts},
        "BestEffort": {},
    }[qos]
    if k % 3 == 1:  # a sidecar with its own resources
        sidecar = json.loads(json.dumps(app))
        sidecar["name"] = "sidecar"
        sidecar["resources"] = (
            {"limits": {"cpu": "250m", "memory": "256Mi"},
             "requests": {"cpu": "250m", "memory": "256Mi"}}
            if qos == "Guaranteed" else {"requests": {"cpu": "100m"}}
        )  # fmt: skip
        containers.append(sidecar)
    labels = pod["metadata"].setdefault("labels", {})
    labels["tier"] = ("frontend", "backend", "batch")[k % 3]
    labels[UNIQUE_LABEL] = MARK.decode()  # a new value per request: the cache cannot help


def apiserver_unique_templates(webhook: str, count: int = 12) -> list[bytes]:
    """Every pod different, as a real apiserver sends them: the recorded bodies (a named pod
    and a ReplicaSet's replica, alternating) with the pod's spec varied per template
    (_unique_pod) and a label whose value is new on every request (MARK), so no two reviews
    are the same object and the decision cache misses every one. Serialized compactly in
    the recorded field order (Go's, kept by json.loads and dumps)."""
    out = []
    for k in range(count):
        which = ("pod", "replica")[k % 2]
        review = json.loads((APISERVER_BODIES / f"{webhook}-{which}.json").read_bytes())
        _unique_pod(review["request"]["object"], k)
        body = json.dumps(review, separators=(",", ":")).encode()
        out.append(apiserver_template(body))
    return out


def as_mutate_review(template: bytes) -> bytes:
    """A validate review template as the mutate review of the same create: its pod without
    ``spec.affinity`` (the recorded bodies carry none; a template that did would be
    planned again from the pod as written)."""
    review = json.loads(template)
    review["request"]["object"]["spec"].pop("affinity", None)
    return json.dumps(review, separators=(",", ":")).encode()


def judged_template(template: bytes, mutate_answer: bytes) -> bytes:
    """The validate review ``template`` with its pod as the mutate answer ``mutate_answer``
    (to :func:`as_mutate_review` of it) leaves it: the answer's JSONPatch applied (jsonpatch,
    as the apiserver applies it). Every pod different, each carrying numagate's own affinity:
    the reviews whose judged intent is the pod without it (issue 27's third stream)."""
    import base64

    import jsonpatch

    response = json.loads(mutate_answer)["response"]
    if "patch" not in response:
        raise ValueError(f"mutate did not patch the pod: {response}")
    review = json.loads(as_mutate_review(template))
    ops = json.loads(base64.b64decode(response["patch"]))
    request = review["request"]
    request["object"] = jsonpatch.apply_patch(request["object"], ops)
    return json.dumps(review, separators=(",", ":")).encode()


@dataclass(frozen=True)
class Inputs:
    """Paths of one generated benchmark input set."""

    inventory: Path
    realistic: list[Path]
    impossible: list[Path]


def write_inputs(out: Path, *, nodes: int = 10_000, pods: int = 12) -> Inputs:
    out.mkdir(parents=True, exist_ok=True)
    inventory = write_inventory(out / f"inventory-{nodes}.yaml", nodes)
    realistic = []
    for k, body in enumerate(review_bodies(realistic_pods(pods), prefix="r")):
        path = out / f"review-{k:02d}.json"
        path.write_bytes(body)
        realistic.append(path)
    impossible_path = out / "review-impossible.json"
    impossible_path.write_bytes(review_bodies([impossible_pod()], prefix="i")[0])
    return Inputs(inventory, realistic, [impossible_path])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--nodes", type=int, default=10_000)
    args = parser.parse_args()
    inputs = write_inputs(args.out, nodes=args.nodes)
    sizes = [p.stat().st_size for p in inputs.realistic]
    print(f"inventory: {inputs.inventory} ({inputs.inventory.stat().st_size} bytes)")
    print(f"reviews: {len(sizes)} realistic ({min(sizes)}-{max(sizes)} bytes), 1 impossible")


if __name__ == "__main__":
    main()
