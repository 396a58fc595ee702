"""Contract tests: the real server (webhook.server.serve_worker) over real TLS, called by
the apiserver-like harness. Certificates come from certs.authority for the Service name
numagate.numagate-system.svc; the client verifies the chain and that name."""

from __future__ import annotations

import asyncio
import copy
import socket
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import jsonpatch
import orjson
import pytest
import yaml
from cryptography import x509

from certs.authority import CertPaths, cert_pem, create_ca, generate, utcnow
from tests.builders.objects import SMALL, build_review, koord_pod, manifest
from tests.certs.tls import client_certificate
from tests.launch import NAMESPACE, SERVER_NAME, SERVICE, running_server
from tests.paths import FIXTURES
from tests.webhook.harness import ApiServer, WebhookCallError
from tests.webhook.scrape import parse
from webhook.server import ServeOptions

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


@pytest.fixture(scope="module")
def config_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cfg") / "config.yaml"
    path.write_text("shutdown: {delaySeconds: 0}\n")
    return path


def options(certs: CertPaths, config: Path, **kw: Any) -> ServeOptions:
    base: dict[str, Any] = {
        "host": "127.0.0.1",
        "port": 0,
        "cert": str(certs.cert),
        "key": str(certs.key),
        "inventory": str(SMALL),
        "config": str(config),
    }
    base.update(kw)
    return ServeOptions(**base)


@pytest.fixture
async def api(certs: CertPaths, config_file: Path) -> AsyncIterator[ApiServer]:
    async with running_server(options(certs, config_file)) as port:  # noqa: SIM117
        async with ApiServer(f"https://127.0.0.1:{port}", certs.ca) as client:
            yield client


@pytest.mark.parametrize(
    ("name", "allowed", "patched"),
    [
        ("koord-pod", True, True),
        ("koord-pod-misspelled", True, True),
        ("koord-pod-user-affinity", True, True),
        ("koord-pod-impossible", False, True),
        ("pod-bad-annotation", False, False),
        ("volcano-pod", True, True),  # pinned by node name: policies only in NRT (auto mode)
        ("plain-pod", True, False),
        ("deployment-impossible", False, False),
        ("cronjob-bad-annotation", False, False),
    ],
)
async def test_admission_chain(api: ApiServer, name: str, allowed: bool, patched: bool) -> None:
    result = await api.admit(manifest(name))
    assert result.allowed is allowed, result.validate and result.validate.message
    assert (result.mutate.patch is not None) is patched
    if patched:
        assert result.reinvoked is not None and result.reinvoked.patch is None
    if not allowed:
        assert result.validate is not None and result.validate.response["status"]["code"] == 403


async def test_mutated_pod_keeps_the_users_terms(api: ApiServer) -> None:
    pod = manifest("koord-pod-user-affinity")
    result = await api.admit(pod)
    terms = result.object["spec"]["affinity"]["nodeAffinity"][REQUIRED]["nodeSelectorTerms"]
    before = pod["spec"]["affinity"]["nodeAffinity"][REQUIRED]["nodeSelectorTerms"]
    assert [
        t["matchExpressions"][: len(b["matchExpressions"])]
        for t, b in zip(terms, before, strict=True)
    ] == [b["matchExpressions"] for b in before]


async def test_update_and_delete_and_dry_run(api: ApiServer) -> None:
    deploy = manifest("deployment-impossible")
    scaled = {**deploy, "spec": {**deploy["spec"], "replicas": 9}}
    assert (await api.admit(scaled, operation="UPDATE", old=deploy)).allowed
    delete = await api.call("validate", build_review(None, operation="DELETE", old=deploy))
    assert delete.allowed
    dry = await api.admit(koord_pod("12"), dry_run=True)
    assert not dry.allowed


async def test_wrong_service_name_is_refused_by_tls(certs: CertPaths, config_file: Path) -> None:
    async with (
        running_server(options(certs, config_file)) as port,
        ApiServer(
            f"https://127.0.0.1:{port}", certs.ca, server_name="other.numagate-system.svc"
        ) as client,
    ):
        with pytest.raises(aiohttp.ClientConnectorCertificateError):
            await client.call("validate", build_review(koord_pod("2")))


async def test_transport_errors_are_real_http_statuses(api: ApiServer) -> None:
    status, body = await api.post("/validate", b"{}", headers={"Content-Type": "text/plain"})
    assert status == 415
    status, body = await api.post(
        "/mutate",
        orjson.dumps(
            {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "request": {"operation": "CREATE"},
            }
        ),
    )
    assert status == 400 and b"request.uid" in body
    with pytest.raises(WebhookCallError) as exc:
        await api.call(
            "validate",
            {
                "apiVersion": "admission.k8s.io/v1beta1",
                "kind": "AdmissionReview",
                "request": {"uid": "x"},
            },
        )
    assert exc.value.status == 400


async def test_replicas_of_one_template_each_get_their_own_answer(api: ApiServer) -> None:
    """A ReplicaSet's pods (generated names, fresh uids) through the apiserver's chain over
    TLS: every answer echoes its own uid and carries the same patch, the patched pods are
    valid, and all but the first come from the decision cache."""
    template = manifest("koord-pod-misspelled")
    template["metadata"].pop("name", None)
    template["metadata"]["generateName"] = "web-7d4b9c-"
    admissions = []
    for n in range(5):
        pod = copy.deepcopy(template)
        pod["metadata"]["name"] = f"web-7d4b9c-{n:05d}"
        admissions.append(await api.admit(pod))  # verify_response checks the uid echo
    patches = [a.mutate.patch for a in admissions]
    assert patches[0] and all(p == patches[0] for p in patches)
    names = [a.object["metadata"]["name"] for a in admissions]
    assert names == [f"web-7d4b9c-{n:05d}" for n in range(5)]
    samples = parse((await api.get("/metrics"))[1].decode())
    # per pod: mutate, the re-invocation (an already patched pod) and validate
    assert samples['numagate_decision_cache_total{result="miss"}'] == 3
    assert samples['numagate_decision_cache_total{result="hit"}'] == 12


async def test_health_metrics_and_cert_expiry_over_tls(api: ApiServer, certs: CertPaths) -> None:
    assert (await api.get("/healthz"))[0] == 200
    assert (await api.get("/readyz"))[0] == 200
    await api.admit(koord_pod("2"))
    status, body = await api.get("/metrics")
    assert status == 200
    samples = parse(body.decode())
    not_after = x509.load_pem_x509_certificate(certs.cert.read_bytes()).not_valid_after_utc
    assert samples["numagate_certificate_expiry_timestamp_seconds{}"] == pytest.approx(
        not_after.timestamp()
    )
    assert samples["numagate_inventory_nodes{}"] == 2
    assert (
        samples[
            'numagate_admission_requests_total{webhook="mutate",operation="CREATE",allowed="true",code="200"}'
        ]
        == 2
    )
    assert samples["numagate_feasibility_duration_seconds_count{}"] >= 1


def _client_pair(directory: Path) -> tuple[Path, Path, Path]:
    """A client CA and a clientAuth certificate, as an AdmissionConfiguration kubeconfig holds."""
    ca = create_ca(now=utcnow())
    ca_file = directory / "client-ca.crt"
    ca_file.write_bytes(cert_pem(ca.cert))
    return (ca_file, *client_certificate(ca, directory, "client"))


async def test_client_ca_requires_the_apiservers_certificate(
    certs: CertPaths, config_file: Path, tmp_path: Path
) -> None:
    client_ca, client_cert, client_key = _client_pair(tmp_path)
    async with running_server(options(certs, config_file, client_ca=str(client_ca))) as port:
        url = f"https://127.0.0.1:{port}"
        async with ApiServer(url, certs.ca, client_cert=(client_cert, client_key)) as good:
            assert (await good.call("validate", build_review(koord_pod("2")))).allowed
        async with ApiServer(url, certs.ca) as anonymous:
            with pytest.raises((aiohttp.ClientError, ssl.SSLError)):
                await anonymous.call("validate", build_review(koord_pod("2")))


async def test_patch_applies_with_jsonpatch_on_the_wire_bytes(api: ApiServer) -> None:
    pod = manifest("koord-pod-misspelled")
    call = await api.call("mutate", build_review(pod))
    assert call.patch is not None
    patched = jsonpatch.JsonPatch(call.patch).apply(pod)
    assert (
        "SingleNUMANode"
        in patched["metadata"]["annotations"]["scheduling.koordinator.sh/numa-topology-spec"]
    )


@pytest.mark.slow
async def test_live_cluster_source_readiness_and_staleness(
    certs: CertPaths, tmp_path: Path
) -> None:
    """`serve --kubeconfig`: the real kubernetes client against the list/watch test server.
    Not ready until synced; a synced inventory denies an impossible pod; once the
    inventory is older than staleAfterSeconds it only warns."""
    from tests.webhook.fake_apiserver import NODES, running_apiserver

    config = tmp_path / "config.yaml"
    config.write_text("shutdown: {delaySeconds: 0}\ninventory: {staleAfterSeconds: 1.5}\n")
    with running_apiserver(tmp_path) as fake:
        for obj in yaml.safe_load_all(SMALL.read_text()):
            fake.apply(obj)
        fake.hold_lists(NODES)
        kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
        opts = options(certs, config, inventory=None, kubeconfig=str(kubeconfig))
        async with running_server(opts) as port:  # noqa: SIM117
            async with ApiServer(f"https://127.0.0.1:{port}", certs.ca) as api:
                status, text = await api.get("/readyz")
                assert status == 503 and b"inventory" in text
                fake.release_lists(NODES)
                for _ in range(100):
                    if (await api.get("/readyz"))[0] == 200:
                        break
                    await asyncio.sleep(0.05)
                assert (await api.get("/readyz"))[0] == 200
                fresh = await api.call("validate", build_review(koord_pod("12")))
                assert fresh.allowed is False
                await asyncio.sleep(1.6)  # no watch event since: the inventory is stale
                stale = await api.call("validate", build_review(koord_pod("12")))
                assert stale.allowed is True and stale.warnings
                _, body = await api.get("/metrics")
                assert parse(body.decode())["numagate_inventory_age_seconds{}"] > 1.5


@pytest.mark.slow
async def test_running_server_reloads_config_and_keeps_last_good(
    certs: CertPaths, tmp_path: Path
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("shutdown: {delaySeconds: 0}\nreloadIntervalSeconds: 0.05\n")

    async def wait_for(api: ApiServer, allowed: bool) -> bool:
        for _ in range(100):
            if (await api.call("validate", build_review(koord_pod("12")))).allowed is allowed:
                return True
            await asyncio.sleep(0.05)
        return False

    async with running_server(options(certs, config)) as port:  # noqa: SIM117
        async with ApiServer(f"https://127.0.0.1:{port}", certs.ca) as api:
            assert await wait_for(api, False)
            config.write_text(
                "shutdown: {delaySeconds: 0}\nreloadIntervalSeconds: 0.05\nmodes: {feasibility: warn}\n"
            )
            assert await wait_for(api, True)
            config.write_text("modes: {feasibility: maybe}\n")  # broken: last good stays
            await asyncio.sleep(0.3)
            assert (await api.call("validate", build_review(koord_pod("12")))).allowed is True
            _, body = await api.get("/metrics")
            samples = parse(body.decode())
            assert samples['numagate_config_reloads_total{result="failure"}'] >= 1
            assert samples['numagate_config_reloads_total{result="success"}'] >= 1


async def test_certificate_rotation_is_served_without_a_restart(tmp_path: Path) -> None:
    cert_dir = tmp_path / "certs"
    first = generate(cert_dir, service=SERVICE, namespace=NAMESPACE, ips=["127.0.0.1"])
    config = tmp_path / "config.yaml"
    config.write_text("shutdown: {delaySeconds: 0}\ncertificates: {reloadIntervalSeconds: 0.05}\n")

    def served_serial(port: int) -> int:
        ctx = ssl.create_default_context(cafile=str(first.ca))
        with (
            socket.create_connection(("127.0.0.1", port)) as raw,
            ctx.wrap_socket(raw, server_hostname=SERVER_NAME) as tls,
        ):
            der = tls.getpeercert(binary_form=True)
        assert der is not None
        return x509.load_der_x509_certificate(der).serial_number

    async with running_server(options(first, config)) as port:
        before = await asyncio.to_thread(served_serial, port)
        generate(cert_dir, service=SERVICE, namespace=NAMESPACE, ips=["127.0.0.1"])  # same CA
        after = before
        for _ in range(100):
            await asyncio.sleep(0.05)
            after = await asyncio.to_thread(served_serial, port)
            if after != before:
                break
        assert after != before
        async with ApiServer(f"https://127.0.0.1:{port}", first.ca) as api:  # same listener
            assert (await api.call("validate", build_review(koord_pod("2")))).allowed
            _, body = await api.get("/metrics")
        assert parse(body.decode())["numagate_certwatcher_read_certificate_total{}"] >= 1


# AdmissionReviews recorded from a real kube-apiserver (tests/e2e/test_reviews.py): the
# server answers each within the contract, and a mutate patch applies to the object sent.
APISERVER_REVIEWS = sorted((FIXTURES / "reviews" / "apiserver").glob("*.json"))


def test_the_recorded_apiserver_reviews_are_there() -> None:
    names = {p.stem for p in APISERVER_REVIEWS}
    assert {"mutate-pod-create", "validate-pod-create", "validate-deployment-update",
            "validate-volcano-job-create", "mutate-pod-create-dry-run"} <= names, names  # fmt: skip


@pytest.mark.parametrize("path", APISERVER_REVIEWS, ids=lambda p: p.stem)
async def test_reviews_recorded_from_the_real_apiserver(api: ApiServer, path: Path) -> None:
    review = orjson.loads(path.read_bytes())
    webhook = path.stem.split("-", 1)[0]
    call = await api.call(webhook, review)
    if call.patch is not None:
        patched = jsonpatch.JsonPatch(call.patch).apply(review["request"]["object"])
        again = copy.deepcopy(review)
        again["request"]["object"] = patched
        assert (await api.call(webhook, again)).patch is None  # idempotent on the real shape
