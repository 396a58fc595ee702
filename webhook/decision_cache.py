"""Answers of recent reviews, reused for reviews that differ only in the object's identity.

A ReplicaSet, a Job or a StatefulSet creates its pods from one template, so the apiserver
sends bursts of reviews (a scale-up of hundreds of replicas) whose objects differ only in
``metadata.name``, ``uid``, ``creationTimestamp`` and the times in ``managedFields``. The
webhook's decision reads none of those (nor ``request.uid``/``name``, ``userInfo`` or
``options``: a test in tests/webhook/test_decision_cache.py holds every other field to
account), so such a review gets the answer of the first one, with its own uid.

The key is a SHA-256 digest of everything the decision reads: the webhook, the request's
kind, resource, subresource, operation, namespace and dryRun flag, and the object minus
those identity fields (an identity field is left out only when it has its API type, so a
malformed one still reaches validation). Entries belong to one inventory view and one
configuration: when either is replaced the cache starts empty. UPDATE reviews (their
answer depends on the old object too), answers given while the inventory is missing or
stale, and answers whose feasibility check was skipped for the deadline are never stored
(``Outcome.volatile``). Bounded by entries (FIFO eviction): a digest, the outcome and the
serialized answer, about 1-2 KiB each.
"""

from __future__ import annotations

import hashlib
from typing import Any, NamedTuple

import orjson

from webhook.admission import AdmissionRequest, Outcome

# metadata fields that identify one object and that no check reads, with their API types
# (ObjectMeta: name, uid, creationTimestamp and resourceVersion are strings, generation an
# integer, managedFields a list).
IDENTITY_FIELDS: dict[str, type] = {
    "name": str,
    "uid": str,
    "creationTimestamp": str,
    "resourceVersion": str,
    "generation": int,
    "managedFields": list,
}


class Entry(NamedTuple):
    """One cached answer: the outcome (for the log and the metrics) and the serialized
    AdmissionReview split around the uid, which is the only per-review byte in it."""

    outcome: Outcome
    head: bytes
    tail: bytes

    def body(self, uid: str) -> bytes:
        return self.head + orjson.dumps(uid) + self.tail


def review_key(request: AdmissionRequest, webhook: str) -> bytes | None:
    """The digest of what the decision reads, or None when the review is not cacheable."""
    obj = request.object
    if request.operation != "CREATE" or request.old_object is not None or type(obj) is not dict:
        return None
    meta = obj.get("metadata")
    if type(meta) is dict:
        obj = dict(obj)
        obj["metadata"] = {
            k: v
            for k, v in meta.items()
            if not (k in IDENTITY_FIELDS and type(v) is IDENTITY_FIELDS[k])
        }
    kind, resource = request.kind, request.resource
    try:
        data = orjson.dumps(
            [
                webhook,
                [kind.group, kind.version, kind.kind],
                [resource.group, resource.version, resource.resource],
                request.sub_resource,
                request.operation,
                request.namespace,
                request.dry_run,
                obj,
            ]
        )
    except (TypeError, orjson.JSONEncodeError):
        return None
    return hashlib.sha256(data).digest()


def split_body(body: bytes, uid: str) -> tuple[bytes, bytes] | None:
    """``body`` cut around the JSON string of ``uid``, or None when it is not where
    expected. The first ``"uid":`` is the response's: finalize puts it first, after the
    fixed apiVersion and kind."""
    label = b'"uid":'
    value = orjson.dumps(uid)
    at = body.find(label + value)
    if at < 0:
        return None
    cut = at + len(label)
    return body[:cut], body[cut + len(value) :]


class DecisionCache:
    """Digest -> Entry for one (inventory view, configuration) pair at a time."""

    def __init__(self) -> None:
        self._entries: dict[bytes, Entry] = {}
        self._view: Any = None
        self._config: Any = None

    def __len__(self) -> int:
        return len(self._entries)

    def _generation(self, view: Any, config: Any) -> None:
        # Identity, not equality: a reloaded view or configuration is a new object, and the
        # cache holds a reference to the old ones, so an id cannot be reused under it.
        if view is not self._view or config is not self._config:
            self._entries = {}
            self._view, self._config = view, config

    def get(self, key: bytes, view: Any, config: Any) -> Entry | None:
        self._generation(view, config)
        return self._entries.get(key)

    def put(self, key: bytes, entry: Entry, view: Any, config: Any, limit: int) -> None:
        self._generation(view, config)
        entries = self._entries
        while len(entries) >= limit and entries:
            del entries[next(iter(entries))]  # oldest first (dicts keep insertion order)
        entries[key] = entry
