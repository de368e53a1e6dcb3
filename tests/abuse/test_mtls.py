"""mTLS means kube-scheduler: a real ``berth extender`` process serves the scheduler verbs only to
client certificates that name kube-scheduler's client (BERTH_TLS_CLIENT_NAMES), and refuses to
start rather than serve ``bind`` in plain HTTP or without client authentication."""

from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import orjson
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID

from tests.builders import make_node, make_pod, make_policy
from tests.e2e.harness.certs import _issue, _name, generate_pki
from tests.e2e.harness.process import free_port
from tests.e2e.stack import _berth_command
from tests.extender.helpers import args, bind_args

SCHEDULER_CN = "berth-scheduler-client"


@dataclass(frozen=True)
class Leaves:
    ca: Path
    serving: tuple[Path, Path]
    scheduler: tuple[Path, Path]
    webhook: tuple[Path, Path]  # another leaf of the same CA, valid for client authentication too


def _leaf(directory: Path, name: str, common_name: str, ca_cert: x509.Certificate,
          ca_key: ec.EllipticCurvePrivateKey, usages: list[x509.ObjectIdentifier],
          dns: list[str] | None = None) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _issue(subject=_name(common_name), public_key=key.public_key(), ca_cert=ca_cert, ca_key=ca_key,
                  usages=usages, dns_names=dns, ips=["127.0.0.1"] if dns else None)
    crt_path, key_path = directory / f"{name}.crt", directory / f"{name}.key"
    crt_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return crt_path, key_path


@pytest.fixture(scope="module")
def leaves(tmp_path_factory: pytest.TempPathFactory) -> Leaves:
    pki = generate_pki(tmp_path_factory.mktemp("pki"))
    ca_cert = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes())
    ca_key = serialization.load_pem_private_key(pki.ca_key.read_bytes(), None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    both = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]  # as Helm's genSignedCert makes
    return Leaves(
        ca=pki.ca_cert,
        serving=_leaf(pki.dir, "extender", "localhost", ca_cert, ca_key, both, ["localhost"]),
        scheduler=_leaf(pki.dir, "scheduler", SCHEDULER_CN, ca_cert, ca_key, [ExtendedKeyUsageOID.CLIENT_AUTH]),
        webhook=_leaf(pki.dir, "webhook", "berth-webhook.berth-system.svc", ca_cert, ca_key, both,
                      ["berth-webhook.berth-system.svc"]),
    )


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("snapshot") / "cluster.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List",
                                "items": [make_node("a").obj(),
                                          make_policy("web").obj(),
                                          make_pod("web-1").labels({"app": "web"}).obj()]}))
    return path


def _start(snapshot: Path, env: dict[str, str], *extra: str, host: str = "127.0.0.1",
           port: int | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([_berth_command(), "extender", "--host", host, "--port", str(port or free_port()),
                             "--snapshot", str(snapshot), *extra],
                            env={**os.environ, "BERTH_LOG_LEVEL": "WARNING", **env}, cwd=snapshot.parent,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _stop(proc: subprocess.Popen[str]) -> str:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=20)
    return out


@pytest.fixture(scope="module")
def served(leaves: Leaves, snapshot: Path) -> Iterator[str]:
    port, api_port = free_port(), free_port()
    env = {"BERTH_TLS_CERT_FILE": str(leaves.serving[0]), "BERTH_TLS_KEY_FILE": str(leaves.serving[1]),
           "BERTH_TLS_CLIENT_CA_FILE": str(leaves.ca), "BERTH_API_PORT": str(api_port)}
    proc = _start(snapshot, env, port=port)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if httpx.get(f"http://127.0.0.1:{api_port}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        assert proc.poll() is None, _stop(proc)
        yield f"https://localhost:{port}"
    finally:
        _stop(proc)


def _verb(base: str, leaves: Leaves, client: tuple[Path, Path], path: str = "/filter") -> httpx.Response:
    context = ssl.create_default_context(cafile=str(leaves.ca))
    context.load_cert_chain(str(client[0]), str(client[1]))
    pending = make_pod("web-2").labels({"app": "web"}).obj()
    body = orjson.dumps(bind_args(pending, "a") if path == "/bind" else args(pending, ["a"]))
    return httpx.post(base + path, content=body, verify=context, timeout=10)


@pytest.mark.parametrize("path", ["/filter", "/bind"])
def test_only_kube_schedulers_certificate_calls_the_verbs(served: str, leaves: Leaves, path: str) -> None:
    """Another leaf of the same CA (the operator's webhook serving certificate, valid for client
    authentication as Helm issues it) gets 403 naming it; kube-scheduler's client is served."""
    reply = _verb(served, leaves, leaves.webhook, path)
    assert reply.status_code == 403, reply.text
    assert "berth-webhook.berth-system.svc" in reply.json()["Error"]
    served_reply = _verb(served, leaves, leaves.scheduler, path)
    assert served_reply.status_code == 200, served_reply.text


def _refused(snapshot: Path, env: dict[str, str], *extra: str, host: str = "127.0.0.1") -> str:
    proc = _start(snapshot, env, *extra, host=host)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        _stop(proc)
        pytest.fail("the extender started serving")
    out = _stop(proc)
    assert proc.returncode == 1, out
    assert "Traceback" not in out and len(out.strip().splitlines()) == 1, out
    return out


def test_no_tls_settings_refuse_to_start(snapshot: Path) -> None:
    out = _refused(snapshot, {})
    assert "BERTH_TLS_CERT_FILE" in out and "--dev-insecure" in out


def test_an_empty_client_ca_setting_is_refused(leaves: Leaves, snapshot: Path) -> None:
    out = _refused(snapshot, {"BERTH_TLS_CERT_FILE": str(leaves.serving[0]),
                              "BERTH_TLS_KEY_FILE": str(leaves.serving[1]), "BERTH_TLS_CLIENT_CA_FILE": ""})
    assert "BERTH_TLS_CLIENT_CA_FILE is set but empty" in out


def test_the_development_flag_listens_on_loopback_only(snapshot: Path) -> None:
    out = _refused(snapshot, {}, "--dev-insecure", host="0.0.0.0")
    assert "loopback" in out


def test_a_renewed_certificate_is_served_without_a_restart(tmp_path: Path, leaves: Leaves, snapshot: Path) -> None:
    """The chart renews short-lived leaves (on upgrade, or cert-manager by itself): the running
    extender serves the renewed certificate from its files, so no leaf outlives its renewal."""
    ca_cert = x509.load_pem_x509_certificate(leaves.ca.read_bytes())
    ca_key = serialization.load_pem_private_key((leaves.ca.parent / "ca.key").read_bytes(), None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    serving = tmp_path / "serving.crt", tmp_path / "serving.key"
    serving[0].write_bytes(leaves.serving[0].read_bytes())
    serving[1].write_bytes(leaves.serving[1].read_bytes())
    port, api_port = free_port(), free_port()
    proc = _start(snapshot, {"BERTH_TLS_CERT_FILE": str(serving[0]), "BERTH_TLS_KEY_FILE": str(serving[1]),
                             "BERTH_TLS_CLIENT_CA_FILE": str(leaves.ca), "BERTH_API_PORT": str(api_port),
                             "BERTH_TLS_RELOAD_SECONDS": "0.2"}, port=port)
    try:
        def presented() -> bytes | None:
            try:
                return ssl.get_server_certificate(("127.0.0.1", port), timeout=2).encode()
            except OSError:
                return None

        deadline = time.monotonic() + 30
        while presented() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        first = presented()
        assert first is not None
        renewed = _leaf(tmp_path, "renewed", "localhost", ca_cert, ca_key, [ExtendedKeyUsageOID.SERVER_AUTH],
                        ["localhost"])
        os.replace(renewed[1], serving[1])  # kubelet swaps a Secret volume's files at once; near enough
        os.replace(renewed[0], serving[0])
        wanted = x509.load_pem_x509_certificate(serving[0].read_bytes())
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            now = presented()
            if now is not None and x509.load_pem_x509_certificate(now) == wanted:
                break
            time.sleep(0.2)
        now = presented()
        assert now is not None and x509.load_pem_x509_certificate(now) == wanted
    finally:
        _stop(proc)
