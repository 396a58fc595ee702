"""`numagate test`: test-suite files run through the webhook's own review handler; a line
per case, exit 0 / 1 / 2, and clear messages for unusable suites."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.paths import FIXTURES
from webhook.cli.main import main
from webhook.cli.suite import admission_review

SUITES = FIXTURES / "suites"
MANIFESTS = FIXTURES / "manifests"


def run(capsys: pytest.CaptureFixture[str], *suites: str | Path) -> tuple[int, str, str]:
    code = main(["test", *map(str, suites)])
    out, err = capsys.readouterr()
    return code, out, err


def test_fixture_suite_passes(capsys):
    code, out, err = run(capsys, SUITES / "koordinator.yaml")
    lines = out.splitlines()
    assert code == 0 and err == ""
    assert len(lines) == 6 and all(line.startswith("PASS  ") for line in lines[:5])
    assert lines[-1].endswith("5 of 5 cases passed")


def test_failures_say_what_differs(capsys):
    code, out, _ = run(capsys, SUITES / "koordinator.yaml", SUITES / "failing.yaml")
    assert code == 1
    lines = [line for line in out.splitlines() if "wrong expectations" in line]
    assert lines[0].startswith("FAIL  wrong expectations / impossible pod expected allowed: ")
    assert "expected allowed, got denied (" in lines[0]
    assert "expected a message with 'quota exceeded', got '" in lines[1]
    assert "expected a warning with 'GPU'" in lines[2] and "expected no patch, got one" in lines[2]
    assert lines[3] == "PASS  wrong expectations / right"
    assert lines[4].endswith("1 of 4 cases passed")


def test_answers_are_those_of_numagate_review(capsys, tmp_path):
    """The same handler: `numagate review` denies what the suite expects denied."""
    import yaml

    pod = yaml.safe_load((MANIFESTS / "koord-pod-impossible.yaml").read_text())
    review = tmp_path / "review.json"
    review.write_bytes(admission_review(pod, namespace="default"))
    inv = str(MANIFESTS / "inventory-small.yaml")
    assert main(["review", "--inventory", inv, "--webhook", "validate", str(review)]) == 0
    response = json.loads(capsys.readouterr().out)["response"]
    assert response["allowed"] is False and "no node" in response["status"]["message"]


@pytest.mark.parametrize(
    ("suite", "message"),
    [
        ("name: s\ninventory: {inv}\ncases:\n- {{name: c, manifest: {pod}, expect: {{}}}}\n",
         "cases[0].expect.allowed: Field required"),
        ("name: s\ninventory: {inv}\ncases:\n- {{name: c, manifest: {pod}, object: {{}}, "
         "expect: {{allowed: true}}}}\n", "exactly one of 'manifest'"),
        ("name: s\ninventory: {inv}\ncases:\n- {{name: c, manifest: nope.yaml, "
         "expect: {{allowed: true}}}}\n", "cases[0].manifest: "),
        ("name: s\ninventory: nope.yaml\ncases:\n- {{name: c, manifest: {pod}, "
         "expect: {{allowed: true}}}}\n", "nope.yaml"),
        ("name: s\ninventory: {inv}\ncases: []\n", "cases: List should have at least 1 item"),
        ("name: s\ninventory: {inv}\nwebhooks: x\ncases:\n- {{name: c, manifest: {pod}, "
         "webhook: patch, expect: {{allowed: true}}}}\n", "cases[0].webhook: Input should be"),
        ("[", "not valid YAML"),
    ],
)  # fmt: skip
def test_unusable_suites_exit_2_naming_the_field(capsys, tmp_path, suite, message):
    path = tmp_path / "suite.yaml"
    inv, pod = MANIFESTS / "inventory-small.yaml", MANIFESTS / "koord-pod.yaml"
    path.write_text(suite.format(inv=inv, pod=pod))
    code, out, err = run(capsys, path)
    assert code == 2 and out == ""
    assert err.startswith(f"numagate test: {path}") and message in err, err
    assert "Traceback" not in err
