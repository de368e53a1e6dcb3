"""Prometheus metrics of the extender, on a registry of its own (one per app, so that tests can
build many apps in one process).

- ``berth_extender_request_seconds{verb}``: latency histogram per verb (filter, prioritize,
  bind, preempt, preview, capacity, allocations, decision);
- ``berth_bind_step_seconds{step}``: the parts of a bind berth spends itself (``pod``, ``lock_wait``,
  ``recheck``) and, within its Binding call, before the request goes out (``connection_wait``,
  ``connect``) and until the reply's headers are read (``answer``), beside
  ``berth_api_call_seconds{call}``, the call as a whole;
- ``berth_event_loop_lag_seconds``: how late the event loop runs a sampled wake-up
  (:mod:`berth.extender.loop_lag`): the part of a call's time spent waiting for the loop;
- ``berth_extender_decisions_total{verb,result}``: outcomes (``placed``, ``passthrough``,
  ``no_node``, an error code such as ``already_filled``, ``bound``, ``conflict``,
  ``bad_request`` ...);
- ``berth_view_objects{kind}``: view sizes (nodes, pods, assumed, pending, policies, ...), read at
  scrape time;
- ``berth_view_unreadable_objects_total{kind}``: nodes, leases and pods the list or watch delivered
  that berth cannot read and leaves out of its view (each is also logged);
- ``berth_watch_restarts_total{kind}``: relists after a watch error or 410 Gone;
- ``berth_bind_conflicts_total{reason}``: binds refused by the recheck (``recheck``) or because a
  bind of the same pod was in flight (``in_flight``);
- ``berth_events_dropped_total``: BerthPlaced Events dropped because too many were waiting to be
  written (the pod's annotation still records the decision);
- ``berth_assumptions_expired_total{kind}``: assumed pods released by their time bound: ``tentative``
  (no bind came for filter's choice) or ``bound`` (a bound pod's reservation lapsed before the watch
  showed the pod bound or deleted: a lagging watch);
- ``berth_nominations_total{result}``: nominations of pending pods (:mod:`berth.extender.nominator`):
  ``made``, ``hit``, ``missed``, ``late``, ``superseded``, ``dropped``, ``failed``, ``withdrawn``,
  ``abandoned``; ``hit``, ``missed`` and ``late`` on the replica whose filter judged the pod, for
  any nomination berth wrote (its managedFields name berth's field manager), whichever replica
  wrote it: sum them over the replicas (each knows only its own counts: a missed nomination whose
  next filter reaches the other replica counts ``late`` there too);
- ``berth_nominator_leading``: 1 while this replica nominates (it holds the nominator's Lease, or
  nominates without an election), 0 while another replica does (:mod:`berth.extender.leader`);
- ``berth_cache_entries{cache}``: entries of each bounded cache (counted selectors, verdict tables,
  decisions, binds in flight, Events queued ...), read at scrape time: each stays under its bound whatever clients ask.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from berth.extender.store import ClusterStore

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_BUCKETS = (0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class _ViewCollector(Collector):
    """The view's figures, read from the store at scrape time."""

    def __init__(self, store: ClusterStore, metrics: Metrics) -> None:
        self._store = store
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        sizes = GaugeMetricFamily("berth_view_objects", "Objects in the extender's cluster view, by kind",
                                  labels=["kind"])
        for kind, value in sorted(self._store.sizes().items()):
            sizes.add_metric([kind], float(value))
        yield sizes
        unreadable = CounterMetricFamily("berth_view_unreadable_objects",
                                         "Objects from the list or watch that berth cannot read and ignores, by kind",
                                         labels=["kind"])
        for kind, value in sorted(self._store.unreadable.items()):
            unreadable.add_metric([kind], float(value))
        yield unreadable
        caches = GaugeMetricFamily("berth_cache_entries", "Entries of the extender's bounded caches, by cache",
                                   labels=["cache"])
        extra = self._metrics.cache_sizes
        for cache, value in sorted({**self._store.cache_sizes(), **(extra() if extra else {})}.items()):
            caches.add_metric([cache], float(value))
        yield caches


class Metrics:
    def __init__(self, store: ClusterStore | None = None) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.latency = Histogram("berth_extender_request_seconds", "Time to answer a request, by verb",
                                 ["verb"], registry=self.registry, buckets=_BUCKETS)
        self.api_calls = Histogram(
            "berth_api_call_seconds",
            "Time the API server took to answer the bind's calls (binding: the Binding), by call: the "
            "rest of the bind latency is the extender's own (its loop, the recheck)",
            ["call"], registry=self.registry, buckets=_BUCKETS)
        self.bind_steps = Histogram(
            "berth_bind_step_seconds",
            "Where a bind's time goes, by step: pod (finding the pod), lock_wait (waiting for the view's lock), "
            "recheck (the node judged again and reserved), and within the Binding call (berth_api_call_seconds) "
            "connection_wait (for a free connection to the API server), connect (opening one, TLS included) and "
            "answer (from the request sent to the reply's headers read)",
            ["step"], registry=self.registry, buckets=_BUCKETS)
        self.loop_lag = Histogram(
            "berth_event_loop_lag_seconds",
            "How much later than due the event loop ran a sampled wake-up: the wait a ready reply (a Binding's) "
            "has before the loop comes round to it", registry=self.registry, buckets=_BUCKETS)
        self.decisions = Counter("berth_extender_decisions_total", "Answers by verb and result",
                                 ["verb", "result"], registry=self.registry)
        self.watch_restarts = Counter("berth_watch_restarts_total",
                                      "Relists after a watch error or 410 Gone, by kind", ["kind"],
                                      registry=self.registry)
        self.bind_conflicts = Counter("berth_bind_conflicts_total",
                                      "Binds refused: the recheck failed or a bind of the pod was in flight",
                                      ["reason"], registry=self.registry)
        self.events_dropped = Counter("berth_events_dropped",
                                      "BerthPlaced Events dropped: too many were waiting to be written",
                                      registry=self.registry)
        self.assumptions_expired = Counter(
            "berth_assumptions_expired_total",
            "Assumed pods released by their time bound (bound: before the watch showed the pod)",
            ["kind"], registry=self.registry)
        self.nominations = Counter(
            "berth_nominations_total",
            "Pods berth nominated to a node before kube-scheduler's cycle (status.nominatedNodeName), by what "
            "became of the nomination: made (written by this replica), hit (filter was sent that node alone and "
            "passed it), missed (sent it alone, refused it: berth's decision changed), late (filter was sent more "
            "nodes); hit, missed and late are counted once a nomination on each replica whose filter judged the pod, "
            "for nominations berth wrote (this replica, or another or an earlier process: the pod's managedFields "
            "name berth-extender); superseded "
            "(kube-scheduler's cycle for the pod, or another nomination, came before the write), dropped (the "
            "queue was full), failed (the API server refused the write), withdrawn (a missed nomination cleared), "
            "abandoned (planned, not written: this replica stopped leading)",
            ["result"], registry=self.registry)
        self.leading = Gauge(
            "berth_nominator_leading",
            "1 while this replica nominates (it holds the nominator's Lease, or nominates without an election), "
            "0 while it does not", registry=self.registry)
        self.cache_sizes: Callable[[], Mapping[str, int]] | None = None  # the engine's own caches
        # each metric's child of given label values, looked up once: prometheus_client validates and
        # looks the values up under a lock at every labels() call, a dozen times a pod on the verbs
        self._children: dict[tuple[MetricWrapperBase, tuple[str, ...]], Any] = {}
        if store is not None:
            self.registry.register(_ViewCollector(store, self))

    def labelled(self, metric: MetricWrapperBase, *values: str) -> Any:
        """``metric.labels(*values)``, the child kept from its first use (the values a verb labels
        with are a small fixed set: verbs, results, bind steps)."""
        key = (metric, values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return child

    def observe(self, verb: str, seconds: float, result: str | None = None) -> None:
        self.labelled(self.latency, verb).observe(seconds)
        if result is not None:
            self.labelled(self.decisions, verb, result).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
