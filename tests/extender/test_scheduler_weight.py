"""With the documented weight, kube-scheduler binds the node berth's strategy ranks first,
whatever scores the default plugins give (kube-scheduler's own arithmetic, reproduced)."""

from __future__ import annotations

import orjson
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from berth.core.evaluate import MAX_PRIORITY, RUNNER_UP_MAX
from berth.extender.scheduler_config import (
    DEFAULT_SCORE_PLUGIN_WEIGHTS,
    FULL_PROFILE,
    MAX_NODE_SCORE,
    NOMINATE_PROFILE,
    PROFILE_EXTENDER_ENV,
    PROFILES,
    RECOMMENDED_PROFILE,
    RECOMMENDED_WEIGHT,
    THROUGHPUT_PROFILE,
    minimum_weight,
    scheduler_config_yaml,
)
from berth.extender.settings import ExtenderSettings
from tests.builders import make_node, make_pod, make_policy
from tests.extender.helpers import harness

WEB = {"app": "web"}


def scheduler_totals(extender_scores: dict[str, int], plugin_scores: dict[str, dict[str, int]],
                     weight: int) -> dict[str, int]:
    """prioritizeNodes: sum of weight x plugin score, plus score x weight x (100 / 10) per extender."""
    return {
        n: sum(DEFAULT_SCORE_PLUGIN_WEIGHTS[p] * s for p, s in plugin_scores[n].items())
        + extender_scores[n] * weight * (MAX_NODE_SCORE // MAX_PRIORITY)
        for n in extender_scores
    }


def test_the_documented_weight_is_enough() -> None:
    assert MAX_PRIORITY == 10 and RUNNER_UP_MAX == 4
    assert minimum_weight() == 26  # 60 x w > 100 x 15
    assert minimum_weight() <= RECOMMENDED_WEIGHT
    # the worst case: every plugin gives the runner-up 100 and the winner 0
    worst = scheduler_totals({"win": 10, "other": RUNNER_UP_MAX},
                             {"win": dict.fromkeys(DEFAULT_SCORE_PLUGIN_WEIGHTS, 0),
                              "other": dict.fromkeys(DEFAULT_SCORE_PLUGIN_WEIGHTS, 100)}, RECOMMENDED_WEIGHT)
    assert worst["win"] > worst["other"]
    weak = scheduler_totals({"win": 10, "other": RUNNER_UP_MAX},
                            {"win": dict.fromkeys(DEFAULT_SCORE_PLUGIN_WEIGHTS, 0),
                             "other": dict.fromkeys(DEFAULT_SCORE_PLUGIN_WEIGHTS, 100)}, minimum_weight() - 1)
    assert weak["win"] <= weak["other"]  # one less would not be


cluster_shapes = st.lists(st.tuples(st.sampled_from(["1", "2", "4", "8", "16"]), st.integers(0, 3)),
                          min_size=2, max_size=8)
plugin_score = st.integers(0, MAX_NODE_SCORE)


@given(shape=cluster_shapes, strategy=st.sampled_from([None, "Spread", "BestFit", "Balanced", "Auto", "Global",
                                                        "Drained"]),
       data=st.data())
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
def test_kube_scheduler_picks_the_strategy_winner(shape: list[tuple[str, int]], strategy: str | None,
                                                   data: st.DataObject) -> None:
    objects: list[dict[str, object]] = [make_policy("web").spec(**{"strategy": strategy} if strategy else {}).obj()]
    for i, (cpu, running) in enumerate(shape):
        objects.append(make_node(f"n{i}").cpu(cpu).memory("64Gi").obj())
        objects.extend(make_pod(f"run-{i}-{j}").labels(WEB).cpu("500m").on(f"n{i}").obj() for j in range(running))
    h = harness(objects)
    incoming = make_pod("web-new").labels(WEB).cpu("500m").obj()
    passing = h.filter(incoming)["NodeNames"]
    if len(passing) < 2:
        return  # kube-scheduler does not prioritize a single node
    scores = h.prioritize(incoming, passing)
    winner = orjson.loads(h.store.decisions["shop/web-new"])["ranking"][0]
    plugin_scores = {n: {p: data.draw(plugin_score) for p in DEFAULT_SCORE_PLUGIN_WEIGHTS} for n in passing}
    totals = scheduler_totals(scores, plugin_scores, RECOMMENDED_WEIGHT)
    best = max(totals.values())
    assert [n for n, t in totals.items() if t == best] == [winner]


def test_the_scheduler_configuration() -> None:
    text = scheduler_config_yaml("http://berth-extender.berth-system:8888")
    config = yaml.safe_load(text)
    assert config["percentageOfNodesToScore"] == 100
    ext = config["extenders"][0]
    assert ext["weight"] == RECOMMENDED_WEIGHT
    assert (ext["filterVerb"], ext["prioritizeVerb"], ext["bindVerb"], ext["preemptVerb"]) == (
        "filter", "prioritize", "bind", "preempt")
    assert ext["nodeCacheCapable"] is True and ext["enableHTTPS"] is False
    second = yaml.safe_load(scheduler_config_yaml("https://berth:8443", scheduler_name="berth"))
    assert second["profiles"] == [{"schedulerName": "berth"}]
    assert second["extenders"][0]["enableHTTPS"] is True


@pytest.mark.parametrize(("profile", "winner_only", "nominate"),
                         [(THROUGHPUT_PROFILE, True, False), (FULL_PROFILE, False, False),
                          (NOMINATE_PROFILE, True, True)])
def test_each_profiles_extender_settings_are_read_by_the_extender(monkeypatch: pytest.MonkeyPatch, profile: str,
                                                                  winner_only: bool, nominate: bool) -> None:
    """The settings a profile names (the chart sets them) are the extender's own, with the value
    the profile needs: a misspelt variable would be ignored and the profile silently lost."""
    for name, value in PROFILE_EXTENDER_ENV[profile].items():
        monkeypatch.setenv(name, value)
    assert ExtenderSettings().filter_winner_only is winner_only
    assert ExtenderSettings().nominate is nominate
    assert set(PROFILES) == set(PROFILE_EXTENDER_ENV)
    assert RECOMMENDED_PROFILE == NOMINATE_PROFILE == PROFILES[0]
