"""`numagate lint`: one finding per problem with its field path, text and JSON output,
stdin, Lists, exit codes 0/1/2, and the feasibility check with --inventory."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.paths import FIXTURES
from webhook.cli.lint_report import LintFinding, lint_objects, render_json, render_text
from webhook.cli.main import main
from webhook.inventory.loader import parse_objects

FIX = FIXTURES / "lint"
ROOT = FIX.parent.parent.parent
NUMA = "scheduling.koordinator.sh/numa-topology-spec"


def lint(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["lint", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_mixed_file_one_finding_per_problem_with_paths(capsys):
    path = str(FIX / "mixed.yaml")
    code, out, err = lint(capsys, "-o", "json", path)
    assert code == 1 and err == ""
    got = [(f["object"], f["path"], f["severity"], f["code"]) for f in json.loads(out)["findings"]]
    assert got == [
        ("Pod/team-a/koord-typo", f"metadata.annotations[{NUMA}]", "error", "unknown-policy"),
        (
            "Job/default/vj-half",
            "spec.tasks[0].template.spec.containers[0].resources.limits[cpu]",
            "error",
            "fractional-cpu",
        ),
        (
            "CronJob/default/gpu-nightly",
            "spec.jobTemplate.spec.template.metadata.annotations[hami.io/gpu-scheduler-policy]",
            "warning",
            "respelled",
        ),
        (
            "CronJob/default/gpu-nightly",
            "spec.jobTemplate.spec.template.spec.containers[0].resources.limits[nvidia.com/gpucores]",
            "error",
            "out-of-range",
        ),
        ("Pod/default/broken-json", f"metadata.annotations[{NUMA}]", "error", "invalid-json"),
    ]


def test_json_output_has_exactly_the_design_shape(capsys):
    code, out, _ = lint(capsys, "-o", "json", str(FIX / "list.json"))
    doc = json.loads(out)
    assert list(doc) == ["findings"]
    for f in doc["findings"]:
        assert list(f) == ["file", "object", "path", "severity", "code", "message", "line"]
        assert all(isinstance(v, str) for k, v in f.items() if k != "line")
        assert isinstance(f["line"], int) and f["line"] > 0
        assert f["file"] == str(FIX / "list.json")
    assert code == 1


def test_text_output_lines_and_summary(capsys):
    path = str(FIX / "mixed.yaml")
    code, out, _ = lint(capsys, path)
    lines = out.splitlines()
    assert code == 1
    assert lines[0] == (
        f"{path}:32: Pod/team-a/koord-typo: metadata.annotations[{NUMA}]: error unknown-policy: "
        f"{NUMA} field numaTopologyPolicy: 'SingleNUMA' is not an allowed value (allowed: "
        '"" (none), BestEffort, Restricted, SingleNUMANode); did you mean SingleNUMANode?'
    )
    assert len(lines) == 6
    assert lines[-1] == "4 errors, 1 warning, 0 info in 6 objects (1 file)"


def test_clean_and_warning_only_files_exit_0(capsys):
    code, out, _ = lint(capsys, str(FIX / "good.yaml"))
    assert code == 0 and out == "0 errors, 0 warnings, 0 info in 2 objects (1 file)\n"
    code, out, _ = lint(capsys, str(FIX / "warnings.yaml"))
    assert code == 0
    assert [line.split(": ")[3] for line in out.splitlines()[:-1]] == [
        "warning repaired-json",
        "warning misplaced-field",
    ]


def test_list_and_multiple_files(capsys):
    code, out, _ = lint(capsys, str(FIX / "good.yaml"), str(FIX / "list.json"))
    assert code == 1
    assert (
        "Pod/ns/vol-bad: metadata.annotations[volcano.sh/numa-topology-policy]: error unknown-policy"
        in out
    )
    assert out.splitlines()[-1] == "1 error, 1 warning, 0 info in 4 objects (2 files)"


def test_stdin(capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO((FIX / "mixed.yaml").read_text()))
    code, out, _ = lint(capsys, "-o", "json", "-")
    findings = json.loads(out)["findings"]
    assert code == 1 and len(findings) == 5
    assert {f["file"] for f in findings} == {"<stdin>"}


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["{fix}/broken.yaml"], "not valid YAML or JSON at line 4"),
        (["{fix}/does-not-exist.yaml"], "cannot read"),
        (["-", "-"], "only once"),
        (["--config", "{fix}/nope.yaml", "{fix}/good.yaml"], "--config"),
        (["--inventory", "{fix}/nope.yaml", "{fix}/good.yaml"], "--inventory"),
    ],
)
def test_unreadable_input_exits_2_with_message(capsys, argv, needle):
    code, _, err = lint(capsys, *[a.format(fix=FIX) for a in argv])
    assert code == 2
    assert needle in err and "Traceback" not in err


def test_unreadable_file_does_not_hide_findings_of_others(capsys):
    code, out, err = lint(capsys, str(FIX / "broken.yaml"), str(FIX / "list.json"))
    assert code == 2 and "broken.yaml" in err
    assert "vol-bad" in out


def test_usage_error_exits_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["lint"])
    assert exc.value.code == 2


@pytest.mark.slow
def test_installed_command_end_to_end():
    bindir = Path(sys.executable).parent
    proc = subprocess.run(
        [bindir / "numagate", "lint", str(FIX / "broken.yaml")],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("numagate lint: ") and "Traceback" not in proc.stderr
    proc = subprocess.run(
        [bindir / "numagate", "lint", "-"],
        input=(FIX / "good.yaml").read_text(),
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr


# ---- with an inventory -------------------------------------------------------------------


def test_inventory_denial_is_an_impossible_error(capsys):
    code, out, _ = lint(
        capsys,
        "--inventory",
        str(FIX / "inventory.yaml"),
        "-o",
        "json",
        str(FIX / "feasibility.yaml"),
    )
    findings = json.loads(out)["findings"]
    assert code == 1
    assert [(f["object"], f["path"], f["severity"], f["code"]) for f in findings] == [
        ("Pod/default/too-wide", "spec", "error", "impossible")
    ]
    assert "node-a" in findings[0]["message"]


def test_inventory_no_room_now_is_a_warning(capsys):
    code, out, _ = lint(
        capsys, "--inventory", str(FIX / "inventory-busy.yaml"), str(FIX / "room.yaml")
    )
    assert code == 0
    assert "Pod/default/later: spec: warning no-room-now:" in out


def test_inventory_checks_workload_templates(capsys):
    # The seed's Volcano Deployment (2 CPUs, single-numa-node) fits node-a; the Volcano Job
    # task is checked at its template path.
    code, out, _ = lint(
        capsys, "--inventory", str(FIX / "inventory.yaml"), "-o", "json", str(FIX / "mixed.yaml")
    )
    findings = json.loads(out)["findings"]
    assert code == 1
    assert not [f for f in findings if f["object"] == "Deployment/default/numa-tset"]
    assert not [
        f for f in findings if f["code"] == "impossible" and f["object"].startswith("Deployment")
    ]


def test_empty_inventory_never_denies(capsys, tmp_path):
    empty = tmp_path / "empty.yaml"
    empty.write_text("apiVersion: v1\nkind: List\nitems: []\n")
    code, out, _ = lint(capsys, "--inventory", str(empty), str(FIX / "feasibility.yaml"))
    assert code == 0
    assert "info not-checked" in out


# ---- engine ----------------------------------------------------------------------------------


def test_duplicate_findings_are_reported_once():
    text = (
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  annotations:\n"
        "    volcano.sh/numa-topology-policy: SingleNUMANode\n"
        "spec:\n  containers: [{name: a}, {name: b}]\n"
    )
    findings = lint_objects(parse_objects(text, "x.yaml"))
    keys = [(f.path, f.code) for f in findings]
    assert len(keys) == len(set(keys))
    assert ("metadata.annotations[volcano.sh/numa-topology-policy]", "respelled") in keys


def test_object_without_kind_is_reported():
    [f] = lint_objects(parse_objects("metadata: {name: x}\n", "x.yaml"))
    assert (f.object, f.path, f.severity) == ("?/default/x", "kind", "warning")


def test_renderers():
    f = LintFinding("a.yaml", "Pod/ns/p", "spec", "error", "impossible", "no node")
    assert render_text([f], objects=1, files=1) == (
        "a.yaml: Pod/ns/p: spec: error impossible: no node\n"
        "1 error, 0 warnings, 0 info in 1 object (1 file)\n"
    )
    assert json.loads(render_json([f])) == {"findings": [f.as_dict()]}


SCORING = FIX.parent / "scoring"


@pytest.mark.parametrize(
    "args", ["volcano-numa-aware.yaml", "koordinator-fitplus.yaml", "kube-scheduler-config.yaml"]
)
def test_config_with_seed_scoring_is_accepted(capsys, tmp_path, args):
    cfg = tmp_path / "config.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "modes": {"noRoomNow": "warn"},
                "scoring": yaml.safe_load((SCORING / args).read_text()),
            }
        )
    )
    code, out, err = lint(capsys, "--config", str(cfg), str(FIX / "good.yaml"))
    assert code == 0 and err == ""
    assert out.splitlines()[-1].startswith("0 errors")


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ("modes: {feasibility: deny}\n", ["modes.feasibility", "'deny'", "enforce"]),
        (
            "scoring:\n  plugins:\n    score:\n      enabled: [{name: ScarceResourceAvoidance}]\n",
            ["scoring.plugins.score.enabled", "ScarceResourceAvoidance", "pluginConfig"],
        ),
        (
            "scoring:\n  hami: {gpuSchedulerPolicy: closest}\n",
            ["scoring.hami.gpuSchedulerPolicy", "'closest'"],
        ),
        ("modes: [\n", ["not valid YAML"]),
    ],
)
def test_bad_config_exits_2_naming_the_field(capsys, tmp_path, text, needles):
    cfg = tmp_path / "config.yaml"
    cfg.write_text(text)
    code, out, err = lint(capsys, "--config", str(cfg), str(FIX / "good.yaml"))
    assert code == 2 and out == ""
    assert "Traceback" not in err and str(cfg) in err
    for needle in needles:
        assert needle in err


def test_config_limits_apply_to_lint(tmp_path, capsys):
    """lint keeps to the configuration's limits, as the webhook does (issue 29)."""
    import json

    from tests.fixtures.slow.worst_cases import many_containers

    manifest = tmp_path / "pod.json"
    manifest.write_text(json.dumps(many_containers("containers")(150)))
    code, out, _ = lint(capsys, str(manifest))
    assert code == 1 and "over numagate's limit of 128" in out
    config = tmp_path / "config.yaml"
    config.write_text("limits: {containers: 200}\n")
    code, out, _ = lint(capsys, "--config", str(config), str(manifest))
    assert "too-large" not in out
