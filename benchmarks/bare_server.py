"""The ceiling of the stack: a bare aiohttp TLS server that reads the body and answers a
fixed allowed AdmissionReview. Same TLS context builder, same worker model (N processes
sharing the port with SO_REUSEPORT) as ``numagate serve``, so the difference to numagate
is the admission work itself.

    python benchmarks/bare_server.py --cert-dir DIR --port P [--workers 2] [--valid]

With ``--valid`` it is the smallest webhook a real apiserver accepts: it decodes the body
(orjson.loads) and echoes the request's uid in an allowed answer (the apiserver refuses an
answer whose uid is not the request's). Without it the uid is fixed and nothing is parsed.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import signal
import sys
from pathlib import Path

import orjson
from aiohttp import web

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from certs.watcher import build_server_context  # noqa: E402

# A complete, valid v1 answer (uid, allowed); the uid is fixed because this server does not
# parse the request: parsing is part of what the numagate figure pays for.
RESPONSE = (
    b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview",'
    b'"response":{"uid":"00000000-0000-0000-0000-000000000000","allowed":true}}'
)
MAX_BODY = 7 * 1024 * 1024  # the cap numagate uses (webhook/app.py)


async def review(request: web.Request) -> web.Response:
    await request.read()
    return web.Response(body=RESPONSE, content_type="application/json")


async def valid_review(request: web.Request) -> web.Response:
    review = orjson.loads(await request.read())
    answer = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": review["request"]["uid"], "allowed": True},
    }
    return web.Response(body=orjson.dumps(answer), content_type="application/json")


async def ready(request: web.Request) -> web.Response:
    return web.Response(text="ok\n")


def make_app(*, valid: bool = False) -> web.Application:
    app = web.Application(client_max_size=MAX_BODY)
    handler = valid_review if valid else review
    app.router.add_post("/mutate", handler)
    app.router.add_post("/validate", handler)
    app.router.add_get("/readyz", ready)
    return app


async def serve(cert_dir: str, host: str, port: int, valid: bool = False) -> None:
    ctx = build_server_context(Path(cert_dir) / "tls.crt", Path(cert_dir) / "tls.key")
    runner = web.AppRunner(make_app(valid=valid), handle_signals=False, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=ctx, reuse_port=True)
    await site.start()
    print(f"bare: worker {os.getpid()} serving https://{host}:{port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()


def worker(cert_dir: str, host: str, port: int, valid: bool = False) -> None:
    asyncio.run(serve(cert_dir, host, port, valid))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cert-dir", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--valid", action="store_true",
                        help="decode the body and echo its uid (the minimal valid webhook)")  # fmt: skip
    args = parser.parse_args()
    ctx = multiprocessing.get_context("spawn")
    procs = [
        ctx.Process(target=worker, args=(args.cert_dir, args.host, args.port, args.valid))
        for _ in range(args.workers)
    ]
    for p in procs:
        p.start()

    def forward(signum: int, _frame: object) -> None:
        for p in procs:
            if p.pid is not None and p.is_alive():
                os.kill(p.pid, signal.SIGTERM)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    for p in procs:
        p.join()
    return 0


if __name__ == "__main__":
    sys.exit(main())
