"""Certificates for the kind cluster of deploy/kind, made before the cluster exists.

The control-plane kube-scheduler needs its client certificate and the CA from its first start,
before berth is installed, so the CA is made here and handed to the chart as
``tls.existingCASecret`` (the chart signs the extender's serving certificate with it).

    python deploy/kind/pki.py OUT_DIR

writes
    OUT_DIR/ca/tls.crt, OUT_DIR/ca/tls.key               the CA (RSA, PKCS#1: what Helm's
                                                         buildCustomCert reads)
    OUT_DIR/scheduler/pki/ca.crt, tls.crt, tls.key       kube-scheduler's client certificate

Existing files are kept (re-running does not invalidate a running cluster's certificates).
Needs the ``cryptography`` package (a test dependency: scripts/setup.sh --test).
"""

from __future__ import annotations

import datetime
import sys
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = datetime.timedelta(days=365)
CLIENT_CN = "berth-scheduler-client"  # the chart's berth.tls.schedulerClientCN


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make(out: Path) -> None:
    ca_dir, client_dir = out / "ca", out / "scheduler" / "pki"
    if (ca_dir / "tls.key").exists() and (client_dir / "tls.key").exists():
        print(f"pki: keeping the certificates in {out}", file=sys.stderr)
        return
    ca_dir.mkdir(parents=True, exist_ok=True)
    client_dir.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)

    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(_name("berth-kind-ca"))
        .issuer_name(_name("berth-kind-ca"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False,
                                     encipher_only=False, decipher_only=False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    client_key = ec.generate_private_key(ec.SECP256R1())
    client_cert = (
        x509.CertificateBuilder()
        .subject_name(_name(CLIENT_CN))
        .issuer_name(ca_cert.subject)
        .public_key(client_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    def pem_key(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey) -> bytes:
        return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                 serialization.NoEncryption())

    ca_pem = ca_cert.public_bytes(serialization.Encoding.PEM)
    (ca_dir / "tls.crt").write_bytes(ca_pem)
    (ca_dir / "tls.key").write_bytes(pem_key(ca_key))
    (client_dir / "ca.crt").write_bytes(ca_pem)
    (client_dir / "tls.crt").write_bytes(client_cert.public_bytes(serialization.Encoding.PEM))
    (client_dir / "tls.key").write_bytes(pem_key(client_key))
    for key_file in (ca_dir / "tls.key", client_dir / "tls.key"):
        key_file.chmod(0o600)
    print(f"pki: wrote a CA and kube-scheduler's client certificate in {out}", file=sys.stderr)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    make(Path(sys.argv[1]))
