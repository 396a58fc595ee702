"""The HTTP pieces of a watch: the line splitter, the reconnect backoff, cutting a
blocked stream, one readable line per error."""

from __future__ import annotations

import contextlib
import random
import socket
from collections.abc import Iterator, Mapping
from typing import Any

import urllib3
from kubernetes.client.exceptions import ApiException


class Backoff:
    """Exponential backoff with jitter, capped: attempt n waits a random time in
    [d/2, d] with d = min(maximum, initial * factor**n), never below ``initial``.
    The jitter spreads the reconnects of many replicas after an apiserver restart."""

    def __init__(
        self,
        initial: float,
        maximum: float,
        *,
        factor: float = 2.0,
        rng: random.Random | None = None,
    ) -> None:
        if not 0 < initial <= maximum:
            raise ValueError(
                f"backoff bounds: need 0 < initial <= maximum, got initial={initial}, "
                f"maximum={maximum}"
            )
        self.initial = initial
        self.maximum = maximum
        self.factor = factor
        self.attempt = 0
        self._rng = rng or random.Random()

    def next(self) -> float:
        ceiling = min(self.maximum, self.initial * self.factor**self.attempt)
        self.attempt += 1
        return max(self.initial, self._rng.uniform(ceiling / 2, ceiling))

    def reset(self) -> None:
        self.attempt = 0


def api_get(
    api_client: Any, path: str, params: Mapping[str, Any], timeout: tuple[float, float]
) -> Any:
    """GET ``path`` as the generated API classes would (``api_client`` brings the
    server, TLS, proxy, credentials and User-Agent): the unread urllib3 response, or
    ApiException for a status other than 2xx. Not through ``CoreV1Api``: importing it
    costs 0.4 s of CPU and 20 MiB in every worker with kubernetes 37, for two list calls.
    ``params`` by their names on the wire (booleans sent as true/false)."""
    query = [(k, str(v).lower() if isinstance(v, bool) else str(v)) for k, v in params.items()]
    headers = {"Accept": "application/json"}
    serialize = getattr(api_client, "param_serialize", None)
    if serialize is None:
        # kubernetes < 36 (the python-legacy generator): one call, raising for non-2xx,
        # the raw response when its content is not preloaded (checked against 35.0.0).
        return api_client.call_api(
            path,
            "GET",
            query_params=query,
            header_params=headers,
            auth_settings=["BearerToken"],
            _return_http_data_only=True,
            _preload_content=False,
            _request_timeout=timeout,
        )
    request = serialize(
        method="GET",
        resource_path=path,
        query_params=query,
        header_params=headers,
        auth_settings=["BearerToken"],
    )
    response = api_client.call_api(*request, _request_timeout=timeout)
    if not 200 <= response.status <= 299:
        response.read()
        raise ApiException.from_response(http_resp=response, body=None, data=None)
    return response.response


def iter_lines(response: Any) -> Iterator[bytes]:
    """The non-empty lines of a streamed body (a watch sends one JSON event per line).
    Ours rather than the kubernetes client's private ``iter_resp_lines``; a line split
    over many chunks is joined once, not re-concatenated per chunk."""
    pending: list[bytes] = []
    for chunk in response.stream(amt=None, decode_content=False):
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                if start < len(chunk):
                    pending.append(chunk[start:])
                break
            piece = chunk[start:end]
            if pending:
                pending.append(piece)
                piece = b"".join(pending)
                pending.clear()
            if piece.strip():
                yield piece
            start = end + 1
    if pending:
        tail = b"".join(pending)
        if tail.strip():
            yield tail


def describe_error(exc: Exception) -> str:
    """One readable line: urllib3 wraps the useful part (connection refused, TLS
    verification failed) in MaxRetryError.reason, or raises it bare when not retrying."""
    if isinstance(exc, urllib3.exceptions.MaxRetryError) and exc.reason is not None:
        return f"API unreachable: {type(exc.reason).__name__}: {exc.reason}"
    if isinstance(exc, urllib3.exceptions.HTTPError):
        return f"API unreachable: {type(exc).__name__}: {exc}"
    if isinstance(exc, ApiException):
        return f"API error {exc.status} {exc.reason}"
    return f"{type(exc).__name__}: {exc}"


def cut_response(response: Any) -> None:
    """Shut the socket under a blocked streaming read, so its thread wakes now (the
    same workaround ``kubernetes.watch.Watch.stop`` uses)."""
    connection = getattr(response, "connection", None)
    sock = getattr(connection, "sock", None)
    if sock is None:
        return
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
