"""``tenure jobs``: list, show, cancel, requeue, delete and redrive jobs."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import click

from ..records import STATES
from .common import (
    Commands,
    _close,
    _fail,
    _jsonable,
    _short,
    emit_json,
    fmt_ms,
    json_option,
    main,
    open_store,
    print_table,
    url_option,
)

#: What Celery, RQ, Sidekiq and Oban call a job state, and tenure's name for it.
PEER_STATES = {
    "queued": "pending", "available": "pending", "scheduled": "pending", "waiting": "pending",
    "enqueued": "pending", "deferred": "pending", "started": "leased", "running": "leased",
    "executing": "leased", "active": "leased", "retryable": "failed", "retry": "failed", "retrying": "failed",
    "discarded": "dead", "dead_letter": "dead", "failure": "dead", "completed": "done", "success": "done",
    "finished": "done", "succeeded": "done", "canceled": "cancelled", "revoked": "cancelled",
}


class StateChoice(click.Choice):
    """A job state; another queue's name for one (``retryable``, ``completed``) is refused with
    tenure's (``did you mean 'failed'?``), as a misspelt one is by click."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        ours = PEER_STATES.get(str(value).lower())
        if ours is not None and str(value) not in self.choices:
            self.fail(f"{value!r} is not a tenure job state (did you mean {ours!r}?); the states are "
                      f"{', '.join(STATES)}", param, ctx)
        return super().convert(value, param, ctx)


@main.group(cls=Commands)
def jobs() -> None:
    """List, inspect, cancel, requeue and redrive jobs."""


def _job_dict(job: Any) -> dict[str, Any]:
    return dataclasses.asdict(job)


def _edge(d: Any, other: str) -> dict[str, Any]:
    """One dependency edge for ``jobs show --json``: the job at the other end, its state, the edge."""
    return {"id": other, "kind": d.job.kind if d.job else None, "state": d.job.state if d.job else None,
            "position": d.position, "met": d.met, "on_parent_failure": d.on_parent_failure}


@jobs.command("list")
@url_option
@click.option("--state", type=StateChoice(STATES), default=None, help="Only jobs in this state.")
@click.option("--queue", default=None, help="Only jobs in this queue.")
@click.option("--kind", default=None, help="Only jobs of this kind.")
@click.option("--tag", default=None, help="Only jobs carrying this tag.")
@click.option("--order", type=click.Choice(["newest", "oldest"]), default="newest", show_default=True,
              help="Newest first (tenure's ids are time-ordered), or oldest first.")
@click.option("--after", default=None, metavar="JOB_ID", help="Continue after this id (keyset paging).")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(min=1, max=10_000),
              help="Jobs per page.")
@json_option
def jobs_list(url: str | None, state: str | None, queue: str | None, kind: str | None, tag: str | None,
              order: str, after: str | None, limit: int, as_json: bool) -> None:
    """One keyset page of jobs, by id (filter by --state, --queue, --kind, --tag)."""
    store = open_store(url)
    try:
        page = store.jobs.page(state=state, kind=kind, queue=queue, tag=tag, after=after, limit=limit,
                               order=order)
    finally:
        _close(store)
    if as_json:
        emit_json({"items": [_job_dict(j) for j in page.items], "next_after": page.next_after})
        return
    print_table(["id", "kind", "queue", "state", "attempts", "run at (UTC)", "updated (UTC)", "last error"],
                [(j.id, j.kind, j.queue, j.state, f"{j.attempts}/{j.max_attempts}", fmt_ms(j.run_at),
                  fmt_ms(j.updated_at), _short(j.last_error, 40)) for j in page.items])
    if page.next_after:
        click.echo(f"more: --after {page.next_after}")
    elif not page.items:
        click.echo("no jobs match")


@jobs.command("show")
@click.argument("job_id")
@url_option
@json_option
def jobs_show(job_id: str, url: str | None, as_json: bool) -> None:
    """Everything the store holds about one job (never its lease token)."""
    store = open_store(url)
    try:
        job = store.jobs.get(job_id)
        parents = store.jobs.dependencies(job_id) if job is not None else []
        dependents = store.jobs.dependents(job_id) if job is not None else []
    finally:
        _close(store)
    if job is None:
        _fail(f"no job {job_id!r}")
    if as_json:
        emit_json({**_job_dict(job), "dependencies": [_edge(d, d.parent_id) for d in parents],
                   "dependents": [_edge(d, d.job_id) for d in dependents]})
        return
    fields = [("id", job.id), ("kind", job.kind), ("queue", job.queue), ("state", job.state),
              ("priority", job.priority), ("attempts", f"{job.attempts} of {job.max_attempts}"),
              ("lease generation", job.lease_generation), ("lease owner", job.lease_owner or ""),
              ("lease until", fmt_ms(job.lease_until)), ("run at", fmt_ms(job.run_at)),
              ("created", fmt_ms(job.created_at)), ("updated", fmt_ms(job.updated_at)),
              ("timeout", f"{job.timeout_ms} ms" if job.timeout_ms else ""),
              ("singleton key", job.singleton_key or ""), ("group key", job.group_key or ""),
              ("dead letter of", job.origin_id or ""), ("last error", job.last_error or ""),
              ("cancel requested", fmt_ms(job.cancel_requested_at) if job.cancel_requested_at else ""),
              ("tags", ", ".join(job.tags) if isinstance(job.tags, list) else "(cannot be decoded)"),
              ("meta", json.dumps(job.meta, ensure_ascii=False, default=_jsonable) if job.meta else ""),
              ("progress", "" if job.progress is None else
               f"{job.progress.fraction * 100:.0f}% (attempt {job.progress.attempt}, {fmt_ms(job.progress.at)})"
               + (f": {job.progress.note}" if job.progress.note else ""))]
    if parents or job.waiting_on:
        fields.append(("waiting on", f"{job.waiting_on} parent(s)"))
    print_table(["field", "value"], fields)
    for title, edges, other in (("parents (depends_on)", parents, "parent_id"), ("dependents", dependents, "job_id")):
        if edges:
            click.echo(f"{title}:")
            print_table(["id", "kind", "state", "met", "on parent failure"],
                        [(getattr(d, other), d.job.kind if d.job else "(deleted)", d.job.state if d.job else "",
                          "yes" if d.met else "no", d.on_parent_failure) for d in edges])
    click.echo("payload:")
    click.echo(json.dumps(job.payload, indent=2, ensure_ascii=False, default=_jsonable))
    if job.result is not None:
        click.echo("result:")
        click.echo(json.dumps(job.result, indent=2, ensure_ascii=False, default=_jsonable))
    if job.errors and not isinstance(job.errors, list):  # a tenure.Undecodable history
        click.echo(f"error history: cannot be decoded ({getattr(job.errors, 'reason', '?')})")
    elif job.errors:
        click.echo(f"error history ({len(job.errors)} failed attempt(s), oldest first):")
        for e in job.errors:
            took = f", {e['duration_ms']} ms" if e.get("duration_ms") is not None else ""
            click.echo(f"- attempt {e.get('attempt')} at {fmt_ms(e.get('at'))} by {e.get('owner') or '?'}{took}: "
                       f"{e.get('type') or 'error'}: {e.get('message')}")
            for line in (e.get("traceback") or "").rstrip().splitlines():
                click.echo(f"    {line}")


def _bulk_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The filter options of the bulk forms of jobs cancel / requeue / delete (tenure.cli.bulk)."""
    for opt in reversed([
        click.option("--state", type=StateChoice(STATES), default=None, help="Only jobs in this state."),
        click.option("--kind", default=None, help="Only jobs of this kind."),
        click.option("--queue", default=None, help="Only jobs in this queue."),
        click.option("--tag", default=None, help="Only jobs carrying this tag."),
        click.option("--older-than", "older_than", default=None, metavar="DURATION",
                     help="Only jobs created longer ago than this (e.g. 7d, 12h, 90s)."),
        click.option("--dry-run", is_flag=True, help="Only count the jobs it would change."),
        click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation."),
    ]):
        fn = opt(fn)
    return fn


def _bulk(operation: str, job_id: str | None, url: str | None, filters: dict[str, Any], dry_run: bool,
          yes: bool, as_json: bool) -> bool:
    """Run the bulk form when filters are given (answers True); refuse a JOB_ID with filters."""
    given = any(v is not None for v in filters.values())
    if job_id is not None:
        if given or dry_run:
            raise click.UsageError("give a JOB_ID or filters, not both")
        return False
    from .bulk import run_bulk

    run_bulk(operation, url, filters, dry_run=dry_run, yes=yes, as_json=as_json)
    return True


@jobs.command("cancel")
@click.argument("job_id", required=False)
@url_option
@_bulk_options
@json_option
def jobs_cancel(job_id: str | None, url: str | None, state: str | None, kind: str | None, queue: str | None,
                tag: str | None, older_than: str | None, dry_run: bool, yes: bool, as_json: bool) -> None:
    """Cancel a job: a queued one at once; a running one is asked to stop (its worker sets
    ctx.cancelled and settles it cancelled within a second; store.jobs.request_cancel).
    Without JOB_ID, every job the filters match (asks first; --yes, --dry-run)."""
    if _bulk("cancel", job_id, url, {"state": state, "kind": kind, "queue": queue, "tag": tag,
                                     "older_than": older_than}, dry_run, yes, as_json):
        return
    assert job_id is not None
    store = open_store(url)
    try:
        outcome = store.jobs.request_cancel(job_id)
    finally:
        _close(store)
    if as_json:
        data: dict[str, Any] = {"id": job_id, "cancelled": outcome == "cancelled"}
        if outcome == "requested":
            data["requested"] = True
        emit_json(data)
    elif outcome == "cancelled":
        click.echo(f"cancelled {job_id}")
    elif outcome == "requested":
        click.echo(f"cancel requested for {job_id}: it is running; its worker stops it and settles it cancelled")
    else:
        click.echo(f"{job_id} was already cancelled")


@jobs.command("requeue")
@click.argument("job_id", required=False)
@url_option
@_bulk_options
@json_option
def jobs_requeue(job_id: str | None, url: str | None, state: str | None, kind: str | None, queue: str | None,
                 tag: str | None, older_than: str | None, dry_run: bool, yes: bool, as_json: bool) -> None:
    """Return a failed, dead, cancelled or lease-expired job to pending now (attempts are kept).
    Without JOB_ID, every such job the filters match (asks first; --yes, --dry-run)."""
    if _bulk("requeue", job_id, url, {"state": state, "kind": kind, "queue": queue, "tag": tag,
                                      "older_than": older_than}, dry_run, yes, as_json):
        return
    assert job_id is not None
    store = open_store(url)
    try:
        changed = store.jobs.requeue(job_id)
        job = store.jobs.get(job_id) if changed else None
    finally:
        _close(store)
    if as_json:
        emit_json({"id": job_id, "requeued": changed})
    elif job is None:
        click.echo(f"requeued {job_id}" if changed else f"{job_id} was already pending")
    else:  # attempts are kept (spec 10.14): a dead job's next run shows as attempt 4 of 3
        left = max(1, job.max_attempts - job.attempts)
        click.echo(f"requeued {job_id}: pending now; {job.attempts} attempt(s) so far, max_attempts "
                   f"{job.max_attempts}: {left} more run(s) before it is dead (attempts are kept)")


@jobs.command("delete")
@click.argument("job_id", required=False)
@url_option
@_bulk_options
@json_option
def jobs_delete(job_id: str | None, url: str | None, state: str | None, kind: str | None, queue: str | None,
                tag: str | None, older_than: str | None, dry_run: bool, yes: bool, as_json: bool) -> None:
    """Delete a job and its checkpoints (never a running one: TN2091). Without JOB_ID, every job
    the filters match except running ones (asks first; --yes, --dry-run)."""
    if _bulk("delete", job_id, url, {"state": state, "kind": kind, "queue": queue, "tag": tag,
                                     "older_than": older_than}, dry_run, yes, as_json):
        return
    assert job_id is not None
    store = open_store(url)
    try:
        deleted = store.jobs.delete(job_id)
    finally:
        _close(store)
    if as_json:
        emit_json({"id": job_id, "deleted": deleted})
    elif deleted:
        click.echo(f"deleted {job_id}")
    else:
        _fail(f"no job {job_id!r}")


@jobs.command("redrive")
@click.argument("queue")
@url_option
@click.option("--limit", default=None, type=click.IntRange(min=1), help="At most this many jobs.")
@json_option
def jobs_redrive(queue: str, url: str | None, limit: int | None, as_json: bool) -> None:
    """Move the dead-lettered jobs in QUEUE back to their origin queue."""
    store = open_store(url)
    try:
        moved = store.jobs.redrive(queue, limit=limit)
    finally:
        _close(store)
    if as_json:
        emit_json({"queue": queue, "redriven": moved})
    else:
        click.echo(f"redrove {moved} job(s) from {queue}")
