"""The observability kit (manifests/components/observability and the chart's toggles): the
alert rules pass the real `promtool check rules` and `promtool test rules` (a firing and a
silent case per alert), every metric the rules and the dashboard query is one numagate
exposes (read from its registry), and the monitors point at the webhook's port with the
right TLS settings, in the kustomize component and the Helm chart alike."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from tests.builders.objects import build_review, koord_pod
from tests.manifests import MANIFESTS, NAMESPACE, find, with_components
from tests.manifests_helm import MONITORING, render_chart
from tests.paths import FIXTURES
from tests.webhook.harness import runtime
from webhook.app import make_app
from webhook.metrics import WebhookMetrics

COMPONENT = MANIFESTS / "components" / "observability"
RULE_TESTS = FIXTURES / "observability" / "rules.test.yaml"
ALERTS = {
    "NumagateWebhookErrors",
    "NumagateLatencyNearTimeout",
    "NumagateInventoryStale",
    "NumagateCertificateExpiresSoon",
    "NumagateDenialsSpike",
}


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.fail(
            "promtool not found: install Debian's prometheus package "
            "(apt-get install -y --no-install-recommends prometheus; `make test` does it)"
        )
    return path


def kit(source: str, tmp_path: Path, *, podmonitor: bool = False) -> list[dict[str, Any]]:
    """The objects of the kit as kustomize (overlay + component) or the chart renders them."""
    if source == "kustomize":
        extra = ("observability/podmonitor",) if podmonitor else ()
        return with_components(tmp_path, "overlays/cert-manager", "observability", *extra)
    if podmonitor:
        return render_chart(
            {**MONITORING, "serviceMonitor": {"enabled": False}, "podMonitor": {"enabled": True}}
        )
    return render_chart(MONITORING)


SOURCES = ["kustomize", "helm"]


# --- promtool --------------------------------------------------------------------------------


def write_rules(objs: list[dict[str, Any]], directory: Path) -> Path:
    rule = find(objs, "PrometheusRule", "numagate")
    path = directory / "numagate-rules.yaml"
    path.write_text(yaml.safe_dump(rule["spec"]))
    return path


@pytest.mark.parametrize("source", SOURCES)
def test_promtool_checks_the_rule_groups(source: str, tmp_path: Path) -> None:
    rules = write_rules(kit(source, tmp_path), tmp_path)
    result = subprocess.run(
        [promtool(), "check", "rules", str(rules)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in result.stdout


@pytest.mark.parametrize("source", SOURCES)
def test_promtool_unit_tests_fire_and_stay_silent(source: str, tmp_path: Path) -> None:
    write_rules(kit(source, tmp_path), tmp_path)
    tests = tmp_path / "rules.test.yaml"
    shutil.copy(RULE_TESTS, tests)
    result = subprocess.run(
        [promtool(), "test", "rules", str(tests)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    # Every alert has a case where it fires and one where it stays silent.
    cases = yaml.safe_load(tests.read_text())["tests"]
    verdicts = {
        (check["alertname"], bool(check["exp_alerts"]))
        for case in cases
        for check in case["alert_rule_test"]
    }
    assert verdicts == {(a, fires) for a in ALERTS for fires in (True, False)}


def test_promtool_rejects_a_broken_rule(tmp_path: Path) -> None:
    """The check has teeth: a rule naming a function that does not exist fails."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        yaml.safe_dump({"groups": [{"name": "x", "rules": [{"alert": "X", "expr": "rat(x[5m])"}]}]})
    )
    result = subprocess.run(
        [promtool(), "check", "rules", str(bad)], capture_output=True, text=True, check=False
    )
    assert result.returncode != 0 and "rat" in result.stderr


# --- only metrics that exist -----------------------------------------------------------------

_KEYWORDS = {"and", "or", "unless", "offset", "bool", "by", "without", "on", "ignoring"}
_KEYWORDS |= {"group_left", "group_right", "inf", "nan", "le"}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads: identifiers that are not functions,
    keywords, label names (in {...} or by/on/without lists), strings or durations."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # label values, e.g. code=~"5.."
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # ranges, e.g. [5m], [$__rate_interval]
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    text = re.sub(r"\boffset\s+\w+", " ", text)
    names = set()
    for m in re.finditer(r"(?<![\w$.])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?", text):
        if m.group(2) or m.group(1) in _KEYWORDS:
            continue  # a function call or a keyword
        names.add(m.group(1))
    return names


def exposed_series() -> set[str]:
    """Every series name numagate's /metrics can carry, from its registry's TYPE lines
    (histograms: _bucket, _sum, _count)."""
    names = set()
    for line in WebhookMetrics().render().decode().splitlines():
        m = re.match(r"# TYPE (\S+) (\w+)", line)
        if not m:
            continue
        name, kind = m.groups()
        names.add(name)
        if kind in ("histogram", "summary"):
            names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
    return names


def dashboard_queries(dashboard: dict[str, Any]) -> list[str]:
    return [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]


def rule_queries(objs: list[dict[str, Any]]) -> list[str]:
    rule = find(objs, "PrometheusRule", "numagate")
    return [r["expr"] for g in rule["spec"]["groups"] for r in g["rules"]]


def test_metric_name_parser() -> None:
    expr = (
        'histogram_quantile(0.99, sum by (le, webhook) (rate(a_seconds_bucket{webhook="m"}[5m])))'
        ' > 0.8 * 3 or sum(rate(b_total{code=~"5.."}[1h] offset 10m)) / on(job) group_left c'
    )
    assert metric_names(expr) == {"a_seconds_bucket", "b_total", "c"}


@pytest.mark.parametrize("source", SOURCES)
def test_rules_and_dashboard_use_only_exposed_metrics(source: str, tmp_path: Path) -> None:
    objs = kit(source, tmp_path)
    dashboard = json.loads(find(objs, "ConfigMap", "numagate-dashboard")["data"]["numagate.json"])
    queries = rule_queries(objs) + dashboard_queries(dashboard)
    used = set().union(*(metric_names(q) for q in queries))
    missing = used - exposed_series()
    assert not missing, f"queried but not exposed by webhook.metrics: {sorted(missing)}"
    # The kit covers what issue 16 asks for.
    for name in (
        "numagate_admission_requests_total",
        "numagate_admission_duration_seconds_bucket",
        "numagate_policy_violations_total",
        "numagate_decision_cache_total",
        "numagate_inventory_age_seconds",
        "numagate_certificate_expiry_timestamp_seconds",
        "numagate_admission_requests_in_flight",
        "numagate_build_info",
    ):
        assert name in used, name


# Labels Prometheus adds to every scraped series (target labels), and histogram buckets'.
TARGET_LABELS = {"namespace", "pod", "job", "instance", "service", "container", "endpoint", "le"}


async def scraped_labels(aiohttp_client: Any) -> dict[str, set[str]]:
    """Label names per series name on a real /metrics after reviews that fit and that are
    denied, on both webhooks (the in-process app on the small test inventory)."""
    client = await aiohttp_client(make_app(runtime()))
    for webhook in ("mutate", "validate"):
        for cpu in ("2", "12"):  # 12 exclusive CPUs fit no node: a denial by rule
            body = orjson.dumps(build_review(koord_pod(cpu)))
            headers = {"Content-Type": "application/json"}
            assert (await client.post(f"/{webhook}", data=body, headers=headers)).status == 200
    text = await (await client.get("/metrics")).text()
    labels: dict[str, set[str]] = {}
    for line in text.splitlines():
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? ", line)
        if m and not line.startswith("#"):
            labels.setdefault(m[1], set()).update(re.findall(r'([a-zA-Z_]\w*)="', m[2] or ""))
    return labels


def query_units(objs: list[dict[str, Any]]) -> list[tuple[list[str], list[str]]]:
    """(PromQL expressions, label templates) of every alert rule and dashboard panel."""
    rule = find(objs, "PrometheusRule", "numagate")
    units = [
        ([r["expr"]], list(r.get("annotations", {}).values()))
        for group in rule["spec"]["groups"]
        for r in group["rules"]
    ]
    dashboard = json.loads(find(objs, "ConfigMap", "numagate-dashboard")["data"]["numagate.json"])
    for panel in dashboard["panels"]:
        targets = panel["targets"]
        units.append(([t["expr"] for t in targets], [t.get("legendFormat", "") for t in targets]))
    return units


def selector_labels(expr: str) -> dict[str, set[str]]:
    """Label names matched in each metric's selector, e.g. {code=~"5.."}."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    out: dict[str, set[str]] = {}
    for name, matchers in re.findall(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\}", text):
        out.setdefault(name, set()).update(re.findall(r"([a-zA-Z_]\w*)\s*[=!]", matchers))
    return out


def other_labels(expr: str, templates: list[str]) -> set[str]:
    """Label names in grouping clauses (by, on, ...) and in {{label}} / {{ $labels.x }}."""
    found = set()
    for clause in re.findall(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)", expr):
        found |= {label.strip() for label in clause.split(",") if label.strip()}
    for template in templates:
        found |= set(re.findall(r"\{\{\s*(?:\$labels\.)?([a-zA-Z_]\w*)\s*\}\}", template))
    return found


async def test_queries_use_only_labels_the_metrics_carry(
    aiohttp_client: Any, tmp_path: Path
) -> None:
    exposed = await scraped_labels(aiohttp_client)
    for exprs, templates in query_units(kit("kustomize", tmp_path)):
        names = set().union(*(metric_names(e) for e in exprs))
        if not names <= set(exposed):
            # Not in this scrape: a missing metric fails the test above; the live-inventory
            # series (watch events, sync age) only appear with a cluster.
            continue
        carried = set().union(*(exposed.get(n, set()) for n in names)) | TARGET_LABELS
        for expr in exprs:
            for name, used in selector_labels(expr).items():
                assert used <= exposed[name] | TARGET_LABELS, (name, used, expr)
        used = set().union(*(other_labels(e, templates) for e in exprs))
        assert used <= carried, (sorted(used - carried), exprs)


# --- the dashboard and the monitors ----------------------------------------------------------


@pytest.mark.parametrize("source", SOURCES)
def test_dashboard_configmap(source: str, tmp_path: Path) -> None:
    objs = kit(source, tmp_path)
    config_map = find(objs, "ConfigMap", "numagate-dashboard")
    assert config_map["metadata"]["namespace"] == NAMESPACE
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    dashboard = json.loads(config_map["data"]["numagate.json"])
    assert dashboard["uid"] == "numagate"
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids)) >= 10
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    for panel in dashboard["panels"]:
        assert panel["targets"], panel["title"]
        assert panel["datasource"]["uid"] == "${datasource}" and "datasource" in variables
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24, panel["title"]


@pytest.mark.parametrize("podmonitor", [False, True])
@pytest.mark.parametrize("source", SOURCES)
def test_monitors_scrape_the_webhook_port_over_verified_tls(
    source: str, podmonitor: bool, tmp_path: Path
) -> None:
    objs = kit(source, tmp_path, podmonitor=podmonitor)
    kinds = {o["kind"] for o in objs}
    assert ("PodMonitor" in kinds, "ServiceMonitor" in kinds) == (podmonitor, not podmonitor)
    deploy = find(objs, "Deployment", "numagate")
    service = find(objs, "Service", "numagate")
    secret = {v["name"]: v for v in deploy["spec"]["template"]["spec"]["volumes"]}["certs"]
    if podmonitor:
        monitor = find(objs, "PodMonitor", "numagate")
        [endpoint] = monitor["spec"]["podMetricsEndpoints"]
        labels = deploy["spec"]["template"]["metadata"]["labels"]
        ports = {p["name"] for p in deploy["spec"]["template"]["spec"]["containers"][0]["ports"]}
    else:
        monitor = find(objs, "ServiceMonitor", "numagate")
        [endpoint] = monitor["spec"]["endpoints"]
        labels = service["metadata"]["labels"]
        ports = {p["name"] for p in service["spec"]["ports"]}
    assert monitor["metadata"]["namespace"] == NAMESPACE
    assert monitor["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert endpoint["port"] in ports
    assert (endpoint["path"], endpoint["scheme"]) == ("/metrics", "https")
    tls = endpoint["tlsConfig"]
    assert tls["serverName"] == f"{service['metadata']['name']}.{NAMESPACE}.svc"
    assert tls["ca"]["secret"] == {"name": secret["secret"]["secretName"], "key": "ca.crt"}
    assert "insecureSkipVerify" not in tls


def test_chart_and_component_ship_the_same_kit(tmp_path: Path) -> None:
    ours, theirs = kit("helm", tmp_path), kit("kustomize", tmp_path)
    for kind, name in (("PrometheusRule", "numagate"), ("ServiceMonitor", "numagate")):
        assert find(ours, kind, name)["spec"] == find(theirs, kind, name)["spec"], kind
    dashboards = [find(o, "ConfigMap", "numagate-dashboard")["data"] for o in (ours, theirs)]
    assert json.loads(dashboards[0]["numagate.json"]) == json.loads(dashboards[1]["numagate.json"])
