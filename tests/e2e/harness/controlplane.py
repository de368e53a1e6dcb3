"""A real Kubernetes control plane run as plain processes on 127.0.0.1: etcd, kube-apiserver
any number of kube-schedulers and, for the tests that ask for it, a kube-controller-manager
running only the workload controllers (no kubelet).

Typical use::

    with ControlPlane.start() as cp:
        api = cp.api_client()
        sched = cp.start_scheduler()            # default profile
        ...

or, in pytest, the ``control_plane`` fixture of :mod:`tests.e2e.harness.fixtures`.

:meth:`ControlPlane.from_env` uses an existing cluster instead when ``KUBECONFIG`` is set and
``BERTH_E2E_USE_EXISTING=1``: nothing is started for the cluster itself (kube-schedulers that
a test asks for still run locally against that kubeconfig, so give their profiles a scheduler
name of their own there), and :meth:`ControlPlane.stop` leaves the cluster alone.

Environment variables:

* ``BERTH_K8S_BIN_DIR`` (or ``BERTH_K8S_BIN``): where the Kubernetes binaries are (default:
  run ``hack/build-k8s.sh``, which prints it).
* ``BERTH_ETCD``: the etcd binary (default: ``etcd`` on ``PATH``).
* ``BERTH_E2E_KEEP=1``: keep the work directory (certs, kubeconfig, logs) after stopping.
* ``BERTH_E2E_LOG_DIR``: copy the components' logs there when stopping (for CI artefacts).
* ``KUBECONFIG`` + ``BERTH_E2E_USE_EXISTING=1``: use that cluster (see above).
"""

from __future__ import annotations

import atexit
import base64
import copy
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from .binaries import Binaries, resolve_binaries
from .certs import PKI, generate_pki
from .kube import wait_for
from .process import HarnessError, ManagedProcess, free_port, https_get, started_on_free_ports

SERVICE_CIDR = "10.96.0.0/16"
SCHEDULER_CONFIG_API = "kubescheduler.config.k8s.io/v1"
CONTROLLERS = ("deployment", "replicaset", "statefulset", "disruption")
"""The controllers :meth:`ControlPlane.start_controller_manager` runs by default."""


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def _log(msg: str) -> None:
    print(f"[berth-e2e] {msg}", file=sys.stderr, flush=True)


@dataclass
class Scheduler:
    """A running kube-scheduler started by :meth:`ControlPlane.start_scheduler`."""

    name: str
    process: ManagedProcess
    config_path: Path
    config: dict[str, Any]
    secure_port: int

    @property
    def log_path(self) -> Path:
        return self.process.log_path

    @property
    def healthz_url(self) -> str:
        return f"https://127.0.0.1:{self.secure_port}/healthz"

    def alive(self) -> bool:
        return self.process.alive()

    def stop(self, grace: float = 10.0) -> None:
        """Stop the scheduler (SIGTERM, then SIGKILL). Idempotent."""
        self.process.stop(grace=grace)


def default_scheduler_config() -> dict[str, Any]:
    """A KubeSchedulerConfiguration with only the default profile (``default-scheduler``)."""
    return {"apiVersion": SCHEDULER_CONFIG_API, "kind": "KubeSchedulerConfiguration"}


@dataclass
class ControlPlane:
    """A control plane started by the harness, or an existing cluster (``managed=False``).

    Attributes that tests use: :attr:`kubeconfig` (an admin kubeconfig), :attr:`server` (the
    API server URL), :attr:`bin_dir` (kube-apiserver, kube-scheduler, kubectl, helm).
    """

    binaries: Binaries
    kubeconfig: Path
    server: str
    workdir: Path
    managed: bool
    pki: PKI | None = None
    etcd: ManagedProcess | None = None
    apiserver: ManagedProcess | None = None
    etcd_url: str | None = None
    schedulers: list[Scheduler] = field(default_factory=list)
    controller_manager: ManagedProcess | None = None
    startup_seconds: float = 0.0
    _etcd_data_dir: Path | None = None
    _owns_workdir: bool = False
    _stopped: bool = False

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_env(cls, binaries: Binaries | None = None) -> ControlPlane:
        """An existing cluster if ``KUBECONFIG`` and ``BERTH_E2E_USE_EXISTING=1`` are set,
        otherwise a new control plane (:meth:`start`)."""
        kubeconfig = os.environ.get("KUBECONFIG")
        if kubeconfig and _env_flag("BERTH_E2E_USE_EXISTING"):
            return cls.existing(Path(kubeconfig.split(os.pathsep)[0]), binaries=binaries)
        return cls.start(binaries=binaries)

    @classmethod
    def existing(cls, kubeconfig: Path, binaries: Binaries | None = None) -> ControlPlane:
        """Wrap an existing cluster reachable with ``kubeconfig``; nothing is started."""
        binaries = binaries or resolve_binaries()
        cfg = yaml.safe_load(kubeconfig.read_text())
        ctx_name = cfg.get("current-context")
        ctx = next((c["context"] for c in cfg.get("contexts", []) if c["name"] == ctx_name), None)
        if ctx is None:
            raise HarnessError(f"{kubeconfig}: no current context")
        cluster = next(c["cluster"] for c in cfg["clusters"] if c["name"] == ctx["cluster"])
        workdir = Path(tempfile.mkdtemp(prefix="berth-e2e-"))
        cp = cls(
            binaries=binaries,
            kubeconfig=kubeconfig,
            server=cluster["server"],
            workdir=workdir,
            managed=False,
            _owns_workdir=True,
        )
        _log(f"using the existing cluster at {cp.server} ({kubeconfig})")
        return cp

    @classmethod
    def start(
        cls,
        binaries: Binaries | None = None,
        *,
        workdir: Path | None = None,
        timeout: float = 120.0,
        apiserver_args: Sequence[str] = (),
    ) -> ControlPlane:
        """Generate certificates, start etcd and kube-apiserver, wait for ``/readyz`` and the
        system namespaces, write ``<workdir>/admin.kubeconfig``."""
        started = time.monotonic()
        binaries = binaries or resolve_binaries()
        etcd_bin = binaries.require_etcd()
        owns = workdir is None
        workdir = workdir or Path(tempfile.mkdtemp(prefix="berth-e2e-"))
        workdir.mkdir(parents=True, exist_ok=True)
        cp = cls(
            binaries=binaries,
            kubeconfig=workdir / "admin.kubeconfig",
            server="",
            workdir=workdir,
            managed=True,
            _owns_workdir=owns,
        )
        try:
            cp.pki = generate_pki(workdir / "pki", service_cidr=SERVICE_CIDR)
            cp._start_etcd(etcd_bin, timeout)
            cp._start_apiserver(timeout, apiserver_args)
            cp._write_kubeconfig()
            cp._wait_for_system_namespaces(timeout)
        except BaseException:
            cp.stop(keep_workdir=True)  # keep the logs the error points at
            _log(f"control plane failed to start; logs kept in {workdir / 'logs'}")
            raise
        # Tear down in order (and remove the work dir) also when the interpreter exits
        # without running the caller's cleanup, e.g. on KeyboardInterrupt outside pytest.
        atexit.register(cp.stop)
        cp.startup_seconds = time.monotonic() - started
        _log(f"control plane up in {cp.startup_seconds:.1f}s: {cp.server}, kubeconfig {cp.kubeconfig}")
        return cp

    def _start_etcd(self, etcd_bin: Path, timeout: float) -> None:
        # etcd fsyncs on every write: keep its data in memory when /dev/shm is there.
        shm = Path("/dev/shm")
        base = shm if shm.is_dir() and os.access(shm, os.W_OK) else self.workdir
        urls: list[str] = []

        def launch() -> tuple[ManagedProcess, Callable[[], bool]]:
            data_dir = Path(tempfile.mkdtemp(prefix="berth-e2e-etcd-", dir=base))
            client_url, peer_url = f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"
            urls.append(client_url)
            proc = ManagedProcess(
                "etcd",
                [
                    etcd_bin,
                    "--name=berth-e2e",
                    f"--data-dir={data_dir}",
                    f"--listen-client-urls={client_url}",
                    f"--advertise-client-urls={client_url}",
                    f"--listen-peer-urls={peer_url}",
                    f"--initial-advertise-peer-urls={peer_url}",
                    f"--initial-cluster=berth-e2e={peer_url}",
                    "--initial-cluster-state=new",
                    "--logger=zap",
                    "--log-level=warn",
                    "--quota-backend-bytes=2147483648",
                ],
                self.workdir / "logs" / "etcd.log",
            ).start()
            self.etcd, self._etcd_data_dir = proc, data_dir
            return proc, lambda: https_get(f"{client_url}/health", timeout=2)[0] == 200

        def undo() -> None:
            if self._etcd_data_dir is not None:
                shutil.rmtree(self._etcd_data_dir, ignore_errors=True)

        started_on_free_ports(launch, timeout=timeout, what="healthy", interval=0.2, undo=undo)
        self.etcd_url = urls[-1]

    def _start_apiserver(self, timeout: float, extra_args: Sequence[str]) -> None:
        assert self.pki is not None and self.etcd_url is not None
        pki = self.pki

        def launch() -> tuple[ManagedProcess, Callable[[], bool]]:
            port = free_port()
            proc = ManagedProcess(
                "kube-apiserver",
                [
                    self.binaries.kube_apiserver,
                    f"--etcd-servers={self.etcd_url}",
                    "--bind-address=127.0.0.1",
                    "--advertise-address=127.0.0.1",
                    f"--secure-port={port}",
                    f"--cert-dir={self.workdir / 'apiserver-certs'}",
                    f"--tls-cert-file={pki.apiserver_cert}",
                    f"--tls-private-key-file={pki.apiserver_key}",
                    f"--client-ca-file={pki.ca_cert}",
                    "--authorization-mode=Node,RBAC",
                    "--anonymous-auth=true",
                    f"--service-cluster-ip-range={SERVICE_CIDR}",
                    "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                    f"--service-account-key-file={pki.sa_pub}",
                    f"--service-account-signing-key-file={pki.sa_key}",
                    "--allow-privileged=true",
                    # Its Endpoints would point at 127.0.0.1, which validation refuses.
                    "--endpoint-reconciler-type=none",
                    "--profiling=false",
                    "--v=1",
                    *extra_args,
                ],
                self.workdir / "logs" / "kube-apiserver.log",
            ).start()
            self.apiserver = proc
            self.server = f"https://127.0.0.1:{port}"
            return proc, lambda: self._get("/readyz")[0] == 200

        started_on_free_ports(launch, timeout=timeout, what="ready (/readyz)", interval=0.25)

    def _get(self, path: str, timeout: float = 5.0) -> tuple[int, str]:
        assert self.pki is not None
        return https_get(
            self.server + path,
            ca_file=self.pki.ca_cert,
            cert_file=self.pki.admin_cert,
            key_file=self.pki.admin_key,
            timeout=timeout,
        )

    def _write_kubeconfig(self) -> None:
        assert self.pki is not None

        def b64(p: Path) -> str:
            return base64.b64encode(p.read_bytes()).decode()

        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "berth-e2e",
                    "cluster": {
                        "server": self.server,
                        "certificate-authority-data": b64(self.pki.ca_cert),
                    },
                }
            ],
            "users": [
                {
                    "name": "berth-e2e-admin",
                    "user": {
                        "client-certificate-data": b64(self.pki.admin_cert),
                        "client-key-data": b64(self.pki.admin_key),
                    },
                }
            ],
            "contexts": [{"name": "berth-e2e", "context": {"cluster": "berth-e2e", "user": "berth-e2e-admin"}}],
            "current-context": "berth-e2e",
            "preferences": {},
        }
        self.kubeconfig.write_text(yaml.safe_dump(cfg, sort_keys=False))
        self.kubeconfig.chmod(0o600)

    def _wait_for_system_namespaces(self, timeout: float) -> None:
        assert self.apiserver is not None
        wanted = ("default", "kube-system", "kube-node-lease")
        self.apiserver.wait_until(
            lambda: all(self._get(f"/api/v1/namespaces/{ns}")[0] == 200 for ns in wanted),
            timeout,
            f"serving the namespaces {', '.join(wanted)}",
        )

    # ------------------------------------------------------------------ use

    @property
    def bin_dir(self) -> Path:
        """The directory holding kube-apiserver, kube-scheduler, kubectl and helm."""
        return self.binaries.bin_dir

    def api_client(self) -> Any:
        """A new ``kubernetes.client.ApiClient`` for the admin kubeconfig."""
        return k8s_config.new_client_from_config(config_file=str(self.kubeconfig))  # type: ignore[no-untyped-call]

    def core_v1(self) -> Any:
        """A ``CoreV1Api`` on a new admin client."""
        return k8s_client.CoreV1Api(self.api_client())

    def kubectl(
        self, *args: str, check: bool = True, timeout: float = 60.0, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run the built ``kubectl`` with the admin kubeconfig; raises on failure if ``check``."""
        proc = subprocess.run(
            [str(self.binaries.kubectl), f"--kubeconfig={self.kubeconfig}", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            input=input,
            check=False,
        )
        if check and proc.returncode != 0:
            raise HarnessError(f"kubectl {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc

    def apply_crds(self, *paths: Path, timeout: float = 90.0) -> None:
        """Server-side apply the CRD files and wait until every CRD in them is Established."""
        names = []
        for path in paths:
            self.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path))
            names += [f"crd/{doc['metadata']['name']}" for doc in yaml.safe_load_all(path.read_text()) if doc]
        # `kubectl wait` fails at once while a new CRD has no conditions yet: retry it.
        wait_for(lambda: self.kubectl("wait", "--for=condition=Established", "--timeout=30s", *names, check=False),
                 lambda out: out.returncode == 0, timeout=timeout, what=f"{', '.join(names)} Established",
                 describe=lambda out: out.stderr)

    def start_scheduler(
        self,
        config: Mapping[str, Any] | str | None = None,
        *,
        name: str | None = None,
        extra_args: Sequence[str] = (),
        verbosity: int = 2,
        timeout: float = 60.0,
    ) -> Scheduler:
        """Start a kube-scheduler with ``config`` (a KubeSchedulerConfiguration as a dict or
        YAML text; default: :func:`default_scheduler_config`) and wait for its ``/readyz``.

        ``clientConnection.kubeconfig`` defaults to the admin kubeconfig and
        ``leaderElection.leaderElect`` to false. The scheduler serves on a free port of
        127.0.0.1 (:attr:`Scheduler.secure_port`). It is stopped by :meth:`stop`, or earlier by
        :meth:`Scheduler.stop`.
        """
        if config is None:
            cfg: dict[str, Any] = default_scheduler_config()
        elif isinstance(config, str):
            loaded = yaml.safe_load(config)
            if not isinstance(loaded, dict):
                raise HarnessError("scheduler config: YAML text must hold a mapping")
            cfg = loaded
        else:
            cfg = copy.deepcopy(dict(config))
        cfg.setdefault("apiVersion", SCHEDULER_CONFIG_API)
        cfg.setdefault("kind", "KubeSchedulerConfiguration")
        cfg.setdefault("clientConnection", {}).setdefault("kubeconfig", str(self.kubeconfig))
        cfg.setdefault("leaderElection", {}).setdefault("leaderElect", False)

        index = len(self.schedulers)
        name = name or f"kube-scheduler-{index}"
        config_path = self.workdir / f"{name}.config.yaml"
        config_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        ports: list[int] = []

        def launch() -> tuple[ManagedProcess, Callable[[], bool]]:
            port = free_port()
            ports.append(port)
            proc = ManagedProcess(
                name,
                [
                    self.binaries.kube_scheduler,
                    f"--config={config_path}",
                    "--bind-address=127.0.0.1",
                    f"--secure-port={port}",
                    f"--cert-dir={self.workdir / (name + '-certs')}",
                    f"--authentication-kubeconfig={self.kubeconfig}",
                    f"--authorization-kubeconfig={self.kubeconfig}",
                    f"--v={verbosity}",
                    *extra_args,
                ],
                self.workdir / "logs" / f"{name}.log",
            ).start()

            def ready() -> bool:
                status, _ = https_get(f"https://127.0.0.1:{port}/readyz", verify=False, timeout=2)
                if status == 404:
                    status, _ = https_get(f"https://127.0.0.1:{port}/healthz", verify=False, timeout=2)
                return status == 200

            return proc, ready

        proc = started_on_free_ports(launch, timeout=timeout, what="ready (/readyz)")
        sched = Scheduler(name=name, process=proc, config_path=config_path, config=cfg, secure_port=ports[-1])
        self.schedulers.append(sched)
        return sched

    def start_controller_manager(
        self,
        controllers: Sequence[str] = CONTROLLERS,
        *,
        verbosity: int = 2,
        timeout: float = 60.0,
    ) -> ManagedProcess:
        """Start a kube-controller-manager running ``controllers`` only (default: the Deployment,
        ReplicaSet, StatefulSet and disruption controllers: what recreates evicted pods and keeps
        PodDisruptionBudgets' status), with the admin kubeconfig and no leader election, and wait
        for its ``/healthz``. Stopped by :meth:`stop`."""
        if self.controller_manager is not None:
            raise HarnessError("a kube-controller-manager is running already")
        name = "kube-controller-manager"

        def launch() -> tuple[ManagedProcess, Callable[[], bool]]:
            port = free_port()
            proc = ManagedProcess(
                name,
                [
                    self.binaries.kube_controller_manager,
                    f"--kubeconfig={self.kubeconfig}",
                    f"--authentication-kubeconfig={self.kubeconfig}",
                    f"--authorization-kubeconfig={self.kubeconfig}",
                    f"--controllers={','.join(controllers)}",
                    "--leader-elect=false",
                    "--use-service-account-credentials=false",
                    "--bind-address=127.0.0.1",
                    f"--secure-port={port}",
                    f"--cert-dir={self.workdir / (name + '-certs')}",
                    f"--v={verbosity}",
                ],
                self.workdir / "logs" / f"{name}.log",
            ).start()
            return proc, lambda: https_get(f"https://127.0.0.1:{port}/healthz", verify=False, timeout=2)[0] == 200

        self.controller_manager = started_on_free_ports(launch, timeout=timeout, what="healthy (/healthz)")
        return self.controller_manager

    def stop_controller_manager(self) -> None:
        """Stop the kube-controller-manager started here, if any (a test sharing the control plane
        stops it when done)."""
        proc, self.controller_manager = self.controller_manager, None
        if proc is not None:
            proc.stop()

    # ------------------------------------------------------------------ teardown

    def stop(self, *, keep_workdir: bool = False) -> None:
        """Stop every process started here (schedulers, API server, etcd) and remove the work
        directory (unless ``keep_workdir`` or ``BERTH_E2E_KEEP=1``). Idempotent; leaves an
        existing cluster alone."""
        if self._stopped:
            return
        self._stopped = True
        errors: list[BaseException] = []
        for sched in reversed(self.schedulers):
            try:
                sched.stop()
            except BaseException as err:  # keep tearing down the rest
                errors.append(err)
        try:
            self.stop_controller_manager()
        except BaseException as err:
            errors.append(err)
        for proc in (self.apiserver, self.etcd):
            if proc is None:
                continue
            try:
                proc.stop(grace=15.0)
            except BaseException as err:
                errors.append(err)
        log_dir = os.environ.get("BERTH_E2E_LOG_DIR")
        if log_dir and (self.workdir / "logs").is_dir():
            dest = Path(log_dir) / self.workdir.name
            shutil.copytree(self.workdir / "logs", dest, dirs_exist_ok=True)
            _log(f"component logs copied to {dest}")
        if self._etcd_data_dir is not None:
            shutil.rmtree(self._etcd_data_dir, ignore_errors=True)
        if keep_workdir or _env_flag("BERTH_E2E_KEEP"):
            _log(f"kept {self.workdir}")
        elif self._owns_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
        if errors:
            raise errors[0]

    def __enter__(self) -> ControlPlane:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
