"""Operations: liveness, readiness (the first full list of every kind is done) and metrics."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from berth.extender.metrics import CONTENT_TYPE
from berth.extender.routes.deps import MetricsDep, StoreDep

router = APIRouter(tags=["operations"])

LISTED_KINDS = frozenset({"nodes", "pods", "leases", "policies"})


@router.get("/healthz")
async def healthz() -> Response:
    return Response(content=b"ok", media_type="text/plain")


@router.get("/readyz", responses={503: {"description": "the first full list is not done"}})
async def readyz(store: StoreDep) -> Response:
    if store.ready:
        return Response(content=b"ok", media_type="text/plain")
    missing = sorted(LISTED_KINDS - store.listed)
    return Response(content=f"not ready: waiting for the first list of {', '.join(missing)}".encode(),
                    status_code=503, media_type="text/plain")


@router.get("/metrics")
async def metrics(found: MetricsDep) -> Response:
    return Response(content=found.render(), media_type=CONTENT_TYPE)
