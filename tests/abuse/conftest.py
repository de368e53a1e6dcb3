"""A real extender process (``berth extender --snapshot``) on 127.0.0.1, its extender port and its
read-only API port, with short limits set through the environment so that each abuse is seen
within seconds. Only 127.0.0.1 is ever sent to, a bounded number of times."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.builders import make_node, make_pod, make_policy
from tests.e2e.harness.process import free_port

WEB = {"app": "web"}

LIMITS = {
    "BERTH_BODY_TIMEOUT_SECONDS": "1",
    "BERTH_HEADER_TIMEOUT_SECONDS": "1",
    "BERTH_API_MAX_BODY_BYTES": str(64 * 1024),
    "BERTH_API_MAX_CONNECTIONS": "16",
    "BERTH_API_MAX_CONCURRENCY": "1",
    "BERTH_API_MAX_QUEUE": "4",
    "BERTH_API_MAX_CONTAINERS": "16",
    "BERTH_API_MAX_AFFINITY_TERMS": "64",
    "BERTH_DEFAULT_STRATEGY": "Spread",
}


@dataclass
class Extender:
    verbs: str  # the extender port (kube-scheduler's verbs and everything else)
    api: str  # the read-only API port
    verbs_port: int
    api_port: int
    process: subprocess.Popen[str]

    def alive(self, timeout: float = 2.0) -> bool:
        """Both ports answer their health probe within ``timeout``."""
        try:
            return all(httpx.get(f"{url}/healthz", timeout=timeout).status_code == 200
                       for url in (self.verbs, self.api))
        except httpx.HTTPError:
            return False


def _cluster(tmp: Path) -> Path:
    items = [make_node(f"n{i}").cpu("8").memory("32Gi").labels({"topology.kubernetes.io/zone": f"z{i % 3}"}).obj()
             for i in range(12)]
    items += [make_policy("web").strategy("Spread").obj(),
              *(make_pod(f"web-{i}").labels(WEB).cpu("1").on(f"n{i}").obj() for i in range(6))]
    path = tmp / "snapshot.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return path


@pytest.fixture(scope="package")
def extender(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Extender]:
    tmp = tmp_path_factory.mktemp("abuse")
    snapshot = _cluster(tmp)
    port, api_port = free_port(), free_port()
    # A snapshot has no API server to review tokens: the explain API is opened to anyone (as a
    # single-tenant cluster may choose), and the verbs are served in plain HTTP on 127.0.0.1.
    env = {**os.environ, **LIMITS, "BERTH_API_PORT": str(api_port), "BERTH_TRACK_LEASES": "false",
           "BERTH_API_ANONYMOUS": "true"}
    berth = Path(sys.executable).parent / "berth"
    log = (tmp / "extender.log").open("w")
    proc = subprocess.Popen([str(berth), "extender", "--host", "127.0.0.1", "--port", str(port), "--snapshot",
                             str(snapshot), "--dev-insecure"], env=env, cwd=tmp, stdout=log,
                            stderr=subprocess.STDOUT, text=True)
    ext = Extender(f"http://127.0.0.1:{port}", f"http://127.0.0.1:{api_port}", port, api_port, proc)
    deadline = time.monotonic() + 60
    while not ext.alive(0.5):
        assert proc.poll() is None and time.monotonic() < deadline, (tmp / "extender.log").read_text()
        time.sleep(0.2)
    yield ext
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:  # a stalled loop ignores SIGTERM: that is a failure too
        proc.kill()
        proc.wait(5)
        pytest.fail("the extender did not stop on SIGTERM")
    finally:
        log.close()
    output = (tmp / "extender.log").read_text()
    assert "Traceback" not in output, output
