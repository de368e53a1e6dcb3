"""Where the validating admission webhook is served, and with which certificate.

Three modes (``--webhook`` / ``BERTH_WEBHOOK_MODE``):

``off``
    No webhook. Invalid policies still get ``Valid=False`` from the operator.
``dev``
    A self-signed certificate made at start (needs the ``cryptography`` package, a test
    dependency), served on ``127.0.0.1:9443`` by default: for an API server on the same machine.
``cluster``
    The certificate and key the chart mounts (``--webhook-cert`` / ``--webhook-key``, e.g. a
    cert-manager Secret), served on ``0.0.0.0:9443``. ``--webhook-ca`` is the CA bundle the API
    server must trust (default: the certificate itself). Kopf re-reads the files when they change.

In ``dev`` and ``cluster`` mode Kopf keeps a ``ValidatingWebhookConfiguration`` named
``--webhook-config`` (default ``berth.dev``) pointing at ``https://HOST:PORT/<handler id>``,
where HOST is ``--webhook-host`` (in a cluster: the Service's DNS name, e.g.
``berth-operator.berth-system.svc``; the Service must expose the same port). With
``--webhook-config ''`` Kopf leaves the configuration alone and the chart owns it: it must send
the reviews to the path :data:`WEBHOOK_PATH` (``/validate-placementpolicy``; any other path
reaches no handler and is allowed). The webhook's ``failurePolicy`` is ``Ignore`` unless
``--webhook-fail-closed``: with the operator down, policies are accepted and judged by the
``Valid`` condition once it is back, rather than refused.
"""

from __future__ import annotations

import asyncio
import atexit
import datetime
import ipaddress
import logging
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, cast

import aiohttp.web
import kopf
import orjson

WEBHOOK_ID = "validate-placementpolicy"
WEBHOOK_PATH = f"/{WEBHOOK_ID}"
DEFAULT_PORT = 9443
DEFAULT_CONFIG_NAME = "berth.dev"

log = logging.getLogger("berth.operator.webhook")

Mode = Literal["off", "dev", "cluster"]
MODES: tuple[Mode, ...] = ("off", "dev", "cluster")


MAX_REVIEW_BYTES = 1 << 20
"""An AdmissionReview larger than this is refused (413) unread: a PlacementPolicy is a few KiB."""

MAX_REVIEW_DEPTH = 64
"""JSON nested deeper than this is refused (400): a PlacementPolicy and its metadata nest about 15
deep, and deeper documents would exhaust the recursion of the code that walks them."""

REVIEWS_AT_ONCE = 4
"""AdmissionReviews judged at the same time; the others wait their turn."""

REVIEW_SECONDS = 5.0
"""A review not read, queued and judged within this answers 503 (the API server's webhook
timeout is 10 s by default): a flood delays others by at most this, it never stalls them."""


class WebhookConfigError(ValueError):
    """Webhook options that cannot work together."""


class MalformedReview(ValueError):
    """A request that is not an AdmissionReview the API server would send (answered 400)."""


def review_problem(data: object) -> str | None:
    """Why ``data`` (decoded JSON) is not an AdmissionReview of admission.k8s.io/v1, or None."""
    if not isinstance(data, dict):
        return "the body must be a JSON object (an AdmissionReview)"
    if data.get("apiVersion") != "admission.k8s.io/v1" or data.get("kind") != "AdmissionReview":
        return "the body must be an AdmissionReview of admission.k8s.io/v1"
    request = data.get("request")
    if not isinstance(request, dict):
        return "request must be an object"
    for name in ("uid", "operation"):
        if not isinstance(request.get(name), str) or not request.get(name):
            return f"request.{name} must be a non-empty string"
    for name in ("userInfo", "resource", "kind"):
        if not isinstance(request.get(name), dict):
            return f"request.{name} must be an object"
    for name in ("object", "oldObject"):
        if request.get(name) is not None and not isinstance(request.get(name), dict):
            return f"request.{name} must be an object or null"
    if request.get("object") is None and request.get("oldObject") is None:
        return "request.object or request.oldObject is required"
    return None


def _too_deep(data: object, limit: int = MAX_REVIEW_DEPTH) -> bool:
    """Whether ``data`` nests deeper than ``limit`` (walked without recursion)."""
    level: list[object] = [data]
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True
        following: list[object] = []
        for item in level:
            if isinstance(item, dict):
                following.extend(item.values())
            elif isinstance(item, list):
                following.extend(item)
        level = following
    return False


class BoundedWebhookServer(kopf.WebhookServer):
    """Kopf's webhook server with what it leaves open closed: a review larger than
    :data:`MAX_REVIEW_BYTES` is refused unread (413), one that is not JSON, nests deeper than
    :data:`MAX_REVIEW_DEPTH` or is not an AdmissionReview is refused (400, never a 500 that
    ``failurePolicy: Ignore`` would turn into an admission), at most :data:`REVIEWS_AT_ONCE` are
    judged at a time and each has :data:`REVIEW_SECONDS` to be read, wait and be judged (503)."""

    def __init__(self, *args: Any, review_seconds: float = REVIEW_SECONDS, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.review_seconds = review_seconds
        self._at_once: asyncio.Semaphore | None = None

    async def _serve(self, fn: Any, request: aiohttp.web.Request) -> aiohttp.web.Response:  # type: ignore[override]
        if self._at_once is None:
            self._at_once = asyncio.Semaphore(REVIEWS_AT_ONCE)
        if request.content_length is not None and request.content_length > MAX_REVIEW_BYTES:
            return _refusal(413, f"an AdmissionReview of {request.content_length} bytes; at most {MAX_REVIEW_BYTES}")
        try:
            async with asyncio.timeout(self.review_seconds):
                try:
                    raw = await request.content.read(MAX_REVIEW_BYTES + 1)
                except aiohttp.web.HTTPException as exc:
                    return _refusal(exc.status, exc.reason)
                if len(raw) > MAX_REVIEW_BYTES:
                    return _refusal(413, f"an AdmissionReview of more than {MAX_REVIEW_BYTES} bytes")
                data = _decode(raw)
                async with self._at_once:
                    return await kopf.WebhookServer._serve(fn, cast(aiohttp.web.Request, _Replayed(request, data)))
        except MalformedReview as exc:
            return _refusal(400, str(exc))
        except TimeoutError:
            log.warning("an AdmissionReview was not read and judged within %gs", self.review_seconds)
            return _refusal(503, f"the review was not read and judged within {self.review_seconds:g}s")


def _decode(raw: bytes) -> object:
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise MalformedReview(f"the body is not JSON: {exc}") from None
    if _too_deep(data):
        raise MalformedReview(f"the body nests deeper than {MAX_REVIEW_DEPTH} levels")
    problem = review_problem(data)
    if problem:
        raise MalformedReview(problem)
    return data


class _Replayed:
    """The request as Kopf's own handler reads it, its body already read and checked."""

    def __init__(self, request: aiohttp.web.Request, data: object) -> None:
        self._request = request
        self._text = orjson.dumps(data).decode()
        self.headers = request.headers
        self.transport = request.transport
        self.match_info = request.match_info

    async def text(self) -> str:
        return self._text


def _refusal(status: int, message: str) -> aiohttp.web.Response:
    return aiohttp.web.json_response({"error": message}, status=status)


@dataclass(frozen=True)
class WebhookOptions:
    mode: Mode = "off"
    listen: str | None = None  # dev: 127.0.0.1, cluster: 0.0.0.0
    port: int = DEFAULT_PORT
    host: str | None = None  # the name the API server calls; dev: the listen address
    cert_file: str | None = None
    key_file: str | None = None
    ca_file: str | None = None
    config_name: str | None = DEFAULT_CONFIG_NAME  # None: the chart owns the ValidatingWebhookConfiguration
    fail_closed: bool = False

    @property
    def enabled(self) -> bool:
        return self.mode != "off"

    def checked(self) -> WebhookOptions:
        """These options with the mode's defaults filled in; raises when they cannot work."""
        if self.mode not in MODES:
            raise WebhookConfigError(f"webhook mode {self.mode!r}: use one of {', '.join(MODES)}")
        if not 0 < self.port < 65536:
            raise WebhookConfigError(f"webhook port {self.port} is not a port")
        if self.mode == "dev":
            return replace(self, listen=self.listen or "127.0.0.1")
        if self.mode == "cluster":
            if not self.cert_file or not self.key_file:
                raise WebhookConfigError("webhook mode cluster needs --webhook-cert and --webhook-key")
            for path in (self.cert_file, self.key_file, self.ca_file):
                if path and not Path(path).is_file():
                    raise WebhookConfigError(f"webhook certificate file {path} does not exist")
            if self.config_name and not self.host:
                raise WebhookConfigError("webhook mode cluster with a managed configuration needs --webhook-host "
                                         "(the Service's DNS name)")
            return replace(self, listen=self.listen or "0.0.0.0")
        return self

    def server(self) -> kopf.WebhookServer | None:
        """The Kopf webhook server for these options (None when off)."""
        options = self.checked()
        if options.mode == "off":
            return None
        if options.mode == "dev":
            host = options.host or options.listen or "127.0.0.1"
            cert, key = self_signed_files(sorted({host, options.listen or host, "localhost"}))
            return BoundedWebhookServer(addr=options.listen, port=options.port, host=host,
                                        certfile=cert, pkeyfile=key, cafile=cert)
        return BoundedWebhookServer(addr=options.listen, port=options.port, host=options.host,
                                    certfile=options.cert_file, pkeyfile=options.key_file,
                                    cafile=options.ca_file or options.cert_file)


def self_signed_certificate(hostnames: list[str], days: int = 365) -> tuple[bytes, bytes]:
    """A self-signed CA-capable server certificate for ``hostnames`` (DNS names or IPs), PEM."""
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    except ImportError:
        raise WebhookConfigError("webhook mode dev makes a self-signed certificate and needs the "
                                 "'cryptography' package (pip install cryptography); or use mode "
                                 "cluster with a certificate") from None
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = []
    for name in hostnames:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            names.append(x509.DNSName(name))
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hostnames[0])])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_pem = certificate.public_bytes(serialization.Encoding.PEM)
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return cert_pem, key_pem


def self_signed_files(hostnames: list[str]) -> tuple[str, str]:
    """Write a fresh self-signed certificate and key to a private temporary directory (removed
    at exit); Kopf re-reads them from there."""
    cert_pem, key_pem = self_signed_certificate(hostnames)
    folder = Path(tempfile.mkdtemp(prefix="berth-webhook-"))
    atexit.register(shutil.rmtree, folder, True)
    cert, key = folder / "tls.crt", folder / "tls.key"
    cert.write_bytes(cert_pem)
    key.touch(mode=0o600)
    key.write_bytes(key_pem)
    return str(cert), str(key)
