"""Who may read the explain API: the caller's own Kubernetes rights, not berth's.

The API answers what a caller could read with kubectl. The bearer token of the request is
authenticated with the API server's TokenReview, and each answer is authorized with a
SubjectAccessReview for the caller (``get pods`` in the pod's namespace for a decision, ``list
placementpolicies.berth.dev`` in the namespace and ``list nodes`` for a preview or a capacity
table, ``list nodes`` and ``list placementpolicies.berth.dev`` in every namespace for the node
allocations and every policy's settings, ``get nodedrains.berth.dev`` for a drain's plan).
Both answers are kept briefly in bounded caches, and at most :data:`REVIEWS_IN_FLIGHT` reviews
run at once, so a flood of made-up tokens cannot turn into a flood of API-server calls.

Nothing is read from the API server on a caller's behalf before the caller is authorized: the
decision of a pod no longer in memory is read with berth's rights only after ``get pods`` in its
namespace was allowed for the caller.

``BERTH_API_ANONYMOUS=true`` turns all this off (single-tenant clusters, snapshot mode): then
everyone who reaches the port reads every decision, policy and node allocation.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import orjson

log = logging.getLogger("berth.extender.authz")

REVIEWS_IN_FLIGHT = 4
"""TokenReviews and SubjectAccessReviews sent at once; further requests wait their turn."""

K = TypeVar("K")
V = TypeVar("V")


class TtlCache(Generic[K, V]):
    """At most ``size`` entries, each kept ``ttl`` seconds; the oldest goes first when full."""

    def __init__(self, size: int, ttl: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.size = size
        self.ttl = ttl
        self.clock = clock
        self._entries: OrderedDict[K, tuple[float, V]] = OrderedDict()

    def find(self, key: K) -> tuple[bool, V | None]:
        """(found, value): a value may itself be None (a token the API server did not authenticate)."""
        hit = self._entries.get(key)
        if hit is None:
            return False, None
        if hit[0] <= self.clock():
            del self._entries[key]
            return False, None
        return True, hit[1]

    def put(self, key: K, value: V) -> None:
        if self.size <= 0:
            return
        self._entries[key] = (self.clock() + self.ttl, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


@dataclass(frozen=True)
class Caller:
    """An authenticated user, as the TokenReview names it."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True)
class Access:
    """One permission, as ``kubectl auth can-i VERB RESOURCE[.GROUP] [-n NAMESPACE]`` asks it."""

    verb: str
    resource: str
    group: str = ""
    namespace: str = ""  # "": cluster-scoped, or every namespace

    def __str__(self) -> str:
        resource = f"{self.resource}.{self.group}" if self.group else self.resource
        where = f" in namespace {self.namespace}" if self.namespace else " cluster-wide"
        return f"{self.verb} {resource}{where}"


class Denied(Exception):
    """The API's refusal: 401 (no or bad credentials), 403 (not allowed), 503 (cannot ask)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class Reviewer(Protocol):
    """The API server's review endpoints (both calls block: they run in worker threads)."""

    def token_review(self, token: str) -> dict[str, Any]: ...

    def access_review(self, caller: Caller, access: Access) -> dict[str, Any]: ...


class KubeReviewer:
    """TokenReview and SubjectAccessReview through the kubernetes client, with berth's identity."""

    def __init__(self, api_client: Any) -> None:
        from kubernetes import client

        self.authentication: Any = client.AuthenticationV1Api(api_client)
        self.authorization: Any = client.AuthorizationV1Api(api_client)

    def token_review(self, token: str) -> dict[str, Any]:
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
        return _read(self.authentication.create_token_review(body, _preload_content=False))

    def access_review(self, caller: Caller, access: Access) -> dict[str, Any]:
        attributes = {"verb": access.verb, "resource": access.resource, "group": access.group}
        if access.namespace:
            attributes["namespace"] = access.namespace
        spec: dict[str, Any] = {"user": caller.name, "groups": list(caller.groups), "resourceAttributes": attributes}
        if caller.uid:
            spec["uid"] = caller.uid
        if caller.extra:
            spec["extra"] = {key: list(values) for key, values in caller.extra}
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
        return _read(self.authorization.create_subject_access_review(body, _preload_content=False))


def _read(resp: Any) -> dict[str, Any]:
    try:
        data = orjson.loads(resp.read())
    finally:
        resp.release_conn()
    return data if isinstance(data, dict) else {}


@dataclass
class ApiGate:
    """Authenticates and authorizes the explain API's callers (see the module's docstring).

    ``reviewer`` None (snapshot mode: no API server to ask) refuses every caller unless
    ``anonymous``."""

    reviewer: Reviewer | None
    anonymous: bool = False
    cache_seconds: float = 30.0
    cache_entries: int = 4096
    clock: Callable[[], float] = time.monotonic
    _tokens: TtlCache[str, Caller | None] = field(init=False)
    _access: TtlCache[tuple[Caller, Access], bool] = field(init=False)
    _in_flight: asyncio.Semaphore | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self._tokens = TtlCache(self.cache_entries, self.cache_seconds, self.clock)
        self._access = TtlCache(self.cache_entries, self.cache_seconds, self.clock)

    async def caller(self, authorization: str | None) -> Caller | None:
        """The caller of a request with this ``Authorization`` header (None when anonymous access
        is on); :class:`Denied` 401 without a valid bearer token."""
        if self.anonymous:
            return None
        scheme, _, token = (authorization or "").strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise Denied(401, "the explain API needs a bearer token (Authorization: Bearer <token>): "
                              "the caller's own Kubernetes credentials, e.g. kubectl create token")
        if self.reviewer is None:
            raise Denied(401, "this extender has no API server to check tokens with (snapshot mode); "
                              "set BERTH_API_ANONYMOUS=true to serve the explain API to everyone")
        key = hashlib.sha256(token.encode()).hexdigest()
        found, cached = self._tokens.find(key)
        if not found:
            cached = await self._review_token(token)
            self._tokens.put(key, cached)
        if cached is None:
            raise Denied(401, "the bearer token is not valid (the API server's TokenReview did not authenticate it)")
        return cached

    async def require(self, caller: Caller | None, accesses: Sequence[Access]) -> None:
        """:class:`Denied` 403 unless ``caller`` has every one of ``accesses``."""
        if caller is None:
            return  # anonymous access is on
        for access in accesses:
            found, allowed = self._access.find((caller, access))
            if not found:
                allowed = await self._review_access(caller, access)
                self._access.put((caller, access), allowed)
            if not allowed:
                raise Denied(403, f"{caller.name} may not {access}, which this answer needs")

    async def _review_token(self, token: str) -> Caller | None:
        review = await self._call(lambda reviewer: reviewer.token_review(token))
        status = review.get("status") or {}
        user = status.get("user") or {}
        if not status.get("authenticated") or not isinstance(user.get("username"), str):
            return None
        extra = user.get("extra") or {}
        return Caller(name=user["username"], uid=str(user.get("uid") or ""),
                      groups=tuple(str(g) for g in user.get("groups") or ()),
                      extra=tuple(sorted((str(k), tuple(str(v) for v in vs or ())) for k, vs in extra.items())))

    async def _review_access(self, caller: Caller, access: Access) -> bool:
        review = await self._call(lambda reviewer: reviewer.access_review(caller, access))
        status = review.get("status") or {}
        return bool(status.get("allowed")) and not status.get("denied")

    async def _call(self, ask: Callable[[Reviewer], dict[str, Any]]) -> dict[str, Any]:
        reviewer = self.reviewer
        assert reviewer is not None
        if self._in_flight is None:
            self._in_flight = asyncio.Semaphore(REVIEWS_IN_FLIGHT)
        async with self._in_flight:
            try:
                return await asyncio.to_thread(ask, reviewer)
            except Exception as exc:
                log.warning("cannot ask the API server to review a caller: %s", exc)
                raise Denied(503, f"cannot ask the API server who the caller is and what it may read: {exc}") from None

