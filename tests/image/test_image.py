"""The container image, run as the Helm chart runs it: user 65532, read-only root filesystem, a
writable /tmp. Built by hack/build-image.sh (buildah, no daemon) unless BERTH_IMAGE names one
already built into its storage; run by hack/run-image.sh, which enforces the read-only root with a
read-only bind mount (see that script). Needs root and buildah: skipped without them on a
developer's machine, failed without them in CI."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness.process import free_port

ROOT = Path(__file__).resolve().parents[2]
FILTER_REQUEST = ROOT / "tests/extender/fixtures/kube-scheduler-v1.36/cache-true/filter-0000-request.json"
UID = "65532"

pytestmark = [pytest.mark.image, pytest.mark.timeout(3600)]


def _bh(*args: str, timeout: float = 600) -> str:
    """buildah with the storage hack/image-lib.sh uses."""
    done = subprocess.run(["bash", "-c", 'source hack/image-lib.sh && bh "$@"', "bh", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"buildah {args}: {done.stderr}"
    return done.stdout.strip()


@pytest.fixture(scope="module")
def image() -> str:
    missing = [t for t in ("buildah", "unshare", "chroot") if shutil.which(t) is None]
    reason = f"missing {missing}" if missing else ("not root" if os.geteuid() != 0 else "")
    if reason:
        hint = f"the image tests need root and buildah ({reason}): run bash hack/install-deps.sh image"
        if os.environ.get("CI") == "true":
            pytest.fail(hint)
        pytest.skip(hint)
    name = os.environ.get("BERTH_IMAGE")
    if not name:
        built = subprocess.run(["bash", "hack/build-image.sh", "localhost/berth:test"], cwd=ROOT,
                               capture_output=True, text=True, timeout=3000)
        assert built.returncode == 0, f"hack/build-image.sh failed:\n{built.stderr[-4000:]}"
        name = built.stdout.strip().splitlines()[-1]
    return name


@pytest.fixture(scope="module")
def container(image: str) -> Iterator[str]:
    """One working container of the image for all the runs (a vfs container copies the image)."""
    name = _bh("from", "--pull=never", "--quiet", image)
    yield name
    _bh("rm", name)


def _run(container: str, *args: str, entrypoint: str | None = None, input_dir: Path | None = None,
         timeout: float = 120) -> subprocess.CompletedProcess[str]:
    cmd = ["bash", "hack/run-image.sh"]
    if entrypoint:
        cmd += ["--entrypoint", entrypoint]
    if input_dir:
        cmd += ["--input", str(input_dir)]
    cmd += ["--container", container]
    return subprocess.run([*cmd, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def _oci(kind: str, name: str) -> dict[str, Any]:
    """The OCI image configuration (config, history) of an image or a working container."""
    oci: dict[str, Any] = json.loads(_bh("inspect", "--type", kind, name))["OCIv1"]
    return oci


def test_image_config_runs_as_65532(image: str) -> None:
    config = _oci("image", image)["config"]
    assert config["User"] == f"{UID}:{UID}"
    assert config["Entrypoint"] == ["berth"]
    assert config["WorkingDir"] == "/tmp"


CHECK_ROOT = """
import errno, importlib.util, os, pathlib, sys
print("ids", os.getuid(), os.getgid())
for path in ("/x", "/etc/x", "/opt/berth/x", "/tmp/x"):
    try:
        pathlib.Path(path).write_text("x")
        print("write", path, "ok")
    except OSError as e:
        print("write", path, errno.errorcode[e.errno])
site = pathlib.Path(sys.prefix, "lib", f"python{sys.version_info[0]}.{sys.version_info[1]}", "site-packages")
sources = [p for p in site.rglob("*.py") if "berth" in p.parts or p.parent == site]
stale = [str(p) for p in sources if not pathlib.Path(importlib.util.cache_from_source(str(p))).is_file()]
print("sources", len(sources), "without bytecode", stale[:5])
"""


def test_runs_as_65532_on_a_read_only_root_with_a_writable_tmp(container: str) -> None:
    done = _run(container, "-c", CHECK_ROOT, entrypoint="/opt/berth/bin/python")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert f"ids {UID} {UID}" in lines
    # EROFS, not EACCES: the file system refuses the write, whoever asks.
    assert "write /x EROFS" in lines and "write /etc/x EROFS" in lines and "write /opt/berth/x EROFS" in lines
    assert "write /tmp/x ok" in lines
    counted = next(line for line in lines if line.startswith("sources"))
    assert counted.endswith("without bytecode []") and not counted.startswith("sources 0 "), counted


def test_berth_help(container: str) -> None:
    done = _run(container, "--help")
    assert done.returncode == 0, done.stderr
    for command in ("extender", "operator", "plan", "simulate"):
        assert command in done.stdout


def test_berth_operator_help(container: str) -> None:
    done = _run(container, "operator", "--help")
    assert done.returncode == 0, done.stderr
    assert "--webhook" in done.stdout


def test_no_build_secret_is_left_in_the_image(container: str) -> None:
    rootfs = Path(_bh("mount", container))
    assert list(rootfs.rglob("pip.conf")) == [], "a pip configuration was baked into the image"
    secrets = rootfs / "run" / "secrets"
    assert not secrets.exists() or not any(secrets.iterdir()), "build secrets were left in /run/secrets"
    assert not (rootfs / "etc/apt/sources.list").exists() and not list((rootfs / "etc/apt").glob("sources.list.d/*"))
    history = json.dumps(_oci("container", container)["history"])
    assert "index-url" not in history and "/run/secrets/pip-ca" not in history.replace("id=pip-ca", "")


def _get(url: str, body: bytes | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_extender_serves_the_sample_cluster_snapshot(container: str, tmp_path: Path) -> None:
    sample = _run(container, "sample")
    assert sample.returncode == 0, sample.stderr
    (tmp_path / "cluster.json").write_text(sample.stdout)
    # The input is mounted as it is: the image's user must be able to read it.
    tmp_path.chmod(0o755)
    (tmp_path / "cluster.json").chmod(0o644)
    nodes = [i["metadata"]["name"] for i in json.loads(sample.stdout)["items"] if i["kind"] == "Node"]
    port = free_port()
    cmd = ["bash", "hack/run-image.sh", "--input", str(tmp_path), "--container", container,
           "extender", "--snapshot", "/tmp/input/cluster.json", "--host", "127.0.0.1", "--port", str(port),
           "--dev-insecure"]
    log = (tmp_path / "extender.log").open("w")
    server = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        status = 0
        while time.monotonic() < deadline and server.poll() is None:
            try:
                status, _ = _get(f"http://127.0.0.1:{port}/healthz")
                if status == 200:
                    break
            except OSError:
                pass
            time.sleep(0.5)
        assert status == 200, f"/healthz never answered 200:\n{(tmp_path / 'extender.log').read_text()}"
        # What kube-scheduler v1.36 sent, its candidate nodes renamed to the sample cluster's.
        request = json.loads(FILTER_REQUEST.read_text())
        request["NodeNames"] = nodes[:6]
        status, body = _get(f"http://127.0.0.1:{port}/filter", json.dumps(request).encode())
        assert status == 200, body
        answer = json.loads(body)
        assert answer["Error"] == ""
        passed, failed = answer["NodeNames"], {**answer["FailedNodes"], **answer["FailedAndUnresolvableNodes"]}
        assert sorted([*passed, *failed]) == sorted(nodes[:6]) and passed, answer
    finally:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(server.pid, sig)
                server.wait(timeout=30)
                break
            except ProcessLookupError:
                break
            except subprocess.TimeoutExpired:
                continue
        log.close()
