"""``numagate test SUITE...``: run each case of a test-suite file (:mod:`webhook.cli.suite`)
through the webhook's own review handler (:func:`webhook.review.pipeline.answer`, as
``numagate review`` does) and compare the answer with the case's expectation.

Prints one line per case (``PASS`` or ``FAIL`` with what differed) and a summary per suite.
Exit status: 0 every case passed, 1 a case failed, 2 a suite, inventory, configuration or
manifest could not be used.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import copy
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.mutation.patch import apply_ops
from webhook.cli.suite import (
    Case,
    Expect,
    SuiteError,
    admission_review,
    case_object,
    load_suite,
    resolve,
)
from webhook.config import ConfigError, load_config
from webhook.dra.state import DraFileSource, DraState
from webhook.inventory.loader import LoadError
from webhook.inventory.state import InventoryState, StaticFileSource
from webhook.logs import setup_logging
from webhook.review.pipeline import Runtime, answer

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


@dataclass
class Answer:
    """What the webhook(s) answered for one case."""

    allowed: bool
    message: str = ""
    warnings: list[str] = field(default_factory=list)
    patched: bool = False


async def _call(obj: dict[str, Any], webhook: str, namespace: str, runtime: Runtime) -> Any:
    raw = admission_review(obj, namespace=namespace)
    result = await answer(raw, webhook=webhook, runtime=runtime)  # type: ignore[arg-type]
    if not result.is_review:
        raise SuiteError(f"the {webhook} webhook answered HTTP {result.status}: {result.body!r}")
    return json.loads(result.body)["response"]


async def review_case(obj: dict[str, Any], case: Case, runtime: Runtime) -> Answer:
    """The answer for ``obj``: one webhook, or (``admit``) mutate, the patch applied, then
    validate, as the apiserver calls them."""
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    namespace = case.namespace or str(meta.get("namespace") or "default")
    hooks = ["mutate", "validate"] if case.webhook == "admit" else [case.webhook]
    out = Answer(allowed=True)
    for hook in hooks:
        response = await _call(obj, hook, namespace, runtime)
        out.warnings += [w for w in response.get("warnings") or [] if w not in out.warnings]
        if response.get("patch"):
            out.patched = True
            obj = copy.deepcopy(obj)
            apply_ops(obj, json.loads(base64.b64decode(response["patch"])))
        if not response.get("allowed", False):
            out.allowed = False
            out.message = str((response.get("status") or {}).get("message", ""))
            break
    return out


def differences(expect: Expect, got: Answer) -> list[str]:
    """What does not match, each as 'expected ..., got ...'."""
    out: list[str] = []
    if got.allowed != expect.allowed:
        word = {True: "allowed", False: "denied"}
        detail = f" ({got.message})" if got.message else ""
        out.append(f"expected {word[expect.allowed]}, got {word[got.allowed]}{detail}")
    if expect.message is not None and expect.message not in got.message:
        out.append(f"expected a message with {expect.message!r}, got {got.message!r}")
    if expect.warnings is not None:
        if not expect.warnings and got.warnings:
            out.append(f"expected no warning, got {got.warnings}")
        for want in expect.warnings:
            if not any(want in w for w in got.warnings):
                out.append(f"expected a warning with {want!r}, got {got.warnings}")
    if expect.patched is not None and expect.patched != got.patched:
        out.append(
            f"expected {'a' if expect.patched else 'no'} patch, got {'one' if got.patched else 'none'}"
        )
    return out


def _runtime(suite_file: Path, inventory: str, config: str | None) -> Runtime:
    loaded = load_config(resolve(suite_file, config) if config else None)
    state = InventoryState()
    path = resolve(suite_file, inventory)
    StaticFileSource(path, state).load()
    dra = DraState()  # the DRA objects of the same file, as `numagate review` reads them
    DraFileSource(path, dra).load()
    return Runtime(config=lambda: loaded, inventory=state, dra=dra)


def run_suite(path: Path) -> tuple[int, int]:
    """Run one suite, print a line per case; (passed, failed)."""
    suite = load_suite(path)
    try:
        runtime = _runtime(path, suite.inventory, suite.config)
    except (ConfigError, LoadError) as exc:
        raise SuiteError(f"{path}: {exc}") from None
    objects = [case_object(path, i, case) for i, case in enumerate(suite.cases)]
    passed = failed = 0
    for case, obj in zip(suite.cases, objects, strict=True):
        problems = differences(case.expect, asyncio.run(review_case(obj, case, runtime)))
        if problems:
            failed += 1
            print(f"FAIL  {suite.name} / {case.name}: {'; '.join(problems)}")
        else:
            passed += 1
            print(f"PASS  {suite.name} / {case.name}")
    print(f"suite {suite.name!r} ({path}): {passed} of {passed + failed} cases passed")
    return passed, failed


def run(args: argparse.Namespace) -> int:
    setup_logging("error")
    total_failed = 0
    for name in args.suites:
        try:
            _, failed = run_suite(Path(name))
        except SuiteError as exc:
            print(f"numagate test: {exc}", file=sys.stderr)
            return EXIT_USAGE
        total_failed += failed
    return EXIT_FAILED if total_failed else EXIT_OK
