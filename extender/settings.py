"""The extender's settings, read once at start from ``BERTH_*`` environment variables.

Invalid values are logged and the safe default is used (docs/behaviour.md#overcommit); the
extender never refuses to start over a bad setting. :meth:`ExtenderSettings.core` maps the
placement settings onto the core's :class:`~berth.core.settings.Settings`.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Literal

from pydantic import (
    Field,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from berth.core import (
    LIVENESS_THRESHOLD_SECONDS,
    MIN_FREE_DISK_PERCENT,
    OVERCOMMIT_PERCENT,
    ROUND_TIMEOUT_SECONDS,
    SLEEPY_MEMORY_FACTOR,
    Settings,
    Strategy,
    index_from_environment,
)
from berth.extender.leader import LeaseTimes, default_identity, default_namespace

log = logging.getLogger("berth.extender.settings")

ASSUME_TTL_SECONDS = 900.0
"""The safety bound on a bound pod's reservation: long, as kube-scheduler itself never drops an
assumed pod whose bind succeeded; a watch lagging this far behind is a fault worth a metric."""

MIB = 2**20


class ExtenderSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="BERTH_", extra="ignore", frozen=True,
                                      validate_default=False)

    # -- placement (mapped onto berth.core.settings.Settings) --------------------------
    cpu_overcommit_percent: int = OVERCOMMIT_PERCENT.field(100)
    memory_overcommit_percent: int = OVERCOMMIT_PERCENT.field(100)
    min_free_disk_percent: int = MIN_FREE_DISK_PERCENT.field(10)
    reject_unknown_capacity: bool = False
    liveness_threshold_seconds: float = LIVENESS_THRESHOLD_SECONDS.field(40.0)
    sleepy_memory_factor: float = SLEEPY_MEMORY_FACTOR.field(2.0)
    default_strategy: Strategy | None = None  # for pods no policy selects; unset: they pass through

    # -- extender ---------------------------------------------------------------------
    track_leases: bool = True  # judge liveness by kube-node-lease Leases (off for clusters without kubelets)
    tentative_ttl_seconds: float = Field(default=15.0, gt=0, le=3600)  # prioritize winner held until bind
    # A bound pod counts on its node until the watch (or a full list) shows it bound or deleted; this
    # safety bound releases it only if neither ever comes (berth_assumptions_expired_total{kind="bound"}).
    assume_ttl_seconds: float = Field(default=ASSUME_TTL_SECONDS, gt=0, le=86400)
    # An executing NodeDrain's planned destination keeps room for an evicted pod's replacement this long at most
    drain_hold_seconds: float = Field(default=300.0, gt=0, le=86400)
    # a Fill/Each round left idle this long closes
    round_timeout_seconds: float = Field(default=ROUND_TIMEOUT_SECONDS, gt=0, le=86400)
    # filter answers a governed pod with berth's winner alone: kube-scheduler then skips scoring
    # (one feasible node) and prioritize; for large clusters (extender/README.md, "Configuration")
    filter_winner_only: bool = False
    # berth writes the node it plans for a pending pod it governs into status.nominatedNodeName before
    # kube-scheduler's cycle, which then tries that node alone first (extender/README.md, "Nominate")
    nominate: bool = False
    nominate_schedulers: str = "berth-scheduler"  # comma-separated: the schedulerNames (profiles) that call
    # berth; only their pods are nominated
    nominate_queue: int = Field(default=10000, ge=1, le=1_000_000)  # pods waiting for a nomination; more dropped
    nominate_per_second: float = Field(default=300.0, gt=0, le=10000)  # nominations written a second at most
    # a pod is nominated only once it has waited this long unreached by kube-scheduler's cycle (it is then
    # behind a backlog, where a nomination wins): longer than kube-scheduler takes to reach a pod when idle
    nominate_after_seconds: float = Field(default=0.1, ge=0, le=60)
    # With BERTH_NOMINATE, one replica nominates: the holder of a coordination.k8s.io/v1 Lease
    # (extender/leader.py; the others answer filter, prioritize and bind only). Off: every replica
    # nominates (one replica, or no API server).
    leader_elect: bool = True
    leader_lease_name: str = Field(default="berth-extender-nominator", min_length=1, max_length=253)
    leader_lease_namespace: str = ""  # empty: the pod's (POD_NAMESPACE, or its service account's), else default
    leader_identity: str = ""  # the holder's name; empty: the pod's (POD_NAME), else host name and a random suffix
    leader_lease_duration_seconds: int = Field(default=15, ge=1, le=3600)  # a Lease not renewed keeps others
    # off this long (by each candidate's own clock)
    leader_renew_deadline_seconds: float = Field(default=10.0, gt=0, le=3600)  # the holder stops nominating
    # when it could not renew for this long (less than the lease duration)
    leader_retry_period_seconds: float = Field(default=2.0, gt=0, le=600)  # between tries to take or renew
    decisions_kept: int = Field(default=5000, ge=0, le=1_000_000)  # latest decisions kept in memory
    record_events: bool = True  # an Event on the pod at bind (BerthPlaced) and when no node takes it (BerthRefused)
    # connections for the Bindings opened from the start and kept open while idle, so that no bind of a
    # burst pays a TLS handshake (extender/binder.py); at most the Bindings' pool's 64; 0: opened on demand
    bind_connections_warm: int = Field(default=64, ge=0, le=64)
    # a Binding that found no free connection within this many seconds is not sent and its bind fails
    # (kube-scheduler retries the pod after its backoff): keep it below kube-scheduler's extender
    # httpTimeout (5 s by default), after which kube-scheduler no longer waits for the bind
    bind_queue_seconds: float = Field(default=3.0, gt=0, le=600)
    watch_timeout_seconds: int = Field(default=300, ge=10, le=3600)  # server-side watch timeout, then re-watch
    relist_backoff_max_seconds: float = Field(default=30.0, gt=0, le=600)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "INFO"

    # -- serving (only kube-scheduler may drive filter, prioritize and bind) -------------------
    tls_cert_file: str | None = None  # serve HTTPS with this certificate ...
    tls_key_file: str | None = None  # ... and key
    tls_client_ca_file: str | None = None  # and require client certificates signed by this CA ...
    tls_client_names: str = "berth-scheduler-client"  # ... naming one of these (comma-separated; the CN
    # or a DNS SAN of kube-scheduler's client certificate; the chart's scheduler client by default)
    tls_reload_seconds: float = Field(default=30.0, ge=0.1, le=3600)  # how often the TLS files are checked
    api_anonymous: bool = False  # the explain API to everyone who reaches the port, without authentication
    api_auth_cache_seconds: float = Field(default=30.0, gt=0, le=600)  # TokenReview / SubjectAccessReview kept
    api_auth_cache_entries: int = Field(default=4096, ge=0, le=1_000_000)  # at most this many of each
    api_port: int | None = Field(default=None, ge=1, le=65535)  # a second, plain-HTTP listener: explain
    # API, health and metrics only (never the scheduler verbs), for probes and people
    docs: bool = False  # serve /docs and /redoc (for development: their pages load assets from a CDN)

    # -- limits (what one client can make the extender hold or do) --------------------------
    max_body_bytes: int = Field(default=128 * MIB, ge=MIB, le=1024 * MIB)  # the extender port: kube-scheduler's
    # largest real request, filter with 5,000 full Node objects (nodeCacheCapable: false), measured ~110 MiB
    api_max_body_bytes: int = Field(default=MIB, ge=1024, le=64 * MIB)  # the API port: a Pod manifest or shape
    body_timeout_seconds: float = Field(default=30.0, gt=0, le=600)  # a request's whole body must arrive within
    header_timeout_seconds: float = Field(default=10.0, gt=0, le=300)  # a request's head must arrive within
    max_header_bytes: int = Field(default=64 * 1024, ge=4096, le=MIB)  # request line and headers
    keep_alive_seconds: int = Field(default=75, ge=1, le=3600)  # an idle connection is closed after
    api_max_connections: int = Field(default=64, ge=1, le=10000)  # open on the API port; more closed at once
    api_max_concurrency: int = Field(default=1, ge=1, le=64)  # API requests judged at once
    api_loop_share: float = Field(default=0.25, gt=0, le=1)  # of the event loop's time API work may take
    # (both ports share one loop: the verbs keep the rest whatever floods the API)
    api_max_queue: int = Field(default=32, ge=0, le=10000)  # API requests waiting; more answered 503
    api_max_containers: int = Field(default=64, ge=1, le=10000)  # containers of a preview/capacity pod
    api_max_resources: int = Field(default=32, ge=1, le=10000)  # distinct resources it requests
    api_max_labels: int = Field(default=64, ge=1, le=10000)  # labels it carries
    api_max_affinity_terms: int = Field(default=256, ge=1, le=100000)  # node selector entries, affinity
    # requirements and their values, and tolerations, counted together
    api_max_node_names: int = Field(default=10000, ge=1, le=1_000_000)  # nodes a preview may name

    @field_validator("*", mode="wrap")
    @classmethod
    def _safe_default(cls, value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> Any:
        field = info.field_name or ""
        if field == "default_strategy" and isinstance(value, str):
            value = _strategy_spelling(value)
        elif field == "log_level" and isinstance(value, str):
            value = value.strip().upper()
        try:
            return handler(value)
        except ValidationError as exc:
            default = cls.model_fields[field].default
            log.warning("setting BERTH_%s=%r is invalid (%s); using the safe default %r",
                        field.upper(), value, exc.errors()[0]["msg"], default)
            return default

    @model_validator(mode="after")
    def _consistent_lease_times(self) -> ExtenderSettings:
        """Lease times that cannot work together (a holder must stop before another may take
        over) are logged and replaced by the defaults, all three."""
        try:
            self.lease_times()
        except ValueError as exc:
            log.warning("%s; using the safe defaults 15s, 10s, 2s", exc)
            for name in ("leader_lease_duration_seconds", "leader_renew_deadline_seconds",
                         "leader_retry_period_seconds"):
                object.__setattr__(self, name, type(self).model_fields[name].default)
        return self

    def lease_times(self) -> LeaseTimes:
        return LeaseTimes(self.leader_lease_duration_seconds, self.leader_renew_deadline_seconds,
                          self.leader_retry_period_seconds)

    def lease_namespace(self) -> str:
        """Where the nominator's Lease is: BERTH_LEADER_LEASE_NAMESPACE, else the pod's namespace."""
        return (self.leader_lease_namespace.strip() or os.environ.get("POD_NAMESPACE", "").strip()
                or default_namespace())

    def lease_identity(self) -> str:
        """The name this replica holds the Lease under: BERTH_LEADER_IDENTITY, else the pod's name."""
        return self.leader_identity.strip() or os.environ.get("POD_NAME", "").strip() or default_identity()

    def nominated_schedulers(self) -> frozenset[str]:
        """The schedulerNames whose pods berth nominates."""
        return frozenset(n.strip() for n in self.nominate_schedulers.split(",") if n.strip())

    def core(self) -> Settings:
        """The core's settings, ``BERTH_INDEX`` read once here like the others: left unresolved, every
        evaluation would read the environment again, several times a pod."""
        return Settings(
            cpu_overcommit_percent=self.cpu_overcommit_percent,
            memory_overcommit_percent=self.memory_overcommit_percent,
            min_free_disk_percent=self.min_free_disk_percent,
            reject_unknown_capacity=self.reject_unknown_capacity,
            liveness_threshold_seconds=self.liveness_threshold_seconds,
            sleepy_memory_factor=self.sleepy_memory_factor,
            default_strategy=self.default_strategy,
            index=index_from_environment(),
        )


def _strategy_spelling(value: str) -> str | None:
    """``fill``, ``FILL``, ``best-fit`` are read as ``Fill``, ``BestFit``; empty or ``none`` unsets it."""
    text = value.strip()
    if text.lower() in ("", "none", "default"):
        return None
    wanted = text.replace("-", "").replace("_", "").lower()
    for strategy in Strategy:
        if strategy.value.lower() == wanted:
            return strategy.value
    return text


def load_settings(**overrides: Any) -> ExtenderSettings:
    """Settings from the environment, with ``overrides`` (tests, CLI flags) taking precedence."""
    return ExtenderSettings(**overrides)
