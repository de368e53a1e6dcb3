"""Where the control plane's binaries come from.

* ``kube-apiserver``, ``kube-scheduler``, ``kubectl``, ``helm`` and ``kube-controller-manager``
  (needed only by the tests that start it): the directory named by
  ``BERTH_K8S_BIN_DIR`` (or ``BERTH_K8S_BIN``) if set; otherwise ``hack/build-k8s.sh`` is run, which builds them once
  from the Go module proxy, caches them outside the repository and prints the bin dir (a run
  with a warm cache takes about a second).
* ``etcd``: ``BERTH_ETCD`` if set, else ``etcd`` on ``PATH`` (``hack/install-deps.sh`` installs
  Debian's ``etcd-server``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from .process import HarnessError

REPO_ROOT = Path(__file__).resolve().parents[3]
BUILD_SCRIPT = REPO_ROOT / "hack" / "build-k8s.sh"
K8S_BINARIES = ("kube-apiserver", "kube-scheduler", "kubectl", "helm")


@dataclass(frozen=True)
class Binaries:
    """Paths of the binaries the harness runs."""

    bin_dir: Path
    etcd: Path | None

    def path(self, name: str) -> Path:
        """The path of ``name`` in :attr:`bin_dir`; fails if it is not an executable there."""
        p = self.bin_dir / name
        if not os.access(p, os.X_OK):
            raise HarnessError(f"{name} not found in {self.bin_dir} (run: bash hack/build-k8s.sh)")
        return p

    @property
    def kube_apiserver(self) -> Path:
        return self.path("kube-apiserver")

    @property
    def kube_scheduler(self) -> Path:
        return self.path("kube-scheduler")

    @property
    def kube_controller_manager(self) -> Path:
        return self.path("kube-controller-manager")

    @property
    def kubectl(self) -> Path:
        return self.path("kubectl")

    @property
    def helm(self) -> Path:
        return self.path("helm")

    def require_etcd(self) -> Path:
        """The etcd binary; fails with the command that installs it."""
        if self.etcd is None:
            raise HarnessError("etcd not found on PATH and BERTH_ETCD unset (run: bash hack/install-deps.sh)")
        return self.etcd


def build_k8s(timeout: float = 3600.0) -> Path:
    """Run ``hack/build-k8s.sh`` (its log goes to our stderr) and return the bin dir it prints."""
    try:
        proc = subprocess.run(
            ["bash", str(BUILD_SCRIPT)],
            stdout=subprocess.PIPE,
            stderr=sys.stderr,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as err:
        raise HarnessError(f"{BUILD_SCRIPT} did not finish in {timeout:.0f}s") from err
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise HarnessError(f"{BUILD_SCRIPT} failed with exit code {proc.returncode}")
    return Path(lines[-1])


def find_etcd() -> Path | None:
    """``BERTH_ETCD`` or ``etcd`` on ``PATH``."""
    explicit = os.environ.get("BERTH_ETCD")
    if explicit:
        return Path(explicit)
    found = shutil.which("etcd")
    return Path(found) if found else None


def resolve_binaries() -> Binaries:
    """Locate (building if needed) every binary; see the module docstring."""
    env_dir = os.environ.get("BERTH_K8S_BIN_DIR") or os.environ.get("BERTH_K8S_BIN")
    bin_dir = Path(env_dir) if env_dir else build_k8s()
    missing = [b for b in K8S_BINARIES if not os.access(bin_dir / b, os.X_OK)]
    if missing:
        raise HarnessError(f"missing in {bin_dir}: {', '.join(missing)} (run: bash hack/build-k8s.sh)")
    return Binaries(bin_dir=bin_dir, etcd=find_etcd())
