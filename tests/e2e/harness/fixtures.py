"""Reusable pytest fixtures for the e2e tests.

Bring them into a ``conftest.py`` (or a test module) by importing them::

    from tests.e2e.harness.fixtures import *  # noqa: F403  (all of them)
    from tests.e2e.harness.fixtures import control_plane, kube_api  # or some

Fixtures that depend on others need those imported too (``from ... import *`` is simplest).

* ``control_plane`` (session): a :class:`ControlPlane` (etcd + kube-apiserver on 127.0.0.1,
  or the existing cluster of ``KUBECONFIG`` when ``BERTH_E2E_USE_EXISTING=1``). It is created
  once per process even when several modules import the fixture, and stopped after the last
  user. If it cannot start, every test that uses it errors with the reason: it never skips.
* ``kube_api`` (session): a ``kubernetes.client.ApiClient`` with admin rights.
* ``node_leases`` (session): a :class:`NodeLeaseRenewer` (every 2 s) for the test's nodes.
* ``start_scheduler`` (function): ``start_scheduler(config=None, **kw) -> Scheduler``;
  every scheduler started through it is stopped when the test ends.
* ``e2e_namespace`` (function): a fresh namespace with its ``default`` ServiceAccount; its
  pods are force-deleted when the test ends.
* ``make_nodes`` (function): ``make_nodes(*NodeSpec) -> [names]``: Ready-looking nodes whose
  Leases are renewed; deleted (with their Leases) when the test ends.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from .controlplane import ControlPlane, Scheduler
from .kube import NodeLeaseRenewer, NodeSpec, create_node, delete_node, temporary_namespace

__all__ = [
    "control_plane",
    "e2e_namespace",
    "kube_api",
    "make_nodes",
    "node_leases",
    "start_scheduler",
]

_shared_lock = threading.Lock()
_shared_cp: ControlPlane | None = None
_shared_users = 0


def acquire_control_plane() -> ControlPlane:
    """The process-wide control plane, started on first use (reference counted)."""
    global _shared_cp, _shared_users
    with _shared_lock:
        if _shared_cp is None:
            _shared_cp = ControlPlane.from_env()
        _shared_users += 1
        return _shared_cp


def release_control_plane() -> None:
    """Drop one reference; the last one stops the control plane."""
    global _shared_cp, _shared_users
    with _shared_lock:
        _shared_users -= 1
        if _shared_users <= 0 and _shared_cp is not None:
            cp, _shared_cp, _shared_users = _shared_cp, None, 0
            cp.stop()


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    """etcd + kube-apiserver on 127.0.0.1 (or an existing cluster, see the module doc)."""
    cp = acquire_control_plane()
    try:
        yield cp
    finally:
        release_control_plane()


@pytest.fixture(scope="session")
def kube_api(control_plane: ControlPlane) -> Iterator[Any]:
    """An admin ``kubernetes.client.ApiClient`` for the control plane."""
    api = control_plane.api_client()
    try:
        yield api
    finally:
        api.close()


@pytest.fixture(scope="session")
def node_leases(kube_api: Any) -> Iterator[NodeLeaseRenewer]:
    """Renews the Leases of the nodes added to it, every 2 seconds."""
    renewer = NodeLeaseRenewer(kube_api, interval=2.0)
    try:
        yield renewer
    finally:
        renewer.stop()


@pytest.fixture
def start_scheduler(control_plane: ControlPlane) -> Iterator[Callable[..., Scheduler]]:
    """A factory for kube-schedulers (see ``ControlPlane.start_scheduler``) stopped at test end."""
    started: list[Scheduler] = []

    def start(config: Any = None, **kwargs: Any) -> Scheduler:
        sched = control_plane.start_scheduler(config, **kwargs)
        started.append(sched)
        return sched

    try:
        yield start
    finally:
        for sched in reversed(started):
            sched.stop()


@pytest.fixture
def e2e_namespace(kube_api: Any) -> Iterator[str]:
    """A new namespace (``e2e-<random>``) with its default ServiceAccount."""
    with temporary_namespace(kube_api, "e2e") as name:
        yield name


@pytest.fixture
def make_nodes(kube_api: Any, node_leases: NodeLeaseRenewer) -> Iterator[Callable[..., list[str]]]:
    """A factory: ``make_nodes(*specs)`` creates the nodes and renews their Leases; they are
    deleted when the test ends."""
    created: list[str] = []

    def make(*specs: NodeSpec) -> list[str]:
        names = []
        for spec in specs:
            create_node(kube_api, spec)
            created.append(spec.name)
            names.append(spec.name)
        node_leases.add(*names)
        return names

    try:
        yield make
    finally:
        node_leases.remove(*created)
        for name in created:
            delete_node(kube_api, name)
