"""Watches opened when numagate is installed and read by later tests: the real apiserver
sends a BOOKMARK about once a minute on a long watch (its watch cache's heartbeat; none
was seen on watches of a few seconds), so the suite watches from the start instead of
waiting a minute in a test.

- numagate's own ``Reflector`` on NodeResourceTopologies, as the shipped ServiceAccount;
- a raw watch of Nodes (the admin), every event kept, for the bookmark's shape.
"""

from __future__ import annotations

import http.client
import json
import random
import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from kubernetes import config

from tests.e2e.controlplane import ControlPlane
from webhook.inventory.live import NODE_RESOURCE_TOPOLOGIES
from webhook.inventory.objects import Timing
from webhook.inventory.reflector import Reflector


class _Listener:
    def on_replaced(self, reflector: Any, old: Any, new: Any, changed: bool) -> None:
        pass

    def on_event(self, reflector: Any, kind: str, key: Any, item: dict[str, Any]) -> None:
        pass

    def on_touch(self) -> None:
        pass


@dataclass
class Watches:
    reflector: Reflector
    node_events: list[dict[str, Any]] = field(default_factory=list)
    stopping: threading.Event = field(default_factory=threading.Event)

    def stop(self) -> None:
        self.stopping.set()
        self.reflector.cut()


def start_watches(plane: ControlPlane, sa_kubeconfig: str) -> Watches:
    api = config.new_client_from_config(sa_kubeconfig)
    stopping = threading.Event()
    timing = Timing(watch_timeout=300, request_timeout=10, backoff_initial=0.2, backoff_max=2,
                    absent_retry=5, page_size=500)  # fmt: skip
    reflector = Reflector(
        NODE_RESOURCE_TOPOLOGIES, api, _Listener(), timing, stopping, random.Random(1)
    )
    watches = Watches(reflector, stopping=stopping)
    threading.Thread(target=reflector.run, daemon=True, name="e2e-reflector").start()

    def raw_nodes() -> None:
        conn = http.client.HTTPSConnection(
            "127.0.0.1", plane.apiserver_port, context=plane.ssl_context(), timeout=700
        )
        try:
            conn.request("GET", "/api/v1/nodes")
            rv = json.loads(conn.getresponse().read())["metadata"]["resourceVersion"]
            params = {
                "watch": "true",
                "allowWatchBookmarks": "true",
                "timeoutSeconds": 600,
                "resourceVersion": rv,
            }
            conn.request("GET", f"/api/v1/nodes?{urlencode(params)}")
            resp = conn.getresponse()
            while not stopping.is_set():
                line = resp.readline()
                if not line:
                    break
                watches.node_events.append(json.loads(line))
        except (OSError, http.client.HTTPException, ValueError):
            pass  # an apiserver restart ends it; the test says what it saw
        finally:
            conn.close()

    threading.Thread(target=raw_nodes, daemon=True, name="e2e-raw-watch").start()
    return watches
