"""The dashboard's HTTP plumbing below its pages and actions: JSON and error responses, the HTTP
status of each coded error, and the guard every request passes (host allow-list, token, security
headers)."""

from __future__ import annotations

import json
from collections.abc import MutableMapping
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..errors import InvalidArgument, InvalidType, QueueNotFound, StorageError, TenureError

if TYPE_CHECKING:
    from .app import Dashboard


CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")

SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
]

def _base(request: Request) -> str:
    return (request.scope.get("root_path") or "").rstrip("/")


def _json(data: Any, status: int = 200) -> Response:
    return Response(json.dumps(data, default=str), status_code=status, media_type="application/json",
                    headers={"cache-control": "no-store"})


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"ok": False, "error": code, "message": message}, status_code=status,
                        headers={"cache-control": "no-store"})


def _status_for(exc: TenureError) -> int:
    if isinstance(exc, InvalidArgument | InvalidType) or exc.code.startswith("TN1"):
        return 400
    if isinstance(exc, QueueNotFound):
        return 404
    if isinstance(exc, StorageError):
        return 503
    return 409


class _Guard:
    """Pure-ASGI middleware: the host check (hosts.py) and the token check for every HTTP route
    but /healthz, and the security headers on every response."""

    def __init__(self, app: Any, dash: Dashboard) -> None:
        self.app = app
        self.dash = dash

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        root = scope.get("root_path") or ""
        path = scope.get("path", "")
        if root and path.startswith(root):
            path = path[len(root):]

        async def send_secured(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                headers = [h for h in message.get("headers", [])
                           if h[0].lower() not in {k for k, _ in SECURITY_HEADERS}]
                message = {**message, "headers": headers + SECURITY_HEADERS}
            await send(message)

        if path != "/healthz":
            hosts = [v.decode("latin-1") for k, v in scope.get("headers", []) if k == b"host"]
            server = scope.get("server")
            verdict = self.dash.hosts.check_host(hosts, server[0] if server else None)
            if verdict.status is not None:
                resp = JSONResponse({"ok": False, "error": "host" if verdict.status == 400 else "misdirected",
                                     "message": verdict.message}, status_code=verdict.status,
                                    headers={"cache-control": "no-store"})
                await resp(scope, receive, send_secured)
                return
        if path != "/healthz" and self.dash.token is not None:
            auth = None
            for k, v in scope.get("headers", []):
                if k == b"authorization":
                    auth = v.decode("latin-1")
                    break
            if not self.dash.authorized(auth):
                resp = JSONResponse({"ok": False, "error": "unauthorized",
                                     "message": "this dashboard needs its token (Bearer, or basic-auth password)"},
                                    status_code=401,
                                    headers={"www-authenticate": 'Basic realm="tenure", charset="UTF-8"',
                                             "cache-control": "no-store"})
                await resp(scope, receive, send_secured)
                return
        await self.app(scope, receive, send_secured)
