"""A real Kubernetes control plane for the end-to-end tests and benchmarks: etcd,
kube-apiserver, kube-scheduler and kwok (every node fake, every other part real), built by
tests/e2e/build.py. No Docker, no kubelet, no kube-controller-manager (docs/e2e.md says
what that leaves out).

    python -m tests.e2e.controlplane up     # prints the kubeconfig path, Ctrl-C tears down

Each process runs in its own process group and is stopped by its PID; its output goes to
``<workdir>/logs/<name>.log`` (``ControlPlane.logs()`` returns the tails, printed when a
test fails).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.e2e import build
from tests.e2e.pki import Pki, write_pki

SERVICE_CIDR = "10.0.0.0/24"
SA_ISSUER = "https://kubernetes.default.svc.cluster.local"
STAGES = build.STAGES


class ControlPlaneError(RuntimeError):
    """A binary is missing or a process did not become ready; the message says which."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(check: Callable[[], bool], timeout: float, what: str, step: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            if check():
                return
        time.sleep(step)
    raise ControlPlaneError(f"timed out after {timeout:.0f} s waiting for {what}")


def kubeconfig_doc(server: str, ca: Path, cert: Path | None, key: Path | None,
                   token: str | None = None, user: str = "admin") -> dict[str, Any]:  # fmt: skip
    """A one-context kubeconfig: client certificate, or a bearer token."""
    creds: dict[str, str] = {"token": token} if token else {
        "client-certificate": str(cert), "client-key": str(key)}  # fmt: skip
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "e2e", "cluster": {"server": server, "certificate-authority": str(ca)}}
        ],
        "users": [{"name": user, "user": creds}],
        "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": user}}],
        "current-context": "e2e",
    }


PR_SET_PDEATHSIG = 1


def _on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the parent dies. A pytest run killed by a
    timeout does not tear down its session fixture, and etcd, kube-apiserver, kwok and
    kube-scheduler would keep running (SIGTERM is not enough: kube-apiserver's graceful
    shutdown waits on an etcd that died beside it). The signal follows the thread that
    forked, so only processes started from the main thread ask for it (a restart from a
    thread that ends would otherwise kill the restarted process)."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass
class Proc:
    name: str
    cmd: list[str]
    log: Path
    popen: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.popen = subprocess.Popen(
                self.cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group: stopped by PID, children too
                preexec_fn=_die_with_parent if _on_main_thread() else None,
            )  # fmt: skip

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        if self.popen is None or self.popen.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGTERM)
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait()

    def tail(self, lines: int = 40) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(text[-lines:])


@dataclass
class ControlPlane:
    """Start with ``start()``, stop with ``stop()`` (or use it as a context manager)."""

    workdir: Path
    bin_dir: Path = field(default_factory=build.bin_dir)
    procs: dict[str, Proc] = field(default_factory=dict)
    etcd_port: int = 0
    apiserver_port: int = 0
    pki: Pki | None = None
    apiserver_flags: list[str] = field(default_factory=list)
    # The benchmarks measure admission alone: no scheduler competing for the 2 cores.
    with_scheduler: bool = True

    # -- paths
    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.apiserver_port}"

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "admin.kubeconfig"

    def binary(self, name: str) -> Path:
        return self.bin_dir / name

    # -- lifecycle
    def start(self) -> ControlPlane:
        missing = build.missing()
        if missing:
            raise ControlPlaneError(
                f"the end-to-end binaries are not built ({', '.join(missing)} missing "
                f"in {self.bin_dir}); run `make e2e-build` (python3 tests/e2e/build.py)"
            )
        (self.workdir / "logs").mkdir(parents=True, exist_ok=True)
        self.pki = write_pki(self.workdir / "pki")
        self.etcd_port, self.apiserver_port = free_port(), free_port()
        try:
            self._start_etcd()
            self._write_kubeconfigs()
            self.start_apiserver()
            self._ensure_default_service_account("default")
            if self.with_scheduler:
                self._start_scheduler()
            self._start_kwok()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for name in ("kwok", "kube-scheduler", "kube-apiserver", "etcd"):
            if name in self.procs:
                self.procs[name].stop()

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def logs(self, lines: int = 40) -> str:
        """The last lines of every process's log, for a failing test's report."""
        parts = [f"----- {p.name} ({p.log}) -----\n{p.tail(lines)}" for p in self.procs.values()]
        return "\n".join(parts)

    def _spawn(self, name: str, cmd: list[str]) -> Proc:
        proc = Proc(name, cmd, self.workdir / "logs" / f"{name}.log")
        proc.start()
        self.procs[name] = proc
        return proc

    def _wait(self, proc: Proc, check: Callable[[], bool], timeout: float, what: str) -> None:
        def ready() -> bool:
            if not proc.alive():
                raise ControlPlaneError(f"{proc.name} exited ({proc.popen.returncode if proc.popen else '?'}):\n{proc.tail()}")  # fmt: skip
            return check()

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if ready():
                    return
            except ControlPlaneError:
                raise
            except Exception:
                pass
            time.sleep(0.1)
        raise ControlPlaneError(f"{proc.name}: timed out after {timeout:.0f} s waiting for {what}:\n{proc.tail()}")  # fmt: skip

    # -- etcd
    @property
    def etcd_url(self) -> str:
        return f"http://127.0.0.1:{self.etcd_port}"

    def _start_etcd(self) -> None:
        peer = f"http://127.0.0.1:{free_port()}"
        proc = self._spawn("etcd", [
            str(self.binary("etcd")), "--name", "e2e", "--data-dir", str(self.workdir / "etcd"),
            "--listen-client-urls", self.etcd_url, "--advertise-client-urls", self.etcd_url,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"e2e={peer}", "--unsafe-no-fsync",
            "--quota-backend-bytes", str(8 << 30), "--log-level", "warn",
        ])  # fmt: skip
        self._wait(proc, lambda: json.loads(_get(self.etcd_url + "/health"))["health"] == "true",
                   30, "etcd /health")  # fmt: skip

    def etcd_call(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """etcd's gRPC gateway (JSON over HTTP): /v3/kv/range, /v3/kv/compaction, ..."""
        req = urllib.request.Request(self.etcd_url + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})  # fmt: skip
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read())

    def compact_etcd(self) -> int:
        """Compact etcd's history to its current revision (what the apiserver does every 5
        minutes); a watch resuming from before it gets 410 Gone. Returns the revision."""
        key = base64.b64encode(b"/registry").decode()
        revision = int(
            self.etcd_call("/v3/kv/range", {"key": key, "limit": 1})["header"]["revision"]
        )
        self.etcd_call("/v3/kv/compaction", {"revision": revision, "physical": True})
        return revision

    # -- kube-apiserver
    def _write_kubeconfigs(self) -> None:
        assert self.pki is not None
        pki = self.pki
        self.kubeconfig.write_text(yaml.safe_dump(
            kubeconfig_doc(self.server, pki.ca, pki.admin_cert, pki.admin_key)))  # fmt: skip
        (self.workdir / "scheduler.kubeconfig").write_text(yaml.safe_dump(kubeconfig_doc(
            self.server, pki.ca, pki.scheduler_cert, pki.scheduler_key, user="scheduler")))  # fmt: skip

    def start_apiserver(self, timeout: float = 60.0) -> None:
        """Start (or restart, keeping etcd and the port) the kube-apiserver; wait for /readyz."""
        assert self.pki is not None
        pki = self.pki
        if "kube-apiserver" in self.procs:
            self.procs["kube-apiserver"].stop()
        proc = self._spawn("kube-apiserver", [
            str(self.binary("kube-apiserver")),
            "--etcd-servers", self.etcd_url,
            "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
            "--secure-port", str(self.apiserver_port),
            "--cert-dir", str(self.workdir / "apiserver-certs"),
            "--tls-cert-file", str(pki.serving_cert), "--tls-private-key-file", str(pki.serving_key),
            "--client-ca-file", str(pki.ca),
            # The front-proxy CA that kube-scheduler's delegated authentication reads from
            # kube-system/extension-apiserver-authentication (it logs an error without).
            "--requestheader-client-ca-file", str(pki.ca),
            "--requestheader-allowed-names", "front-proxy-client",
            "--requestheader-username-headers", "X-Remote-User",
            "--requestheader-group-headers", "X-Remote-Group",
            "--requestheader-extra-headers-prefix", "X-Remote-Extra-",
            "--authorization-mode", "RBAC",
            "--service-cluster-ip-range", SERVICE_CIDR,
            "--service-account-issuer", SA_ISSUER,
            "--service-account-key-file", str(pki.sa_public),
            "--service-account-signing-key-file", str(pki.sa_private),
            "--allow-privileged=true", "--profiling=false",
            # It taints every new node not-ready until the node lifecycle controller (in the
            # kube-controller-manager, absent here) sees it Ready: nothing would be scheduled.
            "--disable-admission-plugins", "TaintNodesByCondition",
            "--v", "1",
            *self.apiserver_flags,
        ])  # fmt: skip
        self._wait(proc, lambda: _get(self.server + "/readyz", self.ssl_context()) == b"ok",
                   timeout, "kube-apiserver /readyz")  # fmt: skip

    def ssl_context(self) -> ssl.SSLContext:
        """TLS to the apiserver as the admin (urllib, for /readyz and /metrics)."""
        assert self.pki is not None
        ctx = ssl.create_default_context(cafile=str(self.pki.ca))
        ctx.load_cert_chain(str(self.pki.admin_cert), str(self.pki.admin_key))
        return ctx

    def get(self, path: str) -> bytes:
        """A GET on the apiserver as the admin (``/metrics``, ``/readyz``, raw API paths)."""
        return _get(self.server + path, self.ssl_context())

    def _ensure_default_service_account(self, namespace: str) -> None:
        # No kube-controller-manager: its serviceaccount controller would create it.
        self.kubectl("create", "serviceaccount", "default", "-n", namespace, check=False)

    def create_namespace(self, name: str, labels: dict[str, str] | None = None) -> None:
        """A namespace with its `default` ServiceAccount (the ServiceAccount admission
        plugin refuses pods without it; no controller-manager creates it here)."""
        doc = {"apiVersion": "v1", "kind": "Namespace",
               "metadata": {"name": name, "labels": labels or {}}}  # fmt: skip
        self.kubectl("apply", "-f", "-", input=json.dumps(doc))
        self._ensure_default_service_account(name)

    # -- kube-scheduler
    def _start_scheduler(self) -> None:
        port = free_port()
        config = str(self.workdir / "scheduler.kubeconfig")
        proc = self._spawn("kube-scheduler", [
            str(self.binary("kube-scheduler")), "--kubeconfig", config,
            "--authentication-kubeconfig", config, "--authorization-kubeconfig", config,
            "--leader-elect=false", "--bind-address", "127.0.0.1", "--secure-port", str(port),
            "--cert-dir", str(self.workdir / "scheduler-certs"), "--v", "1",
        ])  # fmt: skip
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE  # its self-signed serving cert; health only
        url = f"https://127.0.0.1:{port}/readyz"
        self._wait(proc, lambda: _get(url, insecure) == b"ok", 60, "kube-scheduler /readyz")

    # -- kwok
    def _start_kwok(self) -> None:
        port = free_port()
        proc = self._spawn("kwok", [
            str(self.binary("kwok")), "--kubeconfig", str(self.kubeconfig),
            "--manage-all-nodes=true", "--node-lease-duration-seconds=0",
            "--config", str(self.bin_dir / STAGES),
            "--server-address", f"127.0.0.1:{port}",
        ])  # fmt: skip
        self._wait(proc, lambda: _get(f"http://127.0.0.1:{port}/healthz") == b"ok", 30,
                   "kwok /healthz")  # fmt: skip
        # Ready means a node kwok manages turns Ready; the probe node is removed after.
        name = "e2e-readiness-probe"
        self.kubectl("apply", "-f", "-", input=json.dumps(fake_node(name)))
        self._wait(proc, lambda: self.node_ready(name), 30, f"node {name} Ready (kwok)")
        self.kubectl("delete", "node", name, "--wait=false")

    def node_ready(self, name: str) -> bool:
        out = self.kubectl("get", "node", name, "-o",
                           'jsonpath={.status.conditions[?(@.type=="Ready")].status}',
                           check=False)  # fmt: skip
        return out.returncode == 0 and out.stdout.strip() == "True"

    # -- clients
    def kubectl(self, *args: str, input: str | None = None, check: bool = True,
                kubeconfig: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:  # fmt: skip
        """The built kubectl against this control plane (the admin unless ``kubeconfig``).
        The kubeconfig goes in $KUBECONFIG: kubectl looks a plugin up only when the
        plugin's name comes before any flag (`kubectl numagate pending -A`)."""
        env = {**self.env(), "KUBECONFIG": str(kubeconfig or self.kubeconfig)}
        cmd = [str(self.binary("kubectl")), *args]
        proc = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout,
                              env=env)  # fmt: skip
        if check and proc.returncode != 0:
            raise ControlPlaneError(
                f"kubectl {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}"
            )
        return proc

    def env(self) -> dict[str, str]:
        """The environment for a command run against this cluster: KUBECONFIG, and the built
        kubectl first on PATH (kubectl finds the `kubectl-numagate` plugin on PATH)."""
        path = os.pathsep.join([str(self.bin_dir), str(Path(sys.executable).parent),
                                os.environ.get("PATH", "")])  # fmt: skip
        return {**os.environ, "KUBECONFIG": str(self.kubeconfig), "PATH": path}

    def write_token_kubeconfig(self, path: Path, token: str, user: str) -> Path:
        assert self.pki is not None
        path.write_text(yaml.safe_dump(kubeconfig_doc(self.server, self.pki.ca, None, None,
                                                      token=token, user=user)))  # fmt: skip
        return path


def fake_node(name: str, labels: dict[str, str] | None = None, cpu: str = "32",
              memory: str = "128Gi", extra: dict[str, str] | None = None) -> dict[str, Any]:  # fmt: skip
    """A Node kwok manages (the annotation kwok's own examples use) with a fixed capacity."""
    capacity = {"cpu": cpu, "memory": memory, "pods": "110", **(extra or {})}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"node.alpha.kubernetes.io/ttl": "0", "kwok.x-k8s.io/node": "fake"},
            "labels": {"kubernetes.io/hostname": name, "type": "kwok", **(labels or {})},
        },
        "spec": {},
        "status": {"capacity": capacity, "allocatable": capacity},
    }


def _get(url: str, context: ssl.SSLContext | None = None) -> bytes:
    with urllib.request.urlopen(url, timeout=5, context=context) as resp:
        return resp.read()


@contextlib.contextmanager
def running(workdir: Path | None = None) -> Iterator[ControlPlane]:
    """A started control plane in ``workdir`` (a new temporary directory if None)."""
    tmp = None
    if workdir is None:
        tmp = workdir = Path(tempfile.mkdtemp(prefix="numagate-e2e-"))
    plane = ControlPlane(workdir)
    try:
        yield plane.start()
    finally:
        plane.stop()
        if tmp is not None and not os.environ.get("NUMAGATE_E2E_KEEP"):
            shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="A local etcd + kube-apiserver + kube-scheduler + kwok."
    )
    parser.add_argument("command", choices=["up"], help="start it, print the kubeconfig path, wait")
    parser.add_argument(
        "--workdir", type=Path, help="keep data and logs here (default: a temp dir, removed)"
    )
    args = parser.parse_args(argv)
    try:
        with running(args.workdir) as plane:
            print(plane.kubeconfig, flush=True)
            print(f"export KUBECONFIG={plane.kubeconfig}  # logs in {plane.workdir / 'logs'}; Ctrl-C stops",
                  file=sys.stderr, flush=True)  # fmt: skip
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
            while all(p.alive() for p in plane.procs.values()):
                time.sleep(1)
            print(plane.logs(), file=sys.stderr)
            return 1
    except KeyboardInterrupt:
        return 0
    except ControlPlaneError as exc:
        print(f"control plane: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
