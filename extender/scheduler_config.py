"""How kube-scheduler must be configured to call berth, and why the prioritize ``weight`` is 30.

kube-scheduler adds, for every node, the weighted scores of its score plugins (each 0..100)
and, for every extender, ``Score x weight x (MaxNodeScore / MaxExtenderPriority)`` = ``Score x
weight x 10``. berth scores the strategy's winner 10 and every other node at most 4
(:data:`berth.core.evaluate.RUNNER_UP_MAX`), so the winner leads any other node by at least
``(10 - 4) x weight x 10 = 60 x weight`` from berth alone. The default plugins can give another
node at most ``100 x (sum of their weights)`` more than the winner; with every default score
plugin of v1.36/v1.37 enabled (DynamicResources and VolumeBinding included) that sum is 15, so
the plugins can move a node by at most 1500. ``60 x weight > 1500`` needs ``weight >= 26``;
berth documents 30 (a margin of 1800, room for one more weight-2 plugin). With that weight the
scheduler binds the strategy's node whatever the default plugins say; pods no policy selects
get equal scores of 0 from berth, so the default plugins alone place them.

Strategies that look at the whole cluster (Spread, Balanced, the default ranking, rounds)
need every feasible node: ``percentageOfNodesToScore: 100`` (kube-scheduler otherwise stops
looking after a sample of the nodes on large clusters).

Three profiles (the chart's ``scheduler.profile``); they differ in what the extender does, not in
kube-scheduler's configuration (:data:`PROFILE_EXTENDER_ENV`):

* ``nominate`` (:data:`NOMINATE_PROFILE`, :data:`RECOMMENDED_PROFILE`): ``throughput``, and berth
  writes the node it plans for each pending pod it governs into ``status.nominatedNodeName``
  before kube-scheduler's cycle, which tries that node alone first (extender/nominator.py): at
  5,000 nodes kube-scheduler then filters one node in-tree for such a pod, not every node.
* ``throughput`` (:data:`THROUGHPUT_PROFILE`): berth's filter answers a pod a policy governs with
  its strategy's winner alone, so kube-scheduler, left with one feasible node, skips its score
  plugins and the prioritize call. Every node still goes through kube-scheduler's filters and then
  berth's, so every strategy judges the whole cluster.
* ``full`` (:data:`FULL_PROFILE`): filter answers every passing node, and kube-scheduler scores
  them all with its plugins and berth's prioritize (the weight above makes berth's node win).

kube-scheduler's default plugins stay enabled in all three. Disabling its score plugins gains nothing
for governed pods (they are not scored at all) and would leave pods no policy selects to equal
scores; disabling the filters berth repeats (cordon, taints, node affinity) was measured at 5,000
nodes and did not change the rate beyond the noise, while pods no policy selects pass berth's
filter unjudged, and berth's fit (overcommit, unknown capacity, Fill and Each judging room
themselves) and spread (the policy's constraints, not the pod's own) are not kube-scheduler's.
"""

from __future__ import annotations

from typing import Any

import yaml

MAX_EXTENDER_PRIORITY = 10
MAX_NODE_SCORE = 100

DEFAULT_SCORE_PLUGIN_WEIGHTS: dict[str, int] = {
    "TaintToleration": 3,
    "NodeAffinity": 2,
    "NodeResourcesFit": 1,
    "VolumeBinding": 1,
    "PodTopologySpread": 2,
    "InterPodAffinity": 2,
    "DynamicResources": 2,
    "NodeResourcesBalancedAllocation": 1,
    "ImageLocality": 1,
}
"""Score plugins of kube-scheduler's default profile (pkg/scheduler/apis/config/v1/default_plugins.go,
v1.36/v1.37; VolumeBinding scores with weight 1 when it scores, DynamicResources is on by default)."""

RECOMMENDED_WEIGHT = 30

THROUGHPUT_PROFILE = "throughput"
FULL_PROFILE = "full"
NOMINATE_PROFILE = "nominate"
RECOMMENDED_PROFILE = NOMINATE_PROFILE
PROFILES = (NOMINATE_PROFILE, THROUGHPUT_PROFILE, FULL_PROFILE)

PROFILE_EXTENDER_ENV: dict[str, dict[str, str]] = {
    THROUGHPUT_PROFILE: {"BERTH_FILTER_WINNER_ONLY": "true", "BERTH_NOMINATE": "false"},
    FULL_PROFILE: {"BERTH_FILTER_WINNER_ONLY": "false", "BERTH_NOMINATE": "false"},
    NOMINATE_PROFILE: {"BERTH_FILTER_WINNER_ONLY": "true", "BERTH_NOMINATE": "true"},
}
"""The extender settings each profile needs (the chart sets them from ``scheduler.profile``)."""


def minimum_weight(winner: int = 10, runner_up_max: int = 4,
                   plugin_weights: dict[str, int] | None = None) -> int:
    """The smallest extender weight with which berth's winner always has the highest total."""
    plugins = sum((plugin_weights or DEFAULT_SCORE_PLUGIN_WEIGHTS).values()) * MAX_NODE_SCORE
    gap = (winner - runner_up_max) * (MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY)
    return plugins // gap + 1


def scheduler_config(url: str, *, weight: int = RECOMMENDED_WEIGHT, scheduler_name: str | None = None,
                     bind: bool = True, node_cache_capable: bool = True, ignorable: bool = False,
                     http_timeout: str = "5s", tls: dict[str, Any] | None = None) -> dict[str, Any]:
    """A KubeSchedulerConfiguration that sends every pod through berth (``scheduler_name``: a second
    profile of that name instead of the default one). Both profiles use it; which one runs is the
    extender's setting (:data:`PROFILE_EXTENDER_ENV`)."""
    extender: dict[str, Any] = {
        "urlPrefix": url,
        "filterVerb": "filter",
        "prioritizeVerb": "prioritize",
        "preemptVerb": "preempt",
        "weight": weight,
        "enableHTTPS": url.startswith("https://"),
        "nodeCacheCapable": node_cache_capable,
        "ignorable": ignorable,
        "httpTimeout": http_timeout,
    }
    if bind:
        extender["bindVerb"] = "bind"
    if tls:
        extender["tlsConfig"] = tls
    config: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "percentageOfNodesToScore": 100,
        "extenders": [extender],
    }
    if scheduler_name:
        config["profiles"] = [{"schedulerName": scheduler_name}]
    return config


def scheduler_config_yaml(url: str, **kwargs: Any) -> str:
    return yaml.safe_dump(scheduler_config(url, **kwargs), sort_keys=False)
