"""Answers of recent reviews, reused for reviews that differ only in the object's identity
(the replicas of one template), keyed by a digest of what the decision reads; a raw layer
answers a replica's body without parsing it. Soundness and bounds: docs/decision-cache.md."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any, NamedTuple

import orjson

from webhook.review.response import Outcome
from webhook.review.wire import AdmissionRequest

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


# Fields of a Pod that no check reads and that differ between the replicas of one template
# as the real apiserver sends them: its ServiceAccount admission plugin adds to each pod a
# projected token volume named kube-api-access-<5 random characters> and mounts it in
# every container (tests/fixtures/reviews/apiserver-raw/). Left out of the key like the
# identity fields, and only when they have their API type (lists).
CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")


def _without_volumes(spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` without ``volumes`` and without each container's ``volumeMounts``."""
    out = {k: v for k, v in spec.items() if not (k == "volumes" and type(v) is list)}
    for field in CONTAINER_LISTS:
        containers = out.get(field)
        if type(containers) is list:
            out[field] = [
                {k: v for k, v in c.items() if not (k == "volumeMounts" and type(v) is list)}
                if type(c) is dict
                else c
                for c in containers
            ]
    return out


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
    kind, resource = request.kind, request.resource
    pod = kind.kind == "Pod" and kind.group == ""
    if type(meta) is dict or pod:
        obj = dict(obj)
    if type(meta) is dict:
        obj["metadata"] = {
            k: v
            for k, v in meta.items()
            if not (k in IDENTITY_FIELDS and type(v) is IDENTITY_FIELDS[k])
        }
    if pod and type(obj.get("spec")) is dict:
        obj["spec"] = _without_volumes(obj["spec"])
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
# Replicas' bodies before the object gets a name: docs/decision-cache.md ("Raw bodies").

_UID_LABEL = b'"uid":"'
_PLAIN_TOKEN = re.compile(rb"[A-Za-z0-9-]{1,128}")
# Raw entries keep the body's bytes (compared, not hashed: a SHA-256 of an 8 KB body was
# about half the instructions of a replica's review, issue 27). Bodies over this size are
# not kept raw (the parsed layer still answers them), and the raw layer holds at most
# RAW_BUDGET_BYTES of bodies, oldest dropped first.
RAW_MAX_BYTES = 64 * 1024
RAW_BUDGET_BYTES = 32 * 1024 * 1024
# Raw entries of one slot (webhook, token position, length): bodies of one length with
# the token at one place are nearly always replicas of one template.
RAW_PER_SLOT = 4


_new_tuple = tuple.__new__


class RawKey(NamedTuple):
    slot: tuple[str, int, int]  # (webhook, token start, body length without the token)
    uid: str  # the cut-out token: the request uid once the entry is verified
    raw: bytes
    end: int  # where the token ends

    def head(self) -> bytes:
        return self.raw[: self.slot[1]]

    def tail(self) -> bytes:
        return self.raw[self.end :]


def raw_key(raw: bytes, webhook: str) -> RawKey | None:
    """The body with its first ``"uid":`` string value cut out, or None when that value is
    missing or not a plain token, or the body is over RAW_MAX_BYTES."""
    if len(raw) > RAW_MAX_BYTES:
        return None
    at = raw.find(_UID_LABEL)
    if at < 0:
        return None
    start = at + len(_UID_LABEL)
    end = raw.find(b'"', start)
    if end < 0 or _PLAIN_TOKEN.fullmatch(raw, start, end) is None:
        return None
    slot = (webhook, start, len(raw) - (end - start))
    # tuple.__new__, not RawKey(...): a named tuple's __new__ is a Python function, a
    # third of this function's instructions (one key per review, issue 27)
    return _new_tuple(RawKey, (slot, raw[start:end].decode("ascii"), raw, end))


def same_body(key: RawKey, head: bytes, tail: bytes) -> bool:
    """Whether ``key``'s body is ``head`` + a token + ``tail`` (the slot gives the token's
    position and the length, so every byte outside the token is compared)."""
    raw = key.raw
    return (
        len(head) == key.slot[1]
        and len(raw) - key.end == len(tail)
        and raw.startswith(head)
        and raw.endswith(tail)
    )


@dataclass
class RawEntry:
    """The answer for a raw body, with the request's fields that the log and the metrics
    name (object, oldObject and options dropped: an entry stays small), and the body's
    bytes around the token."""

    entry: Entry
    request: AdmissionRequest
    first_uid: str
    head: bytes
    tail: bytes
    verified: bool = False
    deps: Deps = ()

    @property
    def size(self) -> int:
        return len(self.head) + len(self.tail)


# Inventory validity ("Under inventory churn" in docs/decision-cache.md): entries belong
# to one inventory structure (Snapshot.structure) and record the usage generation of each
# topology class their answer read (Outcome.usage).
Deps = tuple[tuple[int, int], ...]  # (topology class, its usage_gen) the answer read


def _snapshot(view: Any) -> Any:
    return getattr(view, "snapshot", None)


def dependencies(outcome: Outcome, view: Any) -> Deps:
    """The usage generations ``outcome`` was decided under."""
    gens = getattr(_snapshot(view), "usage_gen", ())
    usage = getattr(outcome, "usage", ())
    return tuple((t, gens[t] if t < len(gens) else -1) for t in sorted(usage))


def still_valid(deps: Deps, view: Any) -> bool:
    """No topology class the answer read has changed usage since."""
    if not deps:
        return True
    gens = getattr(_snapshot(view), "usage_gen", ())
    return all(t < len(gens) and gens[t] == g for t, g in deps)


class DecisionCache:
    """Digest -> Entry (and raw digest -> RawEntry) for one (inventory structure,
    configuration) pair at a time."""

    def __init__(self) -> None:
        self._entries: dict[bytes, tuple[Entry, Deps]] = {}
        self._raw: dict[tuple[str, int, int], list[RawEntry]] = {}
        self._raw_bytes = 0
        self._raw_count = 0
        self._view: Any = None
        self._config: Any = None
        self.raw_hits = 0  # answers given without parsing the body (for the tests)
        self._misses_in_a_row = 0
        self._resting_since = 0  # reviews seen while resting; 0 when awake
        self._raw_unverified = 0  # raw entries made since one was last verified

    @property
    def resting(self) -> bool:
        return self._resting_since > 0

    def wants_key(self) -> bool:
        """Whether to compute this review's keys: always, unless resting (see
        docs/decision-cache.md)."""
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

    @property
    def raw_held(self) -> tuple[int, int]:
        """(raw entries, bytes of body they keep)."""
        return self._raw_count, self._raw_bytes

    def _generation(self, view: Any, config: Any) -> None:
        # Identity, not equality: a new structure or configuration is a new object, and the
        # cache holds a reference to the old ones, so an id cannot be reused under it. A
        # view without a snapshot (tests) is its own structure.
        # (no reference to the view itself: an idle worker would keep a replaced one alive)
        snapshot = getattr(view, "snapshot", None)  # _snapshot inlined: once per review
        structure = view if snapshot is None else snapshot.structure
        if structure is not self._view or config is not self._config:
            self._entries = {}
            self._raw = {}
            self._raw_bytes = self._raw_count = self._raw_unverified = 0
            self._view, self._config = structure, config

    def get(self, key: bytes, view: Any, config: Any) -> Entry | None:
        self._generation(view, config)
        found = self._entries.get(key)
        if found is None:
            return None
        if not still_valid(found[1], view):
            del self._entries[key]
            return None
        return found[0]

    def put(self, key: bytes, entry: Entry, view: Any, config: Any, limit: int) -> None:
        self._generation(view, config)
        _bounded_put(self._entries, key, (entry, dependencies(entry.outcome, view)), limit)

    def get_raw(self, key: RawKey, view: Any, config: Any) -> RawEntry | None:
        """The verified entry for this raw body, or None."""
        self._generation(view, config)
        raw = key.raw
        for known in self._raw.get(key.slot, ()):
            # same_body inlined (a replica's review, issue 27); the slot already gives the
            # head's and the tail's lengths
            if known.verified and raw.startswith(known.head) and raw.endswith(known.tail):
                if known.deps and not still_valid(known.deps, view):
                    self._drop_raw(key.slot, known)
                    return None
                self.raw_hits += 1
                return known
        return None

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
        token is this request's uid), or verify the remembered one (see "Raw bodies" in
        docs/decision-cache.md)."""
        if key.uid != request.uid:
            return
        self._generation(view, config)
        for known in self._raw.get(key.slot, ()):
            if same_body(key, known.head, known.tail):
                if not known.verified and known.first_uid != key.uid:
                    known.verified = True
                    self._raw_unverified = 0
                return
        # A real apiserver's bodies are never equal but for the uid (each pod's token
        # volume has a random name, docs/decision-cache.md): once MISSES_TO_REST entries
        # in a row were never verified, learn one body in SAMPLE_WHILE_RESTING only.
        self._raw_unverified += 1
        if self._raw_unverified > MISSES_TO_REST and self._raw_unverified % SAMPLE_WHILE_RESTING:
            return
        envelope = request._replace(object=None, old_object=None, options=None)
        deps = dependencies(entry.outcome, view)
        new = RawEntry(entry, envelope, key.uid, key.head(), key.tail(), deps=deps)
        entries = self._raw.get(key.slot)
        if entries is not None and len(entries) >= RAW_PER_SLOT:
            self._drop_raw(key.slot, entries[0])
        while self._raw and (
            self._raw_count >= limit or self._raw_bytes + new.size > RAW_BUDGET_BYTES
        ):
            oldest = next(iter(self._raw))  # oldest slot first (dicts keep insertion order)
            self._drop_raw(oldest, self._raw[oldest][0])
        self._raw.setdefault(key.slot, []).append(new)
        self._raw_count += 1
        self._raw_bytes += new.size

    def _drop_raw(self, slot: tuple[str, int, int], known: RawEntry) -> None:
        entries = self._raw[slot]
        entries.remove(known)
        self._raw_count -= 1
        self._raw_bytes -= known.size
        if not entries:
            del self._raw[slot]


def _bounded_put(entries: dict[bytes, Any], key: bytes, value: Any, limit: int) -> None:
    while len(entries) >= limit and entries:
        del entries[next(iter(entries))]  # oldest first (dicts keep insertion order)
    entries[key] = value
