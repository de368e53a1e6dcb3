"""Every documented ``extraArgs`` example of values.yaml renders into a command line berth accepts.

A documented example that crash-loops the Deployment is worse than none: each one is taken from
its comment, rendered with helm, and the container's arguments are parsed by the parser of the
command the container runs.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, get_args

import pytest
import yaml

from berth.cli.main import LOG_LEVELS, build_parser
from berth.extender.settings import ExtenderSettings
from berth.operator.main import parser as operator_parser

from .helm import render, require_helm

VALUES = Path(__file__).resolve().parents[2] / "charts" / "berth" / "values.yaml"


def documented_extra_args() -> dict[str, list[str]]:
    """component -> the extraArgs its values.yaml comment gives as an example."""
    found: dict[str, list[str]] = {}
    component = None
    for line in VALUES.read_text().splitlines():
        top = re.match(r"^(\w+):", line)
        if top:
            component = top.group(1)
        example = re.search(r"Example: extraArgs: (\[.*\])", line)
        if example and component:
            found[component] = yaml.safe_load(example.group(1))
    return found


EXAMPLES = documented_extra_args()


def container_args(helm: Path, component: str, extra: list[str]) -> list[str]:
    values: dict[str, Any] = {component: {"extraArgs": extra}}
    if component == "scheduler":
        values[component]["enabled"] = True
    rendered = render(helm, values)
    deployment = next(d for d in rendered.all("Deployment") if d["metadata"]["name"].endswith(component))
    args: list[str] = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[-len(extra):] == extra, "the example's arguments reach the container last"
    return args


def test_values_yaml_documents_extra_args_for_extender_and_operator() -> None:
    assert {"extender", "operator"} <= EXAMPLES.keys()


def test_the_extenders_documented_extra_args_parse() -> None:
    args = container_args(require_helm(), "extender", EXAMPLES["extender"])
    assert args[0] == "extender"
    parsed = build_parser().parse_args(args)  # exits 2 on an unknown flag
    assert parsed.log_level == "DEBUG"


def test_the_operators_documented_extra_args_parse() -> None:
    args = container_args(require_helm(), "operator", EXAMPLES["operator"])
    assert args[0] == "operator"
    operator_parser().parse_args(args[1:])


@pytest.mark.parametrize("level", ["debug", "WARNING"])
def test_extender_log_level_is_one_of_the_settings_levels(level: str) -> None:
    parsed = build_parser().parse_args(["extender", "--log-level", level])
    assert parsed.log_level == level.upper()


def test_cli_log_levels_are_the_extender_settings_levels() -> None:
    annotation = ExtenderSettings.model_fields["log_level"].annotation
    assert tuple(get_args(annotation)) == LOG_LEVELS


def test_an_unknown_log_level_is_refused_with_exit_2() -> None:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["extender", "--log-level", "LOUD"])
    assert exc.value.code == 2
