"""ASGI (FastAPI / Starlette) helpers: enqueue without blocking the loop, run a worker in the app's
lifespan, mount the dashboard (:func:`mount_dashboard`).

```python
from contextlib import asynccontextmanager
from fastapi import FastAPI
import tenure
from tenure.contrib.asgi import worker_lifespan

app_tasks = tenure.App("sqlite:///jobs.db")

@asynccontextmanager
async def lifespan(app):
    async with worker_lifespan(app_tasks, concurrency=4):   # small deployments: one process
        yield

api = FastAPI(lifespan=lifespan)

@api.post("/signup")
async def signup(email: str):
    handle = await send_welcome.enqueue_async(email)        # never blocks the event loop
    return {"job": handle.id}
```
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Any


@asynccontextmanager
async def worker_lifespan(target: Any, handlers: dict[str, Callable[..., Any]] | None = None,
                          **worker_options: Any) -> AsyncIterator[Any]:
    """Start a tenure worker for the lifetime of an ASGI app and stop it (gracefully, off the event
    loop) at shutdown. ``target`` is a :class:`tenure.App` (its tasks) or a Store with ``handlers``."""
    if handlers is None:
        worker = target.create_worker(**worker_options)
    else:
        store = getattr(target, "store", target)
        worker = store.jobs.create_worker(handlers, **worker_options)
    await asyncio.to_thread(worker.start)
    try:
        yield worker
    finally:
        await asyncio.to_thread(worker.stop)


def mount_dashboard(app: Any, store: Any, path: str = "/tenure", *, allowed_hosts: Iterable[str] = (),
                    **options: Any) -> Any:
    """Mount tenure's dashboard for ``store`` on a Starlette or FastAPI ``app`` at ``path`` and
    answer the dashboard app. ``allowed_hosts`` are the host names your site is reached by (the
    dashboard refuses any other ``Host`` with 421, a DNS-rebinding defence; the address the
    request arrived on, ``localhost`` and loopback addresses are always accepted). Other keywords
    go to :func:`tenure.dashboard.create_app` (``auth_token``, ``read_only``...)."""
    from ..dashboard import create_app

    dashboard = create_app(store, allowed_hosts=allowed_hosts, **options)
    app.mount(path, dashboard)
    return dashboard
