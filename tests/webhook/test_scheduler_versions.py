"""schedulerVersions (issue 28): the configuration names the releases the cluster runs, and
the webhook, `numagate review` and `numagate lint` check pods against them; scheduler-owned
HAMi allocation annotations are denied on CREATE."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml

from certs.authority import CertPaths
from core.intent.versions import SchedulerVersions
from tests.builders.objects import SMALL, build_review
from tests.webhook.harness import ApiServer, served
from webhook.cli.main import main
from webhook.config import ConfigError, parse_config

HGPU = "hami.io/gpu-scheduler-policy"


def gpu_pod(annotations: dict[str, str], name: str = "g") -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": {
            "schedulerName": "hami-scheduler",
            "containers": [
                {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
            ],
        },
    }


def test_default_and_configured_versions() -> None:
    assert parse_config({}, env={}).core_versions == SchedulerVersions()
    cfg = parse_config({"schedulerVersions": {"hami": "2.9"}}, env={})
    assert cfg.core_versions == SchedulerVersions(hami=(2, 9, 0))


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (
            {"schedulerVersions": {"hami": "latest"}},
            "schedulerVersions.hami: 'latest' does not match",
        ),
        (
            {"schedulerVersions": {"hami": 2.9}},
            "schedulerVersions.hami: 2.9 is not of type 'string'",
        ),
        ({"schedulerVersions": {"volcano": "v1.15.1"}}, "schedulerVersions: Additional properties"),
    ],
)
def test_bad_versions_name_the_field(data: dict, needle: str) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_config(data, env={})
    assert needle in str(exc.value)


@pytest.fixture
def old_hami(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text("shutdown: {delaySeconds: 0}\nschedulerVersions: {hami: v2.9.0}\n")
    return path


@pytest.fixture
async def api(certs: CertPaths, old_hami: Path) -> AsyncIterator[ApiServer]:
    async with served(certs, inventory=SMALL, config=old_hami) as client:
        yield client


async def test_server_checks_the_configured_release(api: ApiServer) -> None:
    """The real server over TLS, configured with HAMi v2.9.0: `numa` is denied with the
    release that added it; `topology-aware` (v2.7.0) passes."""
    denied = await api.admit(gpu_pod({HGPU: "binpack,numa"}))
    assert not denied.allowed
    assert denied.validate is not None
    message = denied.validate.message or ""
    assert "unsupported-value" in message and "needs HAMi v2.10.0" in message
    assert (await api.admit(gpu_pod({HGPU: "topology-aware"}))).allowed


async def test_server_denies_forged_allocation_on_create_only(api: ApiServer) -> None:
    """A pod created with hami.io/vgpu-node is denied; the same annotation written on an
    UPDATE (what hami-scheduler does when it binds) is allowed."""
    forged = gpu_pod({"hami.io/vgpu-node": "node-1", "hami.io/bind-phase": "allocating"})
    created = await api.admit(forged)
    assert not created.allowed
    message = (created.validate and created.validate.message) or ""
    assert "hami.io/vgpu-node" in message and "hami.io/bind-phase" in message
    assert "forged-allocation" in message
    plain = gpu_pod({})
    update = await api.call("validate", build_review(forged, operation="UPDATE", old=plain))
    assert update.allowed


def test_lint_uses_the_configured_release(
    tmp_path: Path, old_hami: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = tmp_path / "pods.yaml"
    manifest.write_text(
        yaml.safe_dump_all(
            [
                gpu_pod({HGPU: "mutex"}, "m"),
                gpu_pod({"hami.io/vgpu-devices-allocated": "GPU-0,NVIDIA,1000,0:;"}, "f"),
            ]
        )
    )
    assert main(["lint", str(manifest)]) == 1  # the forged one, whatever the release
    out = capsys.readouterr().out
    assert "error forged-allocation" in out and "unsupported-value" not in out
    assert main(["lint", "--config", str(old_hami), str(manifest)]) == 1
    out = capsys.readouterr().out
    assert "Pod/default/m: metadata.annotations[hami.io/gpu-scheduler-policy]: error " in out
    assert "unsupported-value" in out and "v2.9.0" in out


def test_explain_uses_the_configured_release(
    tmp_path: Path, old_hami: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(yaml.safe_dump(gpu_pod({HGPU: "numa"})))
    argv = ["explain", "--inventory", str(SMALL), str(manifest)]
    assert main(argv) == 0
    assert "unsupported-value" not in capsys.readouterr().out
    assert main([*argv[:1], "--config", str(old_hami), *argv[1:]]) == 1
    out, err = capsys.readouterr()
    assert "decision: DENY" in out and "needs HAMi v2.10.0" in out and "v2.9.0" in err
