"""Web views of a worker (on its WEB_PORT): metrics, health and merchant queries.

A query for a merchant is answered by the worker that owns the merchant's
partition; any other worker forwards it there (Faust's table router), so
every worker answers for every merchant.
"""
from __future__ import annotations

from functools import wraps
from typing import Any, Awaitable, Callable

from faust.exceptions import SameNode
from faust.web import Request, Response, View
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from app import app, metrics
from tables import merchant_totals, window_totals

DEFAULT_WINDOWS = 10


@app.page("/metrics")
class Metrics(View):
    """Prometheus metrics of this worker."""

    async def get(self, request: Request) -> Response:
        await metrics.refresh(self.app)
        return self.bytes(generate_latest(), headers={"Content-Type": CONTENT_TYPE_LATEST})


@app.page("/health")
class Health(View):
    """200 while the worker process runs and serves HTTP."""

    async def get(self, request: Request) -> Response:
        return self.json({"status": "alive"})


@app.page("/ready")
class Ready(View):
    """200 once tables are restored and partitions assigned; 503 with the reason before."""

    async def get(self, request: Request) -> Response:
        reason = metrics.readiness(self.app)
        if reason is not None:
            return self.json({"status": "not ready", "reason": reason}, status=503)
        return self.json({"status": "ready"})


@app.page("/merchants/")
class Merchants(View):
    """Every merchant total this worker holds (all of them, on a single worker)."""

    async def get(self, request: Request) -> Response:
        return self.json({merchant: total.asdict() for merchant, total in merchant_totals.items()})


MerchantHandler = Callable[[Any, Request, str], Awaitable[Response]]


def routed_to_merchant_owner(handler: MerchantHandler) -> MerchantHandler:
    """Answer here if this worker owns the merchant's partition, else forward to its owner.

    Like Faust's ``app.table_route``, but the merchant id is routed as raw bytes:
    the tables are partitioned by the stream's raw merchant key, while
    ``table_route`` would hash the table's JSON encoding of the key and pick
    the wrong partition.
    """

    @wraps(handler)
    async def get(view: View, request: Request, merchant_id: str) -> Response:
        try:
            return await app.router.route_req(merchant_totals.name, merchant_id.encode(), view.web, request)
        except SameNode:
            return await handler(view, request, merchant_id)

    return get


def unknown_merchant(view: View, merchant_id: str) -> Response:
    return view.json({"error": f"no payments counted for merchant {merchant_id!r}"}, status=404)


@app.page("/merchants/{merchant_id}/")
class Merchant(View):
    """One merchant's running total, answered by the worker that owns it."""

    @routed_to_merchant_owner
    async def get(self, request: Request, merchant_id: str) -> Response:
        total = merchant_totals.get(merchant_id)
        if total is None:
            return unknown_merchant(self, merchant_id)
        return self.json(total.asdict())


@app.page("/merchants/{merchant_id}/windows/")
class MerchantWindows(View):
    """A merchant's most recent windows (``?limit=N``, default 10), newest first.

    Window totals are partitioned like the running totals (both are updated by
    the merchant's events), so the owner of one owns the other.
    """

    @routed_to_merchant_owner
    async def get(self, request: Request, merchant_id: str) -> Response:
        try:
            limit = int(request.query.get("limit", DEFAULT_WINDOWS))
            if limit <= 0:
                raise ValueError(limit)
        except ValueError:
            return self.json({"error": "limit must be a positive integer"}, status=400)
        if merchant_totals.get(merchant_id) is None:
            return unknown_merchant(self, merchant_id)
        windows = [w for w in window_totals.values() if w.merchant_id == merchant_id]
        windows.sort(key=lambda w: w.window_start, reverse=True)
        return self.json({"merchant_id": merchant_id, "windows": [w.asdict() for w in windows[:limit]]})
