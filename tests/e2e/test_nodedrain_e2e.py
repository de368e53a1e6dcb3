"""The NodeDrain CRD against a real kube-apiserver (tests/e2e/harness): it is accepted (its CEL
rules compile within the apiserver's cost budget), valid drains apply, and each invalid one is
refused by the schema or by the CEL rule tests/crd names for it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.crd.test_nodedrain_crd import INVALID, SCHEMA, VALID
from tests.e2e.harness import ControlPlane
from tests.e2e.harness.fixtures import control_plane  # noqa: F401  (pytest fixture)

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "crds" / "nodedrains.berth.dev.yaml"


@pytest.fixture(scope="module")
def drain_crd(control_plane: ControlPlane) -> Iterator[None]:  # noqa: F811
    control_plane.apply_crds(CRD)
    yield


def _apply(control_plane: ControlPlane, obj: dict[str, Any], tmp_path: Path) -> Any:  # noqa: F811
    path = tmp_path / "drain.yaml"
    path.write_text(yaml.safe_dump(obj))
    return control_plane.kubectl("apply", "--server-side", "-f", str(path), check=False)


def test_nodedrain_crd_is_established(control_plane: ControlPlane, drain_crd: None) -> None:  # noqa: F811
    import json

    out = control_plane.kubectl("get", "crd", "nodedrains.berth.dev", "-o", "json")
    conditions = {c["type"]: c["status"] for c in json.loads(out.stdout)["status"]["conditions"]}
    assert conditions.get("Established") == "True"
    assert conditions.get("NonStructuralSchema") is None


@pytest.mark.parametrize(("name", "obj"), VALID, ids=[v[0] for v in VALID])
def test_valid_nodedrain_applies(name: str, obj: dict[str, Any], control_plane: ControlPlane,  # noqa: F811
                                 drain_crd: None, tmp_path: Path) -> None:
    applied = _apply(control_plane, {**obj, "metadata": {"name": f"valid-{name.replace('_', '-')}"}}, tmp_path)
    assert applied.returncode == 0, applied.stderr


@pytest.mark.parametrize(("name", "obj", "path", "refused_by"), INVALID, ids=[v[0] for v in INVALID])
def test_invalid_nodedrain_is_refused(name: str, obj: dict[str, Any], path: str, refused_by: str,
                                      control_plane: ControlPlane, drain_crd: None,  # noqa: F811
                                      tmp_path: Path) -> None:
    refused = _apply(control_plane, {**obj, "metadata": {"name": f"invalid-{name.replace('_', '-')}"}}, tmp_path)
    assert refused.returncode != 0, f"{name} was accepted"
    if refused_by == SCHEMA:
        assert path.split("[")[0] in refused.stderr, refused.stderr
    else:
        assert refused_by in refused.stderr, refused.stderr
