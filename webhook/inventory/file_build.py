"""A large static inventory file built in a short-lived helper process, which ``serve``
starts first thing (docs/inventory.md, "Startup from a file"). Imports only the standard
library: it is imported before anything heavy."""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import pickle
import signal
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

Build = Callable[[str], bytes]  # path -> the pickled FileBuild (state.pickled_file_build)

# Files above this size are built in a helper process (docs/inventory.md, "Memory"); small
# ones in-process, where a process start would cost more than it saves.
ISOLATE_ABOVE_BYTES = 1 << 20

_OK, _FAILED = b"ok", b"failed"


class FileBuildProcess:
    """``build(path)`` running in a helper process; :meth:`result` waits for it. ``build``
    is passed in (a module-level function: a spawned helper imports it by name) so that
    this module imports nothing of the server's.

    Forked when this process has one thread: the helper has this process's imports
    already (a spawned one spends ~0.4 s importing them again) and forking a
    multi-threaded process can copy a lock another thread holds. "spawn" otherwise
    (``method`` forces one).
    """

    def __init__(self, path: str, build: Build, *, method: str | None = None) -> None:
        if method is None:
            method = "fork" if threading.active_count() == 1 else "spawn"
        ctx = multiprocessing.get_context(method)
        self.path = path
        self._conn, theirs = ctx.Pipe(duplex=False)
        self._proc: Any = ctx.Process(
            target=_build_and_send,
            args=(build, path, theirs),
            name="numagate-file-build",
            daemon=True,
        )
        self._proc.start()
        theirs.close()  # the helper's end: if the helper dies, a read here sees EOF

    def result(self) -> bytes:
        """The pickled FileBuild; the build's own exception (LoadError, CoreError, ...) if
        it failed; LoadError if the helper died without a word (killed, out of memory)."""
        try:
            tag = self._conn.recv_bytes()
            payload = self._conn.recv_bytes()
        except EOFError:
            from webhook.inventory.loader import LoadError

            self._proc.join()
            raise LoadError(
                f"{self.path}: the process building the inventory exited with code "
                f"{self._proc.exitcode} before it finished"
            ) from None
        finally:
            self._conn.close()
        self._proc.join()
        if tag == _FAILED:
            raise pickle.loads(payload)
        return payload

    def cancel(self) -> None:
        """Stop the helper if it still runs (startup failed before its result was used)."""
        if self._proc.is_alive():
            self._proc.terminate()
        self._proc.join()
        with contextlib.suppress(OSError):
            self._conn.close()


def start_file_build(path: str | None, build: Build) -> FileBuildProcess | None:
    """The helper running ``build(path)`` when ``path`` is a file large enough to need
    one; None otherwise (no file, a small one, or one that cannot be read: the
    in-process load reports that)."""
    if not path:
        return None
    try:
        size = os.stat(path).st_size
    except OSError:
        return None
    return FileBuildProcess(path, build) if size > ISOLATE_ABOVE_BYTES else None


def _build_and_send(build: Build, path: str, conn: Connection) -> None:
    # Runs in the helper, which exits afterwards. A forked helper starts with the server's
    # signal handling (the event loop's wakeup fd): back to a fresh interpreter's, so that
    # Ctrl-C and SIGTERM reach it as they would reach a spawned one.
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        payload = build(path)
    except BaseException as exc:  # sent back as itself: the caller raises it
        try:
            error = pickle.dumps(exc, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # an exception that does not pickle: its words still arrive
            error = pickle.dumps(RuntimeError(f"{type(exc).__name__}: {exc}"))
        tag, payload = _FAILED, error
    else:
        tag = _OK
    with contextlib.suppress(BrokenPipeError):  # the caller left: nobody to tell
        conn.send_bytes(tag)
        conn.send_bytes(payload)


def die_with_parent() -> None:
    """Linux: SIGKILL this process when its parent dies (prctl PR_SET_PDEATHSIG)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)
