"""An asyncio HTTP client for the API server calls on the bind path (Bindings, Events, single reads),
built from the kubernetes client's configuration.

Why not the kubernetes client itself: it is synchronous, so each call ran in a worker thread
(``asyncio.to_thread``), serialised through the client's model machinery and urllib3, and the
threads took the interpreter lock from the event loop that answers kube-scheduler's filter and
prioritize. Here a call is one request on a pool of kept-alive connections, on the event loop
itself: the body is encoded with orjson, the reply read as bytes and decoded only when asked.

What is kept from the kubernetes client is its configuration (``kubernetes.client.Configuration``,
filled by ``load_incluster_config`` or ``load_kube_config``): the server's address, its CA, the
client certificate, ``verify_ssl`` / ``assert_hostname`` / ``tls_server_name``, the proxy (unless
``no_proxy`` names the server; a SOCKS proxy is refused at start, aiohttp has none), and the
bearer token, read through ``Configuration.auth_settings()`` on every request, so that a rotated
in-cluster token (the loader's refresh hook reads the file again once a minute) or a refreshed
kubeconfig token is used as soon as the loader has it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from types import SimpleNamespace
from typing import Any

import aiohttp
import orjson

CONNECTIONS = 32
"""Connections kept to the API server at most: kube-scheduler binds pods concurrently (one goroutine
per binding cycle), each bind is one request, and a call waits for a free connection beyond this."""

REQUEST_TIMEOUT_SECONDS = 30.0
"""A call the API server has not answered within this fails (kube-scheduler retries the pod)."""

CONNECT_TIMEOUT_SECONDS = 10.0

USER_AGENT = "berth-extender"

WARM_PATH = "/version"
"""What :meth:`ApiSession.warm` asks to open or refresh a connection: the API server's version, which
every client may read (``system:public-info-viewer``) and which costs it next to nothing; whatever the
answer, the connection it went over stays open for the next call."""


class ApiError(Exception):
    """The API server answered with an error status; ``body`` is its reply (a ``Status``, usually)."""

    def __init__(self, status: int, reason: str, body: bytes) -> None:
        super().__init__(f"{status} {reason}".strip())
        self.status = status
        self.reason = reason
        self.body = body


class ApiUnreachable(Exception):
    """No answer from the API server: the connection failed or the call timed out."""


class NoConnection(ApiUnreachable):
    """The request was never sent: no connection of the pool came free (or could be opened) within
    the session's ``connect_timeout``."""


def ssl_context(configuration: Any) -> ssl.SSLContext | None:
    """The TLS context the kubernetes client's urllib3 pool would use for ``configuration``; None for
    a plain-HTTP server."""
    if not str(configuration.host).startswith("https"):
        return None
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert or None,
                                         cadata=getattr(configuration, "ca_cert_data", None) or None)
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file or None)
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif configuration.assert_hostname is False:
        context.check_hostname = False
    return context


def proxy_of(configuration: Any) -> tuple[str | None, Any]:
    """The proxy (and its headers) the kubernetes client would use for the API server: the
    configuration's (given, or from the environment), unless ``no_proxy`` names the server."""
    from kubernetes.client.rest import is_socks_proxy_url, should_bypass_proxies

    proxy = getattr(configuration, "proxy", None) or None
    if proxy is None or should_bypass_proxies(configuration.host, getattr(configuration, "no_proxy", None) or ""):
        return None, None
    if is_socks_proxy_url(proxy):  # type: ignore[no-untyped-call]
        raise ValueError(f"the API server's proxy {proxy} is a SOCKS proxy, which berth's bind client cannot use: "
                         "name an HTTP proxy, or list the API server in NO_PROXY")
    return proxy, getattr(configuration, "proxy_headers", None) or None


def _timed(step: str) -> tuple[Callable[..., Awaitable[None]], Callable[..., Awaitable[None]]]:
    """The trace hooks that add the time from the first to the second to the call's ``step`` in
    :data:`CALL_TIMINGS` (a step a call goes through more than once adds up)."""

    async def began(session: Any, ctx: SimpleNamespace, params: Any) -> None:
        setattr(ctx, step, time.perf_counter())

    async def ended(session: Any, ctx: SimpleNamespace, params: Any) -> None:
        timings, start = ctx.trace_request_ctx, getattr(ctx, step, None)
        if timings is not None and start is not None:
            timings[step] = timings.get(step, 0.0) + time.perf_counter() - start

    return began, ended


CALL_TIMINGS: ContextVar[dict[str, float] | None] = ContextVar("berth_api_call_timings", default=None)
"""Set by a caller (the bind) to a dict that its calls' times are added to, in seconds: the waits
before the request is sent, for a free connection of the pool (``connection_wait``) and opening a
new one, TLS included (``connect``), and from the request's headers sent to the reply's headers
read (``answer``: the network, the API server, and the event loop's turn to read it). A context
variable, so that the Binder protocol's signatures stay as they are."""


def _trace() -> aiohttp.TraceConfig:
    """The hooks that note a call's waits in :data:`CALL_TIMINGS`."""
    trace = aiohttp.TraceConfig()
    for step, began, ended in (("connection_wait", trace.on_connection_queued_start, trace.on_connection_queued_end),
                               ("connect", trace.on_connection_create_start, trace.on_connection_create_end),
                               ("answer", trace.on_request_headers_sent, trace.on_request_end)):
        start, end = _timed(step)
        began.append(start)
        ended.append(end)
    return trace


class ApiSession:
    """Requests to the API server of ``configuration`` on a connection pool of the running event loop.

    The pool belongs to one event loop: a call from another loop (an app served again, a test's
    ``asyncio.run``) gets a pool of its own. :meth:`close` closes the current one."""

    def __init__(self, configuration: Any, *, connections: int = CONNECTIONS,
                 timeout: float = REQUEST_TIMEOUT_SECONDS, connect_timeout: float = CONNECT_TIMEOUT_SECONDS) -> None:
        self.configuration = configuration
        self.base = str(configuration.host).rstrip("/")
        self.connections = connections
        # connect: the wait for a free connection of the pool and the opening of a new one, together
        self.timeout = aiohttp.ClientTimeout(total=timeout, connect=connect_timeout)
        self._ssl = ssl_context(configuration)
        self._server_hostname = getattr(configuration, "tls_server_name", None) or None
        self._proxy, self._proxy_headers = proxy_of(configuration)
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._in_flight = 0  # calls of :meth:`request` under way (each holds or waits for a connection)

    def _current(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop or self._session.closed:
            connector = aiohttp.TCPConnector(ssl=self._ssl if self._ssl is not None else False,
                                             limit=self.connections, keepalive_timeout=60)
            self._session = aiohttp.ClientSession(connector=connector, timeout=self.timeout,
                                                  headers={"User-Agent": USER_AGENT, "Accept": "application/json"},
                                                  trace_configs=[_trace()])
            self._loop = loop
        return self._session

    def _headers(self) -> dict[str, str]:
        """The credentials, asked of the configuration on every request (its refresh hook runs there)."""
        headers = {}
        for auth in self.configuration.auth_settings().values():
            if auth.get("in") == "header" and auth.get("value"):
                headers[auth["key"]] = auth["value"]
        return headers

    async def request(self, method: str, path: str, body: Any = None, *,
                      content_type: str = "application/json") -> bytes:
        """The reply's body to ``method path`` (``body`` sent as JSON, as ``content_type``: a PATCH
        names its kind, e.g. ``application/merge-patch+json``); :class:`ApiError` for an error
        status, :class:`ApiUnreachable` when no answer came (:class:`NoConnection` when the request
        was not even sent). Its waits and its answer's time go to
        :data:`CALL_TIMINGS` when the caller set it."""
        headers = self._headers()
        data = None
        if body is not None:
            data = orjson.dumps(body)
            headers["Content-Type"] = content_type
        session = self._current()
        self._in_flight += 1
        try:
            async with session.request(method, self.base + path, data=data, headers=headers, proxy=self._proxy,
                                       proxy_headers=self._proxy_headers, server_hostname=self._server_hostname,
                                       trace_request_ctx=CALL_TIMINGS.get()) as resp:
                payload = await resp.read()
                if resp.status >= 400:
                    raise ApiError(resp.status, resp.reason or "", payload)
                return payload
        except aiohttp.ConnectionTimeoutError:  # before TimeoutError, which it also is
            raise NoConnection(f"no connection to the API server for {method} {path} within "
                               f"{self.timeout.connect:g}s (all {self.connections} of the pool busy, or none "
                               "could be opened)") from None
        except TimeoutError:
            raise ApiUnreachable(f"the API server did not answer {method} {path} within "
                                 f"{self.timeout.total:g}s") from None
        except aiohttp.ClientError as exc:
            raise ApiUnreachable(f"cannot reach the API server for {method} {path}: "
                                 f"{exc or type(exc).__name__}") from None
        finally:
            self._in_flight -= 1

    async def warm(self, count: int) -> int:
        """Make ``count`` connections of the pool (at most its size) open and freshly used, when no
        call is under way: the missing ones are opened now, TLS handshake included, and the idle
        ones are used again, so that their keep-alive starts over. Returns how many calls it made
        (each one :data:`WARM_PATH`, all at once, so that none finds another's connection free), 0
        while calls are under way: a pool in use is kept open by its calls (it hands out its
        connections in turn), and a warm then would only take connections from them.

        Why: a connection opened on demand makes the call that needed it pay the handshake, and the
        calls that need new ones come together, at the start of a burst of binds, when the API server
        is busiest: measured, a cold pool of 64 was opened whole by the first binds of every burst of
        the throughput bench, 64 of its 1,000 binds each paying a handshake (p99 of the ``connect``
        step 0.1 to 0.4 s on a loaded machine). A call that fails is forgotten: the next call or
        warm opens the connection again."""
        if self._in_flight:
            return 0
        wanted = min(count, self.connections)

        async def touch() -> None:
            with contextlib.suppress(ApiError, ApiUnreachable):
                await self.request("GET", WARM_PATH)

        token = CALL_TIMINGS.set(None)  # not a call of the caller's
        try:
            await asyncio.gather(*(touch() for _ in range(wanted)))
        finally:
            CALL_TIMINGS.reset(token)
        return wanted

    async def close(self) -> None:
        """Close the connections of the current loop's pool."""
        session, self._session = self._session, None
        if session is not None and not session.closed and self._loop is asyncio.get_running_loop():
            await session.close()
