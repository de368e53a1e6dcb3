"""The extender's page (``/ui``): server-rendered Nodes, Policies and Placement card views over the
explain API's own figures, behind the same authorization (in-process; the browser tests in
``tests/browser`` load the same pages in Chromium)."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from berth.extender.app import create_app
from berth.extender.page import COOKIE, PAGE_SIZE
from berth.extender.settings import ExtenderSettings
from tests.builders import make_node, make_pod, make_policy
from tests.extender.helpers import Clock, Harness, harness, make_store
from tests.extender.reviews import Reviews, reviewed_app

WEB = {"app": "web"}
GPU = "nvidia.com/gpu"


class Page(HTMLParser):
    """The page's machine-readable parts: progress bars, unknown rows, cards, table rows."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.bars: list[dict[str, str]] = []
        self.unknown: list[str] = []
        self.cards: list[str] = []
        self.rows: dict[str, dict[str, str]] = {}
        self._row: str | None = None
        self._cell: str | None = None
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if a.get("role") == "progressbar":
            self.bars.append(a)
        if a.get("data-unknown") == "true":
            self.unknown.append(a["data-dimension"])
        if tag == "section" and "data-node" in a:
            self.cards.append(a["data-node"])
        if tag == "tr" and "data-node" in a:
            self._row = a["data-node"]
            self.rows[self._row] = {}
        if tag == "td" and self._row and "data-verdict" in a:
            self._cell = a["data-verdict"]
            self.rows[self._row][self._cell] = ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "td":
            self._cell = None
        if tag == "tr":
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._row and self._cell:
            self.rows[self._row][self._cell] += data.strip()


def _cluster(**settings: Any) -> Harness:
    return harness([make_node("a").cpu("4").obj(), make_node("b").cpu("2").memory(None).obj(),
                    make_node("c").cpu("8").cordoned().taints([{"key": "db", "value": "only",
                                                                  "effect": "NoSchedule"}]).obj(),
                    make_policy("web").strategy("Spread").obj(), make_pod("web-0").labels(WEB).cpu("3").on("a").obj(),
                    make_pod("web-big").labels(WEB).cpu("6").obj()], **settings)


def test_each_bar_shows_the_allocations_api_figures() -> None:
    h = _cluster()
    api = h.client.get("/api/v1/nodes/allocations").json()["nodes"]
    page = Page(h.client.get("/ui/nodes").text)
    shown = {(bar["aria-label"].split(" requested on ")[1], bar["data-dimension"]):
             (int(bar["aria-valuenow"]), int(bar["aria-valuemax"])) for bar in page.bars}
    expected = {(name, dim): (entry["requested"][dim], entry["allocatable"][dim])
                for name, entry in api.items() for dim in entry["allocatable"]}
    assert shown == expected


def test_unknown_capacity_is_shown_as_unknown_not_as_a_bar() -> None:
    page = Page(_cluster().client.get("/ui/nodes?label=kubernetes.io/hostname=b").text)
    assert page.unknown == ["memory"]
    assert "memory" not in {bar["data-dimension"] for bar in page.bars}


def test_each_extended_resource_gets_its_bar() -> None:
    gpu_node = make_node("g").obj()
    gpu_node["status"]["allocatable"][GPU] = "4"
    h = harness([gpu_node])
    dims = [bar["data-dimension"] for bar in Page(h.client.get("/ui/nodes").text).bars]
    assert dims == ["cpu", "memory", "ephemeral-storage", "pods", GPU]


def test_the_overcommit_limit_is_marked() -> None:
    page = Page(_cluster(cpu_overcommit_percent=150).client.get("/ui/nodes?label=kubernetes.io/hostname=a").text)
    cpu = next(bar for bar in page.bars if bar["data-dimension"] == "cpu")
    assert (cpu["aria-valuemax"], cpu["data-limit"]) == ("4000", "6000")


@pytest.mark.parametrize(("query", "cards"), [
    ("", ["a", "b", "c"]),  # fullest first: a 75% cpu, b 0%, c 0% (then by name)
    ("?sort=name", ["a", "b", "c"]),
    ("?label=kubernetes.io/hostname=c", ["c"]),
    ("?label=kubernetes.io/hostname", ["a", "b", "c"]),
    ("?label=no-such-label", []),
], ids=["fullest-first", "by-name", "label-equals", "label-present", "label-absent"])
def test_filter_by_label_and_sort(query: str, cards: list[str]) -> None:
    assert Page(_cluster().client.get("/ui/nodes" + query).text).cards == cards


def test_sort_by_fullness_puts_the_fullest_node_first() -> None:
    h = harness([make_node("a").cpu("4").obj(), make_node("b").cpu("4").obj(), make_node("c").cpu("4").obj(),
                 make_pod("x").labels({}).cpu("1").on("a").obj(), make_pod("y").labels({}).cpu("3").on("c").obj()])
    assert Page(h.client.get("/ui/nodes").text).cards == ["c", "a", "b"]
    assert Page(h.client.get("/ui/nodes?sort=name").text).cards == ["a", "b", "c"]


def test_pages_of_nodes() -> None:
    count = PAGE_SIZE * 2 + 7
    h = harness([make_node(f"n{i:04d}").obj() for i in range(count)])
    pages = [Page(h.client.get(f"/ui/nodes?sort=name&page={n}").text).cards for n in (1, 2, 3, 9)]
    assert [len(p) for p in pages] == [PAGE_SIZE, PAGE_SIZE, 7, 7]  # past the end: the last page
    assert pages[0][0] == "n0000" and pages[2][-1] == f"n{count - 1:04d}"


@pytest.mark.parametrize(("query", "named"), [
    ("/ui/nodes?label=a%20b=c", "label filter"),
    ("/ui/nodes?label==x", "label filter"),
    ("/ui/nodes?sort=size", "sort"),
    ("/ui/nodes?page=0", "page"),
    ("/ui/nodes?page=two", "page"),
], ids=["space-in-key", "no-key", "unknown-sort", "page-zero", "page-word"])
def test_bad_input_gets_one_page_naming_it(query: str, named: str) -> None:
    reply = _cluster().client.get(query)
    assert reply.status_code == 400
    assert reply.headers["content-type"].startswith("text/html")
    assert re.search(rf'role="alert">{named}: ', reply.text), reply.text


def test_a_node_card_shows_liveness_cordon_taints_and_governed_pods() -> None:
    h = _cluster()
    text = h.client.get("/ui/nodes?label=kubernetes.io/hostname=c").text
    assert "cordoned" in text and "db=only:NoSchedule" in text and "Ready" in text
    text = h.client.get("/ui/nodes?label=kubernetes.io/hostname=a").text
    assert '<a href="/ui/pods/shop/web-0">shop/web-0</a> <span class="muted">(shop/web)</span>' in text


def test_a_pending_pods_card_names_each_nodes_reason_with_the_shortfall() -> None:
    page = Page(_cluster().client.get("/ui/pods/shop/web-big").text)
    assert {name: row["fresh"] for name, row in page.rows.items()} == {
        "a": "insufficient capacity: cpu: needs 6, 1 free of 4 allocatable (short by 5)",
        "b": "insufficient capacity: cpu: needs 6, 2 free of 2 allocatable (short by 4)",
        "c": "node is cordoned (spec.unschedulable)",
    }


def test_the_recorded_decision_stands_beside_the_fresh_evaluation() -> None:
    h = _cluster()
    small = make_pod("web-1").labels(WEB).cpu("1").obj()
    winner = h.schedule(small, ["a", "b", "c"])
    other = {"a": "b", "b": "a"}[winner or ""]
    before = Page(h.client.get("/ui/pods/shop/web-1").text).rows
    assert before[winner]["recorded"] == "winner"
    assert before[winner]["fresh"] != "refused"  # the pod does not count against the room it takes itself
    assert not before[winner]["fresh"].startswith("insufficient")
    h.store.apply_pod(make_pod("filler").labels({}).cpu("4").on(other).obj())  # the other node fills up afterwards
    after = Page(h.client.get("/ui/pods/shop/web-1").text).rows
    assert after[other]["fresh"].startswith("insufficient capacity: cpu"), after
    assert after["c"]["recorded"] == after["c"]["fresh"] == "node is cordoned (spec.unschedulable)"


def test_a_pod_berth_does_not_know_is_404() -> None:
    reply = _cluster().client.get("/ui/pods/shop/nobody")
    assert reply.status_code == 404 and "shop/nobody" in reply.text


def test_policies_show_conditions_plan_pods_per_node_and_pending_links() -> None:
    body = make_policy("web").strategy("Spread").obj()
    body["status"] = {"conditions": [{"type": "Ready", "status": "True", "reason": "Placed"}],
                      "plan": {"a": 1}, "latestDecision": {"pod": "shop/web-0", "winner": "a"}}
    h = harness([make_node("a").obj(), body,
                 make_pod("web-0").labels(WEB).on("a").obj(),
                 make_pod("web-1").labels(WEB).obj()])
    text = h.client.get("/ui/policies").text
    assert "Ready=True (Placed)" in text
    assert "<td>a: 1</td>" in text  # the plan, and the pods placed per node
    assert '<a href="/ui/pods/shop/web-1">web-1</a>' in text
    assert '<a href="/ui/pods/shop/web-0">shop/web-0</a>' in text  # the latest decision's card


def test_the_store_forgets_a_deleted_policys_status() -> None:
    body = make_policy("web").obj()
    body["status"] = {"conditions": []}
    store = make_store([body])
    assert store.policy_status["shop/web"] == {"conditions": []}
    store.delete_policy(body)
    assert "shop/web" not in store.policy_status


# -- authorization (the explain API's: the caller's own rights) ------------------------------


def _guarded() -> TestClient:
    store = make_store([make_node("a").obj(), make_policy("web").obj(), make_pod("web-0").labels(WEB).on("a").obj(),
                        make_pod("web-1").labels(WEB).obj()])
    return TestClient(create_app(store, ExtenderSettings(), clock=Clock(), reviewer=Reviews()))


@pytest.mark.parametrize("path", ["/ui/nodes", "/ui/policies", "/ui/pods/shop/web-1"])
def test_without_a_token_each_view_sends_to_sign_in(path: str) -> None:
    reply = _guarded().get(path, follow_redirects=False)
    assert reply.status_code == 303
    assert reply.headers["location"] == "/ui/signin?next=" + quote(path, safe="")


def test_sign_in_keeps_the_token_in_a_short_lived_strict_http_only_cookie() -> None:
    client = _guarded()
    reply = client.post("/ui/signin", content=b"token=alice-token&next=%2Fui%2Fpods%2Fshop%2Fweb-1",
                        headers={"content-type": "application/x-www-form-urlencoded"}, follow_redirects=False)
    assert reply.status_code == 303 and reply.headers["location"] == "/ui/pods/shop/web-1"
    cookie = reply.headers["set-cookie"]
    for part in (f"{COOKIE}=alice-token", "HttpOnly", "SameSite=strict", "Path=/ui", "Max-Age=1800"):
        assert part.lower() in cookie.lower(), cookie
    assert client.get("/ui/pods/shop/web-1").status_code == 200  # the cookie signs the next views in


@pytest.mark.parametrize(("form", "status", "said"), [
    (b"token=made-up", 401, "not valid"),
    (b"token=", 400, "paste a bearer token"),
    (b"token=a%20b", 400, "not a bearer token"),
], ids=["rejected-token", "empty", "whitespace"])
def test_a_bad_sign_in_is_refused_and_sets_no_cookie(form: bytes, status: int, said: str) -> None:
    reply = _guarded().post("/ui/signin", content=form, follow_redirects=False,
                            headers={"content-type": "application/x-www-form-urlencoded"})
    assert reply.status_code == status and said in reply.text
    assert "set-cookie" not in reply.headers


def test_sign_in_goes_back_only_to_the_page_itself() -> None:
    reply = _guarded().post("/ui/signin", content=b"token=alice-token&next=https%3A%2F%2Fevil.example%2F",
                            headers={"content-type": "application/x-www-form-urlencoded"}, follow_redirects=False)
    assert reply.headers["location"] == "/ui/nodes"


@pytest.mark.parametrize(("path", "missing"), [
    ("/ui/nodes", "list placementpolicies.berth.dev cluster-wide"),
    ("/ui/policies", "list placementpolicies.berth.dev cluster-wide"),
    ("/ui/pods/bank/teller-1", "get pods in namespace bank"),
], ids=["nodes", "policies", "other-namespace-pod"])
def test_a_view_the_caller_may_not_read_is_refused_naming_the_permission(path: str, missing: str) -> None:
    reply = _guarded().get(path, headers={"Authorization": "Bearer alice-token"})
    assert reply.status_code == 403 and f"alice may not {missing}" in reply.text


def test_the_page_has_no_script_and_no_write_form() -> None:
    client = _guarded()
    for path in ("/ui/signin", "/ui/pods/shop/web-1"):
        reply = client.get(path, headers={"Authorization": "Bearer alice-token"})
        assert "script-src" not in reply.headers["content-security-policy"]
        assert "<script" not in reply.text
        assert set(re.findall(r'<form method="(\w+)" action="([^"]+)"', reply.text)) <= {
            ("post", "/ui/signin"), ("post", "/ui/signout"), ("get", "/ui/nodes"), ("get", "/ui/policies"),
            ("get", "/ui/drains")}


def test_fullness_sorting_agrees_with_the_cards_figure() -> None:
    from berth.extender.page import allocation_fullness, bars, fullness

    h = harness([make_node("a").cpu("4").memory(None).obj(),
                 make_pod("x").labels({}).cpu("3").memory("1Gi").on("a").obj()])
    entry = h.client.get("/api/v1/nodes/allocations").json()["nodes"]["a"]
    assert allocation_fullness(entry) == fullness(bars(entry, {})) == 0.75


def test_a_pending_pod_with_no_node_to_judge_says_so() -> None:
    h = harness([make_policy("web").obj(), make_pod("web-1").labels(WEB).obj()])
    text = h.client.get("/ui/pods/shop/web-1").text
    assert "Pending: no node can take it now: no node to consider.</p>" in text  # the evaluation's own error
    assert "no node to show" in text and ". ." not in text


# -- drains ------------------------------------------------------------------------------------


def test_a_drains_pods_with_source_destination_and_state() -> None:
    client, _ = reviewed_app(Reviews())
    text = client.get("/ui/drains/retire-a", headers={"Authorization": "Bearer carol-token"}).text
    row = re.search(r'<tr data-pod="shop/web-1">(.*?)</tr>', text, re.S)
    assert row is not None, text
    cells = [re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row[1], re.S)]
    assert cells[:4] == ["shop/web-1", "a", "b", "Evicting"]
    assert "phase <strong>Draining</strong>" in text and "mode Execute" in text


@pytest.mark.parametrize(("path", "token", "status", "said"), [
    ("/ui/drains/retire-a", "alice-token", 403, "alice may not get nodedrains.berth.dev cluster-wide"),
    ("/ui/drains/nothing-here", "carol-token", 404, "no NodeDrain nothing-here"),
    ("/ui/drains/Not_A_Name", "carol-token", 400, "is not a NodeDrain name"),
], ids=["not-allowed", "unknown", "bad-name"])
def test_a_drain_the_caller_may_not_read_or_that_is_not_there(path: str, token: str, status: int,
                                                              said: str) -> None:
    client, binder = reviewed_app(Reviews())
    reply = client.get(path, headers={"Authorization": f"Bearer {token}"})
    assert reply.status_code == status and said in reply.text
    if status != 404:
        assert binder.reads == []  # refused before the NodeDrain is read with berth's rights
