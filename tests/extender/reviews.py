"""A stand-in for the API server's TokenReview and SubjectAccessReview (three callers with bearer
tokens, and the rights ``kubectl auth can-i`` would grant them), and an app served through it whose
reads of the API server with berth's own rights are counted: the explain API's and the page's
authorization tests share them."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any

from fastapi.testclient import TestClient

from berth.core.decision import DECISION_ANNOTATION
from berth.core.model import PodInfo
from berth.extender.app import create_app
from berth.extender.authz import Access, Caller
from berth.extender.settings import ExtenderSettings
from tests.builders import make_node, make_pod, make_policy
from tests.extender.helpers import Clock, make_store

TOKENS = {"alice-token": Caller("alice", groups=("system:authenticated",)),
          "bob-token": Caller("bob", groups=("system:authenticated",)),
          "carol-token": Caller("carol", groups=("system:authenticated",))}
RIGHTS = {  # what kubectl auth can-i would answer yes to
    "alice": {Access("get", "pods", namespace="shop"), Access("list", "nodes"),
              Access("list", "placementpolicies", "berth.dev", "shop")},
    "bob": set(),
    "carol": {Access("get", "nodedrains", "berth.dev")},
}
DRAIN_STATUS = {"phase": "Draining", "pods": [{"pod": "shop/web-1", "source": "a", "destination": "b",
                                               "state": "Evicting"}]}


def unversioned_record(pod_key: str, node: str) -> str:
    """A decision annotation as berth wrote it before the record had a version."""
    return json.dumps({"pod": pod_key, "policy": None, "strategy": "Spread", "trigger": "bind",
                       "time": "2027-01-15T07:00:00.00Z", "considered": [node], "refused": {}, "winner": node,
                       "ranking": [node], "warnings": [], "error": None, "plan": None})


class Reviews:
    """The API server's TokenReview and SubjectAccessReview, counting what berth asks."""

    def __init__(self, *, failing: bool = False) -> None:
        self.failing = failing
        self.tokens: list[str] = []
        self.accesses: list[tuple[str, Access]] = []
        self.lock = threading.Lock()

    def token_review(self, token: str) -> dict[str, Any]:
        if self.failing:
            raise ConnectionError("the API server went away")
        with self.lock:
            self.tokens.append(token)
        caller = TOKENS.get(token)
        if caller is None:
            return {"status": {"authenticated": False, "error": "invalid bearer token"}}
        return {"status": {"authenticated": True, "user": {"username": caller.name, "groups": list(caller.groups)}}}

    def access_review(self, caller: Caller, access: Access) -> dict[str, Any]:
        with self.lock:
            self.accesses.append((caller.name, access))
        return {"status": {"allowed": access in RIGHTS.get(caller.name, set())}}


class Binder:
    """berth's own reads of the API server: counted, to show none happens for a refused caller."""

    def __init__(self) -> None:
        self.reads: list[str] = []

    async def bind(self, pod: PodInfo, node: str, annotations: Mapping[str, str]) -> None:
        return None

    async def record_event(self, pod: PodInfo, node: str, message: str) -> None:
        return None

    async def fetch_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.reads.append(f"{namespace}/{name}")
        return (make_pod(name)
                .labels({})
                .namespace(namespace)
                .on("a")
                .annotations({DECISION_ANNOTATION: unversioned_record(f"{namespace}/{name}", "a")})
                .obj())

    async def fetch_drain(self, name: str) -> dict[str, Any] | None:
        self.reads.append(f"nodedrain/{name}")
        if name != "retire-a":
            return None
        return {"kind": "NodeDrain", "metadata": {"name": name}, "spec": {"nodes": ["a"], "mode": "Execute"},
                "status": DRAIN_STATUS}


def reviewed_app(reviews: Reviews, **settings: Any) -> tuple[TestClient, Binder]:
    store = make_store([make_node("a").obj(),
                        make_policy("web").obj(),
                        make_policy("secret-plan").namespace("bank").match({"app": "secret-plan"}).obj()])
    binder = Binder()
    app = create_app(store, ExtenderSettings(**settings), binder=binder, clock=Clock(), reviewer=reviews)
    return TestClient(app), binder
