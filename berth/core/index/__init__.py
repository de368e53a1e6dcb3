"""Everything that exists for speed, behind one seam; ``Settings.index`` (``BERTH_INDEX=off``)
turns all of it off, and the plain answers (:class:`berth.core.framework.PlainVerdicts`) must be
the same.

- :func:`index_of`: what is kept on each state, in its ``index`` slot and told of every change
  (:mod:`.cluster`): the view's per-node totals, counted selectors, label index, change logs and
  tables, and its node names in order and as a set (:func:`whole_view`); an overlay's simulated
  pods on top of them;
- :func:`verdicts`: the framework's questions answered for whole node sets (:mod:`.judge`), with
  verdict tables per evaluation signature, caught up from the view's change log, and the
  nodes they keep sorted by each strategy's key (:mod:`.verdicts`), and by Fill's and Each's
  reach, whose first node tells whether a round's walk may stop at the pods waiting
  (``CandidateSet.walk_by``);
- the nodes whose Lease may be stale, from a heap of renew times (:mod:`.leases`);
- topology spread's domain counts, caught up from the view's node log (:mod:`.spread`);
- placement rules as node sets, the node-label ones kept until a node changes (:mod:`.rules`);
- a round's nodes left standing between its pods (:mod:`.standing`, for
  :func:`berth.core.plan.place_in_turn`);
- a Fill or Each round's places left, kept as its pods take and give them back (:mod:`.rounds`).

The plain path never calls into this package, so with the index off no state gets an index and
nothing beyond the plain data is kept.
"""

from berth.core.index.cluster import index_of, whole_view
from berth.core.index.judge import IndexedVerdicts, shared_refusals, verdicts
from berth.core.index.spread import spread_context
from berth.core.index.standing import StandingNodes, alike, standing_nodes, worth_keeping

__all__ = ["IndexedVerdicts", "StandingNodes", "alike", "index_of", "shared_refusals", "spread_context",
           "standing_nodes", "verdicts", "whole_view", "worth_keeping"]
