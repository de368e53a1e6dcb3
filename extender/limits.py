"""Bounds on what one client can make the extender do: how long it may take to send a request,
how large the request may be, how many API requests are judged at once, and how much work a
preview or capacity question may ask for.

Both listeners live in one process and one event loop (:mod:`berth.extender.server`): anything
the read-only API port lets a client hold (a connection, a slot, the loop itself) is taken from
kube-scheduler's verbs. So, per connection, the request head must arrive in time and within a
size (:func:`guarded_protocol`), the body must arrive in time and within a size
(:func:`bounded_bodies`), the API port holds a bounded number of connections, and its requests
are judged a few at a time with a bounded queue (:func:`gated`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from typing import Any

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from berth.extender.joined_writes import JoinedWrites

OPEN_PATHS = frozenset({"/healthz", "/readyz"})
"""Answered without waiting for an API slot: the probes must see a busy extender as alive."""


async def _refuse(send: Send, status: int, error: str, *, close: bool = True,
                  extra: Iterable[tuple[bytes, bytes]] = ()) -> None:
    body = orjson.dumps({"error": error})
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *extra]
    if close:  # the rest of the body is never read: the connection cannot carry another request
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers") or ():
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def bounded_bodies(app: ASGIApp, *, max_bytes: int, timeout: float) -> ASGIApp:
    """``app`` given only bodies of at most ``max_bytes`` that arrive whole within ``timeout``
    seconds; others are answered 413 or 408 here, before the app reads a byte of them. The body
    is read in full first and handed to the app in one message."""

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > max_bytes:
            await _refuse(send, 413, f"request body of {declared} bytes is larger than this port's limit of "
                                     f"{max_bytes} bytes")
            return
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(timeout):
                while True:
                    message = await receive()
                    if message["type"] != "http.request":
                        return  # the client went away: nobody to answer
                    chunk: bytes = message.get("body", b"")
                    size += len(chunk)
                    if size > max_bytes:
                        await _refuse(send, 413, f"request body is larger than this port's limit of {max_bytes} "
                                                 "bytes")
                        return
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            await _refuse(send, 408, f"the request body did not arrive within {timeout:g} s")
            return
        whole: Message = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
        del chunks
        given = False

        async def replay() -> Message:
            nonlocal given
            if not given:
                given = True
                return whole
            return await receive()  # after the body: the disconnect, when it comes

        await app(scope, replay, send)

    return wrapped


class ApiGate:
    """At most ``concurrency`` API requests in the app at once, at most ``queue`` waiting (more are
    answered 503 at once), and API work at most ``share`` of the event loop's time: a request that
    held the loop for d seconds keeps its slot d x (1/share - 1) longer, so that whatever floods
    the API, kube-scheduler's verbs get the rest of the loop and wait behind at most one API
    request (its work bounded by the question limits). The verbs never pass here."""

    def __init__(self, concurrency: int, queue: int, share: float = 1.0) -> None:
        self.concurrency = concurrency
        self.queue = queue
        self.share = share
        self._slots: asyncio.Semaphore | None = None
        self.waiting = 0

    def slots(self) -> asyncio.Semaphore:
        if self._slots is None:  # made in the serving loop
            self._slots = asyncio.Semaphore(self.concurrency)
        return self._slots


def gated(app: ASGIApp, gate: ApiGate) -> ASGIApp:
    """``app`` behind ``gate`` (health probes pass straight through)."""

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            await app(scope, receive, send)
            return
        slots = gate.slots()
        if slots.locked() and gate.waiting >= gate.queue:
            await _refuse(send, 503, f"the API is busy ({gate.concurrency} requests running, {gate.waiting} "
                                     "waiting); retry later", close=False, extra=[(b"retry-after", b"1")])
            return
        gate.waiting += 1
        try:
            await slots.acquire()
        finally:
            gate.waiting -= 1
        try:
            # A request runs to its end once started (its judgement holds the loop): first let what
            # else is ready run, the verbs among it, and let API requests that arrived together
            # queue here, where the queue's bound sheds them, rather than in the loop.
            await asyncio.sleep(0)
            started = time.perf_counter()
            await app(scope, receive, send)
            if gate.share < 1.0:
                await asyncio.sleep((time.perf_counter() - started) * (1 / gate.share - 1))
        finally:
            slots.release()

    return wrapped


def guarded_protocol(*, header_timeout: float, max_header_bytes: int,
                     max_connections: int | None = None) -> type[HttpToolsProtocol]:
    """uvicorn's httptools protocol, with what it lacks against slow or greedy clients: a request's
    head (request line and headers) must arrive whole within ``header_timeout`` seconds of its
    first byte, or of the connection when nothing comes, and within ``max_header_bytes``; with
    ``max_connections``, a connection beyond that many open ones is closed at once (so a port
    cannot use up the file descriptors the other port needs). Idle connections between requests
    are uvicorn's ``timeout_keep_alive``. A response's head and body leave in one write
    (:class:`berth.extender.joined_writes.JoinedWrites`)."""

    class GuardedHttpToolsProtocol(HttpToolsProtocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._head_timer: asyncio.TimerHandle | None = None
            self._head_bytes = 0  # received while the head is incomplete (a head that never ends)
            self._head_parsed = 0  # of the head parsed so far
            self._in_head = False

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(JoinedWrites(transport, self.loop))  # type: ignore[arg-type]
            if max_connections is not None and len(self.connections) > max_connections:
                transport.close()
                return
            self._await_head()

        def connection_lost(self, exc: Exception | None) -> None:
            self._stop_head_timer()
            super().connection_lost(exc)

        def _await_head(self) -> None:
            self._in_head = True
            self._head_bytes = 0
            self._head_parsed = 0
            if self._head_timer is None:
                self._head_timer = self.loop.call_later(header_timeout, self._head_too_slow)

        def _stop_head_timer(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_too_slow(self) -> None:
            self._head_timer = None
            if self._in_head and not self.transport.is_closing():
                self.transport.close()

        def data_received(self, data: bytes) -> None:
            if not self._in_head and self.cycle is not None and self.cycle.response_complete:
                self._await_head()  # the first bytes of the next request on a kept-alive connection
            super().data_received(data)
            if self._in_head:
                self._head_bytes += len(data)
                if self._head_bytes > max_header_bytes and not self.transport.is_closing():
                    self._in_head = False
                    self._stop_head_timer()
                    self.send_400_response(f"Request head larger than {max_header_bytes} bytes.")

        def on_url(self, url: bytes) -> None:
            self._count_head(len(url))
            super().on_url(url)

        def on_header(self, name: bytes, value: bytes) -> None:
            self._count_head(len(name) + len(value) + 4)
            super().on_header(name, value)

        def _count_head(self, size: int) -> None:
            """Parsed parts of the head, counted as they come (a head sent in one piece never looks
            incomplete after a read); raising here makes uvicorn answer 400 and close."""
            self._head_parsed += size
            if self._head_parsed > max_header_bytes:
                raise ValueError(f"request head larger than {max_header_bytes} bytes")

        def on_headers_complete(self) -> None:
            self._in_head = False
            self._stop_head_timer()
            super().on_headers_complete()

    return GuardedHttpToolsProtocol
