"""``berth explain pod``, ``berth nodes``, ``berth policies``: the live cluster, as the person sees it.

Everything is read with the person's own identity. What the API server holds (the pod and its
recorded decision annotation, PlacementPolicies and their status) is read with the kubeconfig's
credentials through the kubernetes client, as kubectl reads it. What only the extender can answer
(a fresh evaluation of every node, the node allocations it counts) is asked of the extender's
read-only port with the person's bearer token, which the extender checks with TokenReview and
SubjectAccessReview. The API server's service proxy cannot carry that identity: it authenticates
the request itself and drops the ``Authorization`` header before proxying, so the extender would
see no caller. The CLI therefore talks to the extender directly, through ``kubectl port-forward``
or any URL that reaches the port (``--extender``, ``BERTH_EXTENDER_URL``).
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from berth.core import API_GROUP, CRD_VERSION, DECISION_ANNOTATION, POLICY_PLURAL, DecisionRecord

DEFAULT_EXTENDER = "http://127.0.0.1:8080"
PORT_FORWARD_HINT = "kubectl -n berth-system port-forward svc/berth-extender 8080"


class LiveError(Exception):
    """What stops a live command, said in one line (exit status 1)."""


Fetch = Callable[[str, str, Any], tuple[int, Any]]
"""(method, path, JSON body or None) -> (HTTP status, decoded JSON) of the extender's API."""


@dataclass
class Extender:
    """The extender's read-only API, asked with the person's bearer token."""

    url: str
    token: str | None
    timeout: float = 30.0

    def fetch(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url.rstrip("/") + path, data=data, method=method)
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as reply:
                return reply.status, json.loads(reply.read() or b"null")
        except urllib.error.HTTPError as exc:
            try:
                return exc.code, json.loads(exc.read() or b"null")
            except ValueError:
                return exc.code, {"error": exc.reason}
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise LiveError(f"cannot reach the extender at {self.url}: {reason} (start a port-forward: "
                            f"{PORT_FORWARD_HINT}, or pass --extender URL)") from None


class Kube:
    """The API server, with the kubeconfig's credentials (as kubectl uses them)."""

    def __init__(self, kubeconfig: str | None = None, context: str | None = None) -> None:
        from kubernetes import client, config

        loader: Any = config
        configuration = client.Configuration()
        try:
            loader.load_kube_config(config_file=kubeconfig, context=context, client_configuration=configuration)
        except (loader.ConfigException, OSError, TypeError, ValueError) as exc:
            raise LiveError(f"cannot read the kubeconfig: {exc}") from None
        # made after the kubeconfig is loaded: the client's connection pool takes the CA and client
        # certificate of the configuration as it is when the client is made
        api_client = client.ApiClient(configuration=configuration)
        self.api_client = api_client
        self.core: Any = client.CoreV1Api(api_client)
        self.custom: Any = client.CustomObjectsApi(api_client)

    def bearer_token(self) -> str | None:
        """The kubeconfig user's bearer token (a token, or what its exec plugin returned), if any."""
        configuration = self.api_client.configuration
        # the kubernetes client keeps it as "Bearer <token>" under BearerToken (refreshed when an
        # exec plugin's token expired); older clients used "authorization"
        value = str(configuration.get_api_key_with_prefix("BearerToken", alias="authorization") or "").strip()
        scheme, _, token = value.partition(" ")
        if scheme.lower() == "bearer":
            return token.strip() or None
        return value or None

    def read_pod(self, namespace: str, name: str) -> dict[str, Any]:
        return self._call(lambda: self.core.read_namespaced_pod(name, namespace, _preload_content=False),
                          f"pod {namespace}/{name}")

    def list_policies(self, namespace: str | None) -> list[dict[str, Any]]:
        if namespace:
            data = self._call(lambda: self.custom.list_namespaced_custom_object(
                API_GROUP, CRD_VERSION, namespace, POLICY_PLURAL, _preload_content=False),
                f"PlacementPolicies in {namespace}")
        else:
            data = self._call(lambda: self.custom.list_cluster_custom_object(
                API_GROUP, CRD_VERSION, POLICY_PLURAL, _preload_content=False), "PlacementPolicies")
        items = data.get("items") or []
        return [item for item in items if isinstance(item, dict)]

    @staticmethod
    def _call(call: Callable[[], Any], what: str) -> dict[str, Any]:
        from kubernetes.client.exceptions import ApiException

        try:
            reply = call()
            try:
                data = json.loads(reply.data or b"{}")
            finally:
                reply.release_conn()
        except ApiException as exc:
            reason = {401: "your credentials were not accepted", 403: "you may not read it",
                      404: "not found"}.get(exc.status or 0, exc.reason)
            raise LiveError(f"cannot read {what}: {reason} (HTTP {exc.status})") from None
        except Exception as exc:  # the API server unreachable: urllib3's errors, TLS, DNS
            raise LiveError(f"cannot read {what}: {exc}") from None
        return data if isinstance(data, dict) else {}


def _answer(status: int, data: Any, what: str) -> Any:
    if status == 200:
        return data
    message = data.get("error") if isinstance(data, dict) else None
    hint = " (pass --token, e.g. $(kubectl create token NAME), when the kubeconfig has no bearer token)" \
        if status == 401 else ""
    raise LiveError(f"the extender refused {what}: HTTP {status}: {message or data}{hint}")


# -- explain pod ----------------------------------------------------------------------------


def explain_pod(kube: Kube, fetch: Fetch, target: str) -> dict[str, Any]:
    """The recorded decision (the pod's annotation, read with the person's credentials) beside the
    extender's fresh evaluation of every node (asked with the person's token)."""
    namespace, sep, name = target.partition("/")
    if not sep or not namespace or not name or "/" in name:
        raise LiveError(f"{target!r} is not NAMESPACE/NAME")
    raw = kube.read_pod(namespace, name)
    annotations = (raw.get("metadata") or {}).get("annotations") or {}
    text = annotations.get(DECISION_ANNOTATION)
    # an annotation berth wrote before the record had a version is shown in this version
    record = DecisionRecord.read_json(text) if isinstance(text, str) else None
    recorded = record.to_json() if record is not None else None
    status, data = fetch("POST", "/api/v1/preview", {"pod": raw})
    fresh = _answer(status, data, f"a fresh evaluation of {target}")
    return {"pod": f"{namespace}/{name}", "node": (raw.get("spec") or {}).get("nodeName"),
            "phase": (raw.get("status") or {}).get("phase"), "recorded": recorded,
            "fresh": fresh.get("decision"), "scores": fresh.get("scores") or {}}


def render_explain(result: Mapping[str, Any]) -> str:
    from berth.extender.page import placement_card

    card = placement_card(result["recorded"], result["fresh"], result["scores"])
    lines = [f"pod {result['pod']}: " + (f"runs on {result['node']}" if result["node"]
                                         else f"{result['phase'] or 'Pending'}, not placed")]
    for label, decision, groups in (("recorded", card["recorded"], card["recorded_groups"]),
                                    ("now", card["fresh"], card["fresh_groups"])):
        if decision is None:
            lines.append(f"{label}: no decision recorded")
            continue
        refused = ", ".join(f"{n} x {reason}" for reason, n in groups) or "none"
        winner = decision.winner.node if decision.winner is not None else "none"
        lines.append(f"{label}: {decision.trigger} at {decision.time}, policy {decision.policy or 'none'}, "
                     f"strategy {decision.strategy}, winner {winner}; refused: {refused}")
    rows = [("NODE", "RECORDED", "NOW", "SCORE")]
    for row in card["rows"]:
        rows.append((row["node"], row["recorded"]["text"] or "-", row["fresh"]["text"] or "-",
                     "" if row["score"] is None else str(row["score"])))
    lines.append("")
    lines.extend(_table(rows))
    return "\n".join(lines)


# -- nodes ----------------------------------------------------------------------------------


def nodes(fetch: Fetch) -> dict[str, Any]:
    status, data = fetch("GET", "/api/v1/nodes/allocations", None)
    answer: dict[str, Any] = _answer(status, data, "the node allocations")
    return answer


def render_nodes(allocations: Mapping[str, Any], width: int = 20) -> str:
    from berth.extender.page import allocation_fullness, bars

    settings = allocations.get("settings") or {}
    overcommit = {"cpu": int(settings.get("cpu_overcommit_percent", 100)),
                  "memory": int(settings.get("memory_overcommit_percent", 100))}
    entries: Mapping[str, Any] = allocations.get("nodes") or {}
    names = sorted(entries, key=lambda n: (-allocation_fullness(entries[n]), n))
    lines: list[str] = []
    for name in names:
        lines.append(f"{name}  ({allocation_fullness(entries[name]) * 100:.0f}% full)")
        for bar in bars(entries[name], overcommit):
            if not bar.known:
                lines.append(f"  {bar.dimension:<18} [{'?' * width}] {bar.text(bar.requested)} / unknown")
                continue
            filled = min(width, round(width * bar.requested / bar.allocatable)) if bar.allocatable else 0
            over = " OVER" if bar.state == "over" else ""
            limit = f" (limit {bar.text(bar.limit)})" if bar.limit != bar.allocatable else ""
            lines.append(f"  {bar.dimension:<18} [{'#' * filled}{'.' * (width - filled)}] "
                         f"{bar.text(bar.requested)} / {bar.text(bar.allocatable)}{limit}{over}")
    return "\n".join(lines) if lines else "no nodes"


# -- policies -------------------------------------------------------------------------------


def policies(kube: Kube, namespace: str | None) -> list[dict[str, Any]]:
    out = []
    for item in kube.list_policies(namespace):
        meta = item.get("metadata") or {}
        status = item.get("status") or {}
        latest = status.get("latestDecision") or {}
        out.append({"policy": f"{meta.get('namespace')}/{meta.get('name')}",
                    "strategy": (item.get("spec") or {}).get("strategy") or "default",
                    "conditions": {c.get("type"): c.get("status") for c in status.get("conditions") or ()
                                   if isinstance(c, dict)},
                    "plan": status.get("plan"), "latestDecision": latest.get("pod")})
    return sorted(out, key=lambda row: row["policy"])


def render_policies(rows: Sequence[Mapping[str, Any]]) -> str:
    table = [("POLICY", "STRATEGY", "CONDITIONS", "PLAN", "LATEST DECISION")]
    for row in rows:
        conditions = ",".join(f"{k}={v}" for k, v in row["conditions"].items()) or "-"
        plan = ",".join(f"{k}:{v}" for k, v in (row["plan"] or {}).items()) or "-"
        table.append((row["policy"], row["strategy"], conditions, plan, row["latestDecision"] or "-"))
    return "\n".join(_table(table)) if rows else "no PlacementPolicies"


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]


def extender_url(given: str | None) -> str:
    return given or os.environ.get("BERTH_EXTENDER_URL") or DEFAULT_EXTENDER
