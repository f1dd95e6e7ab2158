"""FastAPI/Starlette pattern: enqueue from async endpoints without blocking the loop, and a worker
in the app's lifespan (async enqueue path)."""

from __future__ import annotations

import asyncio
import time
from contextlib import asynccontextmanager

import pytest

starlette = pytest.importorskip("starlette")
from starlette.applications import Starlette  # noqa: E402
from starlette.responses import JSONResponse  # noqa: E402
from starlette.routing import Route  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402

import tenure  # noqa: E402
from tenure.contrib.asgi import worker_lifespan  # noqa: E402


def test_enqueue_async_does_not_block_the_loop(engine_url):
    store = tenure.connect(engine_url)
    ticks = []

    async def main():
        async def ticker():
            for _ in range(20):
                ticks.append(time.perf_counter())
                await asyncio.sleep(0.001)

        t = asyncio.create_task(ticker())
        ids = await asyncio.gather(*(store.jobs.enqueue_async("k", {"n": i}) for i in range(50)))
        await t
        return ids

    ids = asyncio.run(main())
    assert len(set(ids)) == 50 and store.jobs.counts()["pending"] == 50
    assert len(ticks) == 20
    store.close()


def test_worker_in_lifespan_runs_jobs_enqueued_by_endpoints(engine_url):
    app_tasks = tenure.App(engine_url)

    @app_tasks.task(name="greet")
    def greet(name: str) -> str:
        return f"hello {name}"

    async def endpoint(request):
        handle = await greet.enqueue_async(request.query_params["name"])
        value = await asyncio.to_thread(handle.result, 10)
        return JSONResponse({"job": handle.id, "value": value})

    @asynccontextmanager
    async def lifespan(app):
        async with worker_lifespan(app_tasks, concurrency=2, poll_interval=0.05) as worker:
            app.state.worker = worker
            yield

    web = Starlette(routes=[Route("/greet", endpoint)], lifespan=lifespan)
    with TestClient(web) as client:
        body = client.get("/greet", params={"name": "ada"}).json()
        assert body["value"] == "hello ada"
        worker = web.state.worker
    assert not worker.running  # stopped with the app
    assert app_tasks.store.jobs.get(body["job"]).state == "done"
    app_tasks.store.close()
