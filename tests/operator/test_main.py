"""``berth operator`` flags map onto :func:`berth.operator.main.run`."""

from __future__ import annotations

from typing import Any

import kopf
import pytest

from berth.operator import main as operator_main
from berth.operator.handlers import OperatorConfig
from berth.operator.webhook import WebhookOptions


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []

    def run(namespace: str | None = None, peering: str | None = None, **kwargs: Any) -> None:
        seen.append({"namespace": namespace, "peering": peering, **kwargs})

    monkeypatch.setattr(operator_main, "run", run)
    for name in list(__import__("os").environ):
        if name.startswith(("BERTH_WEBHOOK_", "BERTH_OPERATOR_")) or name == "BERTH_TRACK_LEASES":
            monkeypatch.delenv(name)
    return seen


def test_defaults(calls: list[dict[str, Any]]) -> None:
    assert operator_main.main([]) == 0
    (call,) = calls
    assert call["namespace"] is None and call["peering"] is None
    assert call["webhook"] == WebhookOptions()
    assert call["resync_seconds"] == 5.0 and call["track_leases"] is True and call["priority"] is None
    assert call["status_writes_per_second"] == 100.0


def test_flags(calls: list[dict[str, Any]]) -> None:
    operator_main.main(["--namespace", "shop", "--peering", "berth", "--priority", "7", "--resync-seconds", "2",
                        "--no-leases", "--webhook", "dev", "--webhook-port", "9555", "--webhook-config", "",
                        "--liveness", "http://0.0.0.0:8080/healthz"])
    (call,) = calls
    assert (call["namespace"], call["peering"], call["priority"]) == ("shop", "berth", 7)
    assert call["track_leases"] is False and call["resync_seconds"] == 2.0
    assert call["webhook"] == WebhookOptions(mode="dev", port=9555, config_name=None)
    assert call["liveness_endpoint"] == "http://0.0.0.0:8080/healthz"


def test_environment(calls: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BERTH_WEBHOOK_MODE", "dev")
    monkeypatch.setenv("BERTH_OPERATOR_PEERING", "berth-operator")
    monkeypatch.setenv("BERTH_TRACK_LEASES", "false")
    operator_main.main([])
    (call,) = calls
    assert call["webhook"].mode == "dev" and call["peering"] == "berth-operator"
    assert call["track_leases"] is False


def test_the_round_timeout_is_the_extenders(calls: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    """The status's plan follows the extender's rounds, so it closes an idle round when the extender
    does: the same variable, and the same default when it is unset."""
    monkeypatch.delenv("BERTH_ROUND_TIMEOUT_SECONDS", raising=False)
    operator_main.main([])
    monkeypatch.setenv("BERTH_ROUND_TIMEOUT_SECONDS", "30")
    operator_main.main([])
    assert [call["round_timeout_seconds"] for call in calls] == [120.0, 30.0]


def test_webhook_environment(calls: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {"MODE": "Cluster", "PORT": "8443", "HOST": "svc", "CERT": "/c", "KEY": "/k", "CONFIG": "",
                        "FAIL_CLOSED": "true"}.items():
        monkeypatch.setenv(f"BERTH_WEBHOOK_{name}", value)
    operator_main.main([])
    (call,) = calls
    assert call["webhook"] == WebhookOptions(mode="cluster", port=8443, host="svc", cert_file="/c", key_file="/k",
                                             config_name=None, fail_closed=True)


def test_an_unknown_webhook_mode_in_the_environment_exits_2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BERTH_WEBHOOK_MODE", "sideways")
    monkeypatch.setattr(kopf, "run", lambda **_: pytest.fail("kopf must not start"))
    assert operator_main.main([]) == 2


def test_status_write_bound_by_flag_and_environment(calls: list[dict[str, Any]],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    operator_main.main(["--status-writes-per-second", "200"])
    monkeypatch.setenv("BERTH_OPERATOR_STATUS_WRITES_PER_SECOND", "5")
    operator_main.main([])
    assert [c["status_writes_per_second"] for c in calls] == [200.0, 5.0]


@pytest.mark.parametrize(("argv", "env", "message"), [
    (["--status-writes-per-second", "0"], None, "must be between 1 and 1000, not 0"),
    (["--status-writes-per-second", "5000"], None, "must be between 1 and 1000, not 5000"),
    (["--status-writes-per-second", "fast"], None, "not a number: 'fast'"),
    ([], "0.1", "must be between 1 and 1000, not 0.1"),
])
def test_a_status_write_bound_out_of_range_exits_2_naming_it(
        calls: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        argv: list[str], env: str | None, message: str) -> None:
    if env is not None:
        monkeypatch.setenv("BERTH_OPERATOR_STATUS_WRITES_PER_SECOND", env)
    with pytest.raises(SystemExit) as exc:
        operator_main.main(argv)
    assert exc.value.code == 2 and calls == []
    assert f"--status-writes-per-second: {message}" in capsys.readouterr().err


def test_bad_webhook_options_exit_2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kopf, "run", lambda **_: pytest.fail("kopf must not start"))
    assert operator_main.main(["--webhook", "cluster"]) == 2


def test_kopf_settings_with_the_dev_webhook() -> None:
    config = OperatorConfig(webhook=WebhookOptions(mode="dev", port=9556).checked())
    settings = operator_main.operator_settings(config)
    assert isinstance(settings.admission.server, kopf.WebhookServer)
    assert settings.admission.managed == "berth.dev"
    assert settings.posting.reporting_component == "berth-operator"
