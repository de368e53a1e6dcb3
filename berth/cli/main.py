"""The ``berth`` command line.

    berth plan      --snapshot S --policy P --pod POD [--count N]   a round's plan and decision (JSON)
    berth capacity  --snapshot S --pod POD [--policy P]              per-node capacity for a shape (JSON)
    berth drain     NODE... --snapshot S (--to NODE,...|--any) [--pods SELECTOR]
                                                                     each pod's destination or shortfall
    berth simulate  [--snapshot S] [--workload W] [--report FILE]    every strategy compared
                    [--jobs N] [--quiet]
    berth sample    [--workloads]                                    print the built-in sample cluster
    berth extender  [--host H] [--port P] [--snapshot FILE] [--dev-insecure]   serve the scheduler extender
    berth operator  [ARGS...]                                        run the PlacementPolicy operator
    berth explain pod NAMESPACE/NAME [--output text|json]            the live cluster: why a pod is where it is
    berth nodes     [--output text|json]                             every node's requested vs allocatable
    berth policies  [-n NAMESPACE] [--output text|json]              each PlacementPolicy's state

The live commands (also ``kubectl berth ...``) read the API server with the kubeconfig's
credentials and ask the extender's read-only port (``--extender``, ``BERTH_EXTENDER_URL``,
default a port-forward on 127.0.0.1:8080) with the same user's bearer token.

Exit status: 0 success; 1 the strategy refused the round (``plan``), a pod would be blocked
(``drain``) or a service failed; 2 bad
input (unreadable file, wrong kind, malformed object, invalid policy, unknown strategy, bad
flag), reported on one line of stderr naming the file and the field; 3 an internal error
(``BERTH_DEBUG=1`` shows its traceback).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import replace
from typing import Any, NoReturn

from berth import __version__
from berth.core import (
    LIVENESS_THRESHOLD_SECONDS,
    MIN_FREE_DISK_PERCENT,
    OVERCOMMIT_PERCENT,
    Bounds,
    DrainRequest,
    InvalidDrain,
    PlacementPolicy,
    Settings,
    capacity_report,
    format_time,
    parse_label_selector,
    parse_time,
    plan_drain,
    plan_round,
)
from berth.snapshot import STDIN, Snapshot, SnapshotError, load_pod, load_policy, load_snapshot

EXIT_OK, EXIT_REFUSED, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 3
# The extender's log levels (its settings' log_level; a test keeps the two equal).
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


class UsageError(Exception):
    """Bad input that is not a file's fault: a flag's value."""


class _Parser(argparse.ArgumentParser):
    """argparse, with errors on one line."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


# -- flags ----------------------------------------------------------------------------------

_SETTING_FLAGS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("--cpu-overcommit", {"type": int, "metavar": "PERCENT",
                          "help": f"CPU overcommit percent, {OVERCOMMIT_PERCENT.range_text()} "
                                  "(default 100: never overcommit)"}),
    ("--memory-overcommit", {"type": int, "metavar": "PERCENT",
                             "help": f"memory overcommit percent, {OVERCOMMIT_PERCENT.range_text()} (default 100)"}),
    ("--min-free-disk", {"type": int, "metavar": "PERCENT",
                         "help": "refuse a node when placing would leave less free ephemeral storage, "
                                 f"{MIN_FREE_DISK_PERCENT.range_text()} (default 10)"}),
    ("--reject-unknown-capacity", {"action": "store_const", "const": True,
                                   "help": "refuse nodes that do not report a resource the pod asks for "
                                           "(default: rank them last, with a warning)"}),
    ("--liveness-threshold", {"type": float, "metavar": "SECONDS",
                              "help": "a node whose Lease is older than this is down (default 40)"}),
    ("--now", {"metavar": "RFC3339",
               "help": "judge the snapshot at this time (default: its newest node Lease renewTime, "
                       "else the current time)"}),
)


def _add_setting_flags(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    """The placement settings, accepted before or after the subcommand."""
    group = parser.add_argument_group("placement settings")
    for flag, options in _SETTING_FLAGS:
        extra = dict(options)
        if suppress:  # a subcommand's copy must not reset what was given before the subcommand
            extra["default"] = argparse.SUPPRESS
        group.add_argument(flag, **extra)


def settings_from(args: argparse.Namespace) -> Settings:
    settings = Settings()
    checks: tuple[tuple[str, str, Bounds], ...] = (
        ("cpu_overcommit", "cpu_overcommit_percent", OVERCOMMIT_PERCENT),
        ("memory_overcommit", "memory_overcommit_percent", OVERCOMMIT_PERCENT),
        ("min_free_disk", "min_free_disk_percent", MIN_FREE_DISK_PERCENT),
        ("liveness_threshold", "liveness_threshold_seconds", LIVENESS_THRESHOLD_SECONDS),
    )
    for attr, field, bounds in checks:
        value = getattr(args, attr, None)
        if value is None:
            continue
        if (problem := bounds.problem(value)) is not None:
            raise UsageError(f"--{attr.replace('_', '-')}: {problem}")
        settings = replace(settings, **{field: value})
    if getattr(args, "reject_unknown_capacity", None):
        settings = replace(settings, reject_unknown_capacity=True)
    return settings


def now_from(args: argparse.Namespace, snapshot: Snapshot) -> float:
    text = getattr(args, "now", None)
    if text is None:
        return snapshot.now()
    try:
        return snapshot.now(parse_time(text))
    except ValueError as exc:
        raise UsageError(f"--now: {exc}") from None


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, found {value}")
    return value


def _jobs(text: str) -> int:
    value = _count(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, found {value}")
    return value


def default_jobs() -> int:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _port(text: str) -> int:
    value = _count(text)
    if not 0 < value < 65536:
        raise argparse.ArgumentTypeError(f"not a TCP port: {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="berth", description="berth: a placement engine for Kubernetes.", allow_abbrev=False,
                     epilog="Placement settings may be given before or after the subcommand. A snapshot is "
                            "judged at the moment it was taken: its newest kube-node-lease Lease renewTime "
                            "(else the current time; --now overrides), so an old snapshot's nodes do not all "
                            "look down. Exit status: 0 done, 1 the strategy refused (plan) or a service "
                            "failed, 2 bad input (one line on stderr naming the file and field), 3 internal "
                            "error.")
    parser.add_argument("--version", action="version", version=f"berth {__version__}")
    _add_setting_flags(parser, suppress=False)
    parser.set_defaults(handler=None)
    sub = parser.add_subparsers(title="commands", metavar="COMMAND", parser_class=_Parser)

    def command(name: str, handler: Callable[[argparse.Namespace], int], help_text: str,
                add_help: bool = True) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text, add_help=add_help, allow_abbrev=False)
        _add_setting_flags(p, suppress=True)
        p.set_defaults(handler=handler, command=name)
        return p

    p = command("plan", cmd_plan, "Plan a round of pods like POD on a cluster snapshot; print the plan and "
                "the decision as JSON (exit 1 when the strategy refuses).")
    p.add_argument("--snapshot", required=True, metavar="FILE",
                   help="the output of kubectl get nodes,pods -A -o json (or YAML; - reads stdin)")
    p.add_argument("--policy", metavar="FILE", help="a PlacementPolicy manifest (default: the snapshot's "
                   "PlacementPolicy that selects the pod, else none)")
    p.add_argument("--pod", required=True, metavar="FILE", help="a Pod manifest, or a workload (Deployment, "
                   "StatefulSet, ReplicaSet, DaemonSet, Job, CronJob) whose pod template is used: the shape and "
                   "labels to place")
    p.add_argument("--count", type=_count, metavar="N", help="pods in the round (default: Fill and Each "
                   "plan their own round, other strategies 1 pod)")

    p = command("capacity", cmd_capacity, "How many more pods like POD fit on each node, and in total (JSON).")
    p.add_argument("--snapshot", required=True, metavar="FILE", help="the cluster snapshot (- reads stdin)")
    p.add_argument("--pod", required=True, metavar="FILE", help="a Pod manifest, or a workload whose pod "
                   "template is used: the shape to measure")
    p.add_argument("--policy", metavar="FILE", help="a PlacementPolicy manifest: its node filter and "
                   "capacity overrides apply")

    p = command("drain", cmd_drain, "Plan a drain (or, with --pods, a move) on a cluster snapshot: for every "
                "pod of the drained nodes, the destination its PlacementPolicy gives it, or every destination's "
                "refusal (exit 1 when any pod would be blocked). Nothing is evicted.")
    p.add_argument("nodes", nargs="+", metavar="NODE", help="the nodes to drain")
    p.add_argument("--snapshot", required=True, metavar="FILE", help="the cluster snapshot (- reads stdin)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--to", metavar="NODE,...", help="the destinations: the only nodes the pods may go to")
    where.add_argument("--any", action="store_true", help="any node but the drained ones may take the pods")
    p.add_argument("--pods", metavar="SELECTOR", help="a move: only the pods this label selector matches "
                   "(kubectl's syntax, e.g. app=web,tier!=db); with one --to node, that node is the move's "
                   "explicit target, honoured even where berth's own checks refuse it (with a warning)")
    p.add_argument("--include-unmanaged", action="store_true", help="also move pods no controller would "
                   "recreate (kubectl drain's --force); by default they are left where they are")
    p.add_argument("--output", "-o", choices=("table", "json"), default="table", help="output (default: table)")

    p = command("simulate", cmd_simulate, "Place a workload mix with every strategy on a fresh copy of the "
                "cluster each time and compare them (default: the built-in sample cluster and mix).")
    p.add_argument("--snapshot", metavar="FILE", help="the cluster (default: the built-in sample cluster)")
    p.add_argument("--workload", metavar="FILE", help="a WorkloadMix YAML (default: the built-in mix; "
                   "berth sample --workloads prints it)")
    p.add_argument("--report", metavar="FILE", help="also write the comparison as a chart: .png, .svg, .pdf "
                   "or .html (table and chart)")
    p.add_argument("--strategies", metavar="LIST", help="comma-separated strategies to compare (default: "
                   "Auto,Fill,Each,Global,Drained,Balanced,Spread,BestFit,Default)")
    p.add_argument("--format", choices=("table", "json"), default="table", help="output (default: table)")
    p.add_argument("--jobs", type=_jobs, metavar="N", default=None, help="strategies run at once, each in a "
                   "process of its own (default: the machine's cores); the output is the same whatever N")
    p.add_argument("--quiet", action="store_true", help="no progress on standard error (it is shown only "
                   "when standard error is a terminal)")

    p = command("sample", cmd_sample, "Print the built-in sample cluster as a kubectl List (JSON), or with "
                "--workloads the built-in workload mix.")
    p.add_argument("--workloads", action="store_true", help="print the workload mix (YAML) instead")

    p = command("extender", cmd_extender, "Serve the kube-scheduler extender (against the cluster of the "
                "in-cluster config or KUBECONFIG, or offline from a snapshot).")
    p.add_argument("--host", default="0.0.0.0", help="address to listen on (default 0.0.0.0)")
    p.add_argument("--port", type=_port, default=8888, help="port to listen on (default 8888)")
    p.add_argument("--snapshot", metavar="FILE", help="serve offline from this cluster snapshot")
    p.add_argument("--dev-insecure", action="store_true",
                   help="local development only: serve the scheduler verbs in plain HTTP without client "
                        "certificates (refused unless --host is a loopback address); without it the extender "
                        "needs BERTH_TLS_CERT_FILE, BERTH_TLS_KEY_FILE and BERTH_TLS_CLIENT_CA_FILE")
    p.add_argument("--log-level", type=str.upper, choices=LOG_LEVELS, metavar="LEVEL",
                   help=f"one of {', '.join(LOG_LEVELS)} (default: BERTH_LOG_LEVEL, else INFO)")

    command("operator", cmd_operator, "Run the PlacementPolicy operator; the arguments that follow go to it "
            "(berth operator --help shows them).", add_help=False)

    p = command("explain", cmd_explain, "Why a pod is where it is on the live cluster: its recorded decision "
                "beside the extender's fresh evaluation of every node.")
    p.add_argument("kind", choices=("pod",), help="what to explain")
    p.add_argument("target", metavar="NAMESPACE/NAME")
    _add_live_flags(p, kube=True, extender=True)
    p = command("nodes", cmd_nodes, "Every node's requested versus allocatable, as bars (from the extender).")
    _add_live_flags(p, kube=True, extender=True)
    p = command("policies", cmd_policies, "Each PlacementPolicy's strategy, conditions, plan and latest "
                "decision (from the API server).")
    p.add_argument("-n", "--namespace", help="only this namespace (default: every namespace you may list)")
    _add_live_flags(p, kube=True, extender=False)
    return parser


def _add_live_flags(p: argparse.ArgumentParser, *, kube: bool, extender: bool) -> None:
    p.add_argument("-o", "--output", choices=("text", "json"), default="text", help="output (default: text)")
    if kube:
        p.add_argument("--kubeconfig", help="the kubeconfig file (default: KUBECONFIG, else ~/.kube/config)")
        p.add_argument("--context", help="the kubeconfig context (default: the current one)")
    if extender:
        p.add_argument("--extender", metavar="URL", help="the extender's read-only port (default: "
                       "BERTH_EXTENDER_URL, else http://127.0.0.1:8080, a kubectl port-forward)")
        p.add_argument("--token", help="the bearer token to give the extender (default: the kubeconfig user's "
                       "token, if it has one; BERTH_TOKEN)")


# -- commands -------------------------------------------------------------------------------


def _print_json(data: object) -> None:
    sys.stdout.write(json.dumps(data, indent=2) + "\n")


def _policy_and_pod(args: argparse.Namespace, snapshot: Snapshot) -> tuple[PlacementPolicy | None, Any]:
    policy = load_policy(args.policy) if args.policy else None
    pod = load_pod(args.pod, default_namespace=policy.namespace if policy else "default")
    if policy is None:
        policy = snapshot.policy_for(pod)
    elif pod.namespace != policy.namespace:
        raise SnapshotError(f"{args.pod}: metadata.namespace: {pod.namespace!r} is not the policy's namespace "
                            f"{policy.namespace!r} (a policy governs only pods in its own namespace)")
    return policy, pod


def _pending_pods_note(snapshot: Snapshot) -> list[str]:
    """The plan's warning that the snapshot's pods with no node yet take no room in it."""
    if not snapshot.pending_pods:
        return []
    return [f"the snapshot holds {snapshot.pending_pods} pending pod(s) with no node yet: they take no room in "
            "this plan"]


def cmd_plan(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    snapshot = load_snapshot(args.snapshot)
    policy, pod = _policy_and_pod(args, snapshot)
    now = now_from(args, snapshot)
    result = plan_round(snapshot.view(), pod, policy, settings, now, count=args.count)
    if policy is not None and not policy.selector.matches(pod.labels):
        result.decision.warnings.append(f"the policy's selector does not match the pod's labels: its pods already "
                                        f"placed are counted by the selector, not by {args.pod}")
    result.decision.warnings.extend(_pending_pods_note(snapshot))
    _print_json(result.to_dict(format_time(now, digits=3)))
    return EXIT_REFUSED if result.error is not None else EXIT_OK


def cmd_capacity(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    snapshot = load_snapshot(args.snapshot)
    policy = load_policy(args.policy) if args.policy else None
    pod = load_pod(args.pod, default_namespace=policy.namespace if policy else "default")
    now = now_from(args, snapshot)
    _print_json(capacity_report(snapshot.view(), pod, policy, settings, now).to_dict())
    return EXIT_OK


_DRAIN_FLAGS = {"nodes": "NODE", "destinations": "--to", "anyDestination": "--any"}


def cmd_drain(args: argparse.Namespace) -> int:
    from berth.cli.drain import table

    settings = settings_from(args)
    pods = None
    if args.pods is not None:
        try:
            pods = parse_label_selector(args.pods)
        except ValueError as exc:
            raise UsageError(f"--pods: {exc}") from None
    destinations: tuple[str, ...] = ()
    if args.to is not None:
        destinations = tuple(name.strip() for name in args.to.split(","))
        if not all(destinations):
            raise UsageError(f"--to: an empty node name in {args.to!r}")
    snapshot = load_snapshot(args.snapshot)
    now = now_from(args, snapshot)
    request = DrainRequest(nodes=tuple(args.nodes), pods=pods, destinations=destinations, any_destination=args.any,
                           include_unmanaged=args.include_unmanaged)
    try:
        plan = plan_drain(snapshot.view(), request, snapshot.policy_for, settings, now)
    except InvalidDrain as exc:
        problem = exc.problem.replace("allow any destination", "allow any destination (--any)")
        raise UsageError(f"{_DRAIN_FLAGS.get(exc.field, exc.field)}: {problem}") from None
    notes = _pending_pods_note(snapshot)
    if args.output == "json":
        _print_json({**plan.to_dict(), "warnings": notes})
    else:
        sys.stdout.write(table(plan, notes))
    return EXIT_REFUSED if plan.blocked else EXIT_OK


def cmd_simulate(args: argparse.Namespace) -> int:
    from berth.cli import render
    from berth.cli.progress import progress_for
    from berth.cli.simulate import ALL_STRATEGIES, parse_strategies, simulate, strategy_name
    from berth.cli.workloads import load_mix, parse_mix
    from berth.extender.heap import collector_paused, settle
    from berth.sample import SOURCE, WORKLOADS_SOURCE, sample_objects, workloads_text
    from berth.snapshot import snapshot_from_documents

    settings = settings_from(args)
    strategies = ALL_STRATEGIES
    if args.strategies is not None:
        try:
            strategies = parse_strategies(args.strategies)
        except ValueError as exc:
            raise UsageError(f"--strategies: {exc}") from None
    if args.report is not None:
        suffix = os.path.splitext(args.report)[1].lower().lstrip(".")
        if suffix not in render.REPORT_FORMATS:
            raise UsageError(f"--report: {args.report}: unknown format {('.' + suffix) if suffix else '(none)'}; "
                             f"use .{', .'.join(render.REPORT_FORMATS)}")
    bars = progress_for(args.quiet)
    with bars if bars is not None else nullcontext():
        with bars.step("reading the snapshot") if bars is not None else nullcontext():
            # A large snapshot is millions of objects that live until the end: the cyclic collector
            # would scan them again and again while they are read (40% of the reading time).
            with collector_paused():
                snapshot = (load_snapshot(args.snapshot) if args.snapshot
                            else snapshot_from_documents([sample_objects()], SOURCE))
            settle()
            mix = load_mix(args.workload) if args.workload else parse_mix(workloads_text(), WORKLOADS_SOURCE)
            now = now_from(args, snapshot)
        if bars is not None:
            bars.strategies([strategy_name(s) for s in strategies], mix.pods)
        sim = simulate(snapshot, mix, settings, now, strategies, jobs=args.jobs or default_jobs(),
                       progress=bars.update if bars is not None else None)
    if args.format == "json":
        _print_json(sim.to_dict())
    else:
        sys.stdout.write(render.text_report(sim))
    if args.report is not None:
        try:
            fmt = render.write_report(sim, args.report)
        except OSError as exc:
            raise UsageError(f"--report: cannot write {args.report}: {exc.strerror or exc}") from None
        if args.format == "table":
            sys.stdout.write(f"\nreport ({fmt}) written to {args.report}\n")
    return EXIT_OK


def cmd_sample(args: argparse.Namespace) -> int:
    from berth.sample import sample_objects, workloads_text

    if args.workloads:
        sys.stdout.write(workloads_text())
    else:
        _print_json(sample_objects())
    return EXIT_OK


def _given_settings(args: argparse.Namespace) -> dict[str, object]:
    settings_from(args)  # validate
    return {key: getattr(args, key, None) for key in ("cpu_overcommit", "memory_overcommit", "min_free_disk",
                                                      "reject_unknown_capacity", "liveness_threshold")}


def cmd_extender(args: argparse.Namespace) -> int:
    from berth.cli import services

    services.export_settings(_given_settings(args))
    if args.log_level is not None:
        os.environ["BERTH_LOG_LEVEL"] = args.log_level
    if args.snapshot and args.snapshot != STDIN:
        load_snapshot(args.snapshot)  # bad input is reported here, on one line, before anything starts
    return _service("extender", lambda: services.run_extender(args.host, args.port, args.snapshot,
                                                                    args.dev_insecure))


def cmd_operator(args: argparse.Namespace) -> int:
    from berth.cli import services

    services.export_settings(_given_settings(args))
    return _service("operator", lambda: services.run_operator(list(args.extra)))


def _service(name: str, start: Callable[[], int]) -> int:
    """Run a long-running part; its failure to start is one line on stderr and exit status 1."""
    from berth.cli import services

    try:
        return start()
    except SystemExit as exc:  # its own argument parser: --help, or a usage error it printed
        return exc.code if isinstance(exc.code, int) else EXIT_REFUSED
    except KeyboardInterrupt:
        return EXIT_OK
    except services.Unavailable as exc:
        _one_line_error(f"{name}: unavailable: {exc}")
        return EXIT_REFUSED
    except (SnapshotError, UsageError):
        raise
    except Exception as exc:
        if os.environ.get("BERTH_DEBUG"):
            raise
        _one_line_error(f"{name}: {type(exc).__name__}: {exc}")
        return EXIT_REFUSED


# -- the live cluster -----------------------------------------------------------------------


def _live(args: argparse.Namespace, run: Callable[[], Any], render: Callable[[Any], str]) -> int:
    from berth.cli.live import LiveError

    try:
        result = run()
    except LiveError as exc:
        _one_line_error(str(exc))
        return EXIT_REFUSED
    if args.output == "json":
        _print_json(result)
    else:
        print(render(result))
    return EXIT_OK


def _kube(args: argparse.Namespace) -> Any:
    from berth.cli.live import Kube

    return Kube(args.kubeconfig, args.context)


def _extender(args: argparse.Namespace, kube: Any) -> Any:
    from berth.cli.live import Extender, extender_url

    token = args.token or os.environ.get("BERTH_TOKEN") or kube.bearer_token()
    return Extender(extender_url(args.extender), token)


def cmd_explain(args: argparse.Namespace) -> int:
    from berth.cli import live

    namespace, sep, name = args.target.partition("/")
    if not sep or not namespace or not name or "/" in name:
        raise UsageError(f"explain pod: {args.target!r} is not NAMESPACE/NAME")

    def run() -> Any:
        kube = _kube(args)
        return live.explain_pod(kube, _extender(args, kube).fetch, args.target)

    return _live(args, run, live.render_explain)


def cmd_nodes(args: argparse.Namespace) -> int:
    from berth.cli import live

    return _live(args, lambda: live.nodes(_extender(args, _kube(args)).fetch), live.render_nodes)


def cmd_policies(args: argparse.Namespace) -> int:
    from berth.cli import live

    return _live(args, lambda: live.policies(_kube(args), args.namespace), live.render_policies)


# -- entry point ----------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status (the console script passes it to ``sys.exit``)."""
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
        if extra and getattr(args, "command", None) != "operator":
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as exc:  # --help, --version, usage errors (already printed on one line)
        return exc.code if isinstance(exc.code, int) else EXIT_BAD_INPUT
    args.extra = extra
    if args.handler is None:
        parser.print_usage(sys.stderr)
        return EXIT_BAD_INPUT
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except (SnapshotError, UsageError) as exc:
        _one_line_error(str(exc))
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # e.g. piped into head
        _silence_stdout()
        return EXIT_OK
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        if os.environ.get("BERTH_DEBUG"):
            raise
        _one_line_error(f"internal error: {type(exc).__name__}: {exc} (BERTH_DEBUG=1 shows the traceback)")
        return EXIT_INTERNAL


def _one_line_error(message: str) -> None:
    sys.stderr.write("berth: error: " + " ".join(message.split()) + "\n")


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    sys.exit(main())
