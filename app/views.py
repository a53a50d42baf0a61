"""Web views of a worker (on its WEB_PORT): queries of the merchant totals."""
from __future__ import annotations

from faust.web import Request, Response, View

from app import app
from tables import merchant_totals


@app.page("/merchants/")
class Merchants(View):
    """Every merchant total this worker holds (all of them, on a single worker)."""

    async def get(self, request: Request) -> Response:
        return self.json({merchant: total.asdict() for merchant, total in merchant_totals.items()})


@app.page("/merchants/{merchant_id}/")
class Merchant(View):
    """One merchant's running total, answered by the worker that owns it."""

    @app.table_route(table=merchant_totals, match_info="merchant_id")
    async def get(self, request: Request, merchant_id: str) -> Response:
        total = merchant_totals.get(merchant_id)
        if total is None:
            return self.json({"error": f"no payments counted for merchant {merchant_id!r}"}, status=404)
        return self.json(total.asdict())
