"""The test-suite file of ``numagate test`` (as ``kyverno test`` and ``gator verify`` have
theirs): manifests with the admission answer expected for each.

.. code-block:: yaml

    name: koordinator policies                # the suite's name
    inventory: ../manifests/inventory.yaml    # the cluster; paths are relative to this file
    config: numagate.yaml                     # optional numagate configuration
    cases:
      - name: a SingleNUMANode pod that fits
        manifest: pods/koord-pod.yaml         # a file with one object, or
        # object: {apiVersion: v1, kind: Pod, ...}   the object inline
        webhook: admit                        # mutate | validate | admit (default: both
                                              # in turn, the patch applied, as the apiserver)
        expect:
          allowed: true
          message: does not match             # optional: a substring of the denial message
          warnings: [no node has room]        # optional: each a substring of some warning;
                                              # [] means no warning at all
          patched: true                       # optional: a JSON patch is (not) returned
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from webhook.inventory.loader import LoadError, load_objects

TEST_UID = "numagate-test"


class SuiteError(Exception):
    """A suite file that cannot be used; the message names the file and the field."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Expect(_Model):
    allowed: bool
    message: str | None = None
    warnings: list[str] | None = None
    patched: bool | None = None


class Case(_Model):
    name: str = Field(min_length=1)
    manifest: str | None = None
    object: dict[str, Any] | None = None
    webhook: Literal["mutate", "validate", "admit"] = "admit"
    namespace: str | None = None
    expect: Expect

    @model_validator(mode="after")
    def _one_source(self) -> Case:
        if (self.manifest is None) == (self.object is None):
            raise ValueError("give exactly one of 'manifest' (a file) and 'object' (inline)")
        return self


class Suite(_Model):
    name: str = Field(min_length=1)
    inventory: str
    config: str | None = None
    cases: list[Case] = Field(min_length=1)


def _where(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def load_suite(path: Path) -> Suite:
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise SuiteError(f"{path}: cannot read: {exc}") from None
    except yaml.YAMLError as exc:
        raise SuiteError(f"{path}: not valid YAML: {exc}") from None
    try:
        return Suite.model_validate(doc)
    except ValidationError as exc:
        problems = "; ".join(f"{_where(e['loc'])}: {e['msg']}" for e in exc.errors())
        raise SuiteError(f"{path}: {problems}") from None


def resolve(suite_file: Path, relative: str) -> str:
    """A path of the suite, relative to the suite file's directory."""
    return str((suite_file.parent / relative) if not Path(relative).is_absolute() else relative)


def case_object(suite_file: Path, index: int, case: Case) -> dict[str, Any]:
    if case.object is not None:
        return dict(case.object)
    assert case.manifest is not None
    where = f"{suite_file}: cases[{index}].manifest"
    try:
        objects = load_objects(resolve(suite_file, case.manifest))
    except LoadError as exc:
        raise SuiteError(f"{where}: {exc}") from None
    if len(objects) != 1:
        raise SuiteError(f"{where}: {case.manifest} holds {len(objects)} objects; a case tests one")
    return objects[0].obj


def admission_review(obj: Mapping[str, Any], *, namespace: str) -> bytes:
    """The AdmissionReview v1 (dry-run CREATE) the apiserver would send for ``obj``."""
    group, _, version = str(obj.get("apiVersion") or "v1").rpartition("/")
    kind = str(obj.get("kind") or "")
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": TEST_UID,
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": kind.lower() + "s"},
            "name": str(meta.get("name") or meta.get("generateName") or ""),
            "namespace": namespace,
            "operation": "CREATE",
            "userInfo": {"username": TEST_UID},
            "object": obj,
            "dryRun": True,
        },
    }
    return json.dumps(review).encode()
