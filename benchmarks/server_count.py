"""The request path counted, not timed: CPU instructions per review under valgrind's
callgrind, which do not depend on what else the machine runs (issue 27).

    .venv/bin/python benchmarks/server_count.py [--stream unique|replicas|impossible|
        apiserver|apiserver-replicas|apiserver-unique|judged] [--webhook mutate|validate]
        [--calls 200]
        [--tree DIR ...] [--top 0] [--stage answer|loads|parse|intent|decide]

Each ``--tree`` (default: this checkout) is a checkout with its own ``.venv``; its code
answers the reviews, this checkout's benchmarks/gen.py builds them (the inputs of
benchmarks/server.py: 10,000 nodes, the twelve realistic pods or the impossible one, each
request its own uid, with ``unique`` each a different pod; ``apiserver`` and
``apiserver-replicas``: the bodies a real kube-apiserver sent, see server_ab.py;
``apiserver-unique``: those with every pod different; ``judged``: those validate bodies
with each pod as mutate leaves it, see STREAMS). The worker is set up as with
``serve --workers 2`` (``PROMETHEUS_MULTIPROC_DIR`` set, logging at info to /dev/null),
``webhook.review.pipeline.answer`` is called once per body to warm up, then valgrind's
instrumentation is switched on (``callgrind_control -i on``) and only what runs inside
the measured loop (``functools.reduce`` over the prepared bodies) is counted: the set-up
(the inventory build) costs no instructions and little time. PYTHONHASHSEED is fixed. Only the thread that runs the loop is counted: a feasibility
check that the pipeline hands to a thread (over ``timeouts.inlineNodes`` nodes, and under
valgrind every check looks slow enough for that) is not, so count the impossible pod with
a configuration that keeps it inline (``--config`` with a large ``timeouts.inlineNodes``).
Prints instructions per review per tree and, with ``--top N``, the N functions with the
most instructions of their own (callgrind_annotate).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT_ENV = "NUMAGATE_COUNT_ROOT"
# The measured loop runs inside this C function, the only one callgrind collects in.
TOGGLE = "functools_reduce"
STREAMS = {"unique": ("realistic", True), "replicas": ("realistic", False)}
STREAMS["impossible"] = ("impossible", True)
# The recorded bodies of a real kube-apiserver, each request its own uid, name and
# service-account volume (gen.apiserver_template): a named pod, a ReplicaSet's replica.
STREAMS["apiserver"] = ("pod", False)
STREAMS["apiserver-replicas"] = ("replica", False)
# The same bodies with the pod's spec varied and a label new on every request: every pod
# different as a real apiserver sends them (gen.apiserver_unique_templates).
STREAMS["apiserver-unique"] = ("unique", False)
# Those validate bodies with each pod as mutate leaves it (its JSONPatch applied), over an
# inventory whose every node carries Koordinator's policy label: validate judges each pod
# without numagate's own affinity (handlers.judged_intent, core.intent.read
# .with_spec_affinity), the path no other stream takes (``--webhook validate`` only).
STREAMS["judged"] = ("judged", False)
# What is counted per review: all of it (``answer``), or one part of it on the same bodies
# after the same warm-up: orjson.loads alone, parse_review (loads and the envelope
# check), the pod's templates and their intent (core.intent), the handler's decision
# from a parsed request (for mutate: templates, intent, the affinity and the patch).
# ``loop``: the harness alone (an empty coroutine run to completion on the event loop, as
# each counted review is), to subtract from ``answer``.
STAGES = ("answer", "loads", "parse", "intent", "decide", "loop")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--stream", choices=sorted(STREAMS), default="unique")
    p.add_argument("--webhook", choices=("mutate", "validate"), default="mutate")
    p.add_argument("--calls", type=int, default=200, help="reviews counted")
    p.add_argument("--nodes", type=int, default=10_000)
    p.add_argument("--tree", action="append", type=Path, help="checkout (default: this one)")
    p.add_argument("--top", type=int, default=0, help="also print the N costliest functions")
    p.add_argument("--config", type=Path, help="numagate configuration file (default: none)")
    p.add_argument("--keep", type=Path, help="keep the callgrind files in this directory")
    p.add_argument("--stage", choices=STAGES, default="answer",
                   help="count only this part of a review (default: all of it)")  # fmt: skip
    p.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def _instrument_on() -> None:
    """Switch callgrind's instrumentation on for this process. vgdb reaches a running
    process by polling, so spin (not sleep) until callgrind_control has returned."""
    control = subprocess.Popen(
        ["callgrind_control", "-i", "on", str(os.getpid())], stdout=subprocess.DEVNULL
    )
    while control.poll() is None:
        pass
    if control.returncode != 0:
        raise SystemExit("callgrind_control -i on failed")


def inner(args: argparse.Namespace) -> None:
    """In the valgrind'd process: set up a worker, warm up, count ``--calls`` reviews."""
    root = os.environ.get(ROOT_ENV, str(HERE.parent))
    sys.path[:0] = [root, str(HERE)]
    import gen

    os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", tempfile.mkdtemp(prefix="count-prom-"))
    import server as bench

    sys.path.insert(0, root)  # server.py put this checkout first: the tree's code answers
    import webhook

    if Path(webhook.__file__).resolve().parent.parent != Path(root).resolve():
        raise SystemExit(f"webhook imported from {webhook.__file__}, not {root}")
    from webhook.review.decision_cache import MISSES_TO_REST
    from webhook.review.pipeline import answer

    kind, unique = STREAMS[args.stream]
    runtime = bench.build_runtime(args.nodes, args.config, labelled=kind == "judged")
    loop = asyncio.new_event_loop()
    if kind in ("pod", "replica", "unique", "judged"):
        bodies = gen.apiserver_templates(args.webhook, "unique" if kind == "judged" else kind)
        if kind == "judged":
            bodies = [judged(body, runtime, loop, answer) for body in bodies]

        def vary(body: bytes, n: int, *, unique: bool) -> bytes:
            return gen.vary_template(body, n)
    else:
        pods = gen.realistic_pods() if kind == "realistic" else [gen.impossible_pod()]
        bodies = gen.review_bodies(pods, prefix="r" if kind == "realistic" else "i")
        vary = gen.vary

    def one(_: Any, body: bytes) -> None:
        result = loop.run_until_complete(answer(body, webhook=args.webhook, runtime=runtime))
        if result.status != 200:
            raise SystemExit(f"HTTP {result.status}: {result.body[:200]!r}")

    # warm-up: imports, caches, the first replicas; for every pod different, past the
    # misses after which the decision cache rests (its steady state under wrk)
    start = 2 * len(bodies) + 2 * MISSES_TO_REST
    for k in range(start):
        one(None, vary(bodies[k % len(bodies)], k, unique=unique))
    varied = [vary(bodies[k % len(bodies)], start + k, unique=unique) for k in range(args.calls)]
    step, items = _stage(args, runtime, varied, one)
    _instrument_on()
    functools.reduce(step, items, None)


def judged(template: bytes, runtime: Any, loop: asyncio.AbstractEventLoop, answer: Any) -> bytes:
    """A validate template with its pod as this runtime's mutate answer leaves it."""
    import gen

    mutated = loop.run_until_complete(
        answer(gen.as_mutate_review(template), webhook="mutate", runtime=runtime)
    )
    return gen.judged_template(template, mutated.body)


def _stage(args: argparse.Namespace, runtime: Any, varied: list[bytes], one: Any) -> Any:
    """(the step functools.reduce calls, its items) for ``args.stage``."""
    import orjson

    from core.intent.read import read_intent
    from core.intent.workloads import pod_templates
    from webhook.review.handlers import HANDLERS, core_settings
    from webhook.review.wire import parse_review

    config = runtime.config()
    inventory = runtime.read(config)
    settings = core_settings(config)
    handler = HANDLERS[args.webhook]
    loop = asyncio.new_event_loop()

    def intent(_: Any, request: Any) -> None:
        for template in pod_templates(request.object, *settings):
            read_intent(template)

    def decide(_: Any, request: Any) -> None:
        loop.run_until_complete(handler.decide(request, runtime, config, 1e18, inventory))

    async def nothing() -> None:
        return None

    steps = {
        "answer": (one, varied),
        "loop": (lambda _, body: loop.run_until_complete(nothing()), varied),
        "loads": (lambda _, body: orjson.loads(body), varied),
        "parse": (lambda _, body: parse_review(body), varied),
        "intent": (intent, None),
        "decide": (decide, None),
    }
    step, items = steps[args.stage]
    return step, [parse_review(body) for body in varied] if items is None else items


def count(tree: Path, args: argparse.Namespace, out: Path) -> int:
    """Instructions collected in ``tree``'s process for ``args.calls`` reviews."""
    python = tree / ".venv" / "bin" / "python"
    cmd = [
        "valgrind",
        "--tool=callgrind",
        "--instr-atstart=no",
        "--collect-atstart=no",
        f"--toggle-collect={TOGGLE}",
        f"--callgrind-out-file={out}",
        str(python),
        str(Path(__file__).resolve()),
        "--inner",
        f"--stream={args.stream}",
        f"--webhook={args.webhook}",
        f"--calls={args.calls}",
        f"--nodes={args.nodes}",
        f"--stage={args.stage}",
    ]
    if args.config is not None:
        cmd.append(f"--config={args.config.resolve()}")
    env = dict(os.environ, PYTHONHASHSEED="0", **{ROOT_ENV: str(tree.resolve())})
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tree)
    if done.returncode != 0:
        raise SystemExit(f"{tree}: exit {done.returncode}\n{done.stderr[-3000:]}")
    for line in out.read_text().splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    raise SystemExit(f"{out}: no totals")


def top(out: Path, n: int, calls: int) -> list[tuple[str, int]]:
    """The ``n`` functions with the most instructions of their own, per review."""
    text = subprocess.run(
        ["callgrind_annotate", "--inclusive=no", "--threshold=100", str(out)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rows = []
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S.*)$", line)
        if m and ":" in m[2]:
            name = m[2].split(" [")[0].rsplit("/", 1)[-1]
            rows.append((name, int(m[1].replace(",", "")) // calls))
    return rows[:n]


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.stream == "judged" and args.webhook != "validate":
        raise SystemExit("--stream judged: validate's reviews (--webhook validate)")
    if args.inner:
        inner(args)
        return 0
    trees = args.tree or [HERE.parent]
    result: dict[str, Any] = {"stream": args.stream, "webhook": args.webhook,
                              "stage": args.stage, "calls": args.calls}  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        for k, tree in enumerate(trees):
            out = (args.keep or Path(tmp)) / f"callgrind.{k}.out"
            total = count(tree, args, out)
            entry: dict[str, Any] = {"per_review": round(total / args.calls)}
            if args.top:
                entry["top"] = top(out, args.top, args.calls)
            result[str(tree)] = entry
    print(json.dumps(result))
    for tree, entry in result.items():
        if isinstance(entry, dict):
            print(f"{tree}: {entry['per_review']:,} instructions per review", file=sys.stderr)
            for name, n in entry.get("top", []):
                print(f"  {n:>9,}  {name}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
