"""The bad-input corpus, generated from readable tables, and the plumbing to run it.

Each :class:`Case` is one HTTP request body (plus its Content-Type) and what the
contract (docs/contracts.md: HTTP endpoints, research/webhook-anchors.md 1.2-1.3) says the webhook must answer:

- ``reject``: a bad *webhook request* (not JSON, not UTF-8, wrong content type, no
  ``request.uid``, not an AdmissionReview v1, over the size cap) gets a real HTTP
  400/413/415 with a plain-text message, so the apiserver's ``failurePolicy`` applies;
- ``deny``: a well-formed review of a bad *object* gets HTTP 200, ``allowed: false`` and a
  message naming the field;
- ``answer``: HTTP 200, a well-formed AdmissionReview with the uid echoed (allowed, or
  denied with a message), for objects the apiserver itself would refuse later or that are
  out of numagate's scope;
- ``allow``: HTTP 200, ``allowed: true`` (out of scope: other kinds, DELETE, CONNECT).

Never a 500, never a traceback, never a hang. The tables are at the bottom of the file;
:func:`build_corpus` expands them.

The reliability tests start the real server with tests/launch.py (in a thread with its
own event loop, so they can use the plain blocking ``Client`` here with timeouts).
"""

from __future__ import annotations

import base64
import copy
import http.client
import json
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tests.builders.objects import manifest

JSON_TYPE = "application/json"
# The cap of webhook/app.py (controller-runtime's 7 MiB, research 1.1).
BODY_CAP = 7 * 1024 * 1024
CLIENT_TIMEOUT = 10.0  # the apiserver's default timeoutSeconds

Expect = Literal["reject", "deny", "answer", "allow"]
KOORD_SPEC = "scheduling.koordinator.sh/numa-topology-spec"
KOORD_RESOURCE = "scheduling.koordinator.sh/resource-spec"
VOLCANO_POLICY = "volcano.sh/numa-topology-policy"
HAMI_NODE = "hami.io/node-scheduler-policy"
HAMI_GPU = "hami.io/gpu-scheduler-policy"
HAMI_BIND = "nvidia.com/numa-bind"


# ----------------------------------------------------------------------------- reviews


def load_manifest(name: str) -> dict[str, Any]:
    return manifest(name.removesuffix(".yaml"))


def review_of(
    obj: Mapping[str, Any] | None, *, uid: str = "uid-good", operation: str = "CREATE"
) -> dict[str, Any]:
    """The AdmissionReview v1 the kube-apiserver sends for ``obj`` (a Pod unless its kind
    says otherwise)."""
    source = obj or {}
    api_version = str(source.get("apiVersion", "v1"))
    group, _, version = api_version.rpartition("/")
    kind = str(source.get("kind", "Pod"))
    resource = kind.lower() + "s"
    meta = source.get("metadata") if isinstance(source.get("metadata"), Mapping) else {}
    assert isinstance(meta, Mapping)
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": resource},
            "requestKind": {"group": group, "version": version, "kind": kind},
            "requestResource": {"group": group, "version": version, "resource": resource},
            "name": str(meta.get("name", "")),
            "namespace": str(meta.get("namespace", "default")),
            "operation": operation,
            "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters"]},
            "object": copy.deepcopy(dict(obj)) if obj is not None else None,
            "oldObject": None,
            "dryRun": False,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    }


def good_pod() -> dict[str, Any]:
    """A Koordinator pod that fits the embedded demo inventory."""
    return load_manifest("koord-pod.yaml")


def impossible_pod() -> dict[str, Any]:
    """40 exclusive CPUs on one NUMA node: no demo node has that many."""
    return load_manifest("koord-pod-impossible.yaml")


def good_review(uid: str = "uid-good") -> dict[str, Any]:
    return review_of(good_pod(), uid=uid)


def encode(doc: Any) -> bytes:
    return json.dumps(doc, ensure_ascii=False).encode("utf-8")


_DELETE = object()  # sentinel: remove the key instead of setting it


def with_value(doc: dict[str, Any], path: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    """A deep copy of ``doc`` with ``path`` set to ``value`` (or removed: ``_DELETE``)."""
    out = copy.deepcopy(doc)
    parent: Any = out
    for step in path[:-1]:
        parent = parent[step]
    if value is _DELETE:
        parent.pop(path[-1], None)
    else:
        parent[path[-1]] = value
    return out


# ----------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class Case:
    """One request and the answer the contract requires from each endpoint."""

    name: str
    body: bytes
    validate: Expect
    mutate: Expect
    fragment: str = ""  # must appear in the 4xx text or the deny message
    content_type: str | None = JSON_TYPE
    uid: str | None = None  # the uid the answer must echo (reviews only)
    statuses: frozenset[int] = field(default_factory=lambda: frozenset({400}))

    def expect(self, webhook: str) -> Expect:
        return self.validate if webhook == "validate" else self.mutate


def _reject(name: str, body: bytes, fragment: str = "", **kw: Any) -> Case:
    return Case(name, body, "reject", "reject", fragment, **kw)


# ---- transport: bodies that are not an AdmissionReview at all


NOT_JSON: tuple[tuple[str, bytes], ...] = (
    ("empty", b""),
    ("whitespace", b" \n\t "),
    ("plain-text", b"hello"),
    ("yaml", b"apiVersion: admission.k8s.io/v1\nkind: AdmissionReview\n"),
    ("xml", b"<AdmissionReview/>"),
    ("single-quotes", b"{'apiVersion': 'admission.k8s.io/v1'}"),
    ("trailing-comma", b'{"apiVersion": "admission.k8s.io/v1",}'),
    ("nan", b'{"request": NaN}'),
    ("two-documents", b"{}{}"),
    ("nul-bytes", b"\x00" * 64),
    ("unterminated-string", b'{"apiVersion": "admission'),
    ("bare-key", b"{apiVersion: 1}"),
    ("comment", b'// x\n{"apiVersion": "admission.k8s.io/v1"}'),
)

NOT_UTF8: tuple[tuple[str, bytes], ...] = (
    ("latin1-in-string", b'{"apiVersion": "admission.k8s.io/v1", "kind": "caf\xe9"}'),
    ("lone-continuation", b'{"a": "\x80"}'),
    ("overlong-slash", b'{"a": "\xc0\xaf"}'),
    ("invalid-start", b"\xff\xfe{}"),
    ("utf16-bom", "{}".encode("utf-16")),
    ("utf16le-review", json.dumps({"kind": "AdmissionReview"}).encode("utf-16-le")),
    ("surrogate-bytes", b'{"a": "\xed\xa0\x80"}'),
    ("truncated-multibyte", b'{"a": "\xe2\x82"}'),
)

JSON_NOT_OBJECT: tuple[tuple[str, bytes], ...] = (
    ("null", b"null"),
    ("true", b"true"),
    ("number", b"42"),
    ("string", b'"AdmissionReview"'),
    ("array", b"[]"),
    ("array-of-review", b"[" + encode(good_review()) + b"]"),
)

CONTENT_TYPES: tuple[tuple[str, str | None], ...] = (
    ("no-content-type", None),
    ("text-plain", "text/plain"),
    ("yaml-type", "application/yaml"),
    ("form", "application/x-www-form-urlencoded"),
    ("json-patch-type", "application/json-patch+json"),
    ("xml-type", "application/xml"),
    ("octet-stream", "application/octet-stream"),
)

TRUNCATION_POINTS = (1, 2, 10, 0.25, 0.5, 0.75, 0.9, -2, -1)


def _nested(depth: int, open_: str, close: str, inner: str = "1") -> bytes:
    return (open_ * depth + inner + close * depth).encode()


def transport_cases() -> list[Case]:
    cases = [_reject(f"not-json/{n}", b) for n, b in NOT_JSON]
    cases += [_reject(f"not-utf8/{n}", b) for n, b in NOT_UTF8]
    cases += [_reject(f"json-not-object/{n}", b) for n, b in JSON_NOT_OBJECT]
    good = encode(good_review())
    for point in TRUNCATION_POINTS:
        cut = int(len(good) * point) if isinstance(point, float) else point
        cases.append(_reject(f"truncated/{point}", good[:cut]))
    for name, ctype in CONTENT_TYPES:
        cases.append(
            _reject(
                f"content-type/{name}",
                good,
                "application/json",
                content_type=ctype,
                statuses=frozenset({415}),
            )
        )
    # Deep nesting: 100,000 levels must not exhaust the parser's stack (orjson and the
    # stdlib both have recursion limits; a RecursionError must not become a 500).
    cases += [
        _reject("nested/array-100000", _nested(100_000, "[", "]")),
        _reject("nested/object-100000", _nested(100_000, '{"a":', "}")),
        _reject("nested/mixed-100000", _nested(50_000, '{"a":[', "]}")),
    ]
    deep_object = encode(good_review()).replace(
        b'"oldObject": null', b'"oldObject": ' + _nested(100_000, "[", "]")
    )
    cases.append(_reject("nested/in-old-object-100000", deep_object))
    # Over the cap: a syntactically valid review padded beyond 7 MiB.
    padded = with_value(
        good_review(),
        ("request", "object", "metadata", "labels"),
        {"pad": "x" * (BODY_CAP + 1024)},
    )
    cases.append(_reject("huge/over-cap", encode(padded), "cap", statuses=frozenset({413})))
    return cases


# ---- the envelope: AdmissionReview and request fields with the wrong type or missing

WRONG_VALUES: tuple[tuple[str, Any], ...] = (
    ("null", None),
    ("int", 7),
    ("float", 1.5),
    ("bool", True),
    ("string", "x"),
    ("list", ["x"]),
    ("object", {"x": 1}),
)
TYPE_OF = {
    "null": type(None),
    "int": int,
    "float": float,
    "bool": bool,
    "string": str,
    "list": list,
    "object": dict,
}

# (path, the type the field must have, may it be absent?, may it be null?). A wrong type
# anywhere in the envelope is a request the apiserver never sends: HTTP 400 naming the field.
ENVELOPE_FIELDS: tuple[tuple[tuple[str | int, ...], str, bool, bool], ...] = (
    (("apiVersion",), "string", False, False),
    (("kind",), "string", False, False),
    (("request",), "object", False, False),
    (("request", "uid"), "string", False, False),
    (("request", "kind"), "object", False, False),
    (("request", "kind", "kind"), "string", False, False),
    (("request", "kind", "version"), "string", False, False),
    (("request", "resource"), "object", False, False),
    (("request", "resource", "resource"), "string", False, False),
    (("request", "operation"), "string", False, False),
    (("request", "object"), "object", True, True),
    (("request", "oldObject"), "object", True, True),
    (("request", "userInfo"), "object", True, False),
    (("request", "userInfo", "groups"), "list", True, False),
    (("request", "name"), "string", True, False),
    (("request", "namespace"), "string", True, False),
    (("request", "subResource"), "string", True, False),
    (("request", "dryRun"), "bool", True, True),
    (("request", "options"), "object", True, True),
)
# Fields numagate does not read (requestKind is only set by matchPolicy Equivalent
# conversions): any value is answered normally.
LOOSE_ENVELOPE_FIELDS: tuple[tuple[str | int, ...], ...] = (
    ("request", "requestKind"),
    ("request", "requestResource"),
    ("request", "requestSubResource"),
)


def _dotted(path: tuple[str | int, ...]) -> str:
    return ".".join(str(p) for p in path)


def envelope_cases() -> list[Case]:
    base = good_review(uid="uid-envelope")
    cases: list[Case] = []
    for path, wanted, missing_ok, null_ok in ENVELOPE_FIELDS:
        name = _dotted(path)
        missing = encode(with_value(base, path, _DELETE))
        if missing_ok:
            cases.append(
                Case(
                    f"envelope/missing/{name}",
                    missing,
                    "answer",
                    "answer",
                    uid=base["request"]["uid"],
                )
            )
        else:
            cases.append(_reject(f"envelope/missing/{name}", missing, str(path[-1])))
        for label, value in WRONG_VALUES:
            if label == wanted or (label == "null" and null_ok):
                continue
            body = encode(with_value(base, path, value))
            cases.append(_reject(f"envelope/{name}={label}", body, str(path[-1])))
    for label, value in (
        ("empty", ""),
        ("v1beta1", "admission.k8s.io/v1beta1"),
        ("v2", "admission.k8s.io/v2"),
        ("core-v1", "v1"),
    ):
        cases.append(
            _reject(
                f"envelope/apiVersion/{label}",
                encode(with_value(base, ("apiVersion",), value)),
                "apiVersion",
            )
        )
    for label, value in (("empty", ""), ("Pod", "Pod"), ("lowercase", "admissionreview")):
        cases.append(
            _reject(f"envelope/kind/{label}", encode(with_value(base, ("kind",), value)), "kind")
        )
    cases.append(
        _reject("envelope/uid/empty", encode(with_value(base, ("request", "uid"), "")), "uid")
    )
    for op in ("create", "PATCH", "", "GET"):
        cases.append(
            _reject(
                f"envelope/operation/{op or 'empty'}",
                encode(with_value(base, ("request", "operation"), op)),
                "operation",
            )
        )
    for path in LOOSE_ENVELOPE_FIELDS:
        for label, value in (("int", 7), ("list", ["x"]), ("object", {"x": 1})):
            body = encode(with_value(base, path, value))
            cases.append(
                Case(
                    f"envelope-loose/{_dotted(path)}={label}",
                    body,
                    "answer",
                    "answer",
                    uid="uid-envelope",
                )
            )
    # v1beta1 in full, as an old apiserver would send it (admissionReviewVersions: [v1] only).
    beta = with_value(base, ("apiVersion",), "admission.k8s.io/v1beta1")
    cases.append(_reject("envelope/v1beta1-full-review", encode(beta), "apiVersion"))
    cases.append(
        _reject("envelope/only-request", encode({"request": base["request"]}), "apiVersion")
    )
    cases.append(
        _reject(
            "envelope/response-instead",
            encode(
                {
                    **{k: v for k, v in base.items() if k != "request"},
                    "response": {"uid": "x", "allowed": True},
                }
            ),
            "request",
        )
    )
    return cases


# ---- the object: wrong types at every field of the pod the review carries

POD = ("request", "object")
META = (*POD, "metadata")
SPEC = (*POD, "spec")
C0 = (*SPEC, "containers", 0)
RES = (*C0, "resources")

# (path, the type it must have). The apiserver's own validation would refuse these
# objects; mutating webhooks run before it (research 1.4), so numagate sees them.
OBJECT_FIELDS: tuple[tuple[tuple[str | int, ...], str], ...] = (
    (META, "object"),
    ((*META, "name"), "string"),
    ((*META, "labels"), "object"),
    ((*META, "annotations"), "object"),
    (SPEC, "object"),
    ((*SPEC, "schedulerName"), "string"),
    ((*SPEC, "nodeName"), "string"),
    ((*SPEC, "nodeSelector"), "object"),
    ((*SPEC, "affinity"), "object"),
    ((*SPEC, "containers"), "list"),
    ((*SPEC, "initContainers"), "list"),
    ((*SPEC, "overhead"), "object"),
    (C0, "object"),
    ((*C0, "name"), "string"),
    (RES, "object"),
    ((*RES, "requests"), "object"),
    ((*RES, "limits"), "object"),
    ((*RES, "requests", "cpu"), "string"),
    ((*RES, "limits", "cpu"), "string"),
    ((*RES, "requests", "memory"), "string"),
)
BAD_QUANTITIES: tuple[tuple[str, Any], ...] = (
    ("word", "abc"),
    ("negative", "-4"),
    ("huge-exponent", "1e400"),
    ("huge-int", 10**40),
    ("unit-typo", "4 cores"),
    ("empty", ""),
    ("nan", "NaN"),
)


def _required_expr(expr: Any) -> dict[str, Any]:
    term = {"matchExpressions": [expr]}
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
        }
    }


AFFINITY_SHAPES: tuple[tuple[str, Any], ...] = (
    ("node-affinity-string", {"nodeAffinity": "x"}),
    ("required-list", {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []}}),
    (
        "terms-string",
        {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": "x"}
            }
        },
    ),
    (
        "expression-operator-unknown",
        _required_expr({"key": "zone", "operator": "Nope", "values": ["a"]}),
    ),
    ("expression-key-int", _required_expr({"key": 1, "operator": "In", "values": ["a"]})),
    ("expression-values-string", _required_expr({"key": "zone", "operator": "In", "values": "a"})),
    (
        "expression-gt-not-number",
        _required_expr({"key": "cpus", "operator": "Gt", "values": ["many"]}),
    ),
    ("expression-string", _required_expr("zone In a")),
    (
        "match-fields-bad",
        {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "Exists", "values": 3}
                            ]
                        }
                    ]
                }
            }
        },
    ),
)


# label -> what the deny message must name
AFFINITY_DENIED = {
    "expression-operator-unknown": "Nope",
    "expression-gt-not-number": "many",
    "match-fields-bad": "matchFields",
}


def object_cases() -> list[Case]:
    base = good_review(uid="uid-object")
    cases: list[Case] = []
    for path, wanted in OBJECT_FIELDS:
        name = _dotted(path[2:]) or "object"
        for label, value in WRONG_VALUES:
            if label == wanted:
                continue
            body = encode(with_value(base, path, value))
            cases.append(Case(f"object/{name}={label}", body, "answer", "answer", uid="uid-object"))
    for label, value in BAD_QUANTITIES:
        for part in ("requests", "limits"):
            body = encode(with_value(base, (*RES, part, "cpu"), value))
            cases.append(
                Case(
                    f"object/quantity/{part}.cpu={label}",
                    body,
                    "answer",
                    "answer",
                    uid="uid-object",
                )
            )
    for label, value in AFFINITY_SHAPES:
        body = encode(with_value(base, (*SPEC, "affinity"), value))
        if label in AFFINITY_DENIED:
            # Requirements the kernel cannot evaluate: a 400 deny naming the value, not a 500.
            cases.append(
                Case(
                    f"object/affinity/{label}",
                    body,
                    "deny",
                    "answer",
                    AFFINITY_DENIED[label],
                    uid="uid-object",
                )
            )
            continue
        cases.append(Case(f"object/affinity/{label}", body, "answer", "answer", uid="uid-object"))
    many = with_value(
        base,
        (*SPEC, "containers"),
        [copy.deepcopy(base["request"]["object"]["spec"]["containers"][0]) for _ in range(2000)],
    )
    cases.append(Case("object/2000-containers", encode(many), "answer", "answer", uid="uid-object"))
    labels = with_value(base, (*META, "labels"), {f"k{i}": "v" * 60 for i in range(20_000)})
    cases.append(Case("object/20000-labels", encode(labels), "answer", "answer", uid="uid-object"))
    return cases


# ---- kinds and operations outside the webhook's scope

OTHER_KINDS: tuple[tuple[str, dict[str, Any]], ...] = (
    (
        "secret",
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"k": "dg=="}},
    ),
    ("configmap", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}),
    (
        "crd-unknown",
        {
            "apiVersion": "example.com/v1",
            "kind": "Widget",
            "metadata": {"name": "w"},
            "spec": {"containers": "x"},
        },
    ),
    ("empty-kind", {"apiVersion": "v1", "kind": "", "metadata": {"name": "e"}}),
    ("node", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}),
)


def scope_cases() -> list[Case]:
    cases: list[Case] = []
    for label, obj in OTHER_KINDS:
        cases.append(
            Case(
                f"kind/{label}",
                encode(review_of(obj, uid="uid-kind")),
                "allow",
                "allow",
                uid="uid-kind",
            )
        )
    pod = good_pod()
    # kind says Deployment but the object is a Pod (and the reverse): answered, not crashed.
    mislabelled = with_value(
        review_of(pod, uid="uid-kind"), ("request", "kind", "kind"), "Deployment"
    )
    cases.append(
        Case(
            "kind/mismatch-deployment-pod", encode(mislabelled), "answer", "answer", uid="uid-kind"
        )
    )
    deploy = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d"},
        "spec": {"template": "x"},
    }
    cases.append(
        Case(
            "kind/deployment-template-string",
            encode(review_of(deploy, uid="uid-kind")),
            "answer",
            "answer",
            uid="uid-kind",
        )
    )
    deploy_spec = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d"},
        "spec": [1],
    }
    cases.append(
        Case(
            "kind/deployment-spec-list",
            encode(review_of(deploy_spec, uid="uid-kind")),
            "answer",
            "answer",
            uid="uid-kind",
        )
    )
    cronjob = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "c"},
        "spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": 5}}}}},
    }
    cases.append(
        Case(
            "kind/cronjob-containers-int",
            encode(review_of(cronjob, uid="uid-kind")),
            "answer",
            "answer",
            uid="uid-kind",
        )
    )
    vjob = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "v"},
        "spec": {"tasks": [{"topologyPolicy": 7, "template": []}, "x"]},
    }
    cases.append(
        Case(
            "kind/volcano-job-broken-tasks",
            encode(review_of(vjob, uid="uid-kind")),
            "answer",
            "answer",
            uid="uid-kind",
        )
    )
    delete = with_value(
        review_of(None, uid="uid-op", operation="DELETE"), ("request", "oldObject"), pod
    )
    delete["request"]["kind"] = {"group": "", "version": "v1", "kind": "Pod"}
    cases.append(Case("operation/delete", encode(delete), "allow", "allow", uid="uid-op"))
    connect = with_value(
        review_of(pod, uid="uid-op", operation="CONNECT"), ("request", "object"), None
    )
    cases.append(Case("operation/connect", encode(connect), "allow", "allow", uid="uid-op"))
    update = with_value(
        review_of(pod, uid="uid-op", operation="UPDATE"), ("request", "oldObject"), "garbage"
    )
    cases.append(_reject("operation/update-old-object-string", encode(update), "oldObject"))
    update2 = with_value(
        review_of(pod, uid="uid-op", operation="UPDATE"), ("request", "oldObject"), {"spec": [1]}
    )
    cases.append(
        Case(
            "operation/update-old-object-broken", encode(update2), "answer", "answer", uid="uid-op"
        )
    )
    status = with_value(
        review_of(pod, uid="uid-op", operation="UPDATE"), ("request", "subResource"), "status"
    )
    cases.append(
        Case("operation/update-status-subresource", encode(status), "allow", "allow", uid="uid-op")
    )
    return cases


# ---- annotations with every kind of broken value

# (label, value). ``deny``: validation must deny naming the key; ``answer``: anything
# well-formed. The value is placed under each key of ANNOTATION_KEYS.
NON_STRING_VALUES: tuple[tuple[str, Any], ...] = (
    ("int", 1),
    ("bool", True),
    ("null", None),
    ("list", ["SingleNUMANode"]),
    ("object", {"numaTopologyPolicy": "SingleNUMANode"}),
    ("float", 0.5),
)
JSON_KEY_VALUES: tuple[tuple[str, str, Expect], ...] = (
    ("invalid-json", "{", "deny"),
    ("single-quoted-json", "{'numaTopologyPolicy': 'SingleNUMANode'}", "deny"),
    ("json-list", '["SingleNUMANode"]', "deny"),
    ("json-number", "1", "deny"),
    ("json-string", '"SingleNUMANode"', "deny"),
    ("json-null", "null", "deny"),
    ("field-wrong-type-int", '{"numaTopologyPolicy": 1}', "deny"),
    ("field-wrong-type-list", '{"numaTopologyPolicy": ["SingleNUMANode"]}', "deny"),
    ("unknown-policy", '{"numaTopologyPolicy": "SingleNUMANodeX"}', "deny"),
    ("empty-policy", '{"numaTopologyPolicy": ""}', "answer"),
    (
        "exclusive-wrong-type",
        '{"numaTopologyPolicy": "SingleNUMANode", "singleNUMANodeExclusive": true}',
        "deny",
    ),
    (
        "exclusive-unknown",
        '{"numaTopologyPolicy": "SingleNUMANode", "singleNUMANodeExclusive": "Always"}',
        "deny",
    ),
    ("control-chars", '{"numaTopologyPolicy": "Single\\u0000NUMA\\u001bNode"}', "deny"),
    ("bidi-override", '{"numaTopologyPolicy": "\u202eedoNAMUNelgniS"}', "deny"),
    ("deep-json", "[" * 100_000 + "]" * 100_000, "deny"),
    ("lenient-trailing-comma", '{"numaTopologyPolicy": "SingleNUMANode",}', "answer"),
    ("lenient-comment", '{"numaTopologyPolicy": "SingleNUMANode" # one node\n}', "answer"),
    ("lenient-both", '{\n// policy\n"numaTopologyPolicy": "Restricted",\n}', "answer"),
    (
        "duplicate-keys",
        '{"numaTopologyPolicy": "Restricted", "numaTopologyPolicy": "SingleNUMANode"}',
        "answer",
    ),
    ("huge-value", '{"numaTopologyPolicy": "' + "S" * 1_000_000 + '"}', "deny"),
    # Python's json accepts these literals, Go's json.Unmarshal (koord-scheduler) does not.
    ("nan-literal", '{"numaTopologyPolicy": "SingleNUMANode", "x": NaN}', "deny"),
    ("infinity-literal", '{"numaTopologyPolicy": "SingleNUMANode", "x": -Infinity}', "deny"),
)
STRING_KEY_VALUES: tuple[tuple[str, str, Expect], ...] = (
    ("unknown-value", "sometimes", "deny"),
    ("control-chars", "single\x00numa\x1bnode", "deny"),
    ("newline", "single-numa-node\nbest-effort", "deny"),
    ("bidi-override", "\u202eedon-amun-elgnis", "deny"),
    ("huge-value", "s" * 1_000_000, "deny"),
    ("json-object", '{"policy": "single-numa-node"}', "deny"),
    ("whitespace-only", "   ", "answer"),
    ("padded", "  single-numa-node  ", "answer"),
    ("wrong-case", "Single-NUMA-Node", "answer"),
)
JSON_KEYS = (KOORD_SPEC, KOORD_RESOURCE)
STRING_KEYS = (VOLCANO_POLICY, HAMI_NODE, HAMI_GPU, HAMI_BIND)


def _annotated(annotations: Mapping[str, Any], uid: str) -> dict[str, Any]:
    pod = good_pod()
    pod["metadata"]["annotations"] = dict(annotations)
    return review_of(pod, uid=uid)


def annotation_cases() -> list[Case]:
    uid = "uid-annotation"
    cases: list[Case] = []
    for key in (*JSON_KEYS, *STRING_KEYS):
        for label, value in NON_STRING_VALUES:
            body = encode(_annotated({key: value}, uid))
            cases.append(Case(f"annotation/{key}={label}", body, "deny", "answer", key, uid=uid))
    for label, text, expect in JSON_KEY_VALUES:
        body = encode(_annotated({KOORD_SPEC: text}, uid))
        cases.append(
            Case(
                f"annotation/{KOORD_SPEC}/{label}",
                body,
                expect,
                "answer",
                KOORD_SPEC if expect == "deny" else "",
                uid=uid,
            )
        )
    for label, text, expect in (
        ("invalid-json", "{", "deny"),
        ("json-list", "[]", "deny"),
        ("bind-unknown", '{"requiredCPUBindPolicy": "AllCPUs"}', "deny"),
        ("bind-wrong-type", '{"preferredCPUBindPolicy": 3}', "deny"),
        ("lenient-comment", '{"preferredCPUBindPolicy": "FullPCPUs" # x\n}', "answer"),
        ("unknown-fields-kept", '{"someFutureField": {"a": [1, 2]}}', "answer"),
    ):
        body = encode(_annotated({KOORD_RESOURCE: text}, uid))
        cases.append(
            Case(
                f"annotation/{KOORD_RESOURCE}/{label}",
                body,
                expect,
                "answer",
                KOORD_RESOURCE if expect == "deny" else "",
                uid=uid,
            )
        )
    for key in STRING_KEYS:
        for label, text, expect in STRING_KEY_VALUES:
            body = encode(_annotated({key: text}, uid))
            cases.append(
                Case(
                    f"annotation/{key}/{label}",
                    body,
                    expect,
                    "answer",
                    key if expect == "deny" else "",
                    uid=uid,
                )
            )
    many = {f"example.com/key-{i}": "v" for i in range(5000)}
    cases.append(
        Case(
            "annotation/5000-unknown-keys",
            encode(_annotated(many, uid)),
            "answer",
            "answer",
            uid=uid,
        )
    )
    weird_keys = {
        "": "x",
        "\x00": "y",
        "a" * 10_000: "z",
        KOORD_SPEC + " ": '{"numaTopologyPolicy":"x"}',
    }
    cases.append(
        Case(
            "annotation/weird-keys",
            encode(_annotated(weird_keys, uid)),
            "answer",
            "answer",
            uid=uid,
        )
    )
    conflict = {
        KOORD_SPEC: '{"numaTopologyPolicy":"SingleNUMANode"}',
        KOORD_RESOURCE: '{"numaTopologyPolicy":"Restricted"}',
    }
    cases.append(
        Case(
            "annotation/conflicting-keys",
            encode(_annotated(conflict, uid)),
            "deny",
            "answer",
            uid=uid,
        )
    )
    return cases


def build_corpus() -> list[Case]:
    """Every case, names unique."""
    cases = (
        transport_cases() + envelope_cases() + object_cases() + scope_cases() + annotation_cases()
    )
    names = [c.name for c in cases]
    dupes = {n for n in names if names.count(n) > 1}
    assert not dupes, f"duplicate case names: {sorted(dupes)}"
    return cases


# ----------------------------------------------------------------------------- server


@dataclass(frozen=True)
class Reply:
    status: int
    content_type: str
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class Client:
    """A blocking HTTPS client with a timeout, verifying the server's CA and address (the
    serving certificate carries 127.0.0.1 and localhost as SANs)."""

    def __init__(
        self,
        port: int,
        ca: Path | None,
        *,
        host: str = "127.0.0.1",
        timeout: float = CLIENT_TIMEOUT,
        context: ssl.SSLContext | None = None,
    ) -> None:
        self.port, self.host, self.timeout = port, host, timeout
        if context is None:
            context = ssl.create_default_context(cafile=str(ca))
        self.context = context

    def connect(self) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(
            self.host, self.port, context=self.context, timeout=self.timeout
        )

    def _send(
        self,
        method: str,
        path: str,
        body: bytes | None,
        headers: Mapping[str, str],
        conn: http.client.HTTPSConnection | None = None,
    ) -> Reply:
        own = conn is None
        conn = conn or self.connect()
        try:
            conn.request(method, path, body=body, headers=dict(headers))
            resp = conn.getresponse()
            return Reply(resp.status, resp.getheader("Content-Type", ""), resp.read())
        finally:
            if own:
                conn.close()

    def post(
        self,
        path: str,
        body: bytes,
        content_type: str | None = JSON_TYPE,
        conn: http.client.HTTPSConnection | None = None,
    ) -> Reply:
        headers = {"Content-Type": content_type} if content_type is not None else {}
        return self._send("POST", path, body, headers, conn)

    def get(self, path: str) -> Reply:
        return self._send("GET", path, None, {})

    def review(self, webhook: str, doc: Any, *, timeout_query: str = "10s") -> Reply:
        return self.post(f"/{webhook}?timeout={timeout_query}", encode(doc))


# ----------------------------------------------------------------------------- checks


def check_review(reply: Reply, *, uid: str, webhook: str) -> dict[str, Any]:
    """What the apiserver verifies (VerifyAdmissionResponse) plus our message rules;
    returns ``response``."""
    assert reply.status == 200, f"HTTP {reply.status}: {reply.body[:300]!r}"
    assert reply.content_type.startswith("application/json"), reply.content_type
    doc = reply.json()
    assert (doc.get("apiVersion"), doc.get("kind")) == ("admission.k8s.io/v1", "AdmissionReview")
    response = doc["response"]
    assert response["uid"] == uid
    assert isinstance(response["allowed"], bool)
    if webhook == "validate":
        assert "patch" not in response and "patchType" not in response
    else:
        assert ("patch" in response) == ("patchType" in response)
        if "patch" in response:
            assert response["patchType"] == "JSONPatch"
            ops = json.loads(base64.b64decode(response["patch"], validate=True))
            assert isinstance(ops, list) and ops
    if not response["allowed"]:
        status = response.get("status") or {}
        assert status.get("code", 0) >= 400 and status.get("message"), status
    for warning in response.get("warnings", []):
        assert isinstance(warning, str) and 0 < len(warning) < 120, warning
    assert b"Traceback" not in reply.body
    return dict(response)


def check_reject(reply: Reply, statuses: frozenset[int], fragment: str = "") -> str:
    """A 4xx with a short plain-text message; returns the message."""
    assert reply.status in statuses, (
        f"HTTP {reply.status} not in {sorted(statuses)}: {reply.body[:300]!r}"
    )
    assert reply.content_type.startswith("text/plain"), reply.content_type
    text = reply.body.decode("utf-8")
    assert text.strip(), "empty error message"
    assert "Traceback" not in text and len(text) < 2000, text[:300]
    if fragment:
        assert fragment.lower() in text.lower(), f"{fragment!r} not in {text!r}"
    return text


GOOD_BODY = encode(good_review("uid-after"))


def check_good(
    client: Client, webhook: str, conn: http.client.HTTPSConnection | None = None
) -> None:
    """The server still answers a good request correctly (the good pod fits the demo).
    ``conn``: a kept-alive connection, as the apiserver reuses them."""
    reply = client.post(f"/{webhook}?timeout=10s", GOOD_BODY, conn=conn)
    response = check_review(reply, uid="uid-after", webhook=webhook)
    assert response["allowed"] is True, response
