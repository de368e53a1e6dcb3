"""``berth explain pod``, ``berth nodes``, ``berth policies`` (and ``kubectl berth``): the live cluster
read with the person's kubeconfig credentials (a stand-in for the API server here) and the extender
asked with the person's token (the real extender app, in-process)."""

from __future__ import annotations

import http.server
import json
import threading
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from berth.cli import live
from berth.cli.main import main
from berth.core.decision import DECISION_ANNOTATION, Winner
from tests.builders import make_node, make_pod, make_policy
from tests.decision_schema import valid_record
from tests.extender.helpers import harness

WEB = {"app": "web"}
RECORDED = {"pod": "shop/web-0", "policy": "shop/web", "strategy": "Spread", "trigger": "bind",
            "time": "2027-01-15T07:00:00.00Z", "considered": ["a", "b"], "refused": {"b": "node is cordoned"},
            "winner": "a", "ranking": ["a"]}


class FakeKube:
    """The API server as the person's credentials read it."""

    def __init__(self, objects: list[dict[str, Any]], token: str | None = "kube-token") -> None:
        self.objects = objects
        self.token = token

    def bearer_token(self) -> str | None:
        return self.token

    def read_pod(self, namespace: str, name: str) -> dict[str, Any]:
        for obj in self.objects:
            meta = obj["metadata"]
            if obj["kind"] == "Pod" and (meta["namespace"], meta["name"]) == (namespace, name):
                return obj
        raise live.LiveError(f"cannot read pod {namespace}/{name}: not found (HTTP 404)")

    def list_policies(self, namespace: str | None) -> list[dict[str, Any]]:
        return [o for o in self.objects if o["kind"] == "PlacementPolicy"
                and (not namespace or o["metadata"]["namespace"] == namespace)]


def _objects() -> list[dict[str, Any]]:
    web = make_policy("web").strategy("Spread").obj()
    web["status"] = {"conditions": [{"type": "Ready", "status": "True"}], "plan": {"a": 1},
                     "latestDecision": {"pod": "shop/web-0"}}
    return [make_node("a").cpu("4").obj(), make_node("b").cpu("2").memory(None).obj(), web,
            (make_pod("web-0")
             .labels(WEB)
             .cpu("3")
             .on("a")
             .annotations({DECISION_ANNOTATION: json.dumps(RECORDED)})
             .obj()),
            make_pod("web-big").labels(WEB).cpu("6").obj()]


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The CLI wired to a fake API server and the real extender app; records the tokens it carried."""
    objects = _objects()
    client = harness(objects).client
    seen: dict[str, Any] = {"tokens": []}

    class InProcessExtender(live.Extender):
        def fetch(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
            seen["tokens"].append(self.token)
            reply = client.request(method, path, json=body)
            return reply.status_code, reply.json()

    monkeypatch.setattr(live, "Kube", lambda kubeconfig=None, context=None: FakeKube(objects))
    monkeypatch.setattr(live, "Extender", InProcessExtender)
    monkeypatch.delenv("BERTH_TOKEN", raising=False)
    return seen


def test_explain_pod_names_each_nodes_reason_and_the_recorded_decision(cluster: dict[str, Any],
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "pod", "shop/web-big"]) == 0
    out = capsys.readouterr().out
    assert "pod shop/web-big: Pending, not placed" in out
    assert "recorded: no decision recorded" in out
    table = out.split("\n\n", 1)[1].splitlines()
    assert table[0].split() == ["NODE", "RECORDED", "NOW", "SCORE"]
    assert any(line.startswith("a ") and "needs 6, 1 free of 4 allocatable (short by 5)" in line for line in table)
    assert any(line.startswith("b ") and "needs 6, 2 free of 2 allocatable (short by 4)" in line for line in table)
    assert cluster["tokens"] == ["kube-token"]  # the kubeconfig user's own token went to the extender


def test_explain_pod_as_json_carries_the_annotation_and_the_fresh_evaluation(
        cluster: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "pod", "shop/web-0", "--output", "json", "--token", "given"]) == 0
    out = json.loads(capsys.readouterr().out)
    # the annotation berth wrote before the record had a version, shown in this version
    recorded = valid_record(out["recorded"])
    assert recorded.refusals() == RECORDED["refused"] and recorded.winner == Winner(node="a")
    assert (recorded.pod, recorded.trigger, recorded.time, recorded.considered) == (
        RECORDED["pod"], RECORDED["trigger"], RECORDED["time"], RECORDED["considered"])
    assert out["node"] == "a"
    fresh = valid_record(out["fresh"])
    assert fresh.trigger == "preview" and fresh.winner is not None and fresh.winner.node == "a"
    assert cluster["tokens"] == ["given"]  # --token wins over the kubeconfig's


@pytest.mark.parametrize(("argv", "code", "said"), [
    (["explain", "pod", "web-big"], 2, "'web-big' is not NAMESPACE/NAME"),
    (["explain", "pod", "shop/a/b"], 2, "is not NAMESPACE/NAME"),
    (["explain", "pod", "shop/nobody"], 1, "cannot read pod shop/nobody: not found"),
    (["explain", "deployment", "shop/web"], 2, "invalid choice"),
], ids=["no-namespace", "extra-slash", "no-such-pod", "unknown-kind"])
def test_bad_input_is_one_line(cluster: dict[str, Any], capsys: pytest.CaptureFixture[str], argv: list[str],
                               code: int, said: str) -> None:
    assert main(argv) == code
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err


def test_nodes_draws_bars_fullest_first_and_unknown_as_unknown(cluster: dict[str, Any],
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["nodes"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "a  (75% full)"
    assert lines[1].split() == ["cpu", "[###############.....]", "3", "/", "4"]
    assert "memory" in lines[7] and "[????????????????????]" in lines[7] and lines[7].endswith("/ unknown")


def test_nodes_as_json_is_the_allocations_answer(cluster: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["nodes", "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["nodes"]["a"]["requested"]["cpu"] == 3000 and "memory" in out["nodes"]["b"]["unknown"]


def test_policies_from_the_api_server(cluster: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policies", "-n", "shop"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["POLICY", "STRATEGY", "CONDITIONS", "PLAN", "LATEST", "DECISION"]
    assert lines[1].split() == ["shop/web", "Spread", "Ready=True", "a:1", "shop/web-0"]
    assert main(["policies", "-n", "bank"]) == 0
    assert capsys.readouterr().out.strip() == "no PlacementPolicies"


@pytest.fixture
def recorder() -> Iterator[tuple[str, list[str]]]:
    """A local HTTP server that records the Authorization header it gets and answers 401."""
    headers: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            headers.append(self.headers.get("Authorization", ""))
            body = b'{"error": "the bearer token is not valid"}'
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            return None

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", headers
    server.shutdown()
    server.server_close()


def test_the_extender_is_asked_with_the_bearer_token_and_its_refusal_is_one_line(
        recorder: tuple[str, list[str]]) -> None:
    url, headers = recorder
    with pytest.raises(live.LiveError, match=r"HTTP 401: the bearer token is not valid .*pass --token"):
        live.nodes(live.Extender(url, "t0ken").fetch)
    assert headers == ["Bearer t0ken"]


def test_an_unreachable_extender_says_how_to_reach_it() -> None:
    with pytest.raises(live.LiveError, match=r"cannot reach the extender.*port-forward svc/berth-extender 8080"):
        live.nodes(live.Extender("http://127.0.0.1:9", None, timeout=2).fetch)


def test_kubectl_berth_is_the_same_cli() -> None:
    scripts = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"][
        "scripts"]
    assert scripts["kubectl-berth"] == scripts["berth"] == "berth.cli.main:main"



@pytest.mark.parametrize(("user", "token"), [
    ({"token": "abc.def"}, "abc.def"),
    ({"client-certificate-data": "", "client-key-data": ""}, None),
], ids=["token-user", "no-token"])
def test_the_kubeconfig_users_bearer_token_is_the_one_given_to_the_extender(
        tmp_path: Path, user: dict[str, str], token: str | None) -> None:
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "c",
              "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:6443"}}],
              "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
              "users": [{"name": "u", "user": user}]}
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps(config))
    assert live.Kube(str(path)).bearer_token() == token


def test_an_unreadable_kubeconfig_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "kubeconfig").write_text("{}")
    with pytest.raises(live.LiveError, match="cannot read the kubeconfig"):
        live.Kube(str(tmp_path / "kubeconfig"))
