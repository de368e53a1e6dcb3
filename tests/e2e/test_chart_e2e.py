"""The Helm chart against a real API server (the local control plane of tests/e2e/harness, or
the cluster of KUBECONFIG with BERTH_E2E_USE_EXISTING=1, e.g. `make e2e-kind`):

* the rendered chart (several value sets) is accepted by server-side dry-run;
* `helm install` creates everything, `helm upgrade` keeps the TLS material;
* RBAC: the API server answers `kubectl auth can-i --as=<the chart's ServiceAccount>` yes for
  every verb each component uses (tests/chart/expected.py) and no for what it must not do;
* the components run *under* the chart's ServiceAccounts (a token from the TokenRequest API),
  with the chart's arguments, environment and certificates: a missing verb shows up as a
  failure of the component, not only of a can-i question.

The control plane has no kubelet and no kube-proxy: the chart's pods never start and Services
route nowhere. So the components run here as local processes on 127.0.0.1 with the chart's
configuration, and the release is installed without the ValidatingWebhookConfiguration (the
API server would call a Service address it cannot reach for every PlacementPolicy write of the
whole test session); the configuration itself is checked by the dry-run.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from tests.chart import expected
from tests.chart.helm import CHART, Rendered, set_args
from tests.e2e.harness import ControlPlane, NodeSpec, ensure_default_service_account, simple_pod, wait_for
from tests.e2e.harness.fixtures import (  # noqa: F401  (pytest fixtures)
    control_plane,
    e2e_namespace,
    kube_api,
    make_nodes,
    node_leases,
)
from tests.e2e.harness.process import ManagedProcess, free_port

pytestmark = pytest.mark.e2e

REPO_ROOT = Path(__file__).resolve().parents[2]

INSTALL_VALUES: dict[str, Any] = {
    "scheduler.enabled": True,
    "operator.replicas": 2,  # peering: the ClusterKopfPeering object and its RBAC
    "extender.replicas": 2,
    "operator.webhook.enabled": False,  # see the module docstring
    "image.tag": "e2e",
}

DRY_RUN_VARIANTS: list[tuple[str, dict[str, Any]]] = [
    ("default", {}),
    ("scheduler-replicas", {"scheduler.enabled": True, "scheduler.replicas": 2, "operator.replicas": 2,
                            "extender.replicas": 3}),
    ("minimal", {"extender.replicas": 1, "operator.enabled": False, "extender.networkPolicy.enabled": False,
                 "tests.enabled": False}),
    ("settings", {"settings.cpuOvercommitPercent": 150, "settings.defaultStrategy": "Balanced",
                  "extender.networkPolicy.schedulerFrom": [{"ipBlock": {"cidr": "192.0.2.0/24"}}],
                  "operator.webhook.failurePolicy": "Fail"}),
]


# ---------------------------------------------------------------------------- helpers


@dataclass
class Installed:
    cp: ControlPlane
    helm: Path
    release: str
    namespace: str
    workdir: Path
    values: dict[str, Any]
    processes: list[ManagedProcess] = field(default_factory=list)

    @property
    def fullname(self) -> str:
        return f"{self.release}-berth"

    def run_helm(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "HELM_CACHE_HOME": str(self.workdir / "helm-cache"),
               "HELM_CONFIG_HOME": str(self.workdir / "helm-config"),
               "HELM_DATA_HOME": str(self.workdir / "helm-data")}
        proc = subprocess.run([str(self.helm), "--kubeconfig", str(self.cp.kubeconfig), *args],
                              capture_output=True, text=True, timeout=300, env=env, check=False)
        if check and proc.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
        return proc

    def manifest(self) -> Rendered:
        return Rendered(self.run_helm("get", "manifest", self.release, "-n", self.namespace).stdout)

    def template(self, values: dict[str, Any], release: str | None = None) -> str:
        return self.run_helm("template", release or self.release, str(CHART), "-n", self.namespace,
                             *set_args(values)).stdout

    def secret_files(self, name: str, into: Path) -> Path:
        """The Secret's keys written as files (like a Secret volume)."""
        core = k8s.CoreV1Api(self.cp.api_client())
        data = core.read_namespaced_secret(name, self.namespace).data
        into.mkdir(parents=True, exist_ok=True)
        for key, value in data.items():
            (into / key).write_bytes(base64.b64decode(value))
        return into

    def token(self, service_account: str) -> str:
        """A TokenRequest token of the ServiceAccount."""
        return str(self.cp.kubectl("create", "token", service_account, "-n", self.namespace,
                                   "--duration=2h").stdout.strip())

    def sa_kubeconfig(self, service_account: str) -> Path:
        """A kubeconfig that authenticates as the ServiceAccount (a TokenRequest token)."""
        token = self.token(service_account)
        admin = yaml.safe_load(self.cp.kubeconfig.read_text())
        cluster = admin["clusters"][0]["cluster"]
        config = {
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "e2e", "cluster": cluster}],
            "users": [{"name": service_account, "user": {"token": token}}],
            "contexts": [{"name": service_account, "context": {"cluster": "e2e", "user": service_account}}],
            "current-context": service_account,
        }
        path = self.workdir / f"{service_account}.kubeconfig"
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)
        return path

    def can_i(self, service_account: str, verb: str, resource: str, namespace: str | None,
              subresource: str | None = None) -> bool:
        args = ["auth", "can-i", verb, resource, f"--as=system:serviceaccount:{self.namespace}:{service_account}"]
        args += ["-n", namespace] if namespace else []
        args += [f"--subresource={subresource}"] if subresource else []
        proc = self.cp.kubectl(*args, check=False)
        answer = proc.stdout.strip()
        assert answer in ("yes", "no"), f"kubectl {' '.join(args)}: {proc.stdout} {proc.stderr}"
        return answer == "yes"


def _berth_bin() -> Path:
    found = Path(sys.executable).parent / "berth"
    if found.exists():
        return found
    which = shutil.which("berth")
    assert which, "the berth console script is not installed (scripts/setup.sh)"
    return Path(which)


def _container(deploy: dict[str, Any]) -> dict[str, Any]:
    return deploy["spec"]["template"]["spec"]["containers"][0]


def _plain_env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}


def _mtls_context(tls_dir: Path, *, client_cert: bool) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(tls_dir / "ca.crt"))
    if client_cert:
        ctx.load_cert_chain(str(tls_dir / "tls.crt"), str(tls_dir / "tls.key"))
    return ctx


def _post(port: int, path: str, body: Any, ctx: ssl.SSLContext, server_name: str) -> Any:
    """POST JSON to https://127.0.0.1:port/path, checking the certificate against server_name."""
    import http.client

    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=15)
    conn.sock = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=15),
                                server_hostname=server_name)
    try:
        conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        data = resp.read()
        assert resp.status == 200, f"POST {path}: {resp.status} {data[:500]!r}"
        return json.loads(data)
    finally:
        conn.close()


def _policy(api: Any, namespace: str, app: str) -> None:
    """A PlacementPolicy selecting app=<app> (pods no policy selects pass berth without a decision)."""
    k8s.CustomObjectsApi(api).create_namespaced_custom_object(
        "berth.dev", "v1alpha1", namespace, "placementpolicies", {
            "apiVersion": "berth.dev/v1alpha1", "kind": "PlacementPolicy",
            "metadata": {"name": app, "namespace": namespace},
            "spec": {"selector": {"matchLabels": {"app": app}}, "strategy": "Spread"}})


def _as(url: str, token: str) -> urllib.request.Request:
    return urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})


def _wait_until_seen(api_port: int, node: str, namespace: str, policy: str, token: str) -> None:
    """Until the extender's view holds the policy and the node as its filter judges it: Ready, with
    its allocatable, without the not-ready taint, its Lease renewed. Asked through the explain API
    with ``token`` (the chart's explain API checks the caller's own rights): the policy's capacity
    table for the test pods' shape gives the node room.

    The node's name in the view is not enough: the watch delivers the node's creation before its
    status, the taint's removal and its Lease, and a filter sent in between refuses the node. An
    error answer (503 while the TokenReview or SubjectAccessReview cannot be asked) is asked again,
    and shown if it lasts."""
    url = (f"http://127.0.0.1:{api_port}/api/v1/capacity?namespace={namespace}&policy={policy}"
           "&cpu=100m&memory=64Mi")

    def room() -> int | str:
        try:
            with urllib.request.urlopen(_as(url, token), timeout=5) as resp:
                return int(json.loads(resp.read())["nodes"].get(node, 0))
        except urllib.error.HTTPError as exc:
            return f"HTTP {exc.code}: {exc.read()[:300]!r}"
        except OSError as exc:
            return f"no answer: {exc}"

    wait_for(room, lambda got: isinstance(got, int) and got >= 1, timeout=30,
             what=f"the extender to see policy {namespace}/{policy} and room on node {node}")


REFUSED = re.compile(r'forbidden|not enough permissions|HTTP/[\d.]+" 403\b|\(403\)', re.IGNORECASE)
"""A refusal in a component's log: the API server's Forbidden (its Status message, the kubernetes
client's ``(403)``, berth's ``403 Forbidden``, a request logged with status 403). Not any " 403":
at DEBUG level (the release runs at DEBUG from the upgrade test on) each request is logged with its
body's length and each list with its resourceVersion, and a length of 4031 bytes is no refusal."""


LOG_LINES = [
    # (case, a log line, whether it tells of a refusal)
    ("a request logged with a 4031-byte body", 'urllib3.connectionpool: https://127.0.0.1:1 "GET /api/v1/pods?'
     'limit=1000 HTTP/1.1" 200 4031', False),
    ("a list at resourceVersion 40312", "listed 12 pods in 0.10s (resourceVersion 40312)", False),
    ("a request logged with status 403", 'urllib3.connectionpool: https://127.0.0.1:1 "GET /api/v1/pods '
     'HTTP/1.1" 403 321', True),
    ("berth's API client refused", "cannot read the Lease ns/x: 403 Forbidden (tried again every 2s)", True),
    ("the kubernetes client refused", "kubernetes.client.exceptions.ApiException: (403)", True),
    ("the API server's Status message", 'pods is forbidden: User "system:serviceaccount:x:y" cannot list', True),
]


@pytest.mark.parametrize(("line", "refused"), [c[1:] for c in LOG_LINES], ids=[c[0] for c in LOG_LINES])
def test_a_refusal_in_a_log_is_told_from_a_number_that_starts_with_403(line: str, refused: bool) -> None:
    assert bool(REFUSED.search(line)) is refused


def _assert_no_forbidden(proc: ManagedProcess) -> None:
    log = proc.log_path.read_text(errors="replace")
    bad = [line for line in log.splitlines() if REFUSED.search(line)]
    assert not bad, f"{proc.name} was refused by RBAC:\n" + "\n".join(bad[:20])


# ---------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def installed(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:  # noqa: F811
    helm = control_plane.binaries.helm
    release = f"e2e{uuid.uuid4().hex[:6]}"
    inst = Installed(cp=control_plane, helm=helm, release=release, namespace=f"{release}-system",
                     workdir=tmp_path_factory.mktemp("chart-e2e"), values=INSTALL_VALUES)
    inst.run_helm("install", release, str(CHART), "-n", inst.namespace, "--create-namespace",
                  *set_args(INSTALL_VALUES))
    # No controller-manager here: the namespace's default ServiceAccount (the helm test pod's).
    ensure_default_service_account(control_plane.api_client(), inst.namespace)
    try:
        yield inst
    finally:
        for proc in inst.processes:
            proc.stop()
        inst.run_helm("uninstall", release, "-n", inst.namespace, "--wait=false", check=False)


# ---------------------------------------------------------------------------- acceptance


@pytest.mark.parametrize(("label", "values"), DRY_RUN_VARIANTS, ids=[n for n, _ in DRY_RUN_VARIANTS])
def test_rendered_chart_is_accepted_by_server_side_dry_run(installed: Installed, label: str,
                                                           values: dict[str, Any]) -> None:
    text = installed.template(values, release=f"dry{label.replace('-', '')[:10]}")
    proc = installed.cp.kubectl("apply", "--dry-run=server", "-f", "-", input=text, check=False, timeout=120)
    assert proc.returncode == 0, f"{label}: the API server refused the chart:\n{proc.stderr}"
    created = [line for line in proc.stdout.splitlines() if "(server dry run)" in line]
    assert len(created) == len(Rendered(text).objects), proc.stdout


_STAND_IN_CRDS = [
    ("cert-manager.io", "Certificate", "certificates"),
    ("cert-manager.io", "Issuer", "issuers"),
    ("monitoring.coreos.com", "ServiceMonitor", "servicemonitors"),
]


@pytest.fixture(scope="module")
def third_party_kinds(installed: Installed, kube_api: Any) -> Iterator[None]:  # noqa: F811
    """cert-manager's and the Prometheus Operator's kinds for the dry-run: their real CRDs when
    the cluster has them, else permissive stand-ins (schema-less) made here and removed after."""
    ext = k8s.ApiextensionsV1Api(kube_api)
    made: list[str] = []
    for group, kind, plural in _STAND_IN_CRDS:
        name = f"{plural}.{group}"
        try:
            ext.read_custom_resource_definition(name)
            continue
        except k8s.ApiException as exc:
            if exc.status != 404:
                raise
        ext.create_custom_resource_definition({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": name, "labels": {"berth.dev/test-stand-in": "true"}},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": f"{kind}List"},
                     "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                         "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}})
        made.append(name)
    for name in made:
        wait_for(lambda n=name: ext.read_custom_resource_definition(n),
                 lambda crd: any(c.type == "Established" and c.status == "True"
                                 for c in (crd.status.conditions or [])),
                 timeout=30, what=f"CRD {name} established")
    try:
        yield
    finally:
        for name in made:
            ext.delete_custom_resource_definition(name)


@pytest.mark.parametrize(("label", "values"), [
    ("cert-manager", {"tls.certManager.enabled": True, "scheduler.enabled": True}),
    ("cert-manager-issuer", {"tls.certManager.enabled": True,
                             "tls.certManager.issuerRef": {"name": "platform-ca", "kind": "ClusterIssuer"}}),
    ("service-monitor", {"extender.serviceMonitor.enabled": True}),
], ids=["cert-manager", "cert-manager-issuer", "service-monitor"])
def test_optional_integrations_are_accepted_by_server_side_dry_run(installed: Installed, third_party_kinds: None,
                                                                   label: str, values: dict[str, Any]) -> None:
    text = installed.template(values, release=f"dry{label.replace('-', '')[:10]}")
    rendered = Rendered(text)
    proc = installed.cp.kubectl("apply", "--dry-run=server", "-f", "-", input=text, check=False, timeout=120)
    assert proc.returncode == 0, f"{label}: the API server refused the chart:\n{proc.stderr}"
    created = [line for line in proc.stdout.splitlines() if "(server dry run)" in line]
    assert len(created) == len(rendered.objects), proc.stdout


def test_install_created_every_object(installed: Installed, kube_api: Any) -> None:  # noqa: F811
    r = installed.manifest()
    fn, ns = installed.fullname, installed.namespace
    apps = k8s.AppsV1Api(kube_api)
    for name, replicas in ((f"{fn}-extender", 2), (f"{fn}-operator", 2), (f"{fn}-scheduler", 1)):
        assert apps.read_namespaced_deployment(name, ns).spec.replicas == replicas
    core = k8s.CoreV1Api(kube_api)
    for secret in ("ca", "extender-tls", "scheduler-client-tls", "webhook-tls"):
        assert core.read_namespaced_secret(f"{fn}-{secret}", ns).type == "kubernetes.io/tls"
    ext = k8s.ApiextensionsV1Api(kube_api)
    for crd in ("placementpolicies.berth.dev", "clusterkopfpeerings.kopf.dev"):
        conditions = {c.type: c.status for c in ext.read_custom_resource_definition(crd).status.conditions}
        assert conditions.get("Established") == "True", crd
    peering = k8s.CustomObjectsApi(kube_api).get_cluster_custom_object("kopf.dev", "v1", "clusterkopfpeerings",
                                                                       f"{fn}-operator")
    assert peering["metadata"]["name"] == f"{fn}-operator"
    assert r.find("ConfigMap", f"{fn}-scheduler")


def test_upgrade_keeps_the_certificates(installed: Installed, kube_api: Any) -> None:  # noqa: F811
    core = k8s.CoreV1Api(kube_api)
    names = [f"{installed.fullname}-{s}" for s in ("ca", "extender-tls", "scheduler-client-tls", "webhook-tls")]
    before = {n: core.read_namespaced_secret(n, installed.namespace).data for n in names}
    installed.run_helm("upgrade", installed.release, str(CHART), "-n", installed.namespace,
                       *set_args({**INSTALL_VALUES, "settings.logLevel": "DEBUG"}))
    after = {n: core.read_namespaced_secret(n, installed.namespace).data for n in names}
    assert after == before, "helm upgrade must keep the CA and the certificates it signed"
    # Leaves with less than tls.renewBeforeDays left are renewed by the next upgrade, signed by the
    # same CA (a renewal window longer than what the 90-day leaves have left stands for time passing).
    installed.run_helm("upgrade", installed.release, str(CHART), "-n", installed.namespace,
                       *set_args({**INSTALL_VALUES, "settings.logLevel": "DEBUG", "tls.renewBeforeDays": 90}))
    renewed = {n: core.read_namespaced_secret(n, installed.namespace) for n in names}
    assert renewed[names[0]].data == before[names[0]], "the CA is kept"
    for leaf in names[1:]:
        assert renewed[leaf].data["tls.crt"] != before[leaf]["tls.crt"], leaf
        assert renewed[leaf].data["ca.crt"] == before[leaf]["ca.crt"], leaf
        assert int(renewed[leaf].metadata.annotations["berth.dev/tls-expires"]) > time.time() + 89 * 86400
    env = _plain_env(_container(installed.manifest().get("Deployment", f"{installed.fullname}-extender")))
    assert env["BERTH_LOG_LEVEL"] == "DEBUG"


def test_existing_ca_secret_is_used(installed: Installed, tmp_path: Path) -> None:
    """tls.existingCASecret (the kind setup): the chart signs with a CA made beforehand."""
    subprocess.run([sys.executable, str(REPO_ROOT / "deploy" / "kind" / "pki.py"), str(tmp_path)], check=True,
                   capture_output=True, timeout=60)
    release = f"ca{uuid.uuid4().hex[:6]}"
    ns = f"{release}-system"
    installed.cp.kubectl("create", "namespace", ns)
    ensure_default_service_account(installed.cp.api_client(), ns)
    installed.cp.kubectl("-n", ns, "create", "secret", "tls", "my-ca", "--cert", str(tmp_path / "ca" / "tls.crt"),
                         "--key", str(tmp_path / "ca" / "tls.key"))
    installed.run_helm("install", release, str(CHART), "-n", ns, *set_args(
        {"tls.existingCASecret": "my-ca", "operator.enabled": False, "tests.enabled": False}))
    try:
        from cryptography import x509

        core = k8s.CoreV1Api(installed.cp.api_client())
        secret = core.read_namespaced_secret(f"{release}-berth-extender-tls", ns)
        ca = x509.load_pem_x509_certificate((tmp_path / "ca" / "tls.crt").read_bytes())
        server = x509.load_pem_x509_certificate(base64.b64decode(secret.data["tls.crt"]))
        assert server.issuer == ca.subject
        assert base64.b64decode(secret.data["ca.crt"]) == (tmp_path / "ca" / "tls.crt").read_bytes()
        with pytest.raises(k8s.ApiException):
            core.read_namespaced_secret(f"{release}-berth-ca", ns)  # the chart does not make its own
        missing = installed.run_helm("install", f"{release}x", str(CHART), "-n", ns, *set_args(
            {"tls.existingCASecret": "nope", "operator.enabled": False}), check=False)
        assert missing.returncode != 0 and "existingCASecret" in missing.stderr
    finally:
        installed.run_helm("uninstall", release, "-n", ns, "--wait=false", check=False)


# ---------------------------------------------------------------------------- RBAC


def _resource(group: str, resource: str) -> tuple[str, str | None]:
    base, _, sub = resource.partition("/")
    return (f"{base}.{group}" if group else base), (sub or None)


@pytest.mark.parametrize("component", ["extender", "operator"])
def test_service_accounts_may_do_exactly_what_their_component_uses(installed: Installed, component: str) -> None:
    sa = f"{installed.fullname}-{component}"
    if component == "extender":
        checks = [(rule, "default") for rule in expected.EXTENDER_CLUSTER | expected.EXTENDER_NOMINATE]
        checks += [(rule, expected.NODE_LEASES) for rule in expected.EXTENDER_NODE_LEASES]
        checks += [(rule, installed.namespace) for rule in expected.EXTENDER_NOMINATOR_ELECTION
                   | expected.nominator_lease(f"{installed.fullname}-extender-nominator")]
    else:
        checks = [(rule, "default") for rule in expected.OPERATOR_CLUSTER]
        checks += [(rule, None) for rule in expected.operator_peering(f"{installed.fullname}-operator")]
    cluster_scoped = {"nodes", "customresourcedefinitions", "clusterkopfpeerings"}
    refused = []
    for (group, resource, verb, name), namespace in checks:
        res, sub = _resource(group, resource)
        if name:
            res = f"{res}/{name}"
        ns = None if resource.split("/")[0] in cluster_scoped else namespace
        if not installed.can_i(sa, verb, res, ns, sub):
            refused.append(f"{verb} {res} {sub or ''} in {ns or 'the cluster'}")
    assert not refused, f"{sa} is refused what {component} uses:\n" + "\n".join(refused)
    allowed = [f"{verb} {res} in {ns or 'the cluster'}" for verb, res, ns in expected.FORBIDDEN[component]
               if installed.can_i(sa, verb, res, ns or None)]
    assert not allowed, f"{sa} may do more than {component} uses:\n" + "\n".join(allowed)
    if component == "extender":  # the Lease that elects the replica that nominates, and no other
        other = f"leases.coordination.k8s.io/{installed.fullname}-scheduler"
        assert not installed.can_i(sa, "update", other, installed.namespace), f"{sa} may update {other}"


def test_scheduler_service_account(installed: Installed) -> None:
    sa = f"{installed.fullname}-scheduler"
    lease = f"leases.coordination.k8s.io/{installed.fullname}-scheduler"
    for verb, res, ns, sub in [
        ("create", "pods", "default", "binding"), ("list", "nodes", None, None), ("watch", "pods", "default", None),
        ("create", "leases.coordination.k8s.io", installed.namespace, None),
        ("get", lease, installed.namespace, None), ("update", lease, installed.namespace, None),
        ("list", "persistentvolumeclaims", "default", None), ("create", "events.events.k8s.io", "default", None),
        ("get", "configmaps/extension-apiserver-authentication", "kube-system", None),
    ]:
        assert installed.can_i(sa, verb, res, ns, sub), f"{sa}: {verb} {res} {sub or ''} in {ns}"
    for verb, res, ns in expected.FORBIDDEN["scheduler"]:
        assert not installed.can_i(sa, verb, res, ns or None), f"{sa} may {verb} {res}"


# ---------------------------------------------------------------------------- components under their accounts


def test_extender_rbac_is_enough_for_what_it_does(installed: Installed, make_nodes: Any,  # noqa: F811
                                                  e2e_namespace: str, kube_api: Any) -> None:  # noqa: F811
    """`berth extender` under the chart's extender ServiceAccount with the chart's environment
    (plain HTTP on 127.0.0.1 with the development flag): its watches list everything
    (/readyz), and filter + bind get, patch and bind the pod and post its Event."""
    deploy = installed.manifest().get("Deployment", f"{installed.fullname}-extender")
    port = free_port()
    plain = {k: v for k, v in _plain_env(_container(deploy)).items()
             if not k.startswith("BERTH_TLS_") and k != "BERTH_API_PORT"}  # plain HTTP, one port
    env = {**plain,
           "KUBECONFIG": str(installed.sa_kubeconfig(f"{installed.fullname}-extender")),
           "POD_NAME": "e2e-extender-rbac", "POD_NAMESPACE": installed.namespace, "HOME": str(installed.workdir)}
    proc = ManagedProcess("berth-extender-rbac", [_berth_bin(), "extender", "--host", "127.0.0.1", "--port", str(port),
                                                   "--dev-insecure"],
                          installed.workdir / "logs" / "extender-rbac.log", env=env).start()
    installed.processes.append(proc)
    base = f"http://127.0.0.1:{port}"

    def get(path: str) -> str:
        with urllib.request.urlopen(base + path, timeout=5) as resp:
            return str(resp.read().decode())

    def post(path: str, body: Any) -> Any:
        req = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read())

    try:
        proc.wait_until(lambda: get("/readyz") is not None, timeout=60, what="ready (every watch listed)")
        [node] = make_nodes(NodeSpec(name=f"rbac-{uuid.uuid4().hex[:6]}"))
        core = k8s.CoreV1Api(kube_api)
        # A policy selects the pod (pods no policy selects pass through: no decision to record).
        _policy(kube_api, e2e_namespace, "rbac")
        pod = core.create_namespaced_pod(e2e_namespace, simple_pod("rbac-placed", scheduler_name="nobody",
                                                                   labels={"app": "rbac"}))
        # the extender's own token as the caller: the explain API's TokenReview and SubjectAccessReview
        # run under the chart's ClusterRole too
        _wait_until_seen(port, node, e2e_namespace, "rbac", installed.token(f"{installed.fullname}-extender"))
        result = post("/filter", {"Pod": kube_api.sanitize_for_serialization(pod), "NodeNames": [node]})
        assert node in (result.get("NodeNames") or []), result
        bound = post("/bind", {"PodName": "rbac-placed", "PodNamespace": e2e_namespace,
                               "PodUID": pod.metadata.uid, "Node": node})
        assert not bound.get("Error"), bound
        placed = wait_for(lambda: core.read_namespaced_pod("rbac-placed", e2e_namespace),
                          lambda p: p.spec.node_name == node, timeout=30, what="the pod bound (pods/binding)")
        assert "berth.dev/decision" in (placed.metadata.annotations or {}), "the decision annotation (patch pods)"
        wait_for(lambda: core.list_namespaced_event(e2e_namespace).items,
                 lambda items: any(e.involved_object.name == "rbac-placed" for e in items),
                 timeout=30, what="the Event on the pod (create events)")
        # one replica nominates: this one, or the chart's other extender of this module, holds the Lease
        lease = wait_for(lambda: k8s.CoordinationV1Api(kube_api).read_namespaced_lease(
            f"{installed.fullname}-extender-nominator", installed.namespace),
            lambda found: bool(found.spec.holder_identity), timeout=30, what="the nominator's Lease held")
        assert lease.spec.holder_identity in ("e2e-extender-rbac", "e2e-extender")
        _assert_no_forbidden(proc)
    finally:
        proc.stop()


def installed_api_port(installed: Installed) -> int:
    deploy = installed.manifest().get("Deployment", f"{installed.fullname}-extender")
    return int(next(p["containerPort"] for p in _container(deploy)["ports"] if p["name"] == "api"))


def _extender_lacks_tls() -> str | None:
    """None if the extender has the settings the chart's TLS environment sets, else what it lacks."""
    from berth.extender.settings import ExtenderSettings

    need = ("tls_cert_file", "tls_key_file", "tls_client_ca_file", "api_port")
    missing = [f"BERTH_{f.upper()}" for f in need if f not in ExtenderSettings.model_fields]
    return ", ".join(missing) or None


@pytest.fixture(scope="module")
def extender(installed: Installed) -> Iterator[dict[str, Any]]:
    """`berth extender` with the chart's arguments and environment, under its ServiceAccount, on
    127.0.0.1 (the webhook port with the chart's certificates, the API port in plain HTTP)."""
    lacking = _extender_lacks_tls()
    assert lacking is None, f"the extender has no settings {lacking}: the chart's TLS would not apply"
    deploy = installed.manifest().get("Deployment", f"{installed.fullname}-extender")
    c = _container(deploy)
    tls = installed.secret_files(f"{installed.fullname}-extender-tls", installed.workdir / "extender-tls")
    client = installed.secret_files(f"{installed.fullname}-scheduler-client-tls", installed.workdir / "client-tls")
    webhook_port, api_port = free_port(), free_port()
    args = []
    for arg in c["args"]:
        if arg.startswith("--host="):
            arg = "--host=127.0.0.1"
        elif arg.startswith("--port="):
            arg = f"--port={webhook_port}"
        args.append(arg)
    chart_env = _plain_env(c)
    assert chart_env["BERTH_API_PORT"] == str(installed_api_port(installed))
    env = {**{k: v.replace("/etc/berth/tls", str(tls)) for k, v in chart_env.items()},
           "BERTH_API_PORT": str(api_port),
           "KUBECONFIG": str(installed.sa_kubeconfig(f"{installed.fullname}-extender")),
           "POD_NAME": "e2e-extender", "POD_NAMESPACE": installed.namespace, "HOME": str(installed.workdir)}
    proc = ManagedProcess("berth-extender", [_berth_bin(), *args], installed.workdir / "logs" / "extender.log",
                          env=env).start()
    installed.processes.append(proc)

    def ready() -> bool:
        with urllib.request.urlopen(f"http://127.0.0.1:{api_port}/readyz", timeout=2) as resp:
            return bool(resp.status == 200)

    proc.wait_until(ready, timeout=60, what="ready (/readyz on the API port)")
    yield {"proc": proc, "webhook_port": webhook_port, "api_port": api_port, "tls": tls, "client": client,
           "server_name": f"{installed.fullname}-extender.{installed.namespace}.svc"}
    proc.stop()


def test_extender_binds_under_its_service_account(installed: Installed, extender: dict[str, Any],
                                                   make_nodes: Any, e2e_namespace: str,  # noqa: F811
                                                   kube_api: Any) -> None:  # noqa: F811
    [node] = make_nodes(NodeSpec(name=f"chart-{uuid.uuid4().hex[:6]}"))
    core = k8s.CoreV1Api(kube_api)
    _policy(kube_api, e2e_namespace, "placed")
    pod = core.create_namespaced_pod(e2e_namespace, simple_pod("placed", scheduler_name="nobody",
                                                               labels={"app": "placed"}))
    pod_dict = kube_api.sanitize_for_serialization(pod)
    _wait_until_seen(extender["api_port"], node, e2e_namespace, "placed",
                     installed.token(f"{installed.fullname}-extender"))

    mutual = _mtls_context(extender["client"], client_cert=True)
    port, name = extender["webhook_port"], extender["server_name"]
    result = _post(port, "/filter", {"Pod": pod_dict, "NodeNames": [node]}, mutual, name)
    assert node in (result.get("NodeNames") or []), result
    bound = _post(port, "/bind", {"PodName": "placed", "PodNamespace": e2e_namespace,
                                  "PodUID": pod.metadata.uid, "Node": node}, mutual, name)
    assert not bound.get("Error"), bound
    placed = wait_for(lambda: core.read_namespaced_pod("placed", e2e_namespace), lambda p: p.spec.node_name == node,
                      timeout=30, what="the pod bound by the extender")
    assert "berth.dev/decision" in (placed.metadata.annotations or {}), "bind records the decision (patch pods)"
    events = wait_for(lambda: core.list_namespaced_event(e2e_namespace).items,
                      lambda items: any(e.involved_object.name == "placed" for e in items),
                      timeout=30, what="the extender's Event on the pod (create events)")
    assert events
    _assert_no_forbidden(extender["proc"])


def test_extender_webhook_port_requires_the_client_certificate(extender: dict[str, Any]) -> None:
    anonymous = _mtls_context(extender["client"], client_cert=False)
    with pytest.raises((ssl.SSLError, ConnectionError, OSError, AssertionError)):
        _post(extender["webhook_port"], "/filter", {"Pod": {}, "NodeNames": []}, anonymous,
              extender["server_name"])
    # The API port serves the read-only API and never the scheduler's verbs.
    req = urllib.request.Request(f"http://127.0.0.1:{extender['api_port']}/bind", data=b"{}", method="POST",
                                 headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=5)
    assert err.value.code in (404, 405)


def test_second_scheduler_runs_under_its_service_account(installed: Installed, extender: dict[str, Any],
                                                         start_scheduler_fn: Any, make_nodes: Any,  # noqa: F811
                                                         e2e_namespace: str, kube_api: Any) -> None:  # noqa: F811
    """The chart's KubeSchedulerConfiguration, run by the real kube-scheduler under the chart's
    scheduler ServiceAccount: it wins its leader-election Lease in the release namespace, and a
    pod with schedulerName berth-scheduler is bound through the extender."""
    r = installed.manifest()
    config = yaml.safe_load(r.get("ConfigMap", f"{installed.fullname}-scheduler")["data"]["config.yaml"])
    client = extender["client"]
    [ext] = config["extenders"]
    ext["urlPrefix"] = f"https://127.0.0.1:{extender['webhook_port']}"
    for key, fname in (("certFile", "tls.crt"), ("keyFile", "tls.key"), ("caFile", "ca.crt")):
        assert ext["tlsConfig"][key] == f"/etc/berth/tls/{fname}"
        ext["tlsConfig"][key] = str(client / fname)
    config["clientConnection"]["kubeconfig"] = str(installed.sa_kubeconfig(f"{installed.fullname}-scheduler"))
    sched = start_scheduler_fn(config, name=f"{installed.release}-scheduler")
    coord = k8s.CoordinationV1Api(kube_api)
    lease = wait_for(lambda: coord.read_namespaced_lease(f"{installed.fullname}-scheduler", installed.namespace),
                     lambda lease_: bool(lease_.spec.holder_identity), timeout=60,
                     what="the scheduler's leader-election Lease")
    assert lease.spec.holder_identity

    [node] = make_nodes(NodeSpec(name=f"chart-{uuid.uuid4().hex[:6]}"))
    core = k8s.CoreV1Api(kube_api)
    _policy(kube_api, e2e_namespace, "via")
    _wait_until_seen(extender["api_port"], node, e2e_namespace, "via",
                     installed.token(f"{installed.fullname}-extender"))
    core.create_namespaced_pod(e2e_namespace, simple_pod("via-scheduler", scheduler_name="berth-scheduler",
                                                         labels={"app": "via"},
                                                         node_selector={"kubernetes.io/hostname": node}))
    placed = wait_for(lambda: core.read_namespaced_pod("via-scheduler", e2e_namespace),
                      lambda p: p.spec.node_name == node, timeout=60, what="the pod bound through berth")
    assert "berth.dev/decision" in (placed.metadata.annotations or {})
    log = sched.log_path.read_text(errors="replace")
    assert "is forbidden" not in log, "kube-scheduler was refused by RBAC"


class _StandIn:
    """A stand-in extender on 127.0.0.1 that serves with the chart's extender certificate and
    requires a client certificate from the chart's CA (as berth does): filter passes every node,
    prioritize is neutral, bind creates the Binding with admin rights. It records the client
    certificates' common names."""

    def __init__(self, tls: Path, api: Any) -> None:
        import http.server
        import threading

        seen: list[str] = []
        core = k8s.CoreV1Api(api)

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                peer = self.connection.getpeercert() or {}  # type: ignore[attr-defined]
                seen.extend(v for rdn in peer.get("subject", ()) for k, v in rdn if k == "commonName")
                args = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if self.path == "/filter":
                    out: Any = {"NodeNames": args.get("NodeNames"), "FailedNodes": {}, "Error": ""}
                elif self.path == "/prioritize":
                    out = [{"Host": n, "Score": 0} for n in args.get("NodeNames") or []]
                elif self.path == "/bind":
                    core.create_namespaced_pod_binding(args["PodName"], args["PodNamespace"], {
                        "apiVersion": "v1", "kind": "Binding",
                        "metadata": {"name": args["PodName"], "namespace": args["PodNamespace"]},
                        "target": {"apiVersion": "v1", "kind": "Node", "name": args["Node"]}},
                        _preload_content=False)
                    out = {"Error": ""}
                else:
                    out = {"NodeNameToMetaVictims": args.get("NodeNameToMetaVictims")}
                body = json.dumps(out).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a: Any) -> None:
                pass

        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(tls / "tls.crt", tls / "tls.key")
        ctx.load_verify_locations(tls / "ca.crt")
        ctx.verify_mode = ssl.CERT_REQUIRED
        self.port = free_port()
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.seen = seen
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_second_scheduler_config_with_the_charts_certificates(installed: Installed, start_scheduler_fn: Any,
                                                              make_nodes: Any, e2e_namespace: str,  # noqa: F811
                                                              kube_api: Any) -> None:  # noqa: F811
    """The chart's KubeSchedulerConfiguration run by the real kube-scheduler under the chart's
    scheduler ServiceAccount (only the extender's address changed): the configuration loads, the
    scheduler wins its leader-election Lease in the release namespace, and it calls an extender
    that requires the chart's client certificate (a stand-in here, so this holds whatever berth's
    extender does), which binds a pod with schedulerName berth-scheduler."""
    fn, ns = installed.fullname, installed.namespace
    r = installed.manifest()
    config = yaml.safe_load(r.get("ConfigMap", f"{fn}-scheduler")["data"]["config.yaml"])
    server_tls = installed.secret_files(f"{fn}-extender-tls", installed.workdir / "standin-tls")
    client = installed.secret_files(f"{fn}-scheduler-client-tls", installed.workdir / "sched-client-tls")
    stand_in = _StandIn(server_tls, kube_api)
    try:
        [ext] = config["extenders"]
        ext["urlPrefix"] = f"https://127.0.0.1:{stand_in.port}"
        for key, fname in (("certFile", "tls.crt"), ("keyFile", "tls.key"), ("caFile", "ca.crt")):
            assert ext["tlsConfig"][key] == f"/etc/berth/tls/{fname}"  # where the Deployment mounts the Secret
            ext["tlsConfig"][key] = str(client / fname)
        assert ext["tlsConfig"]["serverName"] == f"{fn}-extender.{ns}.svc"
        config["clientConnection"]["kubeconfig"] = str(installed.sa_kubeconfig(f"{fn}-scheduler"))
        sched = start_scheduler_fn(config, name=f"{installed.release}-scheduler")
        coord = k8s.CoordinationV1Api(kube_api)
        wait_for(lambda: coord.read_namespaced_lease(f"{fn}-scheduler", ns),
                 lambda lease: bool(lease.spec.holder_identity), timeout=60,
                 what="the scheduler's leader-election Lease in the release namespace")
        [node] = make_nodes(NodeSpec(name=f"chart-{uuid.uuid4().hex[:6]}"))
        core = k8s.CoreV1Api(kube_api)
        core.create_namespaced_pod(e2e_namespace, simple_pod("via-standin", scheduler_name="berth-scheduler",
                                                             node_selector={"kubernetes.io/hostname": node}))
        wait_for(lambda: core.read_namespaced_pod("via-standin", e2e_namespace), lambda p: p.spec.node_name == node,
                 timeout=60, what="the pod bound through the extender")
        assert "berth-scheduler-client" in stand_in.seen, "kube-scheduler presented the chart's client certificate"
        log = sched.log_path.read_text(errors="replace")
        assert "is forbidden" not in log, "kube-scheduler was refused by RBAC"
        sched.stop()
    finally:
        stand_in.stop()


@pytest.fixture
def start_scheduler_fn(control_plane: ControlPlane) -> Iterator[Any]:  # noqa: F811
    started: list[Any] = []

    def start(config: Any, **kw: Any) -> Any:
        s = control_plane.start_scheduler(config, **kw)
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()


def test_operator_runs_under_its_service_account(installed: Installed, e2e_namespace: str,  # noqa: F811
                                                 kube_api: Any) -> None:  # noqa: F811
    """`berth operator` with the chart's arguments (webhook on, peering on), under its
    ServiceAccount: it keeps a policy's status, and serves the admission webhook with the chart's
    certificate."""
    text = installed.template({**INSTALL_VALUES, "operator.webhook.enabled": True})
    deploy = Rendered(text).get("Deployment", f"{installed.fullname}-operator")
    c = _container(deploy)
    webhook = installed.secret_files(f"{installed.fullname}-webhook-tls", installed.workdir / "webhook-tls")
    webhook_port, health_port = free_port(), free_port()
    args = []
    for arg in c["args"][1:]:
        if arg.startswith("--webhook-port="):
            arg = f"--webhook-port={webhook_port}"
        elif arg.startswith("--liveness="):
            arg = f"--liveness=http://127.0.0.1:{health_port}/healthz"
        args.append(arg.replace("/etc/berth/webhook", str(webhook)))
    args.append("--webhook-listen=127.0.0.1")
    assert f"--peering={installed.fullname}-operator" in args
    env = {**_plain_env(c), "KUBECONFIG": str(installed.sa_kubeconfig(f"{installed.fullname}-operator")),
           "POD_ID": "e2e-operator", "HOME": str(installed.workdir)}
    proc = ManagedProcess("berth-operator", [_berth_bin(), "operator", *args],
                          installed.workdir / "logs" / "operator.log", env=env).start()
    installed.processes.append(proc)
    try:
        def healthy() -> bool:
            with urllib.request.urlopen(f"http://127.0.0.1:{health_port}/healthz", timeout=2) as resp:
                return bool(resp.status == 200)

        proc.wait_until(healthy, timeout=90, what="healthy")
        custom = k8s.CustomObjectsApi(kube_api)
        custom.create_namespaced_custom_object("berth.dev", "v1alpha1", e2e_namespace, "placementpolicies", {
            "apiVersion": "berth.dev/v1alpha1", "kind": "PlacementPolicy",
            "metadata": {"name": "web", "namespace": e2e_namespace},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "strategy": "Spread"}})
        policy = wait_for(
            lambda: custom.get_namespaced_custom_object("berth.dev", "v1alpha1", e2e_namespace,
                                                        "placementpolicies", "web"),
            lambda p: any(cond.get("type") == "Valid" and cond.get("status") == "True"
                          for cond in (p.get("status") or {}).get("conditions", [])),
            timeout=60, what="the operator to write the policy's status (Valid=True)")
        assert policy["status"]["conditions"]

        # The webhook serves with the chart's certificate, valid for the Service's name, and
        # refuses what the CRD's schema cannot (keys duplicated after trimming).
        bad = yaml.safe_load((REPO_ROOT / "examples" / "invalid" / "labels-duplicate-after-trim.yaml").read_text())
        bad["metadata"]["namespace"] = e2e_namespace
        review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": str(uuid.uuid4()), "operation": "CREATE",
            "kind": {"group": "berth.dev", "version": "v1alpha1", "kind": "PlacementPolicy"},
            "resource": {"group": "berth.dev", "version": "v1alpha1", "resource": "placementpolicies"},
            "namespace": e2e_namespace, "name": "bad", "userInfo": {"username": "e2e"},
            "object": bad}}
        ctx = ssl.create_default_context(cafile=str(webhook / "ca.crt"))
        deadline = time.monotonic() + 30
        while True:
            try:
                answer = _post(webhook_port, "/validate-placementpolicy", review, ctx,
                               f"{installed.fullname}-webhook.{installed.namespace}.svc")
                break
            except (ConnectionError, OSError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        assert answer["response"]["allowed"] is False, answer
        assert "duplicate" in json.dumps(answer["response"]), answer

        # NodeDrains, under the same ServiceAccount: planned into their status (this one names no
        # node the cluster has: Invalid), and judged by the webhook on their own path.
        drain_name = f"e2e-{e2e_namespace}"
        custom.create_cluster_custom_object("berth.dev", "v1alpha1", "nodedrains", {
            "apiVersion": "berth.dev/v1alpha1", "kind": "NodeDrain", "metadata": {"name": drain_name},
            "spec": {"nodes": [f"{drain_name}-absent"], "anyDestination": True}})
        try:
            drained = wait_for(
                lambda: custom.get_cluster_custom_object("berth.dev", "v1alpha1", "nodedrains", drain_name),
                lambda d: (d.get("status") or {}).get("phase") == "Invalid",
                timeout=60, what="the operator to plan the NodeDrain (phase Invalid)")
            assert f"unknown node '{drain_name}-absent'" in json.dumps(drained["status"]["conditions"])
        finally:
            custom.delete_cluster_custom_object("berth.dev", "v1alpha1", "nodedrains", drain_name)
        drain_review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": str(uuid.uuid4()), "operation": "CREATE",
            "kind": {"group": "berth.dev", "version": "v1alpha1", "kind": "NodeDrain"},
            "resource": {"group": "berth.dev", "version": "v1alpha1", "resource": "nodedrains"},
            "name": "bad", "userInfo": {"username": "e2e"},
            "object": {"apiVersion": "berth.dev/v1alpha1", "kind": "NodeDrain", "metadata": {"name": "bad"},
                       "spec": {"nodes": ["n1"], "destinations": ["n1"]}}}}
        answer = _post(webhook_port, "/validate-nodedrain", drain_review, ctx,
                       f"{installed.fullname}-webhook.{installed.namespace}.svc")
        assert answer["response"]["allowed"] is False, answer
        assert "a drained node is never a destination" in json.dumps(answer["response"]), answer
        _assert_no_forbidden(proc)
    finally:
        proc.stop()
