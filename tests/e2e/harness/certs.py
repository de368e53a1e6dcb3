"""Certificates and keys for a throw-away control plane, made with ``cryptography``.

:func:`generate_pki` writes into one directory:

* ``ca.crt`` / ``ca.key``: a self-signed CA (EC P-256) that signs everything below and is the
  API server's client CA;
* ``apiserver.crt`` / ``apiserver.key``: the API server's serving certificate for
  ``127.0.0.1``, ``localhost`` and the in-cluster ``kubernetes.default.svc`` names;
* ``sa.key`` / ``sa.pub``: the RSA key pair that signs and verifies service-account tokens;
* ``admin.crt`` / ``admin.key``: a client certificate in group ``system:masters``.

Everything is valid for a day, which is plenty for a test session.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = datetime.timedelta(days=1)
_BACKDATE = datetime.timedelta(minutes=5)


@dataclass(frozen=True)
class PKI:
    """Paths of the files written by :func:`generate_pki`."""

    dir: Path
    ca_cert: Path
    ca_key: Path
    apiserver_cert: Path
    apiserver_key: Path
    sa_key: Path
    sa_pub: Path
    admin_cert: Path
    admin_key: Path


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attrs = []
    if organization:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attrs)


def _issue(
    *,
    subject: x509.Name,
    public_key: ec.EllipticCurvePublicKey,
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    usages: list[x509.ObjectIdentifier],
    dns_names: list[str] | None = None,
    ips: list[str] | None = None,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=True,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
    )
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names or []]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips or []]
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(ca_key, hashes.SHA256())


def first_service_ip(service_cidr: str) -> str:
    """The ``kubernetes`` Service's ClusterIP: the first address of the service range."""
    return str(ipaddress.ip_network(service_cidr, strict=False).network_address + 1)


def generate_pki(directory: Path, *, service_cidr: str = "10.96.0.0/16") -> PKI:
    """Create the CA, serving, service-account and admin credentials in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("berth-e2e-ca")
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    serving_key = ec.generate_private_key(ec.SECP256R1())
    serving_cert = _issue(
        subject=_name("kube-apiserver"),
        public_key=serving_key.public_key(),
        ca_cert=ca_cert,
        ca_key=ca_key,
        usages=[ExtendedKeyUsageOID.SERVER_AUTH],
        dns_names=[
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ],
        ips=["127.0.0.1", first_service_ip(service_cidr)],
    )

    admin_key = ec.generate_private_key(ec.SECP256R1())
    admin_cert = _issue(
        subject=_name("berth-e2e-admin", "system:masters"),
        public_key=admin_key.public_key(),
        ca_cert=ca_cert,
        ca_key=ca_key,
        usages=[ExtendedKeyUsageOID.CLIENT_AUTH],
    )

    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    pki = PKI(
        dir=directory,
        ca_cert=directory / "ca.crt",
        ca_key=directory / "ca.key",
        apiserver_cert=directory / "apiserver.crt",
        apiserver_key=directory / "apiserver.key",
        sa_key=directory / "sa.key",
        sa_pub=directory / "sa.pub",
        admin_cert=directory / "admin.crt",
        admin_key=directory / "admin.key",
    )
    _write_cert(pki.ca_cert, ca_cert)
    _write_key(pki.ca_key, ca_key)
    _write_cert(pki.apiserver_cert, serving_cert)
    _write_key(pki.apiserver_key, serving_key)
    _write_cert(pki.admin_cert, admin_cert)
    _write_key(pki.admin_key, admin_key)
    _write_key(pki.sa_key, sa_key)
    pki.sa_pub.write_bytes(
        sa_key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return pki
