"""The page's routes (``/ui/...``): each view a GET over what the explain API answers, authorized
as the API is (see :mod:`berth.extender.page` for the page itself and its figures)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import parse_qs, quote, urlencode

import orjson
from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from berth.core import API_GROUP, NODEDRAIN_PLURAL, POLICY_PLURAL, node_allocations
from berth.extender.authz import Access, ApiGate, Caller, Denied
from berth.extender.page import (
    COOKIE,
    COOKIE_SECONDS,
    NODE_ACCESS,
    PAGE_SIZE,
    SECURITY_HEADERS,
    allocation_fullness,
    bars,
    environment,
    find_pod,
    labels_match,
    local_target,
    node_card,
    page_number,
    parse_label_filter,
    placement_card,
    policy_row,
)
from berth.extender.routes.deps import EngineDep, GateDep, QuestionsDep, SettingsDep, StoreDep
from berth.extender.routes.explain import DRAIN_NAME
from berth.extender.wire import BadRequest

TEMPLATES = environment()


@dataclass(frozen=True, slots=True)
class Page:
    """What every view of the page needs: the gate that checks the caller, and whether the page is
    open to everyone (then it has no sign-in)."""

    gate: ApiGate
    anonymous: bool

    def render(self, template: str, status: int = 200, /, **context: Any) -> HTMLResponse:
        html = TEMPLATES.get_template(template).render(anonymous=self.anonymous, **context)
        return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)

    def problem(self, status: int, message: str) -> HTMLResponse:
        return self.render("problem.html", status, title=f"{status}", message=message)

    async def authorize(self, request: Request, accesses: Sequence[Access]) -> Caller | Response | None:
        """The caller, or the page to answer instead: sign-in for a missing or rejected token, a
        refusal naming the permission for one that may not read this."""
        try:
            caller = await self.gate.caller(token_header(request))
            await self.gate.require(caller, accesses)
        except Denied as exc:
            if exc.status == 401:
                back = urlencode({"next": request.url.path + (f"?{request.url.query}" if request.url.query else "")})
                response = RedirectResponse(f"/ui/signin?{back}", status_code=303, headers=SECURITY_HEADERS)
                if request.cookies.get(COOKIE):
                    response.delete_cookie(COOKIE, path="/ui")
                return response
            return self.problem(exc.status, exc.message)
        return caller

    async def may(self, caller: Caller | None, accesses: Sequence[Access]) -> bool:
        try:
            await self.gate.require(caller, accesses)
        except Denied:
            return False
        return True


def token_header(request: Request) -> str | None:
    """The request's ``Authorization`` header, else the bearer token of the sign-in cookie."""
    header = request.headers.get("authorization")
    if header:
        return header
    token = request.cookies.get(COOKIE)
    return f"Bearer {token}" if token else None


def page_context(gate: GateDep, settings: SettingsDep) -> Page:
    return Page(gate, settings.api_anonymous)


PageDep = Annotated[Page, Depends(page_context)]

router = APIRouter(prefix="/ui", tags=["page"], include_in_schema=False)


@router.get("")
@router.get("/")
async def home() -> Response:
    return RedirectResponse("/ui/nodes", status_code=303, headers=SECURITY_HEADERS)

@router.get("/signin")
async def signin_form(ui: PageDep, next: str = Query("/ui/nodes", max_length=2000)) -> Response:
    return ui.render("signin.html", next=local_target(next), error=None)

@router.post("/signin")
async def signin(request: Request, ui: PageDep) -> Response:
    try:
        form = parse_qs((await request.body()).decode("utf-8"), max_num_fields=4)
    except (UnicodeDecodeError, ValueError):
        return ui.render("signin.html", 400, next="/ui/nodes", error="the sign-in form could not be read")
    token = (form.get("token") or [""])[0].strip()
    target = local_target((form.get("next") or ["/ui/nodes"])[0])
    if not token:
        return ui.render("signin.html", 400, next=target, error="paste a bearer token (kubectl create token ...)")
    if len(token) > 16384 or any(c.isspace() or not c.isprintable() for c in token):
        return ui.render("signin.html", 400, next=target, error="that is not a bearer token")
    try:
        await ui.gate.caller(f"Bearer {token}")
    except Denied as exc:
        return ui.render("signin.html", exc.status, next=target, error=exc.message)
    response = RedirectResponse(target, status_code=303, headers=SECURITY_HEADERS)
    response.set_cookie(COOKIE, token, max_age=COOKIE_SECONDS, path="/ui", httponly=True, samesite="strict",
                        secure=request.url.scheme == "https")
    return response

@router.post("/signout")
async def signout() -> Response:
    response = RedirectResponse("/ui/signin", status_code=303, headers=SECURITY_HEADERS)
    response.delete_cookie(COOKIE, path="/ui")
    return response

@router.get("/nodes")
async def nodes(request: Request, ui: PageDep, engine: EngineDep, store: StoreDep,
                label: str = Query("", max_length=2000), sort: str = Query("fullness", max_length=20),
                page: str = Query("1", max_length=12)) -> Response:
    caller = await ui.authorize(request, NODE_ACCESS)
    if isinstance(caller, Response):
        return caller
    try:
        wanted = parse_label_filter(label)
        number = page_number(page)
        if sort not in ("fullness", "name"):
            raise BadRequest(f"sort: {sort!r} is not one of fullness, name")
    except BadRequest as exc:
        return ui.problem(400, str(exc))
    show_pods = await ui.may(caller, (Access("list", "pods"),))
    started = time.perf_counter()
    settings = engine.core_settings
    overcommit = {d: settings.overcommit_percent(d) for d in ("cpu", "memory")}
    with store.lock:
        view = store.view
        names = [n for n, info in view.nodes.items() if not wanted or labels_match(info.labels, wanted)]
        allocations = node_allocations(view, settings)  # what /api/v1/nodes/allocations answers
        if sort == "fullness":
            names.sort(key=lambda n: (-allocation_fullness(allocations[n]), n))
        else:
            names.sort()
        pages = max(1, -(-len(names) // PAGE_SIZE))
        number = min(number, pages)
        shown = names[(number - 1) * PAGE_SIZE: number * PAGE_SIZE]
        now = engine.eval_clock()
        cards = [node_card(store, name, bars(allocations[name], overcommit), now) for name in shown]
    elapsed = time.perf_counter() - started
    query = {"label": label, "sort": sort}
    return ui.render("nodes.html", cards=cards, total=len(view.nodes), matched=len(names), page=number, pages=pages,
                  label=label, sort=sort, show_pods=show_pods, overcommit=overcommit,
                  leases_tracked=store.track_leases, elapsed_ms=round(elapsed * 1000, 1),
                  page_link=lambda n: "/ui/nodes?" + urlencode({**query, "page": n}))

@router.get("/policies")
async def policies(request: Request, ui: PageDep, store: StoreDep,
                   namespace: str = Query("", max_length=253)) -> Response:
    accesses = (Access("list", POLICY_PLURAL, API_GROUP, namespace),
                Access("list", "pods", namespace=namespace))
    caller = await ui.authorize(request, accesses)
    if isinstance(caller, Response):
        return caller
    with store.lock:
        rows = [policy_row(store, policy) for policy in store.iter_policies()
                if not namespace or policy.namespace == namespace]
        invalid = {key: error for key, error in sorted(store.invalid_policies.items())
                   if not namespace or key.split("/", 1)[0] == namespace}
        invalid_status = {key: store.policy_status.get(key) or {} for key in invalid}
    return ui.render("policies.html", rows=rows, invalid=invalid, invalid_status=invalid_status,
                  namespace=namespace)

@router.get("/pods/{namespace}/{name}")
async def placement(request: Request, ui: PageDep, questions: QuestionsDep, store: StoreDep, namespace: str,
                    name: str) -> Response:
    accesses = (Access("get", "pods", namespace=namespace),
                Access("list", POLICY_PLURAL, API_GROUP, namespace), Access("list", "nodes"))
    caller = await ui.authorize(request, accesses)
    if isinstance(caller, Response):
        return caller
    with store.lock:
        pod = find_pod(store, namespace, name)
    try:
        raw = await questions.decision_of(namespace, name)
    except Exception as exc:
        return ui.problem(503, f"cannot read the decision of {namespace}/{name}: {exc}")
    recorded = orjson.loads(raw) if raw is not None else None
    if pod is None and recorded is None:
        return ui.problem(404, f"berth knows no pod {namespace}/{name} and has recorded no decision for it")
    fresh = questions.preview(pod, None, None) if pod is not None else None
    return ui.render("placement.html", namespace=namespace, name=name, pod=pod,
                  card=placement_card(recorded, fresh["decision"] if fresh else None,
                                      fresh["scores"] if fresh else {}))

@router.get("/drains")
async def drains(request: Request, ui: PageDep, name: str = Query("", max_length=300)) -> Response:
    if name:
        return RedirectResponse(f"/ui/drains/{quote(name, safe='')}", status_code=303, headers=SECURITY_HEADERS)
    caller = await ui.authorize(request, (Access("get", NODEDRAIN_PLURAL, API_GROUP),))
    if isinstance(caller, Response):
        return caller
    return ui.render("drain.html", name="", drain=None)

@router.get("/drains/{name}")
async def drain(request: Request, ui: PageDep, questions: QuestionsDep, name: str) -> Response:
    if len(name) > 253 or not DRAIN_NAME.fullmatch(name):
        return ui.problem(400, f"name: {name[:64]!r} is not a NodeDrain name (a DNS subdomain)")
    caller = await ui.authorize(request, (Access("get", NODEDRAIN_PLURAL, API_GROUP),))
    if isinstance(caller, Response):
        return caller  # before the NodeDrain is read with berth's rights
    try:
        found = await questions.drain(name)
    except Exception as exc:
        return ui.problem(503, f"cannot read NodeDrain {name}: {exc}")
    if found is None:
        return ui.problem(404, f"no NodeDrain {name}")
    return ui.render("drain.html", name=name, drain={"spec": found.get("spec") or {},
                                                  "status": found.get("status") or {}})
