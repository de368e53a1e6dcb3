"""Test harness: a real Kubernetes control plane (etcd, kube-apiserver, kube-scheduler) run
as plain processes on 127.0.0.1, with helpers for a cluster that has no kubelet and no
controller-manager.

* :mod:`.controlplane`: :class:`ControlPlane` (start, kubeconfig, schedulers, teardown).
* :mod:`.kube`: fake nodes, their Leases, namespaces with a default ServiceAccount, pods.
* :mod:`.fixtures`: pytest fixtures (``control_plane`` and friends).
* :mod:`.binaries`: where the binaries come from (``hack/build-k8s.sh``, etcd).
* :mod:`.certs`: the PKI, made with ``cryptography``.
"""

from .binaries import Binaries, resolve_binaries
from .controlplane import ControlPlane, Scheduler, default_scheduler_config
from .kube import (
    NodeLeaseRenewer,
    NodeSpec,
    create_namespace,
    create_node,
    delete_namespace,
    delete_node,
    ensure_default_service_account,
    force_delete_pod,
    force_delete_pods,
    lease_renew_time,
    node_is_ready,
    remove_not_ready_taint,
    renew_node_lease,
    set_node_ready,
    set_taints,
    simple_pod,
    temporary_namespace,
    wait_for,
)
from .process import HarnessError

__all__ = [
    "Binaries",
    "ControlPlane",
    "HarnessError",
    "NodeLeaseRenewer",
    "NodeSpec",
    "Scheduler",
    "create_namespace",
    "create_node",
    "default_scheduler_config",
    "delete_namespace",
    "delete_node",
    "ensure_default_service_account",
    "force_delete_pod",
    "force_delete_pods",
    "lease_renew_time",
    "node_is_ready",
    "remove_not_ready_taint",
    "renew_node_lease",
    "resolve_binaries",
    "set_node_ready",
    "set_taints",
    "simple_pod",
    "temporary_namespace",
    "wait_for",
]
