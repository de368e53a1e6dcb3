"""Run the PlacementPolicy operator: :func:`run` (what ``berth operator`` calls) and
``python -m berth.operator.main`` with the same options as flags.

Credentials: in-cluster service account, else ``KUBECONFIG`` / ``~/.kube/config`` (Kopf's
``login_via_client``, the ``kubernetes`` library's loaders).

Scope: cluster-wide by default (policies of every namespace; Nodes, Pods and node Leases of the
whole cluster, which the plans need: listed and watched by the extender's live view, on threads of
their own, not by Kopf). ``namespace`` restricts policies *and* pods to one
namespace; it is meant for tests: capacity then misses the other namespaces' pods, and node
Leases (in ``kube-node-lease``) are not watched, so liveness falls back to the Ready condition.
Its admission webhook, which the API server calls for every namespace, judges its own namespace's
policies only, and NodeDrains, cluster-wide objects, are left to a cluster-wide operator.

Peering: with ``peering=NAME`` the replicas coordinate through the ``ClusterKopfPeering`` NAME
(``KopfPeering`` in the namespace when namespaced; CRDs in ``crds/kopfpeerings.kopf.dev.yaml``,
the object is created by the chart): only the replica with the highest priority works, the
others stand by. Each replica needs a distinct priority: by default a random one (``POD_ID``,
set from the pod name, names the replica in the peering object). Without ``peering`` the operator
runs standalone (one replica).
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import typing
from collections.abc import Sequence
from typing import Any

import kopf

from berth.core import API_GROUP, CRD_VERSION, POLICY_PLURAL, ROUND_TIMEOUT_SECONDS, Settings
from berth.extender.kube_http import ApiSession
from berth.operator.cluster import OperatorStore, live_view
from berth.operator.drain_execute import KubeDrainApi
from berth.operator.handlers import (
    STATUS_WRITES_BOUNDS,
    STATUS_WRITES_PER_SECOND,
    WRITES_IN_FLIGHT,
    OperatorConfig,
    StatusWriter,
    build_registry,
)
from berth.operator.webhook import DEFAULT_CONFIG_NAME, DEFAULT_PORT, MODES, WebhookConfigError, WebhookOptions

log = logging.getLogger("berth.operator")

PROGRESS_PREFIX = "operator.berth.dev"
"""Kopf's bookkeeping lives in annotations under this prefix, never in the status."""


class EssenceStorage(kopf.AnnotationsDiffBaseStorage):
    """Kopf's last-handled configuration in an annotation, as :class:`kopf.AnnotationsDiffBaseStorage`
    keeps it, the essence made without copying what it leaves out: Kopf copies the whole object and
    then drops the status and the metadata but labels and annotations, on every watch event; a
    policy's status (a count per node, the plan) and its managed fields are most of the object, and
    every status the operator writes comes back as an event."""

    KEPT_METADATA = ("labels", "annotations", "ownerReferences")  # (owners: Kopf's key naming reads them)

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> kopf.BodyEssence:
        tops = {(field.split(".") if isinstance(field, str) else list(field or ("",)))[0]
                for field in extra_fields or ()}
        if tops & {"metadata", "status"}:
            return super().build(body=body, extra_fields=extra_fields)  # a handler reads what is left out
        meta = body.get("metadata") or {}
        lean = {key: value for key, value in body.items() if key not in ("metadata", "status")}
        lean["metadata"] = {key: meta[key] for key in self.KEPT_METADATA if key in meta}
        return super().build(body=kopf.Body(typing.cast(kopf.RawBody, lean)), extra_fields=extra_fields)


def operator_settings(config: OperatorConfig) -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=PROGRESS_PREFIX)
    settings.persistence.diffbase_storage = EssenceStorage(prefix=PROGRESS_PREFIX, key="last-handled-configuration")
    settings.persistence.finalizer = f"{PROGRESS_PREFIX}/finalizer"
    settings.posting.reporting_component = "berth-operator"
    settings.posting.level = logging.WARNING  # Events: ours, and Kopf's only for failures
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.admission.server = config.webhook.server()
    settings.admission.managed = config.webhook.config_name if config.webhook.enabled else None
    return settings


def run(namespace: str | None = None, peering: str | None = None, *,
        webhook: WebhookOptions | None = None,
        settings: Settings | None = None,
        priority: int | None = None,
        resync_seconds: float = 5.0,
        track_leases: bool = True,
        status_writes_per_second: float = STATUS_WRITES_PER_SECOND,
        liveness_endpoint: str | None = None,
        round_timeout_seconds: float = ROUND_TIMEOUT_SECONDS) -> None:
    """Run the operator until it is stopped (SIGINT / SIGTERM).

    ``namespace``: None watches the whole cluster; a name restricts it (tests only, see above).
    ``peering``: the Kopf peering object's name for several replicas; None runs standalone.
    ``webhook``: where the admission webhook is served (:class:`WebhookOptions`; default off).
    ``settings``: the cluster's placement settings, as the extender has them (overcommit, liveness
    threshold...). ``priority``: this replica's peering priority (default: random).
    ``resync_seconds``: how often a policy's status is recomputed when an input changed.
    ``track_leases``: judge node liveness by kube-node-lease Leases, as the extender does.
    ``status_writes_per_second``: the bound on status writes of all policies together.
    ``liveness_endpoint``: e.g. ``http://0.0.0.0:8080/healthz`` for the Deployment's probes.
    ``round_timeout_seconds``: when an idle Fill/Each round closes, as the extender has it.
    """
    from berth.extender.live_view import KubeSource, kube_api_client

    config = OperatorConfig(settings=settings or Settings(), resync_seconds=resync_seconds,
                            track_leases=track_leases and namespace is None, namespace=namespace,
                            status_writes_per_second=status_writes_per_second,
                            round_timeout_seconds=round_timeout_seconds,
                            webhook=(webhook or WebhookOptions()).checked(), drain_api=kube_drain_api,
                            status_api=kube_status_writer)
    store = OperatorStore(leases_tracked=config.track_leases)
    registry, _ = build_registry(config, store)
    if peering is not None and priority is None:
        priority = random.SystemRandom().randint(1, 2**31 - 1)
    log.info("berth operator: %s, %s, webhook %s", f"namespace {namespace}" if namespace else "cluster-wide",
             f"peering {peering!r} priority {priority}" if peering else "standalone", config.webhook.mode)
    view = live_view(store, KubeSource(kube_api_client(), pod_namespace=namespace))
    view.start()
    try:
        kopf.run(
            registry=registry,
            settings=operator_settings(config),
            clusterwide=namespace is None,
            namespaces=[namespace] if namespace else (),
            standalone=peering is None,
            peering_name=peering,
            priority=priority or 0,
            liveness_endpoint=liveness_endpoint,
        )
    finally:
        view.stop()


def kube_drain_api() -> KubeDrainApi:
    """What an executing NodeDrain cordons and evicts with: the in-cluster service account, else
    ``KUBECONFIG`` / ``~/.kube/config``, as Kopf logs in."""
    return KubeDrainApi(_api_client())


class KubeStatusWriter:
    """What writes a policy's status when a pod change calls for it: a merge patch of the status
    subresource, with the same credentials, sent on the operator's event loop over a pool of
    :data:`WRITES_IN_FLIGHT` kept-alive connections (the extender's asyncio client). The
    kubernetes client cost a worker thread per write, its model machinery and a decoded reply that
    nothing reads; under pod churn the operator writes a status for nearly every change."""

    def __init__(self, configuration: Any) -> None:
        self.session = ApiSession(configuration, connections=WRITES_IN_FLIGHT)

    async def __call__(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        await self.session.request(
            "PATCH", f"/apis/{API_GROUP}/{CRD_VERSION}/namespaces/{namespace}/{POLICY_PLURAL}/{name}/status",
            {"status": status}, content_type="application/merge-patch+json")

    async def close(self) -> None:
        await self.session.close()


def kube_status_writer() -> StatusWriter:
    """The operator's :class:`KubeStatusWriter`: the in-cluster service account, else ``KUBECONFIG``
    / ``~/.kube/config``."""
    return KubeStatusWriter(_api_client().configuration)


def _api_client(connections: int | None = None) -> Any:
    """A client with the service account or kubeconfig's credentials; ``connections``: the
    connections it keeps (default: the library's, 5 per CPU), as many as the requests it sends at
    once (more would each open a connection of their own and drop it)."""
    from kubernetes import client
    from kubernetes import config as kube_config

    loader: Any = kube_config
    try:
        loader.load_incluster_config()
    except loader.ConfigException:
        loader.load_kube_config()
    if connections is None:
        return client.ApiClient()
    configuration = client.Configuration.get_default_copy()
    configuration.connection_pool_maxsize = connections
    return client.ApiClient(configuration)


def _placement_settings() -> tuple[Settings, bool, float]:
    """The extender's placement settings, whether it tracks node Leases and when its idle rounds
    close (the same ``BERTH_*`` variables), so that the operator's plans judge nodes and rounds as
    the extender does."""
    try:
        from berth.extender.settings import load_settings
    except ImportError:
        return Settings(), True, ROUND_TIMEOUT_SECONDS
    extender = load_settings()
    return extender.core(), extender.track_leases, extender.round_timeout_seconds


def _writes_per_second(text: str) -> float:
    low, high = STATUS_WRITES_BOUNDS
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not low <= value <= high:
        raise argparse.ArgumentTypeError(f"must be between {low:g} and {high:g}, not {text}")
    return value


def parser() -> argparse.ArgumentParser:
    env = os.environ.get
    p = argparse.ArgumentParser(prog="berth operator", description="Run the PlacementPolicy operator.")
    p.add_argument("--namespace", default=env("BERTH_OPERATOR_NAMESPACE") or None,
                   help="watch only this namespace (tests); default: the whole cluster")
    p.add_argument("--peering", default=env("BERTH_OPERATOR_PEERING") or None,
                   help="Kopf peering object for several replicas; default: standalone")
    p.add_argument("--priority", type=int, default=None, help="peering priority (default: random)")
    p.add_argument("--resync-seconds", type=float, default=float(env("BERTH_OPERATOR_RESYNC_SECONDS") or 5.0),
                   help="how often each policy's status is recomputed (default 5)")
    p.add_argument("--status-writes-per-second", type=_writes_per_second,
                   default=env("BERTH_OPERATOR_STATUS_WRITES_PER_SECOND") or str(STATUS_WRITES_PER_SECOND),
                   help="status writes per second, all policies together "
                        f"({STATUS_WRITES_BOUNDS[0]:g} to {STATUS_WRITES_BOUNDS[1]:g}, default "
                        f"{STATUS_WRITES_PER_SECOND:g})")
    p.add_argument("--no-leases", action="store_true",
                   help="judge node liveness without node Leases (also off with BERTH_TRACK_LEASES=false)")
    p.add_argument("--liveness", default=env("BERTH_OPERATOR_LIVENESS") or None,
                   help="health endpoint, e.g. http://0.0.0.0:8080/healthz")
    w = p.add_argument_group("admission webhook (see berth.operator.webhook)")
    w.add_argument("--webhook", choices=MODES, type=str.lower, default=env("BERTH_WEBHOOK_MODE") or "off")
    w.add_argument("--webhook-listen", default=env("BERTH_WEBHOOK_LISTEN") or None)
    w.add_argument("--webhook-port", type=int, default=int(env("BERTH_WEBHOOK_PORT") or DEFAULT_PORT))
    w.add_argument("--webhook-host", default=env("BERTH_WEBHOOK_HOST") or None,
                   help="the name the API server calls (in a cluster: the Service's DNS name)")
    w.add_argument("--webhook-cert", default=env("BERTH_WEBHOOK_CERT") or None)
    w.add_argument("--webhook-key", default=env("BERTH_WEBHOOK_KEY") or None)
    w.add_argument("--webhook-ca", default=env("BERTH_WEBHOOK_CA") or None)
    w.add_argument("--webhook-config", default=env("BERTH_WEBHOOK_CONFIG", DEFAULT_CONFIG_NAME),
                   help="ValidatingWebhookConfiguration kept by the operator; '' leaves it to the chart")
    w.add_argument("--webhook-fail-closed", action="store_true",
                   default=(env("BERTH_WEBHOOK_FAIL_CLOSED") or "").lower() in ("1", "true", "yes"))
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not args.verbose:
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)  # one line per handler run otherwise
        logging.getLogger("aiohttp.access").setLevel(logging.WARNING)  # one line per admission review
    webhook = WebhookOptions(mode=args.webhook, listen=args.webhook_listen, port=args.webhook_port,
                             host=args.webhook_host, cert_file=args.webhook_cert, key_file=args.webhook_key,
                             ca_file=args.webhook_ca, config_name=args.webhook_config or None,
                             fail_closed=args.webhook_fail_closed)
    settings, track_leases, round_timeout = _placement_settings()
    try:
        run(args.namespace, args.peering, webhook=webhook, settings=settings, priority=args.priority,
            resync_seconds=args.resync_seconds, track_leases=track_leases and not args.no_leases,
            status_writes_per_second=args.status_writes_per_second, liveness_endpoint=args.liveness,
            round_timeout_seconds=round_timeout)
    except WebhookConfigError as exc:
        log.error("%s", exc)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
