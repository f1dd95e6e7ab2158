"""The dashboard's ASGI app: HTML shells, a JSON API the page polls every 2 s, actions, /metrics.

Shape: every page is a small server-rendered shell (navigation, the CSRF token, which page) with
no data in it; ``static/dashboard.js`` fetches ``/api/...`` and builds the DOM with ``textContent``
only, so a payload such as ``<script>...`` is always shown as text. A strict Content-Security-Policy
(scripts and styles from this app only, no inline code) backs that up.

Security:

- **Authentication.** With a token (``auth_token=`` or ``$TENURE_DASHBOARD_TOKEN``) every route but
  ``/healthz`` needs ``Authorization: Bearer <token>`` or HTTP basic auth whose password is the token
  (browsers prompt for it; the user name is ignored unless ``username=`` is set). Without a token the
  pages are open to whoever can connect (``tenure dashboard`` binds 127.0.0.1 and refuses another
  address without a token), and actions are refused to any client that is not on this machine.
- **Actions** (cancel, requeue, redrive, pause, resume) are POST only and need a CSRF token: a value
  signed with the app's secret, set as a ``SameSite=Strict`` HttpOnly cookie and embedded in the page;
  the request must send it back in the ``X-Tenure-CSRF`` header (a cross-site form cannot set a header
  and cannot read the page), and a present ``Origin`` must name one of the dashboard's own hosts.
  Actions call the public API
  (``store.jobs.cancel``...), never the tables.
- **Host names** (DNS rebinding): only requests addressed to one of the dashboard's own names are
  answered (:mod:`tenure.dashboard.hosts`); any other ``Host`` gets 421.
- **No secret is shown**: the store is described by ``engine.describe()`` (password redacted); the
  token is never echoed.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import hmac
import html
import ipaddress
import os
import secrets
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..attempt_history import attempt_rows
from ..engine import redact_url
from ..errors import InvalidArgument, TenureError
from ..insights import Insights
from ..records import STATES
from .hosts import HostAllowList
from .http import _base, _error, _Guard, _json, _status_for

if TYPE_CHECKING:
    from ..store import Store
    from ..worker import Worker

STATIC_DIR = Path(__file__).parent / "static"
CSRF_COOKIE = "tenure_csrf"
CSRF_HEADER = "x-tenure-csrf"
DEFAULT_POLL_MS = 2000
MAX_PAGE = 500
#: Longest last_error shown in a list row (the job page shows all of it).
LIST_ERROR_CHARS = 300
#: A job page lists at most this many steps of its composition.
COMPOSITION_STEPS = 500


PAGES = {"overview": "Overview", "jobs": "Jobs", "job": "Job", "run": "Workflow run",
         "schedules": "Schedules", "workers": "Workers"}


def _is_loopback(host: str | None) -> bool:
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Dashboard:
    """State and endpoints of one dashboard app (see :func:`create_app`)."""

    def __init__(self, store: Store, *, auth_token: str | None, username: str | None, read_only: bool,
                 allow_remote_actions: bool, title: str, poll_ms: int, csrf_secret: bytes | None,
                 insights: Insights | None, workers: Callable[[], Iterable[Worker]] | None,
                 allowed_hosts: Iterable[str] = ()) -> None:
        self.store = store
        self.hosts = HostAllowList(allowed_hosts)
        self.token = auth_token or None
        self.username = username
        self.read_only = read_only
        self.allow_remote_actions = allow_remote_actions
        self.title = title
        self.poll_ms = poll_ms
        self.insights = insights or Insights(store)
        if csrf_secret is None:
            # Derived from the token when there is one, so several server processes behind one
            # address accept each other's CSRF tokens; else random for this process.
            csrf_secret = (hmac.new(self.token.encode(), b"tenure-dashboard-csrf", hashlib.sha256).digest()
                           if self.token else secrets.token_bytes(32))
        self._csrf_secret = csrf_secret
        from ..metrics import build_registry

        self.registry, _ = build_registry(store=store, insights=self.insights, workers=workers)

    # -- auth --------------------------------------------------------------------------------------
    def authorized(self, authorization: str | None) -> bool:
        """True when no token is configured, or ``authorization`` carries it."""
        if self.token is None:
            return True
        if not authorization:
            return False
        scheme, _, value = authorization.partition(" ")
        scheme = scheme.lower()
        value = value.strip()
        if scheme == "bearer":
            return hmac.compare_digest(value.encode(), self.token.encode())
        if scheme == "basic":
            try:
                decoded = base64.b64decode(value, validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError, ValueError):
                return False
            user, sep, password = decoded.partition(":")
            if not sep:
                return False
            ok = hmac.compare_digest(password.encode(), self.token.encode())
            if self.username is not None:
                ok = hmac.compare_digest(user.encode(), self.username.encode()) and ok
            return ok
        return False

    def actions_allowed(self, request: Request) -> bool:
        """Whether this client may act: never when read-only; with a token, any authenticated
        client (the middleware already checked); without one, only a client on this machine."""
        if self.read_only:
            return False
        if self.token is not None or self.allow_remote_actions:
            return True
        return _is_loopback(request.client.host if request.client else None)

    # -- CSRF ------------------------------------------------------------------------------------
    def new_csrf(self) -> str:
        nonce = secrets.token_urlsafe(18)
        return f"{nonce}.{self._sign(nonce)}"

    def _sign(self, nonce: str) -> str:
        return hmac.new(self._csrf_secret, nonce.encode(), hashlib.sha256).hexdigest()[:32]

    def csrf_valid(self, value: str | None) -> bool:
        if not value or "." not in value:
            return False
        nonce, _, sig = value.partition(".")
        return hmac.compare_digest(sig.encode(), self._sign(nonce).encode())

    def check_action(self, request: Request) -> JSONResponse | None:
        """None when the POST may proceed, else the refusal."""
        if not self.actions_allowed(request):
            why = ("this dashboard is read-only" if self.read_only else
                   "actions from another machine need the dashboard to have an auth token "
                   "(TENURE_DASHBOARD_TOKEN)")
            return _error(403, "forbidden", why)
        cookie = request.cookies.get(CSRF_COOKIE)
        header = request.headers.get(CSRF_HEADER)
        if not (cookie and header and hmac.compare_digest(cookie.encode(), header.encode())
                and self.csrf_valid(header)):
            return _error(403, "csrf", "missing or invalid CSRF token: reload the page and try again")
        # A present Origin must be one of this dashboard's own names (hosts.py), never merely equal
        # to Host: a DNS-rebinding page controls both.
        origin = request.headers.get("origin")
        if origin is not None and not self.hosts.origin_allowed(
                origin, request.headers.getlist("host"), request.scope.get("server")):
            return _error(403, "csrf", "cross-origin request refused")
        return None

    # -- pages -------------------------------------------------------------------------------------
    def page(self, request: Request, page: str, arg: str = "") -> Response:
        base = _base(request)
        token = request.cookies.get(CSRF_COOKIE)
        if token is None or not self.csrf_valid(token):
            token = self.new_csrf()
        e = html.escape
        links = []
        for key, href, label in (("overview", "", "Overview"), ("jobs", "jobs", "Jobs"),
                                 ("schedules", "schedules", "Schedules"), ("workers", "workers", "Workers")):
            active = page == key or (key == "jobs" and page in ("job", "run"))
            cls = ' class="active"' if active else ""
            links.append(f'<a href="{e(base)}/{href}"{cls}>{label}</a>')
        nav = "".join(links)
        body = f"""<!doctype html>
<html lang="en" data-root="{e(base)}" data-page="{e(page)}" data-arg="{e(arg)}" data-poll="{self.poll_ms}"
 data-actions="{1 if self.actions_allowed(request) else 0}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="tenure-csrf" content="{e(token)}">
<title>{e(PAGES.get(page, page))} · {e(self.title)}</title>
<link rel="stylesheet" href="{e(base)}/static/dashboard.css">
<link rel="icon" href="{e(base)}/static/favicon.svg" type="image/svg+xml">
</head>
<body>
<header class="top">
  <a class="brand" href="{e(base)}/">{e(self.title)}</a>
  <nav>{nav}<a href="{e(base)}/metrics">Metrics</a></nav>
  <span class="store" title="store">{e(redact_url(self.store.engine.describe()))}</span>
  <span id="live" class="live">connecting…</span>
</header>
<div id="flash" role="status" aria-live="polite"></div>
<main id="app"><p class="muted">Loading…</p></main>
<noscript><p class="muted">This dashboard needs JavaScript; the same data is at <code>{e(base)}/api/overview</code>
and in the <code>tenure</code> CLI.</p></noscript>
<script src="{e(base)}/static/dashboard.js" defer></script>
</body>
</html>
"""
        resp = Response(body, media_type="text/html; charset=utf-8", headers={"cache-control": "no-store"})
        resp.set_cookie(CSRF_COOKIE, token, path=(base or "") + "/", httponly=True, samesite="strict",
                        secure=request.url.scheme == "https")
        return resp

    # -- JSON API --------------------------------------------------------------------------------
    def api_overview(self, request: Request) -> Response:
        ov = self.insights.overview()
        tp = ov.throughput
        return _json({
            "store": redact_url(ov.store), "now": ov.now, "counts": ov.counts, "estimated": ov.estimated,
            "queues": [{**dataclasses.asdict(q), "total": q.total, "windows": self._windows(q)} for q in ov.queues],
            "throughput": {"since": tp.since, "until": tp.until, "bucket_ms": tp.bucket_ms,
                           "buckets": tp.buckets, "totals": tp.totals()},
            "workers_alive": ov.workers_alive, "workers_total": ov.workers_total,
            "computed_ms": ov.computed_ms, "age_ms": max(0, time.time_ns() // 1_000_000 - ov.read_at),
            **(ov.kinds.as_dict() if ov.kinds is not None else {}),
            "actions": self.actions_allowed(request),
        })

    def _windows(self, q: Any) -> list[dict[str, Any]]:
        """A rate-limited queue's current windows (its own, then up to 5 groups): how many starts
        count against the next one, of how many, and when a closed one opens (docs/queues.md)."""
        if q.rate_limit is None and q.group_rate_limit is None:
            return []
        try:
            return [dataclasses.asdict(w) for w in self.store.queues.windows(q.name, limit=5)]
        except Exception:  # noqa: BLE001 - a queue deleted since the overview: nothing to show
            return []

    def api_jobs(self, request: Request) -> Response:
        q = request.query_params
        state = q.get("state") or None
        if state is not None and state not in STATES:
            return _error(400, "TN1001", f"unknown state {state!r}; one of {', '.join(STATES)}")
        try:
            limit = int(q.get("limit") or 50)
        except ValueError:
            return _error(400, "TN1001", "limit must be an integer")
        limit = max(1, min(limit, MAX_PAGE))
        page = self.store.jobs.page(state=state, kind=q.get("kind") or None, queue=q.get("queue") or None,
                                    tag=q.get("tag") or None, after=q.get("after") or None, limit=limit,
                                    order="oldest" if q.get("order") == "oldest" else "newest")
        items = [{"id": j.id, "kind": j.kind, "queue": j.queue, "state": j.state, "priority": j.priority,
                  "tags": j.tags if isinstance(j.tags, list) else [],
                  "attempts": j.attempts, "max_attempts": j.max_attempts, "run_at": j.run_at,
                  "created_at": j.created_at, "updated_at": j.updated_at,
                  "last_error": None if j.last_error is None else j.last_error[:LIST_ERROR_CHARS]}
                 for j in page.items]
        return _json({"items": items, "next_after": page.next_after, "now": self.insights.now_ms()})

    def api_job(self, request: Request) -> Response:
        job_id = request.path_params["job_id"]
        job = self.store.jobs.get(job_id)
        if job is None:
            return _error(404, "not_found", f"no job {job_id!r} (swept, or never enqueued)")
        data = dataclasses.asdict(job)
        timeline: list[dict[str, Any]] = [{"at": job.created_at, "what": "created"}, {"at": job.run_at, "what": "eligible to run (run_at)"}]
        if job.lease_until is not None:
            timeline.append({"at": job.lease_until, "what": f"lease of generation {job.lease_generation} "
                                                            f"{'ends' if job.state == 'leased' else 'ended'}"})
        for e in job.errors:
            if e.get("at") is not None:
                timeline.append({"at": e["at"], "what": f"attempt {e.get('attempt')} failed: {e.get('message')}"})
        if job.cancel_requested_at is not None:
            timeline.append({"at": job.cancel_requested_at, "what": "cancel requested"})
        timeline.append({"at": job.updated_at, "what": f"last change: now {job.state}"})
        timeline.sort(key=lambda t: t["at"])
        data["timeline"] = timeline
        data["attempt_rows"] = attempt_rows(job)
        data["composition"] = self._composition(job_id)
        data["now"] = self.insights.now_ms()
        data["actions"] = self.actions_allowed(request)
        return _json(data)

    def _composition(self, job_id: str) -> list[dict[str, Any]]:
        """The job's composition (docs/composition.md), parents first, each step with its state
        and its parents' ids; [] for a job without dependencies (the common case: two reads)."""
        jobs = self.store.jobs
        if not jobs.dependencies(job_id) and not jobs.dependents(job_id):
            return []
        steps = jobs.composition(job_id)[:COMPOSITION_STEPS]
        return [{"id": j.id, "kind": j.kind, "state": j.state, "waiting_on": j.waiting_on,
                 "parents": [d.parent_id for d in jobs.dependencies(j.id)],
                 "last_error": None if j.last_error is None else j.last_error[:LIST_ERROR_CHARS]} for j in steps]

    def api_run(self, request: Request) -> Response:
        job_id = request.path_params["job_id"]
        try:
            from ..flow import describe_run
        except ImportError:
            return _error(501, "unavailable", "this tenure has no workflows (tenure.flow)")
        run = describe_run(self.store, job_id)
        if run is None:
            return _error(404, "not_found", f"no job {job_id!r}")
        return _json(run)

    def api_schedules(self, request: Request) -> Response:
        registry = getattr(self.store, "schedules", None)
        if registry is None:
            return _json({"available": False, "items": []})
        items = []
        for s in registry.list():
            d = dataclasses.asdict(s) if dataclasses.is_dataclass(s) and not isinstance(s, type) else dict(s)
            items.append(d)
        return _json({"available": True, "items": items, "now": self.insights.now_ms(),
                      "actions": self.actions_allowed(request)})

    def api_workers(self, request: Request) -> Response:
        now = self.insights.now_ms()
        workers = self.insights.workers(now=now)
        return _json({"now": now, "stale_after_ms": self.insights.worker_stale_ms,
                      "items": [dataclasses.asdict(w) for w in workers]})

    # -- actions ---------------------------------------------------------------------------------
    def _act(self, request: Request, fn: Callable[[], Any], done: Callable[[Any], dict[str, Any]]) -> Response:
        refused = self.check_action(request)
        if refused is not None:
            return refused
        result = fn()
        self.insights.invalidate()
        return _json({"ok": True, **done(result)})

    def act_cancel(self, request: Request) -> Response:
        job_id = request.path_params["job_id"]
        messages = {"cancelled": f"cancelled {job_id}", "unchanged": f"{job_id} was already cancelled",
                    "requested": f"cancel requested for {job_id}: its worker stops it and settles it cancelled"}
        return self._act(request, lambda: self.store.jobs.request_cancel(job_id),
                         lambda outcome: {"changed": outcome != "unchanged", "outcome": outcome,
                                          "message": messages[outcome]})

    def act_requeue(self, request: Request) -> Response:
        job_id = request.path_params["job_id"]
        return self._act(request, lambda: self.store.jobs.requeue(job_id),
                         lambda changed: {"changed": changed, "message": f"requeued {job_id}" if changed
                                          else f"{job_id} was already pending"})

    def act_composition(self, request: Request) -> Response:
        """POST /api/jobs/{id}/composition/{cancel|requeue}: the whole composition of the job,
        through ``store.jobs.cancel_composition`` / ``requeue_composition``."""
        job_id, verb = request.path_params["job_id"], request.path_params["verb"]
        if verb == "cancel":
            return self._act(request, lambda: self.store.jobs.cancel_composition(job_id),
                             lambda n: {"changed": bool(n["cancelled"] or n["requested"]), **n,
                                        "message": f"cancelled {n['cancelled']} step(s), asked the workers of "
                                                   f"{n['requested']} running step(s) to stop"})
        if verb == "requeue":
            return self._act(request, lambda: self.store.jobs.requeue_composition(job_id),
                             lambda n: {"changed": bool(n), "requeued": n, "message": f"requeued {n} step(s)"})
        return _error(404, "not_found", f"no composition action {verb!r}; cancel or requeue")

    def act_bulk(self, request: Request) -> Response:
        """POST /api/jobs/bulk/{cancel|requeue|delete}?state=&kind=&queue=&tag=[&dry_run=1]: the
        public ``store.jobs.<op>_where`` on every job the filter matches (a filter is required);
        the page asks with the dry run's count before it acts."""
        op = request.path_params["operation"]
        if op not in ("cancel", "requeue", "delete"):
            return _error(404, "not_found", f"no bulk operation {op!r}")
        q = request.query_params
        filters = {k: q.get(k) or None for k in ("state", "kind", "queue", "tag")}
        dry_run = q.get("dry_run") in ("1", "true")
        words = ", ".join(f"{k}={val}" for k, val in filters.items() if val is not None) or "no filter"
        done = {"cancel": "cancelled (or asked to stop)", "requeue": "requeued", "delete": "deleted"}[op]
        fn = getattr(self.store.jobs, f"{op}_where")
        if dry_run:
            refused = self.check_action(request)
            if refused is not None:
                return refused
            return _json({"ok": True, "dry_run": True, "count": fn(**filters, dry_run=True), "filter": words})
        return self._act(request, lambda: fn(**filters),
                         lambda n: {"changed": bool(n), "count": n, "filter": words,
                                    "message": f"{done} {n} job(s) matching {words}"})

    def act_redrive(self, request: Request) -> Response:
        name = request.path_params["name"]
        return self._act(request, lambda: self.store.jobs.redrive(name),
                         lambda n: {"changed": bool(n), "count": n,
                                    "message": f"redrove {n} job(s) from {name}"})

    def act_schedule(self, request: Request) -> Response:
        """POST /api/schedules/{name}/{run|pause|resume|remove}?key=: enqueue the schedule's job
        now (``store.schedules.run_now``), pause or resume it, or delete it (``remove``); 404 for an
        unknown one."""
        name, verb = request.path_params["name"], request.path_params["verb"]
        key = request.query_params.get("key") or ""
        label = name + (f" #{key}" if key else "")
        if verb not in ("run", "pause", "resume", "remove"):
            return _error(404, "not_found", f"no schedule action {verb!r}; run, pause, resume or remove")
        refused = self.check_action(request)
        if refused is not None:
            return refused
        if self.store.schedules.get(name, key=key) is None:
            return _error(404, "not_found", f"no schedule {label!r}")
        if verb == "run":
            return self._act(request, lambda: self.store.schedules.run_now(name, key=key),
                             lambda job_id: {"changed": True, "job_id": job_id,
                                             "message": f"schedule {label} enqueued job {job_id}"})
        if verb in ("pause", "resume"):
            fn = getattr(self.store.schedules, verb)
            return self._act(request, lambda: fn(name, key=key),
                             lambda s: {"changed": s is not None, "message": f"schedule {label} "
                                        f"{'paused' if verb == 'pause' else 'resumed'}"})
        return self._act(request, lambda: self.store.schedules.remove(name, key=key),
                         lambda removed: {"changed": removed, "message": f"schedule {label} removed "
                                          "(the jobs it enqueued stay)"})

    def act_queue(self, verb: str) -> Callable[[Request], Response]:
        def handler(request: Request) -> Response:
            name = request.path_params["name"]
            fn = getattr(self.store.queues, verb, None)
            if fn is None:
                return _error(501, "unavailable", f"this tenure cannot {verb} queues")
            return self._act(request, lambda: fn(name),
                             lambda _r: {"changed": True, "message": f"queue {name} "
                                         f"{'paused' if verb == 'pause' else 'resumed'}"})

        return handler

    # -- metrics -----------------------------------------------------------------------------------
    def metrics(self, request: Request) -> Response:
        from ..metrics import render

        body, content_type = render(self.registry)
        return Response(body, media_type=content_type, headers={"cache-control": "no-store"})


def create_app(store: Store, *, auth_token: str | None = None, username: str | None = None,
               read_only: bool = False, allow_remote_actions: bool = False, title: str = "tenure",
               poll_ms: int = DEFAULT_POLL_MS, csrf_secret: bytes | None = None,
               insights: Insights | None = None,
               workers: Callable[[], Iterable[Worker]] | None = None,
               allowed_hosts: Iterable[str] = ()) -> Starlette:
    """The dashboard for ``store`` as a Starlette app: serve it (``uvicorn.run(app)``) or mount it
    (``Mount("/tenure", app=create_app(store))``); it follows the mount's root path.

    ``auth_token`` (default ``$TENURE_DASHBOARD_TOKEN``) protects every route but ``/healthz``
    (Bearer or basic auth, password = token; ``username`` too if given). Without a token, actions are
    refused to clients not on this machine unless ``allow_remote_actions`` (use it only behind your
    own authentication). ``read_only`` hides and refuses every action. ``csrf_secret`` signs the CSRF
    tokens (default: derived from the token, else random per process). ``workers`` (a callable
    answering this process's running workers) adds their counters to ``/metrics``.

    Every route but ``/healthz`` answers only requests addressed to this dashboard's own host
    names — the address the request arrived on, ``localhost``, loopback addresses, and
    ``allowed_hosts`` (names or IP addresses, no port: a reverse proxy's public name, say); any
    other ``Host`` gets 421 and a malformed one 400 (DNS rebinding, see
    :mod:`tenure.dashboard.hosts`). A bad entry in ``allowed_hosts`` raises TN1001.
    """
    if auth_token is None:
        auth_token = os.environ.get("TENURE_DASHBOARD_TOKEN") or None
    if auth_token is not None and (not isinstance(auth_token, str) or len(auth_token) < 8):
        raise InvalidArgument("auth_token must be a string of at least 8 characters")
    if not isinstance(poll_ms, int) or poll_ms < 250:
        raise InvalidArgument("poll_ms must be an int >= 250")
    dash = Dashboard(store, auth_token=auth_token, username=username, read_only=read_only,
                     allow_remote_actions=allow_remote_actions, title=title, poll_ms=poll_ms,
                     csrf_secret=csrf_secret, insights=insights, workers=workers,
                     allowed_hosts=allowed_hosts)

    def page(name: str, arg_param: str | None = None) -> Callable[[Request], Response]:
        def endpoint(request: Request) -> Response:
            arg = request.path_params.get(arg_param, "") if arg_param else ""
            return dash.page(request, name, arg)

        return endpoint

    def healthz(request: Request) -> Response:
        return _json({"ok": True})

    def jobs_slash(request: Request) -> Response:
        return RedirectResponse(f"{_base(request)}/jobs", status_code=307)

    routes = [
        Route("/", page("overview")),
        Route("/jobs", page("jobs")),
        Route("/jobs/", jobs_slash),
        Route("/jobs/{job_id:path}", page("job", "job_id")),
        Route("/runs/{job_id:path}", page("run", "job_id")),
        Route("/schedules", page("schedules")),
        Route("/workers", page("workers")),
        Route("/healthz", healthz),
        Route("/metrics", dash.metrics),
        Route("/api/overview", dash.api_overview),
        Route("/api/jobs", dash.api_jobs),
        Route("/api/jobs/bulk/{operation}", dash.act_bulk, methods=["POST"]),
        Route("/api/jobs/{job_id:path}/composition/{verb}", dash.act_composition, methods=["POST"]),
        Route("/api/jobs/{job_id:path}/cancel", dash.act_cancel, methods=["POST"]),
        Route("/api/jobs/{job_id:path}/requeue", dash.act_requeue, methods=["POST"]),
        Route("/api/jobs/{job_id:path}", dash.api_job),
        Route("/api/runs/{job_id:path}", dash.api_run),
        Route("/api/schedules", dash.api_schedules),
        Route("/api/workers", dash.api_workers),
        # {name:path}: a queue name may contain "/" (tenure._validate); the page sends it
        # percent-encoded, the server decodes %2F to "/", and the verb is the last segment.
        Route("/api/schedules/{name}/{verb}", dash.act_schedule, methods=["POST"]),
        Route("/api/queues/{name:path}/pause", dash.act_queue("pause"), methods=["POST"]),
        Route("/api/queues/{name:path}/resume", dash.act_queue("resume"), methods=["POST"]),
        Route("/api/queues/{name:path}/redrive", dash.act_redrive, methods=["POST"]),
        Mount("/static", app=StaticFiles(directory=STATIC_DIR), name="static"),
    ]

    async def on_tenure_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, TenureError)
        return _error(_status_for(exc), exc.code, str(exc))

    app = Starlette(routes=routes, exception_handlers={TenureError: on_tenure_error})
    app.state.dashboard = dash
    app.add_middleware(_Guard, dash=dash)
    return app
