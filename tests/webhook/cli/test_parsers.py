"""`explain -f FILE` is MANIFEST as kubectl spells it: the same report, one of the two required."""

from __future__ import annotations

import pytest

from tests.paths import FIXTURES
from webhook.cli.main import main

INVENTORY = str(FIXTURES / "manifests" / "inventory-small.yaml")
POD = str(FIXTURES / "manifests" / "koord-pod.yaml")


def _explain(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["explain", "--inventory", INVENTORY, "-o", "json", *args])
    return code, capsys.readouterr().out


def test_filename_flag_gives_the_positional_report(capsys: pytest.CaptureFixture[str]) -> None:
    assert _explain(capsys, "-f", POD) == _explain(capsys, POD)
    assert '"name": "koord-single"' in _explain(capsys, "--filename", POD)[1]


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ((), "one of the arguments MANIFEST -f/--filename is required"),
        (("-f", POD, POD), "argument MANIFEST: not allowed with argument -f/--filename"),
    ],
)
def test_exactly_one_manifest_is_required(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], error: str
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["explain", "--inventory", INVENTORY, *args])
    assert exc.value.code == 2
    assert error in capsys.readouterr().err
