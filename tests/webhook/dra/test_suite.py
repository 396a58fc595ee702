"""`numagate test` reads the DRA objects of the suite's inventory file, as `numagate review`
and the served webhook do: a suite pod whose claim no node can allocate is denied, one
that fits gets no "not checked" warning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.webhook.dra.objects import claim, inventory, pod, request
from webhook.cli.main import main


def test_suite_pods_with_claims_are_judged_against_the_inventory_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    claims = [claim("two", [request("gpus", 2)]), claim("five", [request("gpus", 5)])]
    (tmp_path / "inventory.json").write_text(
        json.dumps({"kind": "List", "items": inventory(claims)})
    )
    suite = {
        "name": "dra",
        "inventory": "inventory.json",
        "cases": [
            {
                "name": "five GPUs on four-GPU nodes",
                "object": pod("p", {"gpus": "five"}),
                "webhook": "validate",
                "expect": {"allowed": False, "message": "needs 5 matching device(s)"},
            },
            {
                "name": "two GPUs",
                "object": pod("p", {"gpus": "two"}),
                "webhook": "validate",
                "expect": {"allowed": True, "warnings": []},
            },
        ],
    }
    (tmp_path / "suite.yaml").write_text(yaml.safe_dump(suite))
    code = main(["test", str(tmp_path / "suite.yaml")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "2 of 2 cases passed" in out
