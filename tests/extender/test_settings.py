"""Settings from BERTH_* environment variables: valid values are used, invalid ones are logged
and replaced by the safe default, and they reach the core's Settings."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest

from berth.core.policy import Strategy
from berth.core.settings import Settings
from berth.extender.settings import ExtenderSettings, load_settings

CASES = [
    # (variable, value, field, expected)
    ("BERTH_CPU_OVERCOMMIT_PERCENT", "150", "cpu_overcommit_percent", 150),
    ("BERTH_CPU_OVERCOMMIT_PERCENT", "lots", "cpu_overcommit_percent", 100),
    ("BERTH_CPU_OVERCOMMIT_PERCENT", "0", "cpu_overcommit_percent", 100),
    ("BERTH_MEMORY_OVERCOMMIT_PERCENT", "-5", "memory_overcommit_percent", 100),
    ("BERTH_MEMORY_OVERCOMMIT_PERCENT", "120", "memory_overcommit_percent", 120),
    ("BERTH_MIN_FREE_DISK_PERCENT", "20", "min_free_disk_percent", 20),
    ("BERTH_MIN_FREE_DISK_PERCENT", "101", "min_free_disk_percent", 10),
    ("BERTH_REJECT_UNKNOWN_CAPACITY", "true", "reject_unknown_capacity", True),
    ("BERTH_REJECT_UNKNOWN_CAPACITY", "perhaps", "reject_unknown_capacity", False),
    ("BERTH_LIVENESS_THRESHOLD_SECONDS", "120", "liveness_threshold_seconds", 120.0),
    ("BERTH_LIVENESS_THRESHOLD_SECONDS", "-1", "liveness_threshold_seconds", 40.0),
    ("BERTH_SLEEPY_MEMORY_FACTOR", "0.5", "sleepy_memory_factor", 2.0),
    ("BERTH_DEFAULT_STRATEGY", "best-fit", "default_strategy", Strategy.BEST_FIT),
    ("BERTH_DEFAULT_STRATEGY", "FILL", "default_strategy", Strategy.FILL),
    ("BERTH_DEFAULT_STRATEGY", "Sideways", "default_strategy", None),
    ("BERTH_DEFAULT_STRATEGY", "", "default_strategy", None),
    ("BERTH_TRACK_LEASES", "false", "track_leases", False),
    ("BERTH_ASSUME_TTL_SECONDS", "never", "assume_ttl_seconds", 900.0),
    ("BERTH_ASSUME_TTL_SECONDS", "86400", "assume_ttl_seconds", 86400.0),
    ("BERTH_ASSUME_TTL_SECONDS", "86401", "assume_ttl_seconds", 900.0),
    ("BERTH_LOG_LEVEL", "debug", "log_level", "DEBUG"),
    ("BERTH_LOG_LEVEL", "chatty", "log_level", "INFO"),
    ("BERTH_MAX_BODY_BYTES", "1", "max_body_bytes", 128 * 2**20),  # below 1 MiB: kube-scheduler's would not fit
    ("BERTH_API_MAX_BODY_BYTES", "262144", "api_max_body_bytes", 262144),
    ("BERTH_API_LOOP_SHARE", "0", "api_loop_share", 0.25),  # the API may not be starved to nothing either
    ("BERTH_API_LOOP_SHARE", "1.5", "api_loop_share", 0.25),
    ("BERTH_API_MAX_CONCURRENCY", "0", "api_max_concurrency", 1),
    ("BERTH_HEADER_TIMEOUT_SECONDS", "-1", "header_timeout_seconds", 10.0),
    ("BERTH_DOCS", "true", "docs", True),
]


@pytest.mark.parametrize(("variable", "value", "field", "expected"), CASES,
                         ids=[f"{c[0]}={c[1]!r}" for c in CASES])
def test_environment_values(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, variable: str,
                            value: str, field: str, expected: object) -> None:
    monkeypatch.setenv(variable, value)
    with caplog.at_level(logging.WARNING, logger="berth.extender.settings"):
        settings = load_settings()
    assert getattr(settings, field) == expected
    default = ExtenderSettings.model_fields[field].default
    invalid = expected == default and value.strip().lower() not in ("", str(default).lower())
    if invalid:
        assert any(variable in r.getMessage() and "safe default" in r.getMessage() for r in caplog.records)


def test_defaults_never_overcommit() -> None:
    assert replace(load_settings().core(), index=None) == Settings()


@pytest.mark.parametrize(("variable", "indexed"), [(None, True), ("off", False), ("on", True)])
def test_the_index_switch_is_read_once_into_the_core_settings(monkeypatch: pytest.MonkeyPatch, variable: str | None,
                                                               indexed: bool) -> None:
    if variable is None:
        monkeypatch.delenv("BERTH_INDEX", raising=False)
    else:
        monkeypatch.setenv("BERTH_INDEX", variable)
    core = load_settings().core()
    monkeypatch.setenv("BERTH_INDEX", "on" if variable == "off" else "off")  # changed after start: not read again
    assert core.index is indexed and core.indexed is indexed


def test_settings_reach_the_core(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BERTH_CPU_OVERCOMMIT_PERCENT", "200")
    monkeypatch.setenv("BERTH_DEFAULT_STRATEGY", "Spread")
    monkeypatch.setenv("BERTH_INDEX", "off")
    core = load_settings().core()
    assert core.cpu_overcommit_percent == 200
    assert core.default_strategy is Strategy.SPREAD
    assert core.memory_overcommit_percent == 100
    assert core.indexed is False
