"""The deployment manifests: every rendering validates against the official Kubernetes
schemas, and the security, webhook and RBAC settings are what docs/deploy.md promises.
Also the Dockerfile names files that exist."""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.manifests import (
    K8S_VERSIONS,
    NAMESPACE,
    check_shutdown_rule,
    find,
    rendered,
    shutdown_budget,
    webhooks,
    with_components,
)
from tests.paths import ROOT
from webhook.cli.main import build_parser
from webhook.config import Config

# Custom resources have no official schema; they are checked by the assertions below.
CUSTOM_KINDS = {("cert-manager.io/v1", "Issuer"), ("cert-manager.io/v1", "Certificate")}
EXCLUDED = {"kube-system", "kube-node-lease", NAMESPACE}
OPT_OUT = {"key": "numagate.io/ignore", "operator": "NotIn", "values": ["true"]}


RENDERINGS = ["base", "overlays/cert-manager", "overlays/self-signed"]


def pod_specs(objs) -> Iterator[tuple[str, dict[str, Any]]]:
    for obj in objs:
        if obj["kind"] == "Deployment":
            yield f"Deployment/{obj['metadata']['name']}", obj["spec"]["template"]["spec"]
        elif obj["kind"] == "Job":
            yield f"Job/{obj['metadata']['name']}", obj["spec"]["template"]["spec"]


# --- schema validation ------------------------------------------------------------------


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("name", RENDERINGS)
def test_every_object_validates_against_the_official_schema(name: str, version: str) -> None:
    skipped = set()
    for obj in rendered(name):
        key = (obj["apiVersion"], obj["kind"])
        if key in CUSTOM_KINDS:
            skipped.add(key)
            continue
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{name}: {obj['kind']}/{obj['metadata']['name']}: {exc.message}")
    # Only the cert-manager overlay has custom resources; nothing else is skipped.
    assert skipped == (CUSTOM_KINDS if name == "overlays/cert-manager" else set())


@pytest.mark.parametrize("components", [("fail-open",), ("fail-closed",)])
def test_components_render_and_validate(tmp_path: Path, components) -> None:
    objs = with_components(tmp_path, "overlays/self-signed", *components)
    for obj in objs:
        kubernetes_validate.validate(obj, K8S_VERSIONS[-1], strict=True)
    policies = {
        (o["kind"], w["name"]): w["failurePolicy"]
        for o in objs
        if o["kind"].endswith("WebhookConfiguration")
        for w in o["webhooks"]
    }
    expected = "Ignore" if components == ("fail-open",) else "Fail"
    assert set(policies.values()) == {expected}
    assert len(policies) == 3


def test_every_rendering_has_the_same_core_objects() -> None:
    kinds = {n: {(o["kind"], o["metadata"]["name"]) for o in rendered(n)} for n in RENDERINGS}
    assert kinds["base"] <= kinds["overlays/cert-manager"]
    assert kinds["base"] <= kinds["overlays/self-signed"]
    assert {
        ("Namespace", NAMESPACE),
        ("ServiceAccount", "numagate"),
        ("ClusterRole", "numagate"),
        ("ClusterRoleBinding", "numagate"),
        ("Role", "numagate"),
        ("RoleBinding", "numagate"),
        ("ConfigMap", "numagate-config"),
        ("Deployment", "numagate"),
        ("PodDisruptionBudget", "numagate"),
        ("Service", "numagate"),
        ("NetworkPolicy", "numagate"),
        ("MutatingWebhookConfiguration", "numagate"),
        ("ValidatingWebhookConfiguration", "numagate"),
    } == kinds["base"]
    for name in RENDERINGS:
        images = {
            c["image"]
            for _, spec in pod_specs(rendered(name))
            for c in spec["containers"] + spec.get("initContainers", [])
        }
        assert images == {"ghcr.io/numagate/numagate:0.1.0"}, name


# --- security settings -------------------------------------------------------------------


@pytest.mark.parametrize("name", ["overlays/self-signed"])
def test_pods_are_restricted(name: str) -> None:
    specs = dict(pod_specs(rendered(name)))
    assert set(specs) == {"Deployment/numagate", "Job/numagate-certgen"}
    for where, spec in specs.items():
        pod_sc = spec["securityContext"]
        assert pod_sc["runAsNonRoot"] is True, where
        assert pod_sc["runAsUser"] == 65532, where
        assert pod_sc["seccompProfile"] == {"type": "RuntimeDefault"}, where
        for c in spec["containers"] + spec.get("initContainers", []):
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False, (where, c["name"])
            assert sc["readOnlyRootFilesystem"] is True, (where, c["name"])
            assert sc["capabilities"] == {"drop": ["ALL"]}, (where, c["name"])
            assert sc["seccompProfile"] == {"type": "RuntimeDefault"}, (where, c["name"])
            assert "cpu" in c["resources"]["requests"], (where, c["name"])
            assert "memory" in c["resources"]["requests"], (where, c["name"])
            # No CPU limit: throttling ruins admission latency (gatekeeper#266).
            assert "cpu" not in c["resources"].get("limits", {}), (where, c["name"])
    ns = find(rendered(name), "Namespace", NAMESPACE)
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_deployment_is_highly_available() -> None:
    objs = rendered("base")
    deploy = find(objs, "Deployment", "numagate")
    spec = deploy["spec"]["template"]["spec"]
    assert deploy["spec"]["replicas"] >= 3
    assert deploy["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    selector = deploy["spec"]["selector"]["matchLabels"]
    spread = spec["topologySpreadConstraints"]
    hostname = [t for t in spread if t["topologyKey"] == "kubernetes.io/hostname"]
    assert hostname[0]["whenUnsatisfiable"] == "DoNotSchedule"
    assert hostname[0]["labelSelector"]["matchLabels"] == selector
    anti = spec["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert anti[0]["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert spec["priorityClassName"] == "system-cluster-critical"
    pdb = find(objs, "PodDisruptionBudget", "numagate")
    assert pdb["spec"]["selector"]["matchLabels"] == selector
    assert pdb["spec"]["maxUnavailable"] == 1
    labels = deploy["spec"]["template"]["metadata"]["labels"]
    assert selector.items() <= labels.items()


def test_probes_use_https_health_endpoints() -> None:
    container = find(rendered("base"), "Deployment", "numagate")["spec"]["template"]["spec"][
        "containers"
    ][0]
    for probe, path in (
        ("livenessProbe", "/healthz"),
        ("readinessProbe", "/readyz"),
        ("startupProbe", "/healthz"),
    ):
        get = container[probe]["httpGet"]
        assert (get["path"], get["scheme"], get["port"]) == (path, "HTTPS", "https")
    assert container["ports"] == [{"name": "https", "containerPort": 8443, "protocol": "TCP"}]


def test_serve_arguments_parse_and_match_the_mounts() -> None:
    spec = find(rendered("base"), "Deployment", "numagate")["spec"]["template"]["spec"]
    container = spec["containers"][0]
    args = build_parser().parse_args(container["args"])
    assert args.command == "serve"
    assert args.in_cluster is True
    assert args.port == 8443
    assert args.host == "0.0.0.0"
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert args.cert_dir == mounts["certs"]["mountPath"] == "/etc/numagate/certs"
    assert mounts["certs"]["readOnly"] is True
    assert volumes["certs"]["secret"]["secretName"] == "numagate-tls"
    config_dir, config_key = os.path.split(args.config)
    assert mounts["config"]["mountPath"] == config_dir
    assert volumes["config"]["configMap"]["name"] == "numagate-config"
    configmap = find(rendered("base"), "ConfigMap", "numagate-config")
    assert config_key in configmap["data"]
    # readOnlyRootFilesystem: /tmp is the only writable place.
    assert volumes[next(n for n, m in mounts.items() if m["mountPath"] == "/tmp")]["emptyDir"]


def test_configmap_config_matches_the_config_schema() -> None:
    configmap = find(rendered("base"), "ConfigMap", "numagate-config")
    config = yaml.safe_load(configmap["data"]["config.yaml"])
    schema = json.loads((ROOT / "schemas" / "config.schema.json").read_text())
    jsonschema.validate(config, schema)
    assert config["namespace"] == NAMESPACE
    assert config["ignoreLabel"] == OPT_OUT["key"]


def test_service_and_network_policy_expose_8443_only() -> None:
    objs = rendered("base")
    svc = find(objs, "Service", "numagate")
    assert svc["spec"]["ports"] == [
        {"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP"}
    ]
    labels = find(objs, "Deployment", "numagate")["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= labels.items()
    policy = find(objs, "NetworkPolicy", "numagate")["spec"]
    assert policy["podSelector"]["matchLabels"].items() <= labels.items()
    assert policy["policyTypes"] == ["Ingress"]
    assert policy["ingress"] == [{"ports": [{"protocol": "TCP", "port": 8443}]}]


# --- webhook configurations --------------------------------------------------------------


@pytest.mark.parametrize("name", RENDERINGS)
def test_webhook_settings(name: str) -> None:
    hooks = webhooks(rendered(name))
    assert set(hooks) == {
        "mutate.numagate.io",
        "pods.validate.numagate.io",
        "workloads.validate.numagate.io",
    }
    svc = find(rendered(name), "Service", "numagate")
    for hook_name, hook in hooks.items():
        assert hook["admissionReviewVersions"] == ["v1"], hook_name
        assert hook["sideEffects"] == "None", hook_name
        assert 1 <= hook["timeoutSeconds"] <= 5, hook_name
        assert hook["matchPolicy"] == "Equivalent", hook_name
        service = hook["clientConfig"]["service"]
        assert service["name"] == svc["metadata"]["name"], hook_name
        assert service["namespace"] == svc["metadata"]["namespace"] == NAMESPACE
        assert service["port"] == svc["spec"]["ports"][0]["port"]
        namespace_exprs = hook["namespaceSelector"]["matchExpressions"]
        excluded = [e for e in namespace_exprs if e["key"] == "kubernetes.io/metadata.name"]
        assert len(excluded) == 1, hook_name
        assert excluded[0]["operator"] == "NotIn", hook_name
        assert set(excluded[0]["values"]) == EXCLUDED, hook_name
        assert OPT_OUT in namespace_exprs, hook_name
        assert hook["objectSelector"]["matchExpressions"] == [OPT_OUT], hook_name
        assert "caBundle" not in hook["clientConfig"], "caBundle comes from the injector"
        if hook["_kind"] == "MutatingWebhookConfiguration":
            assert service["path"] == "/mutate"
            assert hook["failurePolicy"] == "Ignore"
            assert hook["reinvocationPolicy"] == "IfNeeded"
        else:
            assert service["path"] == "/validate"
            assert hook["failurePolicy"] == "Fail"


def rule_set(hook: dict[str, Any]) -> set[tuple[str, str, str, str]]:
    return {
        (group, resource, op, rule.get("scope", "*"))
        for rule in hook["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for op in rule["operations"]
    }


def test_webhook_rules() -> None:
    hooks = webhooks(rendered("base"))
    assert rule_set(hooks["mutate.numagate.io"]) == {("", "pods", "CREATE", "Namespaced")}
    assert rule_set(hooks["pods.validate.numagate.io"]) == {("", "pods", "CREATE", "Namespaced")}
    workloads = {
        ("apps", r, op, "Namespaced")
        for r in ("deployments", "statefulsets", "daemonsets", "replicasets")
        for op in ("CREATE", "UPDATE")
    }
    workloads |= {
        ("batch", r, op, "Namespaced") for r in ("jobs", "cronjobs") for op in ("CREATE", "UPDATE")
    }
    workloads |= {("batch.volcano.sh", "jobs", op, "Namespaced") for op in ("CREATE", "UPDATE")}
    assert rule_set(hooks["workloads.validate.numagate.io"]) == workloads


def test_cert_manager_overlay_injects_from_the_serving_certificate() -> None:
    objs = rendered("overlays/cert-manager")
    cert = find(objs, "Certificate", "numagate-serving")
    assert cert["spec"]["secretName"] == "numagate-tls"
    assert cert["spec"]["dnsNames"] == [
        "numagate.numagate-system.svc",
        "numagate.numagate-system.svc.cluster.local",
        "numagate.numagate-system",
        "numagate",
    ]
    assert "server auth" in cert["spec"]["usages"]
    assert cert["spec"]["privateKey"]["algorithm"] == "ECDSA"
    issuer = find(objs, "Issuer", cert["spec"]["issuerRef"]["name"])
    ca = find(objs, "Certificate", "numagate-ca")
    assert issuer["spec"]["ca"]["secretName"] == ca["spec"]["secretName"]
    assert ca["spec"]["isCA"] is True
    find(objs, "Issuer", ca["spec"]["issuerRef"]["name"])
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        annotations = find(objs, kind, "numagate")["metadata"]["annotations"]
        assert annotations == {"cert-manager.io/inject-ca-from": f"{NAMESPACE}/numagate-serving"}


# --- rollout timing (docs/deploy.md, "Shutdown timing") -------------------------------


@pytest.mark.parametrize("name", RENDERINGS)
def test_shutdown_fits_the_pod_grace_period(name: str) -> None:
    budget = shutdown_budget(rendered(name))
    check_shutdown_rule(budget)
    assert budget == {
        "terminationGracePeriodSeconds": 30,
        "preStop": 0,
        "delaySeconds": 10,
        "gracePeriodSeconds": 15,
        "maxTimeoutSeconds": 5,
    }


def test_shutdown_defaults_fit_and_match_the_schema_and_configmap() -> None:
    """The config defaults (used when the ConfigMap says nothing) keep the rule with the
    base's grace period, and the schema and ConfigMap state the same numbers."""
    defaults = Config().shutdown
    budget = shutdown_budget(rendered("base"))
    check_shutdown_rule(
        {
            **budget,
            "delaySeconds": defaults.delay_seconds,
            "gracePeriodSeconds": defaults.grace_period_seconds,
        }
    )
    schema = json.loads((ROOT / "schemas" / "config.schema.json").read_text())
    fields = schema["properties"]["shutdown"]["properties"]
    assert fields["delaySeconds"]["default"] == defaults.delay_seconds == budget["delaySeconds"]
    assert (
        fields["gracePeriodSeconds"]["default"]
        == defaults.grace_period_seconds
        == budget["gracePeriodSeconds"]
    )


def test_rollout_and_disruption_settings() -> None:
    objs = rendered("base")
    deploy = find(objs, "Deployment", "numagate")["spec"]
    assert deploy["strategy"]["rollingUpdate"] == {"maxUnavailable": 0, "maxSurge": 1}
    assert deploy["minReadySeconds"] == 5
    pdb = find(objs, "PodDisruptionBudget", "numagate")["spec"]
    assert pdb["maxUnavailable"] == 1
    assert pdb["unhealthyPodEvictionPolicy"] == "AlwaysAllow"


# --- RBAC --------------------------------------------------------------------------------


def rules_of(objs, kind: str, name: str) -> set[tuple[str, str, str, tuple[str, ...]]]:
    return {
        (group, resource, verb, tuple(rule.get("resourceNames", ())))
        for rule in find(objs, kind, name)["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def test_webhook_rbac_is_read_only_and_minimal() -> None:
    objs = rendered("base")
    read = ("get", "list", "watch")
    assert rules_of(objs, "ClusterRole", "numagate") == {
        (g, r, v, ())
        for g, r in (
            ("", "nodes"),
            ("", "pods"),
            ("topology.node.k8s.io", "noderesourcetopologies"),
            ("nodeinfo.volcano.sh", "numatopologies"),
            ("resource.k8s.io", "resourceslices"),
            ("resource.k8s.io", "deviceclasses"),
            ("resource.k8s.io", "resourceclaims"),
            ("resource.k8s.io", "resourceclaimtemplates"),
        )
        for v in read
    }
    assert rules_of(objs, "Role", "numagate") == {
        ("", "configmaps", v, ("numagate-config",)) for v in read
    }
    binding = find(objs, "ClusterRoleBinding", "numagate")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "numagate", "namespace": NAMESPACE}
    ]
    deploy = find(objs, "Deployment", "numagate")
    assert deploy["spec"]["template"]["spec"]["serviceAccountName"] == "numagate"


def test_certgen_rbac_is_limited_to_its_objects() -> None:
    objs = rendered("overlays/self-signed")
    assert rules_of(objs, "ClusterRole", "numagate-certgen") == {
        ("admissionregistration.k8s.io", r, v, ("numagate",))
        for r in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations")
        for v in ("get", "patch")
    }
    # `create` cannot be limited by name in RBAC; everything else is.
    assert rules_of(objs, "Role", "numagate-certgen") == {
        ("", "secrets", "get", ("numagate-tls", "numagate-tls-ca")),
        ("", "secrets", "update", ("numagate-tls", "numagate-tls-ca")),
        ("", "secrets", "create", ()),
    }
    for obj in objs:
        for rule in obj.get("rules", []):
            assert "*" not in rule["verbs"] and "*" not in rule["resources"], obj["metadata"]


def test_certgen_job_runs_numagate_certs_with_valid_arguments() -> None:
    objs = rendered("overlays/self-signed")
    spec = find(objs, "Job", "numagate-certgen")["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == "numagate-certgen"
    generate = build_parser().parse_args(spec["initContainers"][0]["args"])
    inject = build_parser().parse_args(spec["containers"][0]["args"])
    assert (generate.command, generate.certs_command) == ("certs", "generate")
    assert (generate.service, generate.namespace) == ("numagate", NAMESPACE)
    assert generate.secret == f"{NAMESPACE}/numagate-tls"
    deploy = find(objs, "Deployment", "numagate")["spec"]["template"]["spec"]
    secret = next(v for v in deploy["volumes"] if v["name"] == "certs")["secret"]["secretName"]
    assert generate.secret.split("/")[1] == secret
    assert inject.certs_command == "inject"
    assert inject.ca_file == f"{generate.out}/ca.crt"
    assert (inject.mutating, inject.validating) == ("numagate", "numagate")
    # Both containers share the emptyDir the certificates are written to.
    mounts = [c["volumeMounts"] for c in spec["initContainers"] + spec["containers"]]
    assert all(m == mounts[0] for m in mounts)
    assert generate.out.startswith(mounts[0][0]["mountPath"])


# --- Dockerfile --------------------------------------------------------------------------


def dockerfile_instructions() -> list[tuple[str, str]]:
    text = (ROOT / "Dockerfile").read_text()
    text = re.sub(r"<<'PY'.*?^PY$", "", text, flags=re.S | re.M)  # heredoc body
    text = text.replace("\\\n", " ")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    return [(ln.split(None, 1)[0].upper(), ln.split(None, 1)[1]) for ln in lines]


def test_dockerfile_is_multi_stage_non_root_with_the_numagate_entrypoint() -> None:
    instructions = dockerfile_instructions()
    froms = [arg for op, arg in instructions if op == "FROM"]
    assert len(froms) == 2 and froms[0].endswith("AS build")
    second_from = [i for i, (op, _) in enumerate(instructions) if op == "FROM"][1]
    final = instructions[second_from:]
    assert ("USER", "65532:65532") in final
    assert ("ENTRYPOINT", '["numagate"]') in final
    assert not any(op == "COPY" and "--from" not in arg for op, arg in final), "sources in runtime"
    assert not any("gcc" in arg for _, arg in final), "compiler in the runtime image"
    build = instructions[: len(instructions) - len(final)]
    assert any("NUMAGATE_NO_EXTENSIONS" not in arg and "pip wheel" in arg for _, arg in build)


def test_dockerfile_copies_files_that_exist_and_dockerignore_keeps_them() -> None:
    ignored = [
        ln.strip()
        for ln in (ROOT / ".dockerignore").read_text().splitlines()
        if ln.strip() and not ln.startswith("#")
    ]
    copied = []
    for op, arg in dockerfile_instructions():
        if op == "COPY" and "--from" not in arg:
            copied += shlex.split(arg)[:-1]
    assert copied, "no COPY found"
    for source in copied:
        assert (ROOT / source).exists(), source
        top = source.rstrip("/").split("/")[0]
        assert top not in ignored, f"{source} is excluded by .dockerignore"
    # Every package setup.py installs reaches the build context.
    setup = (ROOT / "setup.py").read_text()
    packages = re.search(r"find_packages\(include=\[([^\]]*)\]", setup)
    assert packages is not None
    for package in re.findall(r'"([^"*]+)\*?"', packages.group(1)):
        assert f"{package}/" in copied, f"package {package} not copied"


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_policies_component_renders_and_validates(tmp_path: Path, version: str) -> None:
    """components/policies adds the three ValidatingAdmissionPolicies and their bindings
    (cluster-scoped: no namespace) to an install, all valid for Kubernetes 1.30 on."""
    objs = with_components(tmp_path, "overlays/self-signed", "policies")
    for obj in objs:
        kubernetes_validate.validate(obj, version, strict=True)
    added = sorted(
        (o["kind"], o["metadata"]["name"]) for o in objs if "AdmissionPolicy" in o["kind"]
    )
    assert added == [
        ("ValidatingAdmissionPolicy", "numagate-templates"),
        ("ValidatingAdmissionPolicy", "numagate-volcano-jobs"),
        ("ValidatingAdmissionPolicy", "numagate-warnings"),
        ("ValidatingAdmissionPolicyBinding", "numagate-templates"),
        ("ValidatingAdmissionPolicyBinding", "numagate-volcano-jobs"),
        ("ValidatingAdmissionPolicyBinding", "numagate-warnings"),
    ]
    assert all("namespace" not in o["metadata"] for o in objs if "AdmissionPolicy" in o["kind"])
