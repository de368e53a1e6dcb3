"""The PlacementPolicy operator (Kopf) and the CRD generator.

Imported as ``berth.operator`` (pyproject maps this folder onto that package: a top-level
package named ``operator`` would be shadowed by the standard library).

Modules, each small and with one job:

- :mod:`.status_model` -- the pydantic models of the status the operator writes;
- :mod:`.crdgen` -- the PlacementPolicy CRD, generated from the spec and status models;
- :mod:`.admission` -- the validating admission webhook's check;
- :mod:`.records` -- what the Kopf indexes keep of Nodes, Pods and Leases;
- :mod:`.cluster` -- the core's cluster view, built from those indexes;
- :mod:`.conditions` -- ``metav1.Condition`` bookkeeping;
- :mod:`.reconcile` -- the status of one policy, computed from plain data (no I/O);
- :mod:`.handlers` -- the Kopf handlers wiring all of the above;
- :mod:`.webhook` -- the webhook server options (self-signed dev server or a mounted cert);
- :mod:`.main` -- :func:`berth.operator.main.run`, what ``berth operator`` calls.
"""
