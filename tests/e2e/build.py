"""Build the real control plane's binaries from the Go module proxy, once per version.

The end-to-end suite runs etcd, kube-apiserver, kube-scheduler, kubectl and kwok, built
here from the modules in tests/e2e/toolchain/ (go.mod, go.sum and a blank-import tools
file each; no Go code of ours). The binaries go to a cache outside the checkout, keyed
by each module's go.mod and go.sum, so a second run (and CI's second pass) reuses them.

    python tests/e2e/build.py            # build what is missing, print where it is
    python tests/e2e/build.py --print    # only print the bin directory (build first)

A cold build prints each step and its time; a failure names the step, the command and the
last lines Go printed.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import resource
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

TOOLCHAIN = Path(__file__).resolve().parent / "toolchain"
KUBERNETES_VERSION = "v1.36.3"
ETCD_VERSION = "v3.6.16"
KWOK_VERSION = "v0.8.0"


def cache_root() -> Path:
    """Where built binaries live: $NUMAGATE_E2E_CACHE, else ~/.cache/numagate/e2e."""
    env = os.environ.get("NUMAGATE_E2E_CACHE")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "numagate" / "e2e"


def _k8s_ldflags() -> str:
    major, minor = KUBERNETES_VERSION.lstrip("v").split(".")[:2]
    values = {
        "gitVersion": KUBERNETES_VERSION,
        "gitMajor": major,
        "gitMinor": minor,
        "gitTreeState": "clean",
        "buildDate": "1970-01-01T00:00:00Z",
    }
    flags = []
    # kubectl and the servers report their version from component-base; client-go's copy is
    # what a client sends in its user agent.
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [f"-X {package}.{key}={value}" for key, value in values.items()]
    return " ".join(["-s", "-w", *flags])


@dataclass(frozen=True)
class Binary:
    name: str
    module: str  # folder under toolchain/
    package: str
    ldflags: str


BINARIES = (
    Binary("etcd", "etcd", "go.etcd.io/etcd/server/v3", "-s -w"),
    Binary("kube-apiserver", "kubernetes", "k8s.io/kubernetes/cmd/kube-apiserver", _k8s_ldflags()),
    Binary("kube-scheduler", "kubernetes", "k8s.io/kubernetes/cmd/kube-scheduler", _k8s_ldflags()),
    Binary("kubectl", "kubernetes", "k8s.io/kubernetes/cmd/kubectl", _k8s_ldflags()),
    Binary(
        "kwok",
        "kwok",
        "sigs.k8s.io/kwok/cmd/kwok",
        f"-s -w -X sigs.k8s.io/kwok/pkg/consts.Version={KWOK_VERSION}",
    ),
)


def module_key(module: str) -> str:
    """A short hash of the module's go.mod and go.sum: a new version is a new cache entry."""
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum"):
        digest.update((TOOLCHAIN / module / name).read_bytes())
    return digest.hexdigest()[:12]


def bin_dir() -> Path:
    """The directory holding every binary of the current toolchain files."""
    keys = "-".join(module_key(m) for m in ("kubernetes", "etcd", "kwok"))
    return cache_root() / f"bin-{hashlib.sha256(keys.encode()).hexdigest()[:12]}"


# kwok v0.8 has no built-in stages: the node and pod lifecycles it ships as files in its
# module (kustomize/stage/...). No node heartbeat: without a kube-controller-manager nothing
# marks a silent node NotReady, and 10,000 heartbeats would load the apiserver for nothing.
STAGES = "kwok-stages.yaml"
STAGE_FILES = (
    "kustomize/stage/node/fast/node-initialize.yaml",
    "kustomize/stage/pod/general/pod-create.yaml",
    "kustomize/stage/pod/general/pod-init-container-running.yaml",
    "kustomize/stage/pod/general/pod-init-container-completed.yaml",
    "kustomize/stage/pod/general/pod-ready.yaml",
    "kustomize/stage/pod/general/pod-complete.yaml",
    "kustomize/stage/pod/general/pod-delete.yaml",
)


def missing() -> list[str]:
    """The binaries (and kwok's stage file) not built yet for the current toolchain files."""
    names = [b.name for b in BINARIES] + [STAGES]
    return [name for name in names if not (bin_dir() / name).is_file()]


class BuildError(RuntimeError):
    pass


def _go() -> str:
    go = shutil.which("go")
    if go is None:
        raise BuildError(
            "the end-to-end suite needs Go (1.26 or newer) on PATH to build etcd, "
            "kube-apiserver, kube-scheduler, kubectl and kwok; none was found"
        )
    return go


def _run(step: str, cmd: list[str], cwd: Path, env: dict[str, str]) -> None:
    started = time.monotonic()
    print(f"[e2e build] {step} ...", file=sys.stderr, flush=True)
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-30:])
        raise BuildError(
            f"step {step!r} failed (exit {proc.returncode}): {' '.join(cmd)}\nin {cwd}\n{tail}"
        )
    print(f"[e2e build] {step}: {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)


def build() -> Path:
    """Build every missing binary; return the bin directory."""
    target = bin_dir()
    todo = [b for b in BINARIES if not (target / b.name).is_file()]
    if not todo:
        if not (target / STAGES).is_file():
            _write_stages(_go(), target)
        return target
    go = _go()
    target.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod"}
    started = time.monotonic()
    print(
        f"[e2e build] building {', '.join(b.name for b in todo)} into {target} "
        "(first time only; about 15-25 minutes on 2 cores)",
        file=sys.stderr,
        flush=True,
    )
    for module in sorted({b.module for b in todo}):
        _run(f"download {module} modules", [go, "mod", "download"], TOOLCHAIN / module, env)
    for binary in todo:
        partial = target / f".{binary.name}.partial"
        _run(
            f"build {binary.name}",
            [
                go,
                "build",
                "-trimpath",
                "-ldflags",
                binary.ldflags,
                "-o",
                str(partial),
                binary.package,
            ],
            TOOLCHAIN / binary.module,
            env,
        )
        partial.rename(target / binary.name)  # whole or absent: an interrupted build is redone
    _write_stages(go, target)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(
        f"[e2e build] done in {time.monotonic() - started:.0f} s; "
        f"largest child process peak RSS {peak:.0f} MiB",
        file=sys.stderr,
        flush=True,
    )
    return target


def _write_stages(go: str, target: Path) -> None:
    """Copy kwok's node and pod stage files from its module into one file next to kwok."""
    env = {**os.environ, "GOFLAGS": "-mod=mod"}
    proc = subprocess.run([go, "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kwok"],
                          cwd=TOOLCHAIN / "kwok", env=env, capture_output=True, text=True)  # fmt: skip
    if proc.returncode != 0 or not proc.stdout.strip():
        raise BuildError(
            f"step 'kwok stages' failed: go list -m sigs.k8s.io/kwok: {proc.stderr.strip()}"
        )
    module = Path(proc.stdout.strip())
    docs = [(module / name).read_text(encoding="utf-8").strip() for name in STAGE_FILES]
    partial = target / f".{STAGES}.partial"
    partial.write_text("\n---\n".join(docs) + "\n", encoding="utf-8")
    partial.rename(target / STAGES)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--print", action="store_true", help="print the bin directory only")
    args = parser.parse_args(argv)
    if args.print:
        print(bin_dir())
        return 0 if not missing() else 1
    try:
        print(build())
    except BuildError as exc:
        print(f"[e2e build] {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
