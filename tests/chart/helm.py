"""Locate the helm binary and render the chart, for the chart tests.

helm is looked up, in order: ``BERTH_HELM`` (a path); ``helm`` in ``BERTH_K8S_BIN_DIR`` or
``BERTH_K8S_BIN`` (the bin dir hack/build-k8s.sh prints); the build script's cache
(``${BERTH_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/berth}/k8s-<version>/bin/helm``, the version
pinned in hack/k8s-build/go.mod). Nothing found: the tests are skipped, except under CI
(``CI=true``), where they fail: CI must prove the chart renders.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
CHART = REPO_ROOT / "charts" / "berth"
KUBE_VERSION = "1.36.2"  # what `helm template` pretends the API server is


def _pinned_k8s_version() -> str | None:
    gomod = REPO_ROOT / "hack" / "k8s-build" / "go.mod"
    if not gomod.is_file():
        return None
    match = re.search(r"k8s\.io/kubernetes (v\d+\.\d+\.\d+)", gomod.read_text())
    return match.group(1) if match else None


def candidates() -> list[Path]:
    found: list[Path] = []
    explicit = os.environ.get("BERTH_HELM")
    if explicit:
        return [Path(explicit)]
    for var in ("BERTH_K8S_BIN_DIR", "BERTH_K8S_BIN"):
        if os.environ.get(var):
            found.append(Path(os.environ[var]) / "helm")
    version = _pinned_k8s_version()
    if version:
        cache = os.environ.get("BERTH_CACHE_DIR") or str(
            Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "berth")
        found.append(Path(cache) / f"k8s-{version}" / "bin" / "helm")
    return found


def find_helm() -> Path | None:
    for path in candidates():
        if path.is_file() and os.access(path, os.X_OK):
            return path
    return None


def require_helm() -> Path:
    """The helm binary; skips the test without one, fails under CI."""
    helm = find_helm()
    if helm is not None:
        return helm
    where = ", ".join(str(p) for p in candidates()) or "nowhere"
    message = f"helm not found (looked in: {where}); run `bash hack/build-k8s.sh` or set BERTH_HELM"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(message)
    pytest.skip(message)


def run_helm(helm: Path, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HELM_CACHE_HOME": str(REPO_ROOT / "build" / "helm" / "cache"),
           "HELM_CONFIG_HOME": str(REPO_ROOT / "build" / "helm" / "config"),
           "HELM_DATA_HOME": str(REPO_ROOT / "build" / "helm" / "data")}
    proc = subprocess.run([str(helm), *args], capture_output=True, text=True, timeout=timeout, env=env,
                          check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def set_args(values: dict[str, Any] | None) -> list[str]:
    """``--set-json key=value`` for each entry of a flat {dotted.key: value} dict."""
    import json

    out: list[str] = []
    for key, value in (values or {}).items():
        out += ["--set-json", f"{key}={json.dumps(value)}"]
    return out


def template(helm: Path, values: dict[str, Any] | None = None, *, release: str = "berth",
             namespace: str = "berth-system", extra: Sequence[str] = (), include_crds: bool = False,
             kube_version: str = KUBE_VERSION) -> str:
    args = ["template", release, str(CHART), "--namespace", namespace, "--kube-version", kube_version,
            *set_args(values), *extra]
    if include_crds:
        args.append("--include-crds")
    return run_helm(helm, *args).stdout


class Rendered:
    """The objects of one rendering, indexed by (kind, name)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.objects = [d for d in yaml.safe_load_all(text) if d]

    def kinds(self) -> set[str]:
        return {o["kind"] for o in self.objects}

    def all(self, kind: str) -> list[dict[str, Any]]:
        return [o for o in self.objects if o["kind"] == kind]

    def find(self, kind: str, name: str) -> dict[str, Any] | None:
        for o in self.objects:
            if o["kind"] == kind and o["metadata"]["name"] == name:
                return o
        return None

    def get(self, kind: str, name: str) -> dict[str, Any]:
        obj = self.find(kind, name)
        if obj is None:
            names = sorted(f"{o['kind']}/{o['metadata']['name']}" for o in self.objects)
            raise AssertionError(f"{kind}/{name} not rendered; rendered: {names}")
        return obj

    def names(self, kind: str) -> set[str]:
        return {o["metadata"]["name"] for o in self.all(kind)}


def render(helm: Path, values: dict[str, Any] | None = None, **kw: Any) -> Rendered:
    return Rendered(template(helm, values, **kw))


def rules_of(role: dict[str, Any]) -> set[tuple[str, str, str, str]]:
    """A Role's rules as a set of (apiGroup, resource, verb, resourceName or "") tuples."""
    out: set[tuple[str, str, str, str]] = set()
    for rule in role.get("rules") or []:
        names: Iterable[str] = rule.get("resourceNames") or [""]
        for group in rule.get("apiGroups") or [""]:
            for resource in rule.get("resources") or []:
                for verb in rule.get("verbs") or []:
                    for name in names:
                        out.add((group, resource, verb, name))
    return out
