"""One version source: webhook/version.py, read by setup.py, ``--version``, the build_info
metric and the image label (the Makefile passes it; the Dockerfile checks it)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.paths import ROOT
from webhook.cli.main import main
from webhook.version import __version__


def test_version_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out == f"numagate {__version__}\n"


@pytest.mark.slow
def test_setup_py_and_makefile_read_the_one_source() -> None:
    out = subprocess.run(
        [sys.executable, "setup.py", "--version"], cwd=ROOT, capture_output=True, text=True
    )
    assert out.returncode == 0 and out.stdout.strip().splitlines()[-1] == __version__
    make = subprocess.run(
        ["make", "-n", "image"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert f"--build-arg VERSION={__version__} " in make.stdout
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert 'org.opencontainers.image.version="${VERSION}"' in dockerfile
    assert 'test "$(numagate --version)" = "numagate ${VERSION}"' in dockerfile
    # No second literal copy of the version anywhere in the build files.
    for name in ("setup.py", "Dockerfile", "Makefile", "pyproject.toml"):
        assert not re.search(rf"\b{re.escape(__version__)}\b", (ROOT / name).read_text()), name
