"""berth's kube-scheduler extender: filter, prioritize, bind and preempt over HTTP on a live
(or snapshot) view of the cluster, plus the explain / preview / allocations / capacity API.

The folder is ``extender/`` in the repository and the import package is ``berth.extender``.
Every placement judgement is made by :mod:`berth.core`; this package only moves data between
kube-scheduler, the API server and the core.
"""

from __future__ import annotations

__all__ = ["create_app", "serve"]


def __getattr__(name: str) -> object:  # lazy: importing berth.extender stays cheap
    if name == "create_app":
        from berth.extender.app import create_app

        return create_app
    if name == "serve":
        from berth.extender.server import serve

        return serve
    raise AttributeError(name)
