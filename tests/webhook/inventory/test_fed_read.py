"""The worker's reading of the inventory process's messages (webhook/inventory/fed.py,
``read_message``) over a real socket pair, framed by multiprocessing as feed.py sends."""

from __future__ import annotations

import os
import pickle
import threading
import tracemalloc
from multiprocessing import Pipe

import pytest

from webhook.inventory import fed as fed_module
from webhook.inventory.fed import READ_CHUNK, read_message
from webhook.inventory.feed import deflated


def _send_in_thread(data: list[bytes]) -> threading.Thread:
    sender, receiver = Pipe()

    def send() -> None:
        for d in data:
            sender.send_bytes(d)
        sender.close()

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    thread.receiver = receiver  # type: ignore[attr-defined]
    return thread


def test_messages_arrive_whole_and_in_order() -> None:
    big = {"rows": [f"node-{i}" for i in range(3 * READ_CHUNK // 8)]}  # several chunks
    small = ("batch", 1, None)
    messages = [big, small, small, big]
    thread = _send_in_thread([pickle.dumps(m, protocol=pickle.HIGHEST_PROTOCOL) for m in messages])
    conn = thread.receiver  # type: ignore[attr-defined]
    assert [read_message(conn) for _ in messages] == messages
    with pytest.raises(EOFError):  # then the process's end is gone
        read_message(conn)
    thread.join()


@pytest.mark.parametrize("count", [1_000, 1_000_000])  # read whole; unpickled as it comes
def test_a_connection_cut_inside_a_message_is_an_end(count: int) -> None:
    data = pickle.dumps(list(range(count)), protocol=pickle.HIGHEST_PROTOCOL)
    assert (len(data) > READ_CHUNK) == (count > 1_000)
    sender, conn = Pipe()

    def die_halfway() -> None:  # the frame says the whole length; then half of it
        sender._send(len(data).to_bytes(4, "big") + data[: len(data) // 2])  # type: ignore[attr-defined]
        sender.close()

    thread = threading.Thread(target=die_halfway, daemon=True)
    thread.start()
    with pytest.raises(EOFError):
        read_message(conn)
    thread.join()


@pytest.mark.parametrize("compressed", [False, True])
def test_a_message_is_not_held_whole_beside_its_objects(compressed: bool) -> None:
    # 40 MiB of pickle into 40 MiB of objects: recv_bytes + loads peaks at both at once,
    # and so would a compressed Whole decompressed whole before it is unpickled.
    payload = [bytes(4096) for _ in range(10_000)]
    data = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
    thread = _send_in_thread([deflated(payload, {}) if compressed else data])
    del payload
    tracemalloc.start()
    try:
        got = read_message(thread.receiver)  # type: ignore[attr-defined]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    thread.join()
    assert len(got) == 10_000
    assert peak < len(data) + 8 * READ_CHUNK, (peak, len(data))  # buffers of 1 MiB


def test_the_heap_is_trimmed_as_soon_as_a_whole_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the unpickler held until its end goes back to the system before the message is
    handed on (the editor and the install come after), for a message read as it arrives;
    a small one is not worth a trim (docs/inventory.md, "The replica at ready")."""
    calls: list[str] = []
    monkeypatch.setattr(fed_module, "release_free_heap", lambda: calls.append("trim") or True)
    big = [os.urandom(4096) for _ in range(512)]  # 2 MiB that do not compress
    thread = _send_in_thread([deflated(big, {}), pickle.dumps(("batch", 1))])
    conn = thread.receiver  # type: ignore[attr-defined]
    assert read_message(conn) == big and calls == ["trim"]
    assert read_message(conn) == ("batch", 1) and calls == ["trim"]
    thread.join()
