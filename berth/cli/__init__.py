"""The ``berth`` command line: plan, capacity and simulate on cluster snapshots, and the
launchers of the extender and the operator. The entry point is :func:`berth.cli.main.main`."""
