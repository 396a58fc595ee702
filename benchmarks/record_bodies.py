"""Record the AdmissionReview bodies a real kube-apiserver sends, byte for byte (issue 27):
the request-path benchmarks (server_count.py, server_ab.py ``--stream apiserver``) replay
them with a new name and uid per request. tests/e2e/test_reviews.py keeps scrubbed,
pretty-printed fixtures for the contract tests; these are the bytes as they came.

    .venv/bin/python benchmarks/record_bodies.py [--out tests/fixtures/reviews/apiserver-raw]

Starts etcd, kube-apiserver and kwok from tests/e2e (``make e2e-build``), registers a
recording webhook (mutating and validating, Ignore) and creates through the API, as
benchmarks/e2e_creates.py does (urllib3, its user agent): a pod like that benchmark's
(its own CPU, memory and Koordinator policy) and a ReplicaSet's replica (generateName,
ownerReferences, the pod-template-hash label; no controller-manager runs here, so it is
posted as the ReplicaSet controller would).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import urllib3

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent)]

from tests.e2e.cluster import create, koord, pod  # noqa: E402
from tests.e2e.controlplane import running  # noqa: E402
from tests.e2e.hookserver import POD_RULES, hook_server, recorder_configs  # noqa: E402

OUT = HERE.parent / "tests" / "fixtures" / "reviews" / "apiserver-raw"
NS = "bench"


def replica(name_prefix: str) -> dict[str, object]:
    """A pod as a ReplicaSet's controller posts it (generateName, ownerReferences)."""
    doc = pod("", cpu="1500m", memory="2Gi", annotations=koord("SingleNUMANode"), namespace=NS,
              labels={"app": "web", "pod-template-hash": "5d8f9c7b6"})  # fmt: skip
    meta = doc["metadata"]
    assert isinstance(meta, dict)
    del meta["name"]
    meta["generateName"] = name_prefix
    meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d8f9c7b6",
                                "uid": "6f1f3c2e-9a8b-4c7d-8e6f-0a1b2c3d4e5f", "controller": True,
                                "blockOwnerDeletion": True}]  # fmt: skip
    return doc


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args(argv)
    with running() as plane, hook_server(plane.workdir / "hook") as rec:
        plane.create_namespace(NS, labels={"kubernetes.io/metadata.name": NS})
        for cfg in recorder_configs(rec, "recorder", POD_RULES, NS):
            create(plane, cfg, check=True)
        time.sleep(2)
        assert plane.pki is not None
        api = urllib3.HTTPSConnectionPool(
            "127.0.0.1", plane.apiserver_port, ca_certs=str(plane.pki.ca),
            cert_file=str(plane.pki.admin_cert), key_file=str(plane.pki.admin_key),
            assert_hostname="127.0.0.1", retries=False, timeout=30,
        )  # fmt: skip
        docs = {
            "pod": pod("bench-0", cpu="1234m", memory="1500Mi", annotations=koord("Restricted"),
                       namespace=NS),
            "replica": replica("web-5d8f9c7b6-"),
        }  # fmt: skip
        args.out.mkdir(parents=True, exist_ok=True)
        for name, doc in docs.items():
            start = len(rec.recorded)
            resp = api.request("POST", f"/api/v1/namespaces/{NS}/pods", body=json.dumps(doc).encode(),
                               headers={"Content-Type": "application/json"})  # fmt: skip
            if resp.status >= 300:
                raise SystemExit(f"{name}: {resp.status} {resp.data[:300]!r}")
            for r in rec.recorded[start:]:
                webhook = r.path.split("?")[0].strip("/")
                (args.out / f"{webhook}-{name}.json").write_bytes(r.body)
                print(f"{webhook}-{name}: {len(r.body)} bytes, query {r.path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
