"""tenure's web dashboard: an ASGI (Starlette) app over one store.

```python
from tenure.dashboard import create_app
app = create_app(store)                       # serve with uvicorn, or mount it:
starlette_app.mount("/tenure", create_app(store, auth_token="..."))
```
Importing this package does not import Starlette; :func:`create_app` does (``tenure[dashboard]``).
The read-only queries it shows live in :mod:`tenure.insights`, which the CLI and
:mod:`tenure.metrics` share.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from ..store import Store

__all__ = ["create_app"]


def create_app(store: Store, **options: Any) -> Starlette:
    """The dashboard for ``store`` (see :func:`tenure.dashboard.app.create_app` for the options)."""
    from .app import create_app as _create

    return _create(store, **options)
