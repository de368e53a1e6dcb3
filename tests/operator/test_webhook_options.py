"""The webhook server options: a self-signed dev server, or the mounted certificate."""

from __future__ import annotations

import ssl
from pathlib import Path

import kopf
import pytest

from berth.operator.webhook import (
    WebhookConfigError,
    WebhookOptions,
    self_signed_certificate,
    self_signed_files,
)


def test_off_by_default() -> None:
    assert WebhookOptions().server() is None


def test_dev_mode_makes_a_certificate_the_server_can_load() -> None:
    server = WebhookOptions(mode="dev", port=9555).server()
    assert isinstance(server, kopf.WebhookServer)
    assert (server.addr, server.port, server.host) == ("127.0.0.1", 9555, "127.0.0.1")
    assert server.certfile is not None and server.pkeyfile is not None and server.cafile == server.certfile
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(server.certfile, server.pkeyfile)
    assert oct(Path(server.pkeyfile).stat().st_mode & 0o777) == "0o600"


def test_the_self_signed_certificate_names_its_hosts() -> None:
    from cryptography import x509

    cert_pem, _ = self_signed_certificate(["127.0.0.1", "localhost"])
    cert = x509.load_pem_x509_certificate(cert_pem)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert sans.get_values_for_type(x509.DNSName) == ["localhost"]


def test_cluster_mode_uses_the_mounted_files(tmp_path: Path) -> None:
    cert, key = self_signed_files(["berth-operator.berth-system.svc"])
    options = WebhookOptions(mode="cluster", cert_file=cert, key_file=key, host="berth-operator.berth-system.svc")
    server = options.server()
    assert isinstance(server, kopf.WebhookServer)
    assert (server.addr, server.port, server.host) == ("0.0.0.0", 9443, "berth-operator.berth-system.svc")
    assert (server.certfile, server.pkeyfile, server.cafile) == (cert, key, cert)


@pytest.mark.parametrize("options", [
    WebhookOptions(mode="cluster"),
    WebhookOptions(mode="cluster", cert_file="/nonexistent/tls.crt", key_file="/nonexistent/tls.key", host="h"),
    WebhookOptions(mode="dev", port=0),
])
def test_options_that_cannot_work_are_refused(options: WebhookOptions) -> None:
    with pytest.raises(WebhookConfigError):
        options.checked()


def test_cluster_mode_with_a_managed_configuration_needs_the_service_name() -> None:
    cert, key = self_signed_files(["x"])
    with pytest.raises(WebhookConfigError, match="webhook-host"):
        WebhookOptions(mode="cluster", cert_file=cert, key_file=key).checked()
    assert WebhookOptions(mode="cluster", cert_file=cert, key_file=key, config_name=None).checked().listen == "0.0.0.0"


def test_an_unknown_mode_is_refused_naming_the_modes() -> None:
    with pytest.raises(WebhookConfigError, match="'sideways': use one of off, dev, cluster"):
        WebhookOptions(mode="sideways").checked()  # type: ignore[arg-type]
