"""The Helm chart (manifests/helm/numagate), linted and rendered by Helm's own engine (the
Go SDK behind the helm-python-sdk package, no cluster): it renders the same objects as the
kustomize base and overlays, every object validates against the official Kubernetes
schemas, each value reaches the objects it names, bad values fail with a message naming
them, and the chart's README documents every value."""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Mapping
from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest
import yaml

from tests.manifests import (
    K8S_VERSIONS,
    MANIFESTS,
    NAMESPACE,
    check_shutdown_rule,
    find,
    rendered,
    shutdown_budget,
    webhooks,
)
from tests.manifests_helm import CHART, MONITORING, render_chart
from webhook.config import parse_config

KUBE_VERSION = "v1.30.0"  # the oldest Kubernetes the chart supports (Chart.yaml kubeVersion)
CRD_KINDS = {"Issuer", "Certificate", "ServiceMonitor", "PodMonitor", "PrometheusRule"}
# Each toggle of the chart, rendered, linted and validated on its own.
CASES: dict[str, dict[str, Any]] = {
    "defaults": {},
    "self-signed": {"certificates": {"mode": "self-signed"}},
    "external": {"certificates": {"mode": "external", "external": {"caBundle": "Y2E="}}},
    "issuer": {
        "certificates": {"certManager": {"issuerRef": {"name": "corp-ca", "kind": "ClusterIssuer"}}}
    },
    "monitoring": MONITORING,
    "podmonitor": {"podMonitor": {"enabled": True}},
    "no-pdb-no-netpol": {
        "podDisruptionBudget": {"enabled": False},
        "networkPolicy": {"enabled": False},
    },
    "scoring": {"scoring": {"hami": {"nodeSchedulerPolicy": "spread"}}},
    "prestop": {"preStopSleepSeconds": 5, "shutdown": {"delaySeconds": 5}},
    "policies": {"policies": {"enabled": True}},
}


@functools.cache
def rendered_case(case: str) -> tuple[dict[str, Any], ...]:
    return tuple(render_chart(CASES[case]))


def render_error(values: Mapping[str, Any]) -> str:
    with pytest.raises(helm.HelmError) as info:
        render_chart(values)
    return str(info.value)


# --- Helm's lint and the official schemas --------------------------------------------------


@pytest.mark.parametrize("case", sorted(CASES))
def test_chart_lints_clean_in_strict_mode(case: str) -> None:
    report = helm.lint(str(CHART), CASES[case], strict=True, kube_version=KUBE_VERSION)
    assert report["errors"] == []
    # Severity 1 is "info" ("icon is recommended"); nothing at warning (2) or error (3).
    assert [m for m in report["messages"] if m["severity"] >= 2] == [], report["messages"]


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_rendered_object_validates(case: str, version: str) -> None:
    custom = set()
    for obj in rendered_case(case):
        if obj["kind"] in CRD_KINDS:
            custom.add(obj["kind"])  # no official schema: checked structurally below
            continue
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{case}: {obj['kind']}/{obj['metadata']['name']}: {exc.message}")
    expected = {
        "defaults": {"Issuer", "Certificate"},
        "issuer": {"Certificate"},
        "monitoring": {"Issuer", "Certificate", "ServiceMonitor", "PrometheusRule"},
        "podmonitor": {"Issuer", "Certificate", "PodMonitor"},
    }.get(case, set() if case in ("self-signed", "external") else {"Issuer", "Certificate"})
    assert custom == expected


# --- one source of truth: the chart renders what kustomize renders ---------------------------


def comparable(obj: dict[str, Any]) -> tuple[tuple[str, str], dict[str, Any]]:
    """The parts of an object both renderings must agree on: everything but the labels
    and annotations each tool adds (webhook annotations kept: cert-manager's CA injection),
    the config file compared as data, the revision suffix of the chart's Job name left out."""
    out = copy.deepcopy(obj)
    meta = out["metadata"]
    name = re.sub(r"-\d+$", "", meta["name"]) if obj["kind"] == "Job" else meta["name"]
    kept = {"name": name, "namespace": meta.get("namespace")}
    if obj["kind"].endswith("WebhookConfiguration"):
        kept["annotations"] = meta.get("annotations", {})
    out["metadata"] = kept
    if obj["kind"] == "ConfigMap" and "config.yaml" in out.get("data", {}):
        out["data"]["config.yaml"] = yaml.safe_load(out["data"]["config.yaml"])
    return (obj["kind"], name), out


def by_key(objs) -> dict[tuple[str, str], dict[str, Any]]:
    return dict(comparable(o) for o in objs)


@pytest.mark.parametrize(
    ("case", "overlay"),
    [("defaults", "overlays/cert-manager"), ("self-signed", "overlays/self-signed")],
)
def test_chart_renders_the_kustomize_objects(case: str, overlay: str) -> None:
    chart, kustomize = by_key(rendered_case(case)), by_key(rendered(overlay))
    # The chart leaves the namespace to `helm install --create-namespace`.
    assert set(kustomize) - set(chart) == {("Namespace", NAMESPACE)}
    assert set(chart) == set(kustomize) - {("Namespace", NAMESPACE)}
    for key, obj in chart.items():
        assert obj == kustomize[key], key


def test_names_follow_the_release() -> None:
    objs = render_chart({"certificates": {"mode": "self-signed"}}, name="gate", namespace="infra")
    deploy = find(objs, "Deployment", "gate-numagate")
    spec = deploy["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == "gate-numagate"
    assert {v["name"]: v for v in spec["volumes"]}["certs"]["secret"]["secretName"] == (
        "gate-numagate-tls"
    )
    for hook in webhooks(objs).values():
        assert hook["clientConfig"]["service"]["name"] == "gate-numagate"
        assert hook["clientConfig"]["service"]["namespace"] == "infra"
        names = hook["namespaceSelector"]["matchExpressions"][0]["values"]
        assert names == ["kube-system", "kube-node-lease", "infra"]
    job = next(o for o in objs if o["kind"] == "Job")
    args = job["spec"]["template"]["spec"]["initContainers"][0]["args"]
    assert "--service=gate-numagate" in args and "--secret=infra/gate-numagate-tls" in args
    config = parse_config(
        yaml.safe_load(find(objs, "ConfigMap", "gate-numagate-config")["data"]["config.yaml"])
    )
    assert config.namespace == "infra"


# --- values reach the objects --------------------------------------------------------------


def test_values_reach_the_objects() -> None:
    objs = render_chart(
        {
            "replicas": 5,
            "image": {"repository": "registry.example/numagate", "tag": "9.9.9"},
            "webhooks": {
                "mutate": {"failurePolicy": "Fail", "timeoutSeconds": 2},
                "validate": {"failurePolicy": "Ignore", "timeoutSeconds": 10},
            },
            "namespaces": {
                "excluded": ["kube-system", "monitoring"],
                "ignoreLabel": "example.com/skip",
            },
            "resources": {
                "requests": {"cpu": "250m", "memory": "256Mi"},
                "limits": {"memory": "1Gi"},
            },
            "config": {"modes": {"feasibility": "warn"}, "decisionCache": {"entries": 0}},
            "extraArgs": ["--workers=2"],
            "logLevel": "debug",
        }
    )
    deploy = find(objs, "Deployment", "numagate")
    container = deploy["spec"]["template"]["spec"]["containers"][0]
    assert deploy["spec"]["replicas"] == 5
    assert container["image"] == "registry.example/numagate:9.9.9"
    assert container["args"][-2:] == ["--log-level=debug", "--workers=2"]
    assert container["resources"] == {
        "requests": {"cpu": "250m", "memory": "256Mi"},
        "limits": {"memory": "1Gi"},
    }
    assert deploy["spec"]["template"]["metadata"]["labels"]["example.com/skip"] == "true"
    hooks = webhooks(objs)
    assert (
        hooks["mutate.numagate.io"]["failurePolicy"],
        hooks["mutate.numagate.io"]["timeoutSeconds"],
    ) == ("Fail", 2)
    for name in ("pods.validate.numagate.io", "workloads.validate.numagate.io"):
        assert (hooks[name]["failurePolicy"], hooks[name]["timeoutSeconds"]) == ("Ignore", 10)
    for hook in hooks.values():
        exprs = hook["namespaceSelector"]["matchExpressions"]
        assert exprs[0]["values"] == ["kube-system", "monitoring", NAMESPACE]
        assert exprs[1]["key"] == "example.com/skip"
        assert hook["objectSelector"]["matchExpressions"][0]["key"] == "example.com/skip"
    config = parse_config(
        yaml.safe_load(find(objs, "ConfigMap", "numagate-config")["data"]["config.yaml"])
    )
    assert config.modes.feasibility == "warn"
    assert config.decision_cache.entries == 0
    assert list(config.excluded_namespaces) == ["kube-system", "monitoring"]
    assert config.ignore_label == "example.com/skip"


def test_scoring_and_certificate_modes() -> None:
    config_map = find(rendered_case("scoring"), "ConfigMap", "numagate-config")
    config = parse_config(yaml.safe_load(config_map["data"]["config.yaml"]))
    assert config.scoring == {"hami": {"nodeSchedulerPolicy": "spread"}}
    external = webhooks(rendered_case("external"))
    assert {h["clientConfig"]["caBundle"] for h in external.values()} == {"Y2E="}
    assert not any(o["kind"] in CRD_KINDS | {"Job"} for o in rendered_case("external"))
    issuer = rendered_case("issuer")
    serving = find(issuer, "Certificate", "numagate-serving")
    assert serving["spec"]["issuerRef"] == {"name": "corp-ca", "kind": "ClusterIssuer"}
    assert [o["kind"] for o in issuer if o["kind"] in CRD_KINDS] == ["Certificate"]
    for case in ("self-signed", "external"):
        for obj in rendered_case(case):
            assert "cert-manager.io/inject-ca-from" not in obj["metadata"].get("annotations", {})


@pytest.mark.parametrize("case", ["defaults", "prestop", "monitoring"])
def test_shutdown_rule_holds_for_the_chart(case: str) -> None:
    budget = shutdown_budget(rendered_case(case))
    check_shutdown_rule(budget)
    if case == "prestop":
        pre_stop = find(rendered_case(case), "Deployment", "numagate")["spec"]["template"]["spec"]
        assert pre_stop["containers"][0]["lifecycle"] == {"preStop": {"sleep": {"seconds": 5}}}
        assert (budget["preStop"], budget["delaySeconds"]) == (5, 5)


def test_disabled_objects_are_left_out() -> None:
    kinds = {o["kind"] for o in rendered_case("no-pdb-no-netpol")}
    assert "PodDisruptionBudget" not in kinds and "NetworkPolicy" not in kinds


@pytest.mark.parametrize(
    ("values", "error", "fragment"),
    [
        (
            {"terminationGracePeriodSeconds": 20},
            helm.HelmRenderError,
            "terminationGracePeriodSeconds (20)",
        ),
        ({"preStopSleepSeconds": 10}, helm.HelmRenderError, "shutdown.gracePeriodSeconds + 5 = 40"),
        (
            {"shutdown": {"gracePeriodSeconds": 3}},
            helm.HelmRenderError,
            "longest webhook timeoutSeconds (5)",
        ),
        (
            {"serviceMonitor": {"enabled": True}, "podMonitor": {"enabled": True}},
            helm.HelmRenderError,
            "choose one",
        ),
        ({"replicas": 0}, helm.HelmValuesError, "/replicas"),
        (
            {"webhooks": {"mutate": {"failurePolicy": "Maybe", "timeoutSeconds": 3}}},
            helm.HelmValuesError,
            "failurePolicy",
        ),
        ({"certificates": {"mode": "vault"}}, helm.HelmValuesError, "/certificates/mode"),
        ({"config": {"shutdown": {"delaySeconds": 1}}}, helm.HelmValuesError, "shutdown"),
        ({"replica": 3}, helm.HelmValuesError, "replica"),
        (
            {"policies": {"enabled": True}, "config": {"limits": {"valueChars": 2048}}},
            helm.HelmRenderError,
            "config.limits.valueChars 2048",
        ),
        (
            {"policies": {"enabled": True}, "config": {"schedulerVersions": {"hami": "v2.6.0"}}},
            helm.HelmRenderError,
            "config.schedulerVersions.hami v2.6.0",
        ),
    ],
)
def test_bad_values_fail_naming_the_value(values: dict, error: type, fragment: str) -> None:
    with pytest.raises(error) as info:
        render_chart(values)
    assert fragment in str(info.value), str(info.value)


def test_install_dry_run_without_a_cluster() -> None:
    """Helm's install action (client dry run, memory storage): the manifest and the notes."""
    config = helm.Config(namespace=NAMESPACE, storage_driver="memory")
    release = config.install(str(CHART), "numagate", {}, dry_run="client", namespace=NAMESPACE)
    assert "kind: ValidatingWebhookConfiguration" in release["manifest"]
    assert "kubectl delete mutatingwebhookconfiguration/numagate" in release["notes"]


# --- the README documents every value ------------------------------------------------------


def value_paths(values: Mapping[str, Any], prefix: str = "") -> dict[str, bool]:
    """Every dotted key of ``values`` -> whether it is a leaf (an empty map is a leaf)."""
    out: dict[str, bool] = {}
    for key, value in values.items():
        path = f"{prefix}{key}"
        nested = isinstance(value, Mapping) and bool(value)
        out[path] = not nested
        if nested:
            out.update(value_paths(value, f"{path}."))
    return out


def readme_table() -> dict[str, tuple[str, str]]:
    rows = re.findall(
        r"^\| `([^`]+)` \| (\w+) \| `(.*)` \| .+ \|$", (CHART / "README.md").read_text(), re.M
    )
    return {key: (kind, default) for key, kind, default in rows}


def test_readme_documents_every_value_with_its_default() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    table = readme_table()
    paths = value_paths(values)
    for path in (p for p, leaf in paths.items() if leaf):
        parts = path.split(".")
        documented = any(".".join(parts[:i]) in table for i in range(1, len(parts) + 1))
        assert documented, f"values.yaml key {path} is not in the README's table"
    for key, (_, default) in table.items():
        assert key in paths, f"README documents {key}, which values.yaml does not have"
        value: Any = values
        for part in key.split("."):
            value = value[part]
        assert yaml.safe_load(default) == value, (key, default, value)


def test_values_schema_accepts_the_defaults_and_names_every_value() -> None:
    schema = yaml.safe_load((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert schema["additionalProperties"] is False
    assert set(schema["properties"]) == set(values)
    with helm.Chart.load(str(CHART)) as chart:
        chart.validate_schema(values)


def test_chart_files_are_the_kustomize_component_files() -> None:
    """One copy of the alerts and the dashboard: the chart's files are links to the
    component's, so the two installs cannot drift."""
    for component, name in (
        ("observability", "prometheusrule.yaml"),
        ("observability", "dashboard.json"),
        ("policies", "policies.yaml"),
    ):
        link = CHART / "files" / name
        assert link.is_symlink(), link
        assert link.resolve() == (MANIFESTS / "components" / component / name).resolve()


def test_policies_follow_the_values() -> None:
    """policies.enabled: the component's policies, scoped by the release namespace and
    the namespaces values, with the actions of config.modes.annotations."""
    assert not [o for o in rendered_case("defaults") if "AdmissionPolicy" in o["kind"]]
    values = {
        "policies": {"enabled": True},
        "namespaces": {"excluded": ["infra"], "ignoreLabel": "x/skip"},
        "config": {"modes": {"annotations": "warn"}},
    }
    objs = render_chart(values, name="gate", namespace="gate-system")
    key = lambda o: (o["kind"], o["metadata"]["name"])  # noqa: E731
    chart = sorted((o for o in objs if "AdmissionPolicy" in o["kind"]), key=key)
    component = sorted(rendered("components/policies"), key=key)
    assert [(o["kind"], o["metadata"]["name"]) for o in chart] == [
        (o["kind"], o["metadata"]["name"]) for o in component
    ]
    for ours, theirs in zip(chart, component, strict=True):
        assert ours["metadata"]["labels"]["app.kubernetes.io/instance"] == "gate"
        if ours["kind"] == "ValidatingAdmissionPolicyBinding":
            assert ours["spec"]["validationActions"] == ["Warn"]
            continue
        constraints = ours["spec"]["matchConstraints"]
        names, label = constraints["namespaceSelector"]["matchExpressions"]
        assert names["values"] == ["gate-system", "infra"]
        assert label == {"key": "x/skip", "operator": "NotIn", "values": ["true"]}
        assert constraints["objectSelector"]["matchExpressions"] == [label]
        # the rules themselves are the generated ones, unchanged
        assert ours["spec"]["validations"] == theirs["spec"]["validations"]
        assert ours["spec"]["variables"] == theirs["spec"]["variables"]


def test_the_warnings_policy_warns_where_the_others_deny() -> None:
    """config.modes.annotations enforce: the denials' bindings Deny, numagate-warnings'
    Warn (webhook.policies.WARN_ACTIONS); dryrun: all Audit."""
    for mode, deny, warn in (("enforce", "Deny", "Warn"), ("dryrun", "Audit", "Audit")):
        values = {"policies": {"enabled": True}, "config": {"modes": {"annotations": mode}}}
        objs = render_chart(values, name="gate", namespace="gate-system")
        actions = {
            o["spec"]["policyName"]: o["spec"]["validationActions"]
            for o in objs
            if o["kind"] == "ValidatingAdmissionPolicyBinding"
        }
        assert actions == {
            "numagate-templates": [deny],
            "numagate-volcano-jobs": [deny],
            "numagate-warnings": [warn],
        }, mode
