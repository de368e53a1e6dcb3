"""The extender served by a real uvicorn on 127.0.0.1 from a snapshot file (offline mode), driven
over HTTP like kube-scheduler drives it, with concurrent binds from many threads."""

from __future__ import annotations

import asyncio
import functools
import importlib.metadata
import inspect
import json
import threading
import time
import tomllib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import orjson
import pytest
import uvicorn
from packaging.requirements import Requirement
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from berth.extender import server as server_module
from berth.extender.server import UVICORN_IO, build_app, serve
from berth.extender.settings import load_settings
from tests.builders import make_node, make_pod, make_policy
from tests.decision_schema import valid_record
from tests.e2e.harness.process import free_port
from tests.extender.helpers import args, bind_args

WEB = {"app": "web"}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    snapshot = {"apiVersion": "v1", "kind": "List", "items": [
        make_node("a").cpu("4").obj(), make_node("b").cpu("2").obj(), make_policy("web").strategy("Spread").obj(),
        make_pod("web-0").labels(WEB).cpu("1").on("b").obj()]}
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps(snapshot))
    app = build_app(str(path), load_settings(api_anonymous=True), settle_heap=False)  # the explain API without tokens
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not srv.started and time.monotonic() < deadline:
        time.sleep(0.01)
    assert srv.started
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(5)


def test_scheduler_round_trip_over_http(server: str) -> None:
    with httpx.Client(base_url=server) as client:
        assert client.get("/readyz").status_code == 200
        p = make_pod("web-1").labels(WEB).cpu("1").obj()
        r = client.post("/filter", content=orjson.dumps(args(p, ["a", "b"])))
        assert r.json()["NodeNames"] == ["a", "b"]
        scores = {h["Host"]: h["Score"] for h in client.post("/prioritize", content=orjson.dumps(
            args(p, ["a", "b"]))).json()}
        assert scores["a"] == 10  # Spread: the least used node
        assert client.post("/bind", content=orjson.dumps(bind_args(p, "a"))).json() == {"Error": ""}
        decision = valid_record(client.get("/api/v1/decisions/shop/web-1").json())
        assert decision.winner is not None and decision.winner.node == "a" and decision.trigger == "bind"
        assert client.post("/filter", content=b"{not json").status_code == 400


def test_concurrent_binds_from_threads_never_overcommit(server: str) -> None:
    pods = [make_pod(f"web-{i}").labels(WEB).cpu("1").obj() for i in range(1, 25)]
    with httpx.Client(base_url=server) as client:
        for p in pods:  # the scheduler filtered each one earlier (against a stale view)
            client.post("/filter", content=orjson.dumps(args(p, ["a"])))

    def bind(p: dict[str, object]) -> str:
        # the server shares this process with the twelve clients: under load the last binds of the
        # burst answer after seconds (the 5 s default timeout gave up on some); what is asserted is
        # the answers, not their latency
        with httpx.Client(base_url=server, timeout=60) as c:
            error: str = c.post("/bind", content=orjson.dumps(bind_args(p, "a"))).json()["Error"]
            return error

    with ThreadPoolExecutor(max_workers=12) as pool:
        errors = list(pool.map(bind, pods))
    assert errors.count("") == 4  # a has 4 cores
    with httpx.Client(base_url=server) as client:
        allocations = client.get("/api/v1/nodes/allocations").json()
    assert allocations["nodes"]["a"]["requested"]["cpu"] == 4000


def test_serve_is_the_cli_entry_point() -> None:
    params = inspect.signature(serve).parameters
    assert list(params)[:3] == ["host", "port", "snapshot"]


def test_both_listeners_run_on_uvloop_and_httptools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """serve() runs the extender port and the API port on uvicorn's compiled HTTP parser and loop
    (asyncio.run would make the standard library's loop whatever the options say)."""
    snapshot = tmp_path / "snapshot.json"
    snapshot.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [make_node("a").obj(),
                                                                                  make_policy("web").obj()]}))
    monkeypatch.setenv("BERTH_API_PORT", str(free_port()))
    monkeypatch.setattr(server_module, "build_app", functools.partial(build_app, settle_heap=False))
    served: list[tuple[object, ...]] = []

    async def record(self: uvicorn.Server, sockets: object = None) -> None:
        self.config.load()
        served.append((issubclass(self.config.http_protocol_class, HttpToolsProtocol),
                       type(asyncio.get_running_loop()).__module__))

    monkeypatch.setattr(uvicorn.Server, "serve", record)
    serve("127.0.0.1", free_port(), str(snapshot), dev_insecure=True)
    # named, not "auto" (which falls back to h11 and asyncio silently when they are missing); the
    # protocol is httptools' with berth's bounds on slow and large request heads
    assert served == [(True, "uvloop")] * 2


def test_the_compiled_http_stack_is_pinned_and_installed() -> None:
    root = Path(__file__).resolve().parents[2]
    dependencies = [Requirement(d) for d in tomllib.loads((root / "pyproject.toml").read_text())["project"][
        "dependencies"]]
    locked = dict(line.split("==") for line in (root / "requirements.lock").read_text().split())
    for name in (UVICORN_IO["http"], UVICORN_IO["loop"]):
        (pin,) = [str(d.specifier) for d in dependencies if d.name == name]
        assert pin == f"=={locked[name]}" == f"=={importlib.metadata.version(name)}", name


def test_tls_with_client_certificates_and_a_plain_api_port(tmp_path: Path) -> None:
    """serve(): HTTPS that only kube-scheduler's client certificate opens; the explain API, health
    and metrics on a second plain port, which never serves the verbs; a clean stop on SIGTERM."""
    import os
    import signal
    import ssl
    import subprocess
    import sys

    from tests.e2e.harness.certs import generate_pki

    pki = generate_pki(tmp_path / "pki")
    snapshot = tmp_path / "snapshot.json"
    snapshot.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [make_node("a").obj(),
                                                                                  make_policy("web").obj()]}))
    port, api_port = free_port(), free_port()
    env = {**os.environ, "BERTH_TLS_CERT_FILE": str(pki.apiserver_cert), "BERTH_TLS_KEY_FILE": str(pki.apiserver_key),
           "BERTH_TLS_CLIENT_CA_FILE": str(pki.ca_cert), "BERTH_API_PORT": str(api_port),
           "BERTH_TLS_CLIENT_NAMES": "berth-e2e-admin", "BERTH_API_ANONYMOUS": "true"}
    code = f"from berth.extender.server import serve; serve('127.0.0.1', {port}, {str(snapshot)!r})"
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        plain = f"http://127.0.0.1:{api_port}"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(plain + "/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        assert httpx.get(plain + "/readyz").status_code == 200
        assert httpx.get(plain + "/api/v1/nodes/allocations").json()["nodes"]["a"]
        assert httpx.post(plain + "/bind", content=b"{}").status_code == 404  # never the verbs
        body = orjson.dumps(args(make_pod("web-1").labels(WEB).obj(), ["a"]))
        trusted = ssl.create_default_context(cafile=str(pki.ca_cert))
        with pytest.raises(httpx.HTTPError):  # no client certificate: refused in the handshake
            httpx.post(f"https://127.0.0.1:{port}/filter", content=body, verify=trusted).raise_for_status()
        trusted.load_cert_chain(str(pki.admin_cert), str(pki.admin_key))
        r = httpx.post(f"https://127.0.0.1:{port}/filter", content=body, verify=trusted)
        assert r.json()["NodeNames"] == ["a"]
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=20)
    # uvicorn stops gracefully, then re-raises the signal it caught: the exit status says SIGTERM
    assert proc.returncode in (0, -signal.SIGTERM), out
    assert "Traceback" not in out, out
    assert out.count("Finished server process") == 2, out  # both listeners shut down
