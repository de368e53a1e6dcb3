"""Static checks of the files around the chart that need no helm: values.yaml documents every
value with an example and matches values.schema.json; the Dockerfile is multi-stage, non-root
and read-only-root friendly, and its build context (.dockerignore) holds what the wheel needs;
the kind setup agrees with the chart and with the local control plane."""

from __future__ import annotations

import fnmatch
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
CHART = REPO_ROOT / "charts" / "berth"

# ---------------------------------------------------------------------------- values.yaml

KEY = re.compile(r"^(?P<indent> *)(?:- )?(?P<key>[A-Za-z][\w.-]*):")


def _documented_keys(text: str) -> list[tuple[int, str, bool]]:
    """(line number, dotted key, documented) for every mapping key of values.yaml: documented
    when the comment block right above it, or above one of its parents, gives an example."""
    lines = text.splitlines()
    stack: list[tuple[int, str, bool]] = []  # (indent, key, has example)
    out: list[tuple[int, str, bool]] = []
    for i, line in enumerate(lines):
        m = KEY.match(line)
        if not m or line.lstrip().startswith("#"):
            continue
        indent = len(m.group("indent"))
        j, block = i - 1, []
        while j >= 0 and lines[j].lstrip().startswith("#"):
            block.append(lines[j])
            j -= 1
        example = any("Example" in b for b in block)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        # keys inside a list item (e.g. the default topologySpreadConstraints) belong to it
        if line.lstrip().startswith("- ") or (stack and stack[-1][0] < indent and _in_list(lines, i, indent)):
            continue
        inherited = any(s[2] for s in stack)
        path = ".".join([s[1] for s in stack] + [m.group("key")])
        out.append((i + 1, path, example or inherited))
        stack.append((indent, m.group("key"), example))
    return out


def _in_list(lines: list[str], i: int, indent: int) -> bool:
    for j in range(i - 1, -1, -1):
        stripped = lines[j].lstrip()
        if not stripped or stripped.startswith("#"):
            continue
        other = len(lines[j]) - len(stripped)
        if other < indent:
            return False
        if (other == indent - 2 and stripped.startswith("- ")) or (other == indent and stripped.startswith("- ")):
            return True
    return False


def test_every_value_has_a_comment_with_an_example() -> None:
    text = (CHART / "values.yaml").read_text()
    keys = _documented_keys(text)
    assert len(keys) > 80
    documented = {k: ok for _, k, ok in keys}

    def ok(key: str) -> bool:  # a section is documented when all its values are
        children = [k for k in documented if k.startswith(key + ".") and "." not in k[len(key) + 1:]]
        return documented[key] or (bool(children) and all(ok(c) for c in children))

    missing = [f"line {n}: {k}" for n, k, _ in keys if not ok(k)]
    assert not missing, "values without a comment giving an example:\n" + "\n".join(missing)


def _schema_paths(schema: dict[str, Any], prefix: str = "") -> set[str]:
    out: set[str] = set()
    for key, sub in (schema.get("properties") or {}).items():
        path = f"{prefix}{key}"
        out.add(path)
        if sub.get("type") == "object" and "properties" in sub:
            out |= _schema_paths(sub, path + ".")
    return out


def _value_paths(values: Any, prefix: str = "", schema: dict[str, Any] | None = None) -> set[str]:
    out: set[str] = set()
    if not isinstance(values, dict):
        return out
    for key, sub in values.items():
        path = f"{prefix}{key}"
        out.add(path)
        sub_schema = (schema or {}).get("properties", {}).get(key, {})
        if isinstance(sub, dict) and "properties" in sub_schema:
            out |= _value_paths(sub, path + ".", sub_schema)
    return out


def test_values_and_schema_agree() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    in_values = _value_paths(values, schema=schema)
    in_schema = _schema_paths(schema) - {"global"}
    assert in_values - in_schema == set(), "values missing from values.schema.json"
    # open-ended entries whose default is empty: an issuerRef, resources' claims
    optional = {p for p in in_schema if p.startswith("tls.certManager.issuerRef.") or p.endswith(".resources.claims")}
    assert in_schema - in_values - optional == set(), "schema entries without a value in values.yaml"


# The defaults and deploy/kind/values-kind.yaml are validated against the schema by helm itself
# whenever test_render.py renders them.


def test_settings_names_match_the_extender() -> None:
    """Every BERTH_* variable the chart sets is a setting of the extender (or POD_*)."""
    from berth.extender.settings import ExtenderSettings

    helpers = (CHART / "templates" / "_helpers.tpl").read_text()
    names = set(re.findall(r"name: (BERTH_[A-Z_]+)", helpers))
    known = {f"BERTH_{f.upper()}" for f in ExtenderSettings.model_fields}
    assert names and names <= known, names - known


# ---------------------------------------------------------------------------- Dockerfile


def _stages(text: str) -> list[list[str]]:
    stages: list[list[str]] = []
    joined = re.sub(r"\\\n", " ", text)
    for line in joined.splitlines():
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        if s.upper().startswith("FROM "):
            stages.append([])
        if stages:
            stages[-1].append(s)
    return stages


def test_dockerfile_is_multi_stage_non_root_and_read_only_friendly() -> None:
    text = (REPO_ROOT / "Dockerfile").read_text()
    stages = _stages(text)
    assert len(stages) >= 2, "build and runtime stages"
    build, runtime = stages[0], stages[-1]
    assert any("pip wheel" in s for s in build), "the build stage builds berth's wheel"
    assert any("requirements.lock" in s for s in build), "dependencies pinned by requirements.lock"
    assert any("compileall" in s for s in build), "bytecode compiled at build time (read-only root)"
    assert any(s.startswith("COPY --from=build /opt/berth") for s in runtime)
    assert not any(s.startswith("COPY . ") for s in runtime), "no sources in the runtime stage"
    user = [s for s in runtime if s.startswith("USER ")]
    assert user, "the runtime stage sets a USER"
    assert "65532" in text and not re.search(r"USER\s+(root|0)\b", user[-1])
    assert 'ENTRYPOINT ["berth"]' in runtime
    env = " ".join(s for s in runtime if s.startswith("ENV "))
    assert "PYTHONDONTWRITEBYTECODE=1" in env and "HOME=/tmp" in env
    # The chart's pods run as the image's user.
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["podSecurityContext"]["runAsUser"] == 65532


def _dockerignore_allows(rel: str, patterns: list[str]) -> bool:
    """Docker's rule: the last matching pattern wins; a pattern matches a path or its parents."""
    allowed = True
    parts = rel.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    for raw in patterns:
        negate = raw.startswith("!")
        pattern = raw[1:] if negate else raw
        pattern = pattern.rstrip("/")
        for prefix in prefixes:
            if fnmatch.fnmatchcase(prefix, pattern) or (
                    pattern.startswith("**/") and any(fnmatch.fnmatchcase(p, pattern[3:]) for p in prefix.split("/"))):
                allowed = negate
                break
    return allowed


def _build_context(tmp: Path) -> Path:
    patterns = [p.strip() for p in (REPO_ROOT / ".dockerignore").read_text().splitlines()
                if p.strip() and not p.strip().startswith("#")]
    tracked = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO_ROOT,
                             capture_output=True, text=True, check=True).stdout.split()
    ctx = tmp / "context"
    for rel in tracked:
        src = REPO_ROOT / rel
        if (src.is_file() or src.is_symlink()) and _dockerignore_allows(rel, patterns):
            dst = ctx / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst, follow_symlinks=False)  # berth/extender, berth/operator stay links
    return ctx


def test_dockerignore_keeps_secrets_and_tests_out() -> None:
    patterns = [p.strip() for p in (REPO_ROOT / ".dockerignore").read_text().splitlines()
                if p.strip() and not p.strip().startswith("#")]
    for rel in (".git/config", ".venv/bin/python", "tests/chart/test_render.py", "charts/berth/values.yaml",
                "build/kind/ca/tls.key", "berth/__pycache__/x.pyc", "deploy/kind/pki.py"):
        assert not _dockerignore_allows(rel, patterns), rel
    for rel in ("pyproject.toml", "requirements.lock", "berth/__init__.py", "extender/app.py",
                "operator/main.py", "crds/placementpolicies.berth.dev.yaml"):
        assert _dockerignore_allows(rel, patterns), rel


@pytest.mark.packaging
def test_wheel_builds_from_the_docker_build_context(tmp_path: Path) -> None:
    """What the Dockerfile's build stage does, without Docker: build the wheel from exactly the
    files .dockerignore lets in, install it, and run the entrypoint with a read-only view of it
    (no bytecode written, HOME=/tmp)."""
    ctx = _build_context(tmp_path)
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    "--wheel-dir", str(dist), str(ctx)], check=True, capture_output=True, timeout=600)
    wheel = next(dist.glob("berth-*.whl"))
    import venv

    venv.EnvBuilder(with_pip=False, system_site_packages=True).create(tmp_path / "venv")
    python = tmp_path / "venv" / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    outer = [p for p in sys.path if p.endswith("site-packages")]
    Path(site, "outer.pth").write_text("\n".join(outer) + "\n")
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", str(wheel)],
                   check=True, capture_output=True, timeout=300)
    env = {"PATH": str(tmp_path / "venv" / "bin"), "HOME": "/tmp", "PYTHONDONTWRITEBYTECODE": "1"}
    for args in (["--help"], ["extender", "--help"], ["operator", "--help"]):
        done = subprocess.run([str(tmp_path / "venv" / "bin" / "berth"), *args], capture_output=True, text=True,
                              env=env, cwd=tmp_path, timeout=120)
        assert done.returncode == 0, f"berth {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    where = subprocess.run([str(python), "-c", "import berth, pathlib; print(pathlib.Path(berth.__file__).parent)"],
                           capture_output=True, text=True, cwd=tmp_path, check=True).stdout
    assert str(ctx) not in where and "site-packages" in where


# ---------------------------------------------------------------------------- kind


def test_kind_config_patches_the_scheduler() -> None:
    cluster = yaml.safe_load((REPO_ROOT / "deploy" / "kind" / "cluster.yaml").read_text())
    assert cluster["kind"] == "Cluster"
    [cp] = [n for n in cluster["nodes"] if n["role"] == "control-plane"]
    patches = [yaml.safe_load(p) for p in cp["kubeadmConfigPatches"]]
    versions = {p["apiVersion"] for p in patches}
    assert versions == {"kubeadm.k8s.io/v1beta3", "kubeadm.k8s.io/v1beta4"}
    for patch in patches:
        sched = patch["scheduler"]
        args = sched["extraArgs"]
        config = args["config"] if isinstance(args, dict) else {a["name"]: a["value"] for a in args}["config"]
        assert config == "/etc/kubernetes/berth/scheduler-config.yaml"
        assert sched["extraVolumes"][0]["mountPath"] == "/etc/kubernetes/berth"
    assert cp["extraMounts"][0]["containerPath"] == "/etc/kubernetes/berth"
    # Same Service range as the local control plane, and the fixed ClusterIP lies in it.
    from tests.e2e.harness.controlplane import SERVICE_CIDR

    assert cluster["networking"]["serviceSubnet"] == SERVICE_CIDR
    import ipaddress

    kind_values = yaml.safe_load((REPO_ROOT / "deploy" / "kind" / "values-kind.yaml").read_text())
    ip = ipaddress.ip_address(kind_values["extender"]["service"]["clusterIP"])
    assert ip in ipaddress.ip_network(SERVICE_CIDR)


def test_kind_scheduler_config_matches_the_chart() -> None:
    """The kind control plane's extender block is the chart's, but for the address (the fixed
    ClusterIP), the certificate paths and ignorable (the cluster's only scheduler)."""
    from .helm import render, require_helm

    helm = require_helm()
    kind_values = yaml.safe_load((REPO_ROOT / "deploy" / "kind" / "values-kind.yaml").read_text())
    r = render(helm, {"scheduler.enabled": True}, extra=["-f", str(REPO_ROOT / "deploy" / "kind" / "values-kind.yaml")])
    chart_cfg = yaml.safe_load(r.get("ConfigMap", "berth-scheduler")["data"]["config.yaml"])
    kind_cfg = yaml.safe_load((REPO_ROOT / "deploy" / "kind" / "scheduler-config.yaml").read_text())
    [chart_ext], [kind_ext] = chart_cfg["extenders"], kind_cfg["extenders"]
    differ = {"urlPrefix", "tlsConfig", "ignorable"}
    assert {k: v for k, v in kind_ext.items() if k not in differ} == {
        k: v for k, v in chart_ext.items() if k not in differ}
    assert kind_ext["urlPrefix"] == f"https://{kind_values['extender']['service']['clusterIP']}:8443"
    assert kind_ext["tlsConfig"]["serverName"] == chart_ext["tlsConfig"]["serverName"]
    assert kind_ext["ignorable"] is True
    assert kind_cfg["profiles"][0]["percentageOfNodesToScore"] == chart_cfg["profiles"][0]["percentageOfNodesToScore"]
    assert kind_cfg["clientConnection"]["kubeconfig"] == "/etc/kubernetes/scheduler.conf"


def test_kind_pki(tmp_path: Path) -> None:
    pytest.importorskip("cryptography")
    from cryptography import x509

    subprocess.run([sys.executable, str(REPO_ROOT / "deploy" / "kind" / "pki.py"), str(tmp_path)], check=True,
                   capture_output=True, timeout=60)
    ca = x509.load_pem_x509_certificate((tmp_path / "ca" / "tls.crt").read_bytes())
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert (tmp_path / "ca" / "tls.key").read_text().startswith("-----BEGIN RSA PRIVATE KEY-----")
    client = x509.load_pem_x509_certificate((tmp_path / "scheduler" / "pki" / "tls.crt").read_bytes())
    assert client.issuer == ca.subject
    assert (tmp_path / "scheduler" / "pki" / "ca.crt").read_bytes() == (tmp_path / "ca" / "tls.crt").read_bytes()
    before = (tmp_path / "ca" / "tls.crt").read_bytes()
    subprocess.run([sys.executable, str(REPO_ROOT / "deploy" / "kind" / "pki.py"), str(tmp_path)], check=True,
                   capture_output=True, timeout=60)
    assert (tmp_path / "ca" / "tls.crt").read_bytes() == before, "re-running keeps the certificates"
    kind_cfg = yaml.safe_load((REPO_ROOT / "deploy" / "kind" / "scheduler-config.yaml").read_text())
    tls = kind_cfg["extenders"][0]["tlsConfig"]
    for key, name in (("certFile", "tls.crt"), ("keyFile", "tls.key"), ("caFile", "ca.crt")):
        assert tls[key] == f"/etc/kubernetes/berth/pki/{name}"


def test_makefile_targets() -> None:
    text = (REPO_ROOT / "Makefile").read_text()
    for target in ("test", "lint", "e2e-kind", "chart-test"):
        assert re.search(rf"^{re.escape(target)}:", text, re.M), target
    assert "deploy/kind/cluster.yaml" in text and "load docker-image" in text
