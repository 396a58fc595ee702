"""The CLI's view of a live cluster (``explain``, ``lint``, ``pending``), as kubectl plugins
read it: the kubeconfig (``--kubeconfig``, ``$KUBECONFIG``, ``~/.kube/config``, by the one
builder in :mod:`webhook.inventory.kube`), ``--context``, ``-n``.

The inventory is read by the live source the server runs (:class:`webhook.inventory.live.
LiveSource`: the same list code, paging, CRD versions, bound pods) into a ``Collector``,
stopped as soon as it has listed everything once. On a terminal a progress line says what
is being read.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from typing import Any

import kubernetes.client
from kubernetes.client.rest import ApiException
from urllib3.exceptions import HTTPError

from webhook.inventory.kube import KubeConfigError, build_api_client, default_namespace

# How long the first complete list may take (10,000 nodes take a few seconds).
LIST_TIMEOUT_SECONDS = 120.0
POD_REF_PREFIXES = ("pod/", "pods/", "po/")


class ClusterError(Exception):
    """The cluster could not be reached or read; the message says what and why."""


def client(args: argparse.Namespace) -> kubernetes.client.ApiClient:
    try:
        return build_api_client(kubeconfig=args.kubeconfig, context=args.context)
    except KubeConfigError as exc:
        raise ClusterError(str(exc)) from None


def namespace(args: argparse.Namespace) -> str:
    return str(args.namespace or default_namespace(args.kubeconfig, args.context))


def _progress(collected: Any, started: float) -> None:
    if sys.stderr.isatty():
        count = len(collected)
        sys.stderr.write(
            f"\rnumagate: reading the cluster's inventory: {count} objects "
            f"({time.monotonic() - started:.0f} s)"
        )
        sys.stderr.flush()


def read_inventory(api: kubernetes.client.ApiClient) -> list[dict[str, Any]]:
    """Nodes, NodeResourceTopologies, Numatopologies, bound Pods and the DRA objects
    (webhook/dra/state.py: optional, a cluster without them lists the rest), listed once."""
    from webhook.dra.state import DRA_RESOURCES
    from webhook.inventory.live import BOUND_PODS, DEFAULT_RESOURCES, Collector, LiveSource

    resources = (*DEFAULT_RESOURCES, *DRA_RESOURCES, BOUND_PODS)
    collected = Collector(resources)
    live = LiveSource(api, collected, resources=resources)
    started = time.monotonic()
    live.start()
    try:
        while not live.synced:
            if time.monotonic() - started > LIST_TIMEOUT_SECONDS:
                errors = "; ".join(f"{k}: {v}" for k, v in live.errors.items()) or "no answer"
                raise ClusterError(
                    f"{api.configuration.host}: the inventory was not listed in "
                    f"{LIST_TIMEOUT_SECONDS:.0f} s ({errors})"
                )
            _progress(collected, started)
            time.sleep(0.05)
        return collected.objects()
    finally:
        live.stop()
        if sys.stderr.isatty():
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def _raw(call: Any, *args: Any, **kwargs: Any) -> Any:
    """A JSON body from a kubernetes client call, with errors in one line."""
    try:
        response = call(*args, _preload_content=False, **kwargs)
        return json.loads(response.data)
    except ApiException as exc:
        try:
            message = json.loads(exc.body or "{}").get("message") or exc.reason
        except ValueError:
            message = exc.reason
        raise ClusterError(f"{exc.status} {message}") from None
    except (HTTPError, OSError) as exc:
        raise ClusterError(f"cannot reach the API server: {exc}") from None


def read_pod(api: kubernetes.client.ApiClient, ns: str, name: str) -> dict[str, Any]:
    pod: dict[str, Any] = _raw(kubernetes.client.CoreV1Api(api).read_namespaced_pod, name, ns)
    pod.setdefault("apiVersion", "v1")
    pod.setdefault("kind", "Pod")
    return pod


def pending_pods(api: kubernetes.client.ApiClient, ns: str | None) -> list[dict[str, Any]]:
    """Pods not bound to a node yet (phase Pending, no spec.nodeName), in ``ns`` or all."""
    core = kubernetes.client.CoreV1Api(api)
    selector = "status.phase=Pending,spec.nodeName="
    if ns is None:
        body = _raw(core.list_pod_for_all_namespaces, field_selector=selector)
    else:
        body = _raw(core.list_namespaced_pod, ns, field_selector=selector)
    pods = [dict(p, apiVersion="v1", kind="Pod") for p in body.get("items") or []]
    return [p for p in pods if not (p.get("spec") or {}).get("nodeName")]


def pod_ref(text: str) -> str | None:
    """``pod/NAME`` (``pods/``, ``po/``) -> NAME; anything else (a file) -> None."""
    for prefix in POD_REF_PREFIXES:
        if text.startswith(prefix) and len(text) > len(prefix) and "/" not in text[len(prefix) :]:
            return text[len(prefix) :]
    return None


def snapshot_file(objects: list[dict[str, Any]], tmpdir: str, name: str) -> str:
    """Write objects as a List file (what explain reads) in ``tmpdir``."""
    path = f"{tmpdir}/{name}.json"
    with open(path, "w", encoding="utf-8") as out:
        json.dump({"apiVersion": "v1", "kind": "List", "items": objects}, out)
    return path


def temporary_dir() -> tempfile.TemporaryDirectory[str]:
    return tempfile.TemporaryDirectory(prefix="numagate-cluster-")
