"""The extender's HTTP routes, one ``APIRouter`` per concern:

- :mod:`.scheduler`: kube-scheduler's verbs (filter, prioritize, bind, preempt), from one table
  (:data:`.scheduler.VERBS`) that gives each verb its request, its reply, its handler and its
  failure policy, and from which both the routes and the fast path are made;
- :mod:`.explain`: the explain / preview / capacity / allocations API under ``/api/v1``;
- :mod:`.operations`: ``/healthz``, ``/readyz``, ``/metrics``.

What a route needs (the engine, the store, the settings, the metrics, the API's gate) it is given
by the dependencies of :mod:`.deps`, which tests replace with ``app.dependency_overrides``.
"""
