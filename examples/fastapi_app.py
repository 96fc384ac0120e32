"""A FastAPI endpoint that starts a workflow once per ``Idempotency-Key`` header.

    pip install fastapi uvicorn
    uvicorn examples.fastapi_app:app          # plus a worker: wf worker examples.checkout

A client that retries ``POST /orders/o-1`` (a timeout, a dropped connection)
sends the same ``Idempotency-Key``; ``start(..., idempotency_key=...)`` claims
the key as the unique attribute ``$idempotency_key`` in the same atomic step
that creates the run, so the retry gets the first run back and nothing starts
twice, whichever process serves it.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import FastAPI, Header, HTTPException
from pydantic import BaseModel

import worlds
from examples.checkout import checkout
from workflow import RunNotFoundError, get_run, start
from worlds.protocol import World


class Order(BaseModel):
    cents: int


class Started(BaseModel):
    run_id: str
    status: str


def create_app(world: World) -> FastAPI:
    """The API over ``world`` (a worker serving ``examples.checkout`` runs the workflows)."""
    app = FastAPI(title="orders")

    @app.post("/orders/{order_id}", status_code=202)
    async def create_order(
        order_id: str,
        order: Order,
        idempotency_key: Annotated[str, Header(min_length=1, max_length=191)],
    ) -> Started:
        try:
            run = await start(
                checkout, order_id, order.cents, idempotency_key=idempotency_key, world=world
            )
        except ValueError as exc:  # a key with characters a run name may not hold, say
            raise HTTPException(status_code=400, detail=str(exc)) from exc
        return Started(run_id=run.id, status=(await run.status()).value)

    @app.get("/runs/{run_id}")
    async def run_status(run_id: str) -> Started:
        try:
            status = await get_run(run_id, world=world).status()
        except RunNotFoundError as exc:
            raise HTTPException(status_code=404, detail=str(exc)) from exc
        return Started(run_id=run_id, status=status.value)

    return app


app = create_app(worlds.open())  # $WORKFLOW_WORLD, else the embedded SQLite file
