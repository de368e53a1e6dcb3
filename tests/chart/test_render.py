"""`helm lint` and `helm template` of charts/berth with default and non-default values: the
objects rendered, their RBAC (exactly the expected verbs), probes, security contexts, TLS
material and the second scheduler's KubeSchedulerConfiguration.

Server-side acceptance (a real API server) is in tests/e2e/test_chart_e2e.py.
"""

from __future__ import annotations

import base64
import datetime
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID

from . import expected
from .helm import CHART, REPO_ROOT, Rendered, render, require_helm, rules_of, run_helm, template

NS = "berth-system"
SCHEDULER_ON: dict[str, Any] = {"scheduler.enabled": True}
NON_DEFAULTS: list[tuple[str, dict[str, Any]]] = [
    ("scheduler", SCHEDULER_ON),
    ("cert-manager", {"tls.certManager.enabled": True, "scheduler.enabled": True}),
    ("cert-manager-issuer", {"tls.certManager.enabled": True,
                             "tls.certManager.issuerRef": {"name": "platform-ca", "kind": "ClusterIssuer"}}),
    ("service-monitor", {"extender.serviceMonitor.enabled": True}),
    ("replicas-2", {"extender.replicas": 2, "operator.replicas": 2, "scheduler.enabled": True,
                    "scheduler.replicas": 2}),
    ("placement-reader", {"placementReader.enabled": True}),
    ("minimal", {"extender.replicas": 1, "operator.enabled": False, "extender.networkPolicy.enabled": False,
                 "tests.enabled": False}),
]


@pytest.fixture(scope="module")
def helm() -> Path:
    return require_helm()


@pytest.fixture(scope="module")
def default(helm: Path) -> Rendered:
    return render(helm)


@pytest.fixture(scope="module")
def with_scheduler(helm: Path) -> Rendered:
    return render(helm, SCHEDULER_ON)


def _container(deploy: dict[str, Any], name: str | None = None) -> dict[str, Any]:
    containers = deploy["spec"]["template"]["spec"]["containers"]
    return containers[0] if name is None else next(c for c in containers if c["name"] == name)


def _cert(secret: dict[str, Any], key: str = "tls.crt") -> x509.Certificate:
    return x509.load_pem_x509_certificate(base64.b64decode(secret["data"][key]))


def _signed_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    public = ca.public_key()
    try:
        if isinstance(public, rsa.RSAPublicKey):
            assert cert.signature_hash_algorithm is not None
            public.verify(cert.signature, cert.tbs_certificate_bytes, padding.PKCS1v15(),
                          cert.signature_hash_algorithm)
        elif isinstance(public, ec.EllipticCurvePublicKey):
            assert cert.signature_hash_algorithm is not None
            public.verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(cert.signature_hash_algorithm))
        else:
            return False
    except Exception:
        return False
    return cert.issuer == ca.subject


# ---------------------------------------------------------------------------- lint


def test_helm_lint_default(helm: Path) -> None:
    out = run_helm(helm, "lint", str(CHART), "--strict", "--namespace", NS)
    assert "0 chart(s) failed" in out.stdout + out.stderr


@pytest.mark.parametrize(("label", "values"), NON_DEFAULTS, ids=[n for n, _ in NON_DEFAULTS])
def test_helm_lint_non_default(helm: Path, label: str, values: dict[str, Any]) -> None:
    from .helm import set_args

    out = run_helm(helm, "lint", str(CHART), "--strict", "--namespace", NS, *set_args(values))
    assert "0 chart(s) failed" in out.stdout + out.stderr, label


@pytest.mark.parametrize(("label", "values"), NON_DEFAULTS, ids=[n for n, _ in NON_DEFAULTS])
def test_every_object_is_namespaced_or_cluster_scoped_as_expected(helm: Path, label: str,
                                                                  values: dict[str, Any]) -> None:
    cluster_scoped = {"ClusterRole", "ClusterRoleBinding", "ValidatingWebhookConfiguration",
                      "CustomResourceDefinition", "ClusterKopfPeering"}
    r = render(helm, values)
    for obj in r.objects:
        labels = obj["metadata"].get("labels") or {}
        assert labels.get("app.kubernetes.io/instance") == "berth", f"{obj['kind']}/{obj['metadata']['name']}"
        if obj["kind"] in cluster_scoped:
            assert "namespace" not in obj["metadata"]
        else:
            assert obj["metadata"].get("namespace") in (NS, "kube-node-lease", "kube-system"), obj["metadata"]


# ---------------------------------------------------------------------------- defaults


def test_default_objects(default: Rendered) -> None:
    assert default.names("Deployment") == {"berth-extender", "berth-operator"}
    assert default.names("Service") == {"berth-extender", "berth-webhook"}
    assert default.names("ServiceAccount") == {"berth-extender", "berth-operator"}
    assert default.names("ClusterRole") == {"berth-extender", "berth-operator"}
    assert default.names("Role") == {"berth-extender-node-leases", "berth-extender-nominator-lease"}
    assert default.names("Secret") == {"berth-ca", "berth-extender-tls", "berth-scheduler-client-tls",
                                       "berth-webhook-tls"}
    assert default.names("PodDisruptionBudget") == {"berth-extender"}
    assert default.names("NetworkPolicy") == {"berth-extender", "berth-operator"}
    assert default.names("ValidatingWebhookConfiguration") == {"berth-webhook"}
    assert default.names("Pod") == {"berth-test-extender"}  # the helm test hook
    for kind in ("ConfigMap", "ServiceMonitor", "Certificate", "Issuer", "ClusterKopfPeering"):
        assert not default.all(kind), kind
    assert not default.find("Deployment", "berth-scheduler")


def test_extender_deployment(default: Rendered) -> None:
    deploy = default.get("Deployment", "berth-extender")
    spec = deploy["spec"]
    assert spec["replicas"] == 2
    assert spec["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    pod = spec["template"]["spec"]
    assert pod["serviceAccountName"] == "berth-extender"
    c = _container(deploy)
    assert c["image"] == "berth:0.1.0"
    assert c["args"][0] == "extender"
    args = c["args"]
    assert args == ["extender", "--host=0.0.0.0", "--port=8443"]
    tls_env = {e["name"]: e.get("value") for e in c["env"]}
    assert tls_env["BERTH_TLS_CERT_FILE"] == "/etc/berth/tls/tls.crt"
    assert tls_env["BERTH_TLS_KEY_FILE"] == "/etc/berth/tls/tls.key"
    assert tls_env["BERTH_TLS_CLIENT_CA_FILE"] == "/etc/berth/tls/ca.crt"  # client certificates required
    assert tls_env["BERTH_TLS_CLIENT_NAMES"] == "berth-scheduler-client"  # ... and only kube-scheduler's
    assert tls_env["BERTH_API_ANONYMOUS"] == "false"  # the explain API checks each caller's own rights
    assert tls_env["BERTH_API_PORT"] == "8080"
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"webhook": 8443, "api": 8080}
    # Probes on the plain API port: the webhook port requires a client certificate.
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "api"}
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "api"}
    assert c["startupProbe"]["httpGet"]["port"] == "api"
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["BERTH_CPU_OVERCOMMIT_PERCENT"] == "100"
    assert env["BERTH_MEMORY_OVERCOMMIT_PERCENT"] == "100"
    assert env["BERTH_MIN_FREE_DISK_PERCENT"] == "10"
    assert env["BERTH_REJECT_UNKNOWN_CAPACITY"] == "false"
    assert env["BERTH_LIVENESS_THRESHOLD_SECONDS"] == "40"
    assert env["BERTH_SLEEPY_MEMORY_FACTOR"] == "2"
    assert env["BERTH_ROUND_TIMEOUT_SECONDS"] == "120"
    assert env["BERTH_DEFAULT_STRATEGY"] == ""
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    assert mounts["tls"]["mountPath"] == "/etc/berth/tls" and mounts["tls"]["readOnly"] is True
    assert mounts["tmp"]["mountPath"] == "/tmp"
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == "berth-extender-tls"
    assert "emptyDir" in volumes["tmp"]
    # Spread across nodes and zones.
    anti = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
    assert anti["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert anti["podAffinityTerm"]["labelSelector"]["matchLabels"]["app.kubernetes.io/component"] == "extender"
    tsc = pod["topologySpreadConstraints"][0]
    assert tsc["topologyKey"] == "topology.kubernetes.io/zone"
    assert tsc["labelSelector"]["matchLabels"] == spec["selector"]["matchLabels"]


def test_extender_settings_values_reach_the_env(helm: Path) -> None:
    r = render(helm, {"settings.cpuOvercommitPercent": 150, "settings.defaultStrategy": "Balanced",
                      "settings.rejectUnknownCapacity": True, "settings.livenessThresholdSeconds": 60.5,
                      "settings.roundTimeoutSeconds": 300})
    env = {e["name"]: e.get("value") for e in _container(r.get("Deployment", "berth-extender"))["env"]}
    assert env["BERTH_CPU_OVERCOMMIT_PERCENT"] == "150"
    assert env["BERTH_DEFAULT_STRATEGY"] == "Balanced"
    assert env["BERTH_REJECT_UNKNOWN_CAPACITY"] == "true"
    assert env["BERTH_LIVENESS_THRESHOLD_SECONDS"] == "60.5"
    op_env = {e["name"]: e.get("value") for e in _container(r.get("Deployment", "berth-operator"))["env"]}
    assert op_env["BERTH_CPU_OVERCOMMIT_PERCENT"] == "150"
    assert env["BERTH_ROUND_TIMEOUT_SECONDS"] == op_env["BERTH_ROUND_TIMEOUT_SECONDS"] == "300"


@pytest.mark.parametrize(("label", "values"), [("default", {}), *NON_DEFAULTS],
                         ids=["default", *[n for n, _ in NON_DEFAULTS]])
def test_security_contexts(helm: Path, label: str, values: dict[str, Any]) -> None:
    r = render(helm, values)
    pods = [(d["metadata"]["name"], d["spec"]["template"]["spec"]) for d in r.all("Deployment")]
    pods += [(p["metadata"]["name"], p["spec"]) for p in r.all("Pod")]
    assert pods
    for name, pod in pods:
        psc = pod["securityContext"]
        assert psc["runAsNonRoot"] is True, name
        assert psc["runAsUser"] != 0, name
        assert psc["seccompProfile"]["type"] == "RuntimeDefault", name
        for c in pod["containers"]:
            sc = c["securityContext"]
            assert sc["readOnlyRootFilesystem"] is True, name
            assert sc["allowPrivilegeEscalation"] is False, name
            assert sc["capabilities"]["drop"] == ["ALL"], name
            tmp = [m for m in c.get("volumeMounts", []) if m["mountPath"] == "/tmp"]
            assert tmp, f"{name}: /tmp must be an emptyDir under a read-only root"
        assert not pod.get("hostNetwork"), name


def test_extender_rbac_is_exactly_what_it_uses(default: Rendered) -> None:
    # the default profile, nominate, patches pods/status
    rules = expected.EXTENDER_CLUSTER | expected.EXTENDER_NOMINATE
    assert rules_of(default.get("ClusterRole", "berth-extender")) == rules
    role = default.get("Role", "berth-extender-node-leases")
    assert role["metadata"]["namespace"] == expected.NODE_LEASES
    assert rules_of(role) == expected.EXTENDER_NODE_LEASES
    binding = default.get("RoleBinding", "berth-extender-node-leases")
    assert binding["metadata"]["namespace"] == expected.NODE_LEASES
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "berth-extender", "namespace": NS}]
    crb = default.get("ClusterRoleBinding", "berth-extender")
    assert crb["roleRef"]["name"] == "berth-extender"
    assert crb["subjects"] == [{"kind": "ServiceAccount", "name": "berth-extender", "namespace": NS}]


NOMINATE_RBAC = [
    # (name, values, the extender's cluster rules)
    ("throughput: no pods/status", {"scheduler.profile": "throughput"}, expected.EXTENDER_CLUSTER),
    ("full: no pods/status", {"scheduler.profile": "full"}, expected.EXTENDER_CLUSTER),
    ("nominate: patch pods/status", {"scheduler.profile": "nominate"},
     expected.EXTENDER_CLUSTER | expected.EXTENDER_NOMINATE),
]


@pytest.mark.parametrize(("values", "rules"), [c[1:] for c in NOMINATE_RBAC], ids=[c[0] for c in NOMINATE_RBAC])
def test_extender_may_patch_pod_status_only_when_it_nominates(helm: Path, values: dict[str, Any],
                                                              rules: set[tuple[str, str, str, str]]) -> None:
    assert rules_of(render(helm, values).get("ClusterRole", "berth-extender")) == rules


@pytest.mark.parametrize(("values", "rules"), [c[1:] for c in NOMINATE_RBAC], ids=[c[0] for c in NOMINATE_RBAC])
def test_extender_may_hold_the_nominator_lease_only_when_it_nominates(helm: Path, values: dict[str, Any],
                                                                      rules: set[tuple[str, str, str, str]]) -> None:
    r = render(helm, values)
    role = r.find("Role", "berth-extender-nominator-lease")
    binding = r.find("RoleBinding", "berth-extender-nominator-lease")
    env = {e["name"]: e.get("value") for e in _container(r.get("Deployment", "berth-extender"))["env"]}
    if rules >= expected.EXTENDER_NOMINATE:
        assert role is not None and binding is not None
        assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == NS
        assert rules_of(role) == (expected.EXTENDER_NOMINATOR_ELECTION
                                  | expected.nominator_lease("berth-extender-nominator"))
        assert binding["roleRef"]["name"] == role["metadata"]["name"]
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "berth-extender", "namespace": NS}]
        assert env["BERTH_LEADER_LEASE_NAME"] == "berth-extender-nominator"
        # held under the pod's name, in the pod's namespace (the settings read POD_NAME, POD_NAMESPACE)
        fields = {e["name"]: e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
                  for e in _container(r.get("Deployment", "berth-extender"))["env"]}
        assert (fields["POD_NAME"], fields["POD_NAMESPACE"]) == ("metadata.name", "metadata.namespace")
    else:
        assert role is None and binding is None
        assert "BERTH_LEADER_LEASE_NAME" not in env


NOMINATE_SCHEDULERS = [
    # (name, values, BERTH_NOMINATE_SCHEDULERS)
    ("the chart's scheduler's pods", {"scheduler.enabled": True, "scheduler.profile": "nominate",
                                      "scheduler.schedulerName": "placement"}, "placement"),
    ("the cluster's own scheduler's pods", {"scheduler.profile": "nominate"}, "default-scheduler"),
]


@pytest.mark.parametrize(("values", "schedulers"), [c[1:] for c in NOMINATE_SCHEDULERS],
                         ids=[c[0] for c in NOMINATE_SCHEDULERS])
def test_nominate_profile_names_the_schedulers_whose_pods_berth_nominates(helm: Path, values: dict[str, Any],
                                                                         schedulers: str) -> None:
    container = _container(render(helm, values).get("Deployment", "berth-extender"))
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["BERTH_NOMINATE"] == "true"
    assert env["BERTH_NOMINATE_SCHEDULERS"] == schedulers


def test_operator_rbac_is_exactly_what_it_uses(default: Rendered, helm: Path) -> None:
    assert rules_of(default.get("ClusterRole", "berth-operator")) == expected.OPERATOR_CLUSTER
    two = render(helm, {"operator.replicas": 2})
    assert rules_of(two.get("ClusterRole", "berth-operator")) == (
        expected.OPERATOR_CLUSTER | expected.operator_peering("berth-operator"))


def test_the_placement_reader_roles_are_optional_and_bind_no_one(default: Rendered, helm: Path) -> None:
    assert not [o for o in default.objects if "placement-reader" in o["metadata"]["name"]]
    r = render(helm, {"placementReader.enabled": True})
    assert rules_of(r.get("ClusterRole", "berth-placement-reader")) == expected.PLACEMENT_READER_CLUSTER
    role = r.get("Role", "berth-placement-reader-port-forward")
    assert role["metadata"]["namespace"] == NS
    assert rules_of(role) == expected.PLACEMENT_READER_PORT_FORWARD
    bindings = r.all("ClusterRoleBinding") + r.all("RoleBinding")
    assert not [b for b in bindings if "placement-reader" in b["roleRef"]["name"]]


def test_no_wildcards_anywhere(helm: Path) -> None:
    r = render(helm, {"scheduler.enabled": True, "operator.replicas": 2})
    for role in r.all("ClusterRole") + r.all("Role"):
        for group, resource, verb, _ in rules_of(role):
            assert "*" not in (group, resource, verb), role["metadata"]["name"]


def test_operator_deployment(default: Rendered, helm: Path) -> None:
    deploy = default.get("Deployment", "berth-operator")
    assert deploy["spec"]["replicas"] == 1
    assert deploy["spec"]["strategy"]["type"] == "Recreate"  # never two standalone operators at once
    c = _container(deploy)
    args = c["args"]
    assert args[0] == "operator"
    assert "--liveness=http://0.0.0.0:8081/healthz" in args
    assert "--status-writes-per-second=100" in args
    assert "--webhook=cluster" in args
    assert "--webhook-port=9443" in args
    assert "--webhook-cert=/etc/berth/webhook/tls.crt" in args
    assert "--webhook-key=/etc/berth/webhook/tls.key" in args
    assert "--webhook-config=" in args  # the chart owns the ValidatingWebhookConfiguration
    assert not any(a.startswith("--peering") for a in args)
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    env = {e["name"]: e for e in c["env"]}
    assert env["POD_ID"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    volumes = {v["name"]: v for v in deploy["spec"]["template"]["spec"]["volumes"]}
    assert volumes["webhook-tls"]["secret"]["secretName"] == "berth-webhook-tls"

    two = render(helm, {"operator.replicas": 2})
    deploy2 = two.get("Deployment", "berth-operator")
    assert "strategy" not in deploy2["spec"]
    assert "--peering=berth-operator" in _container(deploy2)["args"]
    peering = two.get("ClusterKopfPeering", "berth-operator")
    assert peering["apiVersion"] == "kopf.dev/v1"

    off = render(helm, {"operator.webhook.enabled": False, "operator.statusWritesPerSecond": 20})
    assert "--webhook=off" in _container(off.get("Deployment", "berth-operator"))["args"]
    assert "--status-writes-per-second=20" in _container(off.get("Deployment", "berth-operator"))["args"]
    assert not off.all("ValidatingWebhookConfiguration")
    assert not off.find("Service", "berth-webhook")


def test_webhook_configuration(default: Rendered) -> None:
    vwc = default.get("ValidatingWebhookConfiguration", "berth-webhook")
    [hook, drain_hook] = vwc["webhooks"]
    assert hook["clientConfig"]["service"] == {"name": "berth-webhook", "namespace": NS,
                                               "path": "/validate-placementpolicy", "port": 443}
    assert drain_hook["clientConfig"]["service"] == {"name": "berth-webhook", "namespace": NS,
                                                     "path": "/validate-nodedrain", "port": 443}
    assert (drain_hook["rules"][0]["resources"], drain_hook["rules"][0]["scope"]) == (["nodedrains"], "Cluster")
    assert drain_hook["clientConfig"]["caBundle"] == hook["clientConfig"]["caBundle"]
    assert drain_hook["failurePolicy"] == hook["failurePolicy"]
    assert hook["rules"][0]["resources"] == ["placementpolicies"]
    assert hook["rules"][0]["apiGroups"] == ["berth.dev"]
    assert set(hook["rules"][0]["operations"]) == {"CREATE", "UPDATE"}
    assert hook["sideEffects"] == "None"
    assert hook["failurePolicy"] == "Ignore"
    ca = x509.load_pem_x509_certificate(base64.b64decode(hook["clientConfig"]["caBundle"]))
    assert ca.subject == _cert(default.get("Secret", "berth-ca")).subject
    svc = default.get("Service", "berth-webhook")
    assert svc["spec"]["ports"] == [{"name": "webhook", "port": 443, "targetPort": "webhook", "protocol": "TCP"}]


def test_webhook_path_is_the_operators(default: Rendered) -> None:
    """The chart sends reviews to the paths Kopf serves the validating handlers on."""
    from berth.operator.drain import WEBHOOK_ID as DRAIN_WEBHOOK_ID
    from berth.operator.webhook import WEBHOOK_PATH

    vwc = default.get("ValidatingWebhookConfiguration", "berth-webhook")
    assert vwc["webhooks"][0]["clientConfig"]["service"]["path"] == WEBHOOK_PATH
    assert vwc["webhooks"][1]["clientConfig"]["service"]["path"] == f"/{DRAIN_WEBHOOK_ID}"


def test_generated_tls_material(default: Rendered) -> None:
    ca = _cert(default.get("Secret", "berth-ca"))
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    now = datetime.datetime.now(datetime.UTC)
    assert ca.not_valid_after_utc > now + datetime.timedelta(days=3000)

    server_secret = default.get("Secret", "berth-extender-tls")
    assert server_secret["type"] == "kubernetes.io/tls"
    server = _cert(server_secret)
    assert _signed_by(server, ca)
    assert _cert(server_secret, "ca.crt") == ca
    sans = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.DNSName)
    assert "berth-extender.berth-system.svc" in sans
    assert "berth-extender.berth-system.svc.cluster.local" in sans
    eku = server.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in eku

    client = _cert(default.get("Secret", "berth-scheduler-client-tls"))
    assert _signed_by(client, ca)
    assert ExtendedKeyUsageOID.CLIENT_AUTH in client.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value

    webhook = _cert(default.get("Secret", "berth-webhook-tls"))
    assert _signed_by(webhook, ca)
    wsans = webhook.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.DNSName)
    assert "berth-webhook.berth-system.svc" in wsans


def test_generated_leaves_are_short_lived_and_record_when_they_expire(default: Rendered) -> None:
    """Leaves live tls.validityDays (90) and carry their expiry, which `helm upgrade` reads to renew
    them in time; the scheduler client's CN is the one the extender admits."""
    now = datetime.datetime.now(datetime.UTC)
    for name in ("berth-extender-tls", "berth-scheduler-client-tls", "berth-webhook-tls"):
        secret = default.get("Secret", name)
        leaf = _cert(secret)
        assert leaf.not_valid_after_utc < now + datetime.timedelta(days=91), name
        expires = int(secret["metadata"]["annotations"]["berth.dev/tls-expires"])
        assert abs(expires - leaf.not_valid_after_utc.timestamp()) < 3600, name
    client = _cert(default.get("Secret", "berth-scheduler-client-tls"))
    assert client.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)[0].value == "berth-scheduler-client"


def test_the_chart_scheduler_rolls_when_its_client_certificate_is_renewed(helm: Path) -> None:
    r = render(helm, {"scheduler.enabled": True})
    annotations = r.get("Deployment", "berth-scheduler")["spec"]["template"]["metadata"]["annotations"]
    assert annotations["berth.dev/client-tls"].startswith("renewed-in-revision-")  # nothing to keep offline


def test_cert_manager_leaves_are_short_lived(helm: Path) -> None:
    r = render(helm, {"tls.certManager.enabled": True})
    leaf = r.get("Certificate", "berth-extender")["spec"]
    assert leaf["duration"] == "2160h" and leaf["usages"][-1] == "server auth"
    assert r.get("Certificate", "berth-scheduler-client")["spec"]["usages"][-1] == "client auth"


def test_network_policy_default_admits_no_one_but_the_test_pod_on_the_webhook_port(default: Rendered) -> None:
    np = default.get("NetworkPolicy", "berth-extender")
    assert np["spec"]["policyTypes"] == ["Ingress"]
    webhook_rule, api_rule = np["spec"]["ingress"]
    assert webhook_rule["ports"] == [{"port": "webhook", "protocol": "TCP"}]
    assert webhook_rule["from"] == [{"podSelector": {"matchLabels": {
        "app.kubernetes.io/name": "berth", "app.kubernetes.io/instance": "berth",
        "app.kubernetes.io/component": "test"}}}]
    assert api_rule == {"ports": [{"port": "api", "protocol": "TCP"}]}  # read-only: open in the cluster


def test_operator_network_policy_admits_the_webhook_and_liveness_ports_only(default: Rendered,
                                                                               helm: Path) -> None:
    """The API server's address varies by cluster: the webhook port is open to any source by default
    (narrowed by operator.webhook.networkPolicy.from), every other port of the operator is closed."""
    np = default.get("NetworkPolicy", "berth-operator")
    assert np["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "operator"
    assert np["spec"]["policyTypes"] == ["Ingress"]
    assert np["spec"]["ingress"] == [{"ports": [{"port": "webhook", "protocol": "TCP"}]},
                                     {"ports": [{"port": "health", "protocol": "TCP"}]}]
    narrowed = render(helm, {"operator.webhook.networkPolicy.from": [{"ipBlock": {"cidr": "192.0.2.0/24"}}]})
    webhook_rule = narrowed.get("NetworkPolicy", "berth-operator")["spec"]["ingress"][0]
    assert webhook_rule["from"] == [{"ipBlock": {"cidr": "192.0.2.0/24"}}]
    off = render(helm, {"operator.webhook.networkPolicy.enabled": False})
    assert "berth-operator" not in off.names("NetworkPolicy")


def test_network_policy_with_scheduler_and_extra_peers(helm: Path) -> None:
    r = render(helm, {"scheduler.enabled": True, "tests.enabled": False,
                      "extender.networkPolicy.schedulerFrom": [{"ipBlock": {"cidr": "192.0.2.0/24"}}],
                      "extender.networkPolicy.apiFrom": [{"namespaceSelector": {"matchLabels": {"a": "b"}}}]})
    webhook_rule, api_rule = r.get("NetworkPolicy", "berth-extender")["spec"]["ingress"]
    assert webhook_rule["from"] == [
        {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "berth", "app.kubernetes.io/instance": "berth",
                                         "app.kubernetes.io/component": "scheduler"}}},
        {"ipBlock": {"cidr": "192.0.2.0/24"}},
    ]
    assert api_rule["from"] == [{"namespaceSelector": {"matchLabels": {"a": "b"}}}]
    # The scheduler's pods carry the labels the policy admits.
    pod_labels = r.get("Deployment", "berth-scheduler")["spec"]["template"]["metadata"]["labels"]
    assert pod_labels["app.kubernetes.io/component"] == "scheduler"


def test_extender_service_keeps_a_scheduler_on_one_replica(default: Rendered) -> None:
    svc = default.get("Service", "berth-extender")
    assert svc["spec"]["sessionAffinity"] == "ClientIP"
    assert {p["name"]: p["port"] for p in svc["spec"]["ports"]} == {"webhook": 8443, "api": 8080}


def test_pdb_only_with_more_than_one_replica(helm: Path, default: Rendered) -> None:
    pdb = default.get("PodDisruptionBudget", "berth-extender")
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] == "extender"
    assert not render(helm, {"extender.replicas": 1}).all("PodDisruptionBudget")


def test_helm_test_hook(default: Rendered) -> None:
    pod = default.get("Pod", "berth-test-extender")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    script = pod["spec"]["containers"][0]["args"][0]
    assert "http://berth-extender:8080" in script and "/readyz" in script
    assert "https://berth-extender.berth-system.svc:8443" in script
    assert pod["spec"]["volumes"][0]["secret"]["secretName"] == "berth-scheduler-client-tls"
    compile(script, "helm-test", "exec")  # the inline Python at least parses


def test_notes_name_the_next_step(helm: Path) -> None:
    out = run_helm(helm, "install", "berth", str(CHART), "--dry-run=client", "--namespace", NS).stdout
    notes = out[out.index("NOTES:"):]
    assert "helm test berth -n berth-system" in notes
    assert "schedulerName: berth-scheduler" in notes
    assert "urlPrefix: https://berth-extender.berth-system.svc:8443" in notes
    assert "ignorable: true" in notes and "berth-scheduler-client-tls" in notes
    assert "extender.networkPolicy.schedulerFrom" in notes
    assert "http://localhost:8080/ui/" in notes and "kubectl berth explain pod <namespace>/<pod>" in notes
    second = run_helm(helm, "install", "berth", str(CHART), "--dry-run=client", "--namespace", NS,
                      "--set", "scheduler.enabled=true").stdout
    notes = second[second.index("NOTES:"):]
    assert "spec:\n       schedulerName: berth-scheduler" in notes
    assert "rollout status deploy/berth-scheduler" in notes


# ---------------------------------------------------------------------------- second scheduler


def test_scheduler_objects(with_scheduler: Rendered) -> None:
    r = with_scheduler
    assert r.find("Deployment", "berth-scheduler")
    assert r.find("ConfigMap", "berth-scheduler")
    assert r.find("ServiceAccount", "berth-scheduler")
    bindings = {b["metadata"]["name"]: b for b in r.all("ClusterRoleBinding")}
    assert bindings["berth-scheduler-kube-scheduler"]["roleRef"]["name"] == "system:kube-scheduler"
    assert bindings["berth-scheduler-volume-scheduler"]["roleRef"]["name"] == "system:volume-scheduler"
    auth = r.get("RoleBinding", "berth-scheduler-authentication-reader")
    assert auth["metadata"]["namespace"] == "kube-system"
    assert auth["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                               "name": "extension-apiserver-authentication-reader"}
    le = r.get("Role", "berth-scheduler-leader-election")
    assert le["metadata"]["namespace"] == NS
    assert rules_of(le) == expected.SCHEDULER_LEADER_ELECTION | expected.scheduler_lease("berth-scheduler")


def test_scheduler_config(with_scheduler: Rendered) -> None:
    cm = with_scheduler.get("ConfigMap", "berth-scheduler")
    config = yaml.safe_load(cm["data"]["config.yaml"])
    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert config["kind"] == "KubeSchedulerConfiguration"
    [profile] = config["profiles"]
    assert profile == {"schedulerName": "berth-scheduler", "percentageOfNodesToScore": 100}
    assert config["leaderElection"] == {"leaderElect": True, "resourceLock": "leases",
                                        "resourceNamespace": NS, "resourceName": "berth-scheduler"}
    [ext] = config["extenders"]
    assert ext["urlPrefix"] == "https://berth-extender.berth-system.svc:8443"
    assert ext["filterVerb"] == "filter"
    assert ext["prioritizeVerb"] == "prioritize"
    assert ext["bindVerb"] == "bind"
    assert ext["preemptVerb"] == "preempt"
    assert ext["nodeCacheCapable"] is True
    from berth.extender.scheduler_config import RECOMMENDED_WEIGHT, minimum_weight

    assert ext["weight"] == RECOMMENDED_WEIGHT >= minimum_weight()  # the extender's documented weight
    assert ext["ignorable"] is False
    assert ext["httpTimeout"] == "5s"
    assert ext["enableHTTPS"] is True
    # The same verbs and settings as the extender's own reference configuration.
    from berth.extender.scheduler_config import scheduler_config

    reference = scheduler_config("https://x", scheduler_name="berth-scheduler")["extenders"][0]
    assert {k: ext[k] for k in reference if k not in ("urlPrefix", "tlsConfig")} == {
        k: v for k, v in reference.items() if k not in ("urlPrefix", "tlsConfig")}
    assert ext["tlsConfig"] == {"serverName": "berth-extender.berth-system.svc",
                                "certFile": "/etc/berth/tls/tls.crt", "keyFile": "/etc/berth/tls/tls.key",
                                "caFile": "/etc/berth/tls/ca.crt"}
    assert "clientConnection" in config and "kubeconfig" not in config["clientConnection"]

    deploy = with_scheduler.get("Deployment", "berth-scheduler")
    c = _container(deploy)
    assert c["image"] == "registry.k8s.io/kube-scheduler:v1.36.2"  # the API server's version
    assert c["command"][:2] == ["/usr/local/bin/kube-scheduler", "--config=/etc/berth/scheduler/config.yaml"]
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in deploy["spec"]["template"]["spec"]["volumes"]}
    # The files the config names are where the Secret is mounted.
    assert mounts["tls"] == "/etc/berth/tls"
    assert volumes["tls"]["secret"]["secretName"] == "berth-scheduler-client-tls"
    assert mounts["config"] == "/etc/berth/scheduler"
    assert volumes["config"]["configMap"]["name"] == "berth-scheduler"
    assert c["livenessProbe"]["httpGet"]["scheme"] == "HTTPS"
    assert c["readinessProbe"]["httpGet"]["port"] == "https"
    assert deploy["spec"]["template"]["spec"]["serviceAccountName"] == "berth-scheduler"
    assert "checksum/config" in deploy["spec"]["template"]["metadata"]["annotations"]


def test_scheduler_values(helm: Path) -> None:
    r = render(helm, {"scheduler.enabled": True, "scheduler.schedulerName": "placement",
                      "scheduler.extender.weight": 10, "scheduler.extender.ignorable": True,
                      "scheduler.extender.httpTimeout": "2s", "scheduler.extender.nodeCacheCapable": False,
                      "scheduler.extender.preempt": False, "scheduler.extender.bind": False,
                      "scheduler.percentageOfNodesToScore": 50, "scheduler.image.tag": "v1.35.4",
                      "scheduler.extender.managedResources": [{"name": "example.com/gpu",
                                                               "ignoredByScheduler": False}],
                      "scheduler.pluginConfig": [{"name": "NodeResourcesFit", "args": {
                          "scoringStrategy": {"type": "MostAllocated"}}}],
                      "extender.port": 9443})
    config = yaml.safe_load(r.get("ConfigMap", "berth-scheduler")["data"]["config.yaml"])
    [profile] = config["profiles"]
    assert profile["schedulerName"] == "placement"
    assert profile["percentageOfNodesToScore"] == 50
    assert profile["pluginConfig"][0]["name"] == "NodeResourcesFit"
    [ext] = config["extenders"]
    assert ext["weight"] == 10 and ext["ignorable"] is True and ext["httpTimeout"] == "2s"
    assert ext["nodeCacheCapable"] is False
    assert "bindVerb" not in ext and "preemptVerb" not in ext
    assert ext["managedResources"] == [{"name": "example.com/gpu", "ignoredByScheduler": False}]
    assert ext["urlPrefix"] == "https://berth-extender.berth-system.svc:9443"
    assert _container(r.get("Deployment", "berth-scheduler"))["image"].endswith(":v1.35.4")


PROFILE_CASES = [
    ("default-is-nominate", {"scheduler.enabled": True}, "nominate"),
    ("throughput", {"scheduler.enabled": True, "scheduler.profile": "throughput"}, "throughput"),
    ("full", {"scheduler.enabled": True, "scheduler.profile": "full"}, "full"),
    ("nominate", {"scheduler.enabled": True, "scheduler.profile": "nominate"}, "nominate"),
]


@pytest.mark.parametrize(("values", "profile"), [c[1:] for c in PROFILE_CASES], ids=[c[0] for c in PROFILE_CASES])
def test_scheduler_profile_sets_how_the_extender_answers_filter(helm: Path, with_scheduler: Rendered,
                                                                values: dict[str, Any], profile: str) -> None:
    """The extender gets the settings extender/scheduler_config.py gives the profile (the winner
    alone for throughput); kube-scheduler's configuration is the same for both profiles."""
    from berth.extender.scheduler_config import PROFILE_EXTENDER_ENV

    r = render(helm, values)
    env = {e["name"]: e.get("value") for e in _container(r.get("Deployment", "berth-extender"))["env"]}
    assert {k: env[k] for k in PROFILE_EXTENDER_ENV[profile]} == PROFILE_EXTENDER_ENV[profile]
    config = r.get("ConfigMap", "berth-scheduler")["data"]["config.yaml"]
    assert config == with_scheduler.get("ConfigMap", "berth-scheduler")["data"]["config.yaml"]


def test_scheduler_profile_reaches_the_extender_without_the_charts_scheduler(default: Rendered) -> None:
    """With a kube-scheduler of one's own (option B) the extender still answers as the profile says."""
    env = {e["name"]: e.get("value") for e in _container(default.get("Deployment", "berth-extender"))["env"]}
    assert env["BERTH_FILTER_WINNER_ONLY"] == "true"


def test_an_unknown_scheduler_profile_is_refused_naming_the_choices(helm: Path) -> None:
    from .helm import set_args

    proc = run_helm(helm, "template", "berth", str(CHART),
                    *set_args({"scheduler.enabled": True, "scheduler.profile": "fast"}), check=False)
    assert proc.returncode != 0
    assert "/scheduler/profile" in proc.stderr and "'nominate', 'throughput', 'full'" in proc.stderr, proc.stderr


def test_scheduler_image_drops_a_vendor_suffix(helm: Path) -> None:
    r = render(helm, SCHEDULER_ON, kube_version="v1.30.5-gke.1014001")
    assert _container(r.get("Deployment", "berth-scheduler"))["image"] == "registry.k8s.io/kube-scheduler:v1.30.5"


# ---------------------------------------------------------------------------- cert-manager, monitoring


def test_cert_manager_mode(helm: Path) -> None:
    r = render(helm, {"tls.certManager.enabled": True})
    assert not r.all("Secret"), "cert-manager makes the Secrets"
    assert r.names("Issuer") == {"berth-selfsigned", "berth-ca"}
    certs = {c["metadata"]["name"]: c for c in r.all("Certificate")}
    assert set(certs) == {"berth-ca", "berth-extender", "berth-scheduler-client", "berth-webhook"}
    assert certs["berth-ca"]["spec"]["isCA"] is True
    assert certs["berth-extender"]["spec"]["secretName"] == "berth-extender-tls"
    assert "berth-extender.berth-system.svc" in certs["berth-extender"]["spec"]["dnsNames"]
    assert "server auth" in certs["berth-extender"]["spec"]["usages"]
    assert "client auth" in certs["berth-scheduler-client"]["spec"]["usages"]
    assert certs["berth-scheduler-client"]["spec"]["secretName"] == "berth-scheduler-client-tls"
    for name in ("berth-extender", "berth-scheduler-client", "berth-webhook"):
        assert certs[name]["spec"]["issuerRef"] == {"name": "berth-ca", "kind": "Issuer", "group": "cert-manager.io"}
    vwc = r.get("ValidatingWebhookConfiguration", "berth-webhook")
    assert vwc["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == "berth-system/berth-webhook"
    assert all("caBundle" not in hook["clientConfig"] for hook in vwc["webhooks"])

    own = render(helm, {"tls.certManager.enabled": True,
                        "tls.certManager.issuerRef": {"name": "platform-ca", "kind": "ClusterIssuer"}})
    assert not own.all("Issuer")
    assert {c["metadata"]["name"] for c in own.all("Certificate")} == {
        "berth-extender", "berth-scheduler-client", "berth-webhook"}
    for cert in own.all("Certificate"):
        assert cert["spec"]["issuerRef"] == {"name": "platform-ca", "kind": "ClusterIssuer"}


def test_service_monitor(helm: Path) -> None:
    r = render(helm, {"extender.serviceMonitor.enabled": True,
                      "extender.serviceMonitor.labels": {"release": "kube-prometheus-stack"}})
    sm = r.get("ServiceMonitor", "berth-extender")
    assert sm["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert sm["spec"]["endpoints"] == [{"port": "api", "path": "/metrics", "interval": "30s"}]
    svc = r.get("Service", "berth-extender")
    assert {p["name"] for p in svc["spec"]["ports"]} == {"webhook", "api"}
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()


def test_names_follow_the_release(helm: Path) -> None:
    r = render(helm, {"scheduler.enabled": True}, release="placement", namespace="ops")
    assert r.names("Deployment") == {"placement-berth-extender", "placement-berth-operator",
                                     "placement-berth-scheduler"}
    config = yaml.safe_load(r.get("ConfigMap", "placement-berth-scheduler")["data"]["config.yaml"])
    assert config["extenders"][0]["urlPrefix"] == "https://placement-berth-extender.ops.svc:8443"
    sans = _cert(r.get("Secret", "placement-berth-extender-tls")).extensions.get_extension_for_class(
        x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    assert "placement-berth-extender.ops.svc" in sans
    for obj in r.objects:
        assert len(obj["metadata"]["name"]) <= 63


# ---------------------------------------------------------------------------- schema


@pytest.mark.parametrize("bad", [
    {"settings.cpuOvercommitPercent": 0},
    {"settings.defaultStrategy": "Random"},
    {"settings.minFreeDiskPercent": 101},
    {"extender.port": 70000},
    {"extender.replicass": 2},
    {"scheduler.extender.httpTimeout": "five seconds"},
    {"scheduler.percentageOfNodesToScore": 101},
    {"operator.webhook.failurePolicy": "Maybe"},
    {"operator.statusWritesPerSecond": 0},
    {"operator.statusWritesPerSecond": 5000},
    {"image.digest": "latest"},
    {"unknownTopLevel": True},
])
def test_schema_refuses_bad_values(helm: Path, bad: dict[str, Any]) -> None:
    from .helm import set_args

    proc = run_helm(helm, "template", "berth", str(CHART), *set_args(bad), check=False)
    assert proc.returncode != 0, f"{bad} was accepted"
    assert "schema" in proc.stderr.lower() or "values don't meet" in proc.stderr.lower(), proc.stderr


# ---------------------------------------------------------------------------- CRDs


def test_crds_come_from_the_single_source(helm: Path, tmp_path: Path) -> None:
    """charts/berth/crds is a symlink to the repository's crds/: no second copy to drift. Helm
    follows it when rendering and when packaging (the package holds real files)."""
    link = CHART / "crds"
    assert link.is_symlink() and Path(link.readlink()) == Path("../../crds")
    sources = sorted((REPO_ROOT / "crds").glob("*.yaml"))
    rendered = Rendered(template(helm, include_crds=True))
    crd_names = rendered.names("CustomResourceDefinition")
    for source in sources:
        for doc in yaml.safe_load_all(source.read_text()):
            if doc and doc.get("kind") == "CustomResourceDefinition":
                assert doc["metadata"]["name"] in crd_names, source.name
    out = run_helm(helm, "package", str(CHART), "--destination", str(tmp_path)).stdout
    package = next(tmp_path.glob("berth-*.tgz"))
    assert package.name in out or package.exists()
    with tarfile.open(package) as tar:
        members = {m.name: m for m in tar.getmembers()}
        for source in sources:
            member = members.get(f"berth/crds/{source.name}")
            assert member is not None and member.isfile(), f"{source.name} missing from the package"
            extracted = tar.extractfile(member)
            assert extracted is not None and extracted.read() == source.read_bytes()
        assert not any(m.issym() or m.islnk() for m in members.values())


def test_placementpolicy_crd_is_installed_by_the_chart(helm: Path) -> None:
    source = REPO_ROOT / "crds" / "placementpolicies.berth.dev.yaml"
    assert source.exists(), "crds/placementpolicies.berth.dev.yaml is missing"
    rendered = Rendered(template(helm, include_crds=True))
    assert "placementpolicies.berth.dev" in rendered.names("CustomResourceDefinition")


def test_peering_crd_is_shipped_when_peering_is_used(helm: Path) -> None:
    r = Rendered(template(helm, {"operator.replicas": 2}, include_crds=True))
    assert "clusterkopfpeerings.kopf.dev" in r.names("CustomResourceDefinition")


# ---------------------------------------------------------------------------- the components take the chart's arguments


def test_operator_takes_the_charts_arguments(helm: Path) -> None:
    from berth.operator.main import parser

    for values in ({}, {"operator.replicas": 2}, {"operator.webhook.enabled": False}):
        c = _container(render(helm, values).get("Deployment", "berth-operator"))
        assert c["args"][0] == "operator"
        args = parser().parse_args(c["args"][1:])
        if values.get("operator.replicas") == 2:
            assert args.peering == "berth-operator"
        else:
            assert args.peering is None
        if values.get("operator.webhook.enabled") is False:
            assert args.webhook == "off"
        else:
            assert args.webhook == "cluster" and args.webhook_config == ""
            assert args.webhook_cert == "/etc/berth/webhook/tls.crt" and args.webhook_ca == "/etc/berth/webhook/ca.crt"


def test_extender_takes_the_charts_arguments(default: Rendered) -> None:
    """`berth extender` accepts the chart's flags, and every BERTH_* variable the chart sets is
    one of the extender's settings (TLS on the webhook port with required client certificates,
    the plain API port for probes, metrics and the explain API)."""
    import contextlib
    import io

    from berth.cli.main import build_parser
    from berth.extender.settings import ExtenderSettings

    c = _container(default.get("Deployment", "berth-extender"))
    with contextlib.redirect_stderr(io.StringIO()) as err:
        try:
            build_parser().parse_args(c["args"])
        except SystemExit as exc:
            raise AssertionError(f"berth {' '.join(c['args'])}: {err.getvalue()}") from exc
    known = {f"BERTH_{f.upper()}" for f in ExtenderSettings.model_fields}
    chart = {e["name"] for e in c["env"] if e["name"].startswith("BERTH_")}
    tls = {"BERTH_TLS_CERT_FILE", "BERTH_TLS_KEY_FILE", "BERTH_TLS_CLIENT_CA_FILE", "BERTH_TLS_CLIENT_NAMES",
           "BERTH_API_PORT"}
    assert tls <= known, f"the extender has no settings {sorted(tls - known)}"
    assert chart <= known, sorted(chart - known)


def _serve(server: Any) -> Any:
    import threading

    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return thread


def test_helm_test_script_against_a_stand_in_extender(helm: Path, tmp_path: Path) -> None:
    """The `helm test` pod's script, run here against a stand-in extender on 127.0.0.1 that
    serves with the chart's certificates: it passes when the webhook port requires the client
    certificate, and fails when the port answers without one."""
    import http.server
    import ssl
    import subprocess
    import sys

    from tests.e2e.harness.process import free_port

    webhook_port, api_port = free_port(), free_port()
    r = render(helm, {"extender.port": webhook_port, "extender.apiPort": api_port})
    tls_dir = tmp_path / "tls"
    tls_dir.mkdir()
    server_secret = r.get("Secret", "berth-extender-tls")
    for key in ("tls.crt", "tls.key", "ca.crt"):
        (tls_dir / f"server-{key}").write_bytes(base64.b64decode(server_secret["data"][key]))
        (tls_dir / key).write_bytes(base64.b64decode(r.get("Secret", "berth-scheduler-client-tls")["data"][key]))

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200 if self.path in ("/readyz", "/healthz") else 404)
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: Any) -> None:
            pass

    api = http.server.ThreadingHTTPServer(("127.0.0.1", api_port), Handler)

    def https_server(require_client_cert: bool) -> http.server.ThreadingHTTPServer:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(tls_dir / "server-tls.crt", tls_dir / "server-tls.key")
        ctx.load_verify_locations(tls_dir / "server-ca.crt")
        ctx.verify_mode = ssl.CERT_REQUIRED if require_client_cert else ssl.CERT_NONE
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", webhook_port), Handler)
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
        return srv

    pod = r.get("Pod", "berth-test-extender")
    script = pod["spec"]["containers"][0]["args"][0]
    mount = pod["spec"]["containers"][0]["volumeMounts"][0]["mountPath"]
    # Resolve the Service names to 127.0.0.1 and read the certificates from tmp.
    prelude = (
        "import socket\n_real = socket.getaddrinfo\n"
        "socket.getaddrinfo = lambda host, *a, **k: _real('127.0.0.1' if str(host).startswith('berth-extender')"
        " else host, *a, **k)\n"
    )
    script = prelude + script.replace(mount, str(tls_dir))

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)

    _serve(api)
    try:
        for require, passes in ((True, True), (False, False)):
            srv = https_server(require)
            _serve(srv)
            try:
                done = run()
            finally:
                srv.shutdown()
                srv.server_close()
            if passes:
                assert done.returncode == 0 and "PASS" in done.stdout, done.stdout + done.stderr
            else:
                assert done.returncode != 0 and "FAIL" in done.stderr, done.stdout + done.stderr
    finally:
        api.shutdown()
        api.server_close()
