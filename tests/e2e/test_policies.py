"""The generated ValidatingAdmissionPolicies in the real apiserver (issue 29): they pass
``kubectl apply --dry-run=server`` and then apply, and for every object of the agreement
table (tests/policies/table.py) the apiserver denies exactly where the webhook's rules
say, with the webhook's message (less what CEL cannot say); in warn mode it warns instead,
in dryrun mode (Audit) it admits without a warning. This is the only CEL test of the rules
that need Kubernetes' quantity library (core.intent.rules.QUANTITY_RULES): cel-python has
none.

Needs the end-to-end suite's session fixture ``control_plane`` (``.kubeconfig``, an admin
kubeconfig, and ``.kubectl(*args, input=None, check=True)``), from tests/e2e/conftest.py.
No numagate webhook is registered here: the policies alone decide.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator
from typing import Any, Protocol

import pytest
import yaml

from tests.policies.compare import (
    CEL_CODES,
    RELEASE_CODES,
    WARNING_CODES,
    as_cel_words,
    policy_failures,
    webhook_failures,
    webhook_warnings,
)
from tests.policies.table import ALL_CASES, CASES, RELEASE_CASES, RELEASE_CONFIG, Case, pod
from webhook.cli.policies import dump_yaml
from webhook.config import parse_config
from webhook.policies import policies


class ControlPlane(Protocol):
    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]: ...


# A minimal Volcano Job CRD (no schema of its own: the policy is what checks the fields).
VOLCANO_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "jobs.batch.volcano.sh"},
    "spec": {
        "group": "batch.volcano.sh",
        "names": {"kind": "Job", "plural": "jobs", "singular": "job", "shortNames": ["vcjob"]},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1alpha1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
            }
        ],
    },
}
PROBE = pod("policy-probe", {"volcano.sh/numa-topology-policy": "bogus"})
WARN_PROBE = pod(
    "policy-warn-probe", {"volcano.sh/numa-topology-policy": "restricted"}
)  # BestEffort
# a failure as the policy words it: "<field path>: <message> (rule <code>)"
_DENIED = re.compile(r"(?P<path>(?:metadata|spec)\.[\w.\[\]*/-]+): .*?\(rule (?P<code>[a-z-]+)\)")


def _yaml(*objs: dict[str, Any]) -> str:
    return yaml.safe_dump_all(list(objs), sort_keys=False)


def _generated(mode: str = "enforce", extra: dict[str, Any] | None = None) -> str:
    config = {"modes": {"annotations": mode}, **(extra or {})}
    return dump_yaml(policies(parse_config(config, env={}), 1024))


def _wait_until_denied(cp: ControlPlane, timeout: float = 60.0) -> None:
    """A new policy takes effect once the apiserver's policy informer has it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = cp.kubectl(
            "create", "--dry-run=server", "-f", "-", input=_yaml(PROBE), check=False
        )
        if result.returncode != 0 and "numagate-templates" in result.stderr:
            break
        time.sleep(0.5)
    else:
        raise AssertionError("the numagate policies never took effect")
    while time.monotonic() < deadline:  # and the warnings' policy, which has its own informer entry
        result = cp.kubectl("create", "--dry-run=server", "-f", "-", input=_yaml(WARN_PROBE))
        if "'numagate-warnings'" in result.stderr:
            return
        time.sleep(0.5)
    raise AssertionError("the numagate-warnings policy never took effect")


def _send(cp: ControlPlane, case: Case) -> subprocess.CompletedProcess[str]:
    verb = "replace" if case.operation == "UPDATE" else "create"
    return cp.kubectl(verb, "--dry-run=server", "-f", "-", input=_yaml(case.obj), check=False)


def _reported(text: str) -> set[tuple[str, str]]:
    """The denial's failures (the lines of kubectl's warnings left out)."""
    denial = "\n".join(line for line in text.splitlines() if not line.startswith("Warning:"))
    return {(m["path"], m["code"]) for m in _DENIED.finditer(denial)}


_WEBHOOKS = ("mutatingwebhookconfiguration/numagate", "validatingwebhookconfiguration/numagate")


def _set_aside_numagate_webhooks(cp: ControlPlane) -> str | None:
    """numagate's own webhooks, when another test of the session installed them, judge the
    same objects as the policies (and refuse the UPDATE cases' old objects): they are set
    aside for this module, so that the apiserver's answers are the policies' alone."""
    got = cp.kubectl("get", *_WEBHOOKS, "-o", "json", "--ignore-not-found", check=False)
    if got.returncode != 0 or not got.stdout.strip():
        return None
    items = json.loads(got.stdout).get("items") or []
    if not items:
        return None
    for item in items:  # as created, not as stored
        for field in ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields"):
            item["metadata"].pop(field, None)
    cp.kubectl("delete", *_WEBHOOKS, "--ignore-not-found")
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": items})


@pytest.fixture(scope="module")
def with_policies(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    cp = control_plane
    saved = _set_aside_numagate_webhooks(cp)
    try:
        yield _install_policies(cp)
    finally:
        # the session's later tests see the cluster as it was: no policies, numagate's hooks
        cp.kubectl("delete", "--ignore-not-found", "-f", "-", input=_generated(), check=False)
        if saved is not None:
            cp.kubectl("create", "-f", "-", input=saved, check=False)


def _install_policies(cp: ControlPlane) -> ControlPlane:
    for namespace in ("default", "kube-system"):  # pods need it; no controller-manager here
        cp.kubectl("create", "serviceaccount", "default", "-n", namespace, check=False)
    cp.kubectl("apply", "-f", "-", input=_yaml(VOLCANO_CRD))
    cp.kubectl("wait", "--for=condition=Established", "crd/jobs.batch.volcano.sh")
    # the old objects of the UPDATE cases exist before any policy could refuse them
    for case in ALL_CASES:
        if case.operation == "UPDATE" and case.old is not None:
            cp.kubectl("apply", "-f", "-", input=_yaml(case.old))
    generated = _generated()
    dry = cp.kubectl("apply", "--dry-run=server", "-f", "-", input=generated)
    assert dry.stdout.count("(server dry run)") == 6, dry.stdout
    cp.kubectl("apply", "-f", "-", input=generated)
    _wait_until_denied(cp)
    return cp


@pytest.mark.parametrize("case", ALL_CASES, ids=[c.name for c in ALL_CASES])
def test_the_apiserver_denies_where_the_webhook_rules_say(
    with_policies: ControlPlane, case: Case
) -> None:
    result = _send(with_policies, case)
    if not case.expect:
        assert result.returncode == 0, result.stderr
        return
    assert result.returncode != 0, result.stdout
    assert "ValidatingAdmissionPolicy" in result.stderr, result.stderr
    assert "is forbidden" in result.stderr, result.stderr  # 403, as the webhook denies
    reported = _reported(result.stderr)
    assert reported, result.stderr
    # every failure the apiserver names is one the webhook names (it names the first)
    assert reported <= set(case.expect), result.stderr
    said = result.stderr.split("denied request: ", 1)[1].strip()
    # word for word one of the webhook's messages, less what CEL cannot say; for the
    # quantity rules (Kubernetes' CEL only) this is the agreement test
    webhook = {f"{p}: {as_cel_words(t)} (rule {c})" for p, c, t in webhook_failures(case, {})}
    assert said in webhook, (said, webhook)
    # and what celpy evaluated the messageExpression to (tests/policies/test_agreement.py)
    if said.rsplit("(rule ", 1)[1].rstrip(")") in CEL_CODES:
        assert said in {f"{p}: {t} (rule {c})" for p, c, t in policy_failures(case, {})}, said


# kubectl's line for a warning of the warnings' policy (the apiserver's wording around ours)
_WARNED = re.compile(r"^Warning: .*'numagate-warnings'[^:]*: (?P<said>.*)$", re.M)
_SAID = re.compile(r"^(?P<path>[^:]+): .* \(rule (?P<code>[a-z-]+)\)$")


@pytest.mark.parametrize("case", ALL_CASES, ids=[c.name for c in ALL_CASES])
def test_the_apiserver_warns_where_the_webhook_warns(
    with_policies: ControlPlane, case: Case
) -> None:
    """numagate-warnings (bound Warn in enforce mode): the apiserver warns for a rule of
    WARNING_RULES exactly when the webhook does, naming the first container or task the
    webhook names, with its message word for word (a container and a task as ``[*]``)."""
    result = _send(with_policies, case)
    assert (result.returncode == 0) == (not case.expect), result.stderr
    said = [m["said"].strip() for m in _WARNED.finditer(result.stderr)]
    webhook = webhook_warnings(case, {})
    assert {(p, c) for p, c, _ in webhook} == set(case.warns)
    parsed = [_SAID.match(text) for text in said]
    assert all(parsed), said
    # one warning per rule (its first failure); the webhook names every failure
    codes = [m["code"] for m in parsed if m]
    assert sorted(codes) == sorted({c for _, c, _ in webhook}), (said, webhook)
    assert set(codes) <= WARNING_CODES
    assert set(said) <= {text for _, _, text in webhook}, (said, webhook)


def _admitted_in_mode(cp: ControlPlane, mode: str) -> subprocess.CompletedProcess[str]:
    """The probe's answer once the bindings of ``mode`` (no longer Deny) took effect."""
    cp.kubectl("apply", "-f", "-", input=_generated(mode))
    deadline = time.monotonic() + 60
    while True:
        result = cp.kubectl(
            "create", "--dry-run=server", "-f", "-", input=_yaml(PROBE), check=False
        )
        if result.returncode == 0 or time.monotonic() > deadline:
            return result
        time.sleep(0.5)


def test_warn_mode_warns_instead(with_policies: ControlPlane) -> None:
    cp = with_policies
    try:
        result = _admitted_in_mode(cp, "warn")
        assert result.returncode == 0, result.stderr
        assert "Warning:" in result.stderr and "(rule unknown-policy)" in result.stderr
        # a quantity rule warns too
        over = next(c for c in CASES if c.name == "hami-cores-over")
        result = _send(cp, over)
        assert result.returncode == 0, result.stderr
        assert "(rule out-of-range)" in result.stderr, result.stderr
    finally:
        cp.kubectl("apply", "-f", "-", input=_generated())
        _wait_until_denied(cp)


def test_dryrun_mode_audits_only(with_policies: ControlPlane) -> None:
    """modes.annotations dryrun: validationActions Audit, so the apiserver admits without a
    warning (the failure goes to the audit log only)."""
    cp = with_policies
    try:
        result = _admitted_in_mode(cp, "dryrun")
        assert result.returncode == 0, result.stderr
        assert "Warning:" not in result.stderr, result.stderr
        bindings = cp.kubectl(
            "get", "validatingadmissionpolicybindings", "-l", "app.kubernetes.io/component=policy",
            "-o", "jsonpath={.items[*].spec.validationActions}",
        )  # fmt: skip
        assert bindings.stdout.split() == ['["Audit"]'] * 3, bindings.stdout
        # the warnings' binding is Audit too: the probe it warned for no longer warns
        deadline = time.monotonic() + 60
        while True:
            probe = cp.kubectl("create", "--dry-run=server", "-f", "-", input=_yaml(WARN_PROBE))
            if "numagate-warnings" not in probe.stderr or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert "Warning:" not in probe.stderr, probe.stderr
    finally:
        cp.kubectl("apply", "-f", "-", input=_generated())
        _wait_until_denied(cp)


@pytest.mark.parametrize("case", RELEASE_CASES, ids=[c.name for c in RELEASE_CASES])
def test_an_older_release_s_policies_deny_where_the_webhook_does(
    with_policies: ControlPlane, case: Case
) -> None:
    """``numagate policies --config`` with ``schedulerVersions.hami: v2.6.0``: the
    apiserver denies the GPU policies that release cannot read (unsupported-value) with the
    webhook's message, word for word."""
    cp = with_policies
    # each policy has its own informer entry: wait for a denial of each
    probes = [c for c in RELEASE_CASES if c.name in ("release-late-token", "release-vcjob")]
    try:
        cp.kubectl("apply", "-f", "-", input=_generated(extra=RELEASE_CONFIG))
        deadline = time.monotonic() + 60
        for probe in probes:
            while "(rule unsupported-value)" not in _send(cp, probe).stderr:
                assert time.monotonic() < deadline, "the release's policies never took effect"
                time.sleep(0.5)
        result = _send(cp, case)
        if not case.expect:
            assert result.returncode == 0, result.stderr
            return
        assert result.returncode != 0 and "is forbidden" in result.stderr, result.stderr
        assert _reported(result.stderr) <= set(case.expect), result.stderr
        said = result.stderr.split("denied request: ", 1)[1].strip()
        codes = CEL_CODES | RELEASE_CODES
        webhook = webhook_failures(case, RELEASE_CONFIG, codes)
        assert said in {f"{p}: {as_cel_words(t)} (rule {c})" for p, c, t in webhook}, said
        assert said in {f"{p}: {t} (rule {c})" for p, c, t in policy_failures(case, RELEASE_CONFIG)}
    finally:
        cp.kubectl("apply", "-f", "-", input=_generated())
        _wait_until_denied(cp)
