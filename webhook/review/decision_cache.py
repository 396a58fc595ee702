"""Answers of recent reviews, reused for reviews that differ only in the object's identity.

A ReplicaSet or a (non-indexed) Job creates its pods from one template, so the apiserver
sends bursts of reviews (a scale-up of hundreds of replicas) whose objects differ only in
``metadata.name``, ``uid``, ``creationTimestamp`` and the times in ``managedFields``. The
webhook's decision reads none of those (nor ``request.uid``/``name``, ``userInfo`` or
``options``; the corpus test in tests/webhook/review/test_decision_cache.py checks that changing
them never changes an uncached answer), so such a review gets the answer of the first one,
with its own uid.

The key is a SHA-256 digest of everything the decision reads: the webhook, the request's
kind, resource, subresource, operation, namespace and dryRun flag, and the object minus
those identity fields (an identity field is left out only when it has its API type, so a
malformed one still reaches validation). Entries belong to one inventory view and one
configuration: when either is replaced the cache starts empty. UPDATE reviews (their
answer depends on the old object too), answers given while the inventory is missing or
stale, and answers whose feasibility check was skipped for the deadline are never stored
(``Outcome.volatile``). Bounded by entries (FIFO eviction): a digest, the outcome and the
serialized answer, about 1-2 KiB each.

Keys cost ~15-25 us per review (serializing and hashing the object). When every pod is
different (StatefulSet, DaemonSet and indexed Job pods differ in labels or spec) that is
pure overhead, so after MISSES_TO_REST lookups in a row without a hit the cache rests: it
computes keys for one review in SAMPLE_WHILE_RESTING only, and wakes up at the first hit
(a burst of replicas is then answered from the cache again after at most two samples).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any, NamedTuple

import orjson

from webhook.review.wire import AdmissionRequest, Outcome

MISSES_TO_REST = 64
SAMPLE_WHILE_RESTING = 16

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


# ---------------------------------------------------------------------------- raw bodies
#
# Before the object gets a name (mutating admission of a generateName pod), the reviews
# of one ReplicaSet's pods are byte-identical but for the request uid (and the second in
# managedFields' time). The raw layer keys the body itself with the first ``"uid":"...``
# value cut out, so such a review is answered without being parsed. Sound because:
# bodies that agree byte for byte outside one plain string token ([A-Za-z0-9-]: no quote,
# no escape) parse to the same document but for that token's value; an entry is stored
# only from a body whose request.uid equals its token, and is used only once a second body
# with a different token parsed to request.uid == its own token. Then the token is the
# request uid: were the uid read from elsewhere, the bytes there are the same in both
# bodies and the two uids would be equal, but the tokens differ.

_UID_LABEL = b'"uid":"'
_PLAIN_TOKEN = re.compile(rb"[A-Za-z0-9-]{1,128}")


class RawKey(NamedTuple):
    digest: bytes
    uid: str  # the cut-out token: the request uid once the entry is verified


def raw_key(raw: bytes, webhook: str) -> RawKey | None:
    """The body's digest without its first ``"uid":`` string value, or None when that
    value is missing or not a plain token."""
    at = raw.find(_UID_LABEL)
    if at < 0:
        return None
    start = at + len(_UID_LABEL)
    end = raw.find(b'"', start)
    if end < 0 or _PLAIN_TOKEN.fullmatch(raw, start, end) is None:
        return None
    view = memoryview(raw)
    # the cut's position is hashed too: two bodies cannot share a digest by moving it
    digest = hashlib.sha256(f"{webhook}:{start}:".encode())
    digest.update(view[:start])
    digest.update(view[end:])
    return RawKey(digest.digest(), raw[start:end].decode("ascii"))


@dataclass
class RawEntry:
    """The answer for a raw body, with the request's fields that the log and the metrics
    name (object, oldObject and options dropped: an entry stays small)."""

    entry: Entry
    request: AdmissionRequest
    first_uid: str
    verified: bool = False


class DecisionCache:
    """Digest -> Entry (and raw digest -> RawEntry) for one (inventory view,
    configuration) pair at a time."""

    def __init__(self) -> None:
        self._entries: dict[bytes, Entry] = {}
        self._raw: dict[bytes, RawEntry] = {}
        self._view: Any = None
        self._config: Any = None
        self.raw_hits = 0  # answers given without parsing the body (for the tests)
        self._misses_in_a_row = 0
        self._resting_since = 0  # reviews seen while resting; 0 when awake

    @property
    def resting(self) -> bool:
        return self._resting_since > 0

    def wants_key(self) -> bool:
        """Whether to compute this review's keys (always, unless resting: see above)."""
        if not self._resting_since:
            return True
        self._resting_since += 1
        return self._resting_since % SAMPLE_WHILE_RESTING == 0

    def looked_up(self, hit: bool) -> None:
        """The result of a keyed lookup: a hit wakes the cache, misses put it to rest."""
        if hit:
            self._misses_in_a_row = 0
            self._resting_since = 0
            return
        self._misses_in_a_row += 1
        if self._misses_in_a_row >= MISSES_TO_REST and not self._resting_since:
            self._resting_since = 1

    def __len__(self) -> int:
        return len(self._entries)

    def _generation(self, view: Any, config: Any) -> None:
        # Identity, not equality: a reloaded view or configuration is a new object, and the
        # cache holds a reference to the old ones, so an id cannot be reused under it.
        if view is not self._view or config is not self._config:
            self._entries = {}
            self._raw = {}
            self._view, self._config = view, config

    def get(self, key: bytes, view: Any, config: Any) -> Entry | None:
        self._generation(view, config)
        return self._entries.get(key)

    def put(self, key: bytes, entry: Entry, view: Any, config: Any, limit: int) -> None:
        self._generation(view, config)
        _bounded_put(self._entries, key, entry, limit)

    def get_raw(self, key: RawKey, view: Any, config: Any) -> RawEntry | None:
        """The verified entry for this raw body, or None."""
        self._generation(view, config)
        known = self._raw.get(key.digest)
        if known is None or not known.verified:
            return None
        self.raw_hits += 1
        return known

    def learn_raw(
        self,
        key: RawKey,
        request: AdmissionRequest,
        entry: Entry,
        view: Any,
        config: Any,
        limit: int,
    ) -> None:
        """After a parsed review answered with ``entry``: remember the raw body (its
        token is this request's uid), or verify the remembered one (see above)."""
        if key.uid != request.uid:
            return
        self._generation(view, config)
        known = self._raw.get(key.digest)
        if known is None:
            envelope = request._replace(object=None, old_object=None, options=None)
            _bounded_put(
                self._raw,
                key.digest,
                RawEntry(entry, envelope, key.uid),
                limit,
            )
        elif not known.verified and known.first_uid != key.uid:
            known.verified = True


def _bounded_put(entries: dict[bytes, Any], key: bytes, value: Any, limit: int) -> None:
    while len(entries) >= limit and entries:
        del entries[next(iter(entries))]  # oldest first (dicts keep insertion order)
    entries[key] = value
