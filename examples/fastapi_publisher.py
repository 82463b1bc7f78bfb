"""A FastAPI endpoint that publishes IoT readings to ems.

Run: `uvicorn examples.fastapi_publisher:app` (EMS_DATABASE_URL and EMS_REDIS_URL as for
every ems program). One ems.aio.Producer serves every request of the process: requests
that arrive together are committed together.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from ems import Settings
from ems.aio import Producer
from ems.exceptions import InvalidInput, NotFound, ServerUnavailable

TOPIC = "iot.readings"


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    async with Producer(Settings.from_env()) as producer:
        app.state.producer = producer
        yield  # on shutdown: the sends under way finish, then the connections close


app = FastAPI(lifespan=lifespan)


class Reading(BaseModel):
    project_id: str = Field(min_length=1, max_length=64)
    device: str = Field(min_length=1, max_length=64)
    value: float


@app.post("/readings", status_code=201)
async def publish(reading: Reading, request: Request) -> dict[str, int]:
    """Stored and committed when this answers: the place is the message's for good."""
    producer: Producer = request.app.state.producer
    meta = await producer.send(TOPIC, reading.model_dump_json(), key=reading.project_id)
    return {"partition": meta.partition, "offset": meta.offset}


@app.exception_handler(InvalidInput)
async def invalid(request: Request, exc: InvalidInput) -> JSONResponse:
    return JSONResponse({"error": str(exc)}, status_code=422)


@app.exception_handler(NotFound)
async def not_found(request: Request, exc: NotFound) -> JSONResponse:
    return JSONResponse({"error": str(exc)}, status_code=404)


@app.exception_handler(ServerUnavailable)
async def unavailable(request: Request, exc: ServerUnavailable) -> JSONResponse:
    # Not stored, or not known to be: the gateway sends the reading again.
    return JSONResponse({"error": "try again"}, status_code=503, headers={"Retry-After": "1"})
