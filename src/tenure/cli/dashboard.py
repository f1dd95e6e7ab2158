"""``tenure dashboard``: serve the web dashboard and Prometheus ``/metrics``."""

from __future__ import annotations

import click

from ..redact import redact_url
from .common import (
    _SECRETS,
    _close,
    _fail,
    main,
    open_store,
    url_option,
)

_LOOPBACK = {"127.0.0.1", "::1", "localhost"}


def is_loopback(host: str) -> bool:
    """True for an address only this machine can reach."""
    if host in _LOOPBACK:
        return True
    import ipaddress

    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@main.command()
@url_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=8350, show_default=True, type=click.IntRange(min=0, max=65535),
              help="TCP port to serve on (0: any free port).")
@click.option("--token", envvar="TENURE_DASHBOARD_TOKEN", default=None, metavar="TOKEN",
              help="Require this token (Bearer, or the basic-auth password) for every page and action "
                   "[default: $TENURE_DASHBOARD_TOKEN]. Required when --host is not a loopback address.")
@click.option("--read-only", is_flag=True, help="Hide and refuse every action (cancel, requeue, pause...).")
@click.option("--allowed-host", "allowed_hosts", multiple=True, metavar="NAME",
              help="Also answer requests addressed to this host name (repeatable): a reverse proxy's public "
                   "name, a name Prometheus scrapes. Any other Host gets 421 (DNS-rebinding defence).")
def dashboard(url: str | None, host: str, port: int, token: str | None, read_only: bool,
              allowed_hosts: tuple[str, ...]) -> None:
    """Serve the web dashboard (and Prometheus /metrics): tenure dashboard --port 8350.

    It answers only requests addressed to its own names: the bound address, localhost, loopback
    addresses and each --allowed-host."""
    if token:
        _SECRETS.add(token)
    from ..dashboard.hosts import normalize_host

    for name in allowed_hosts:
        if normalize_host(name) is None:
            raise click.BadParameter(f"{name!r} is not a host name or an IP address (no scheme, no port)",
                                     param_hint="--allowed-host")
    names = [*allowed_hosts]
    if host not in ("0.0.0.0", "::") and normalize_host(host) is not None:
        names.append(host)  # the bound name or address is one of the dashboard's own
    if not is_loopback(host) and not token:
        raise click.UsageError(f"--host {host} is reachable from other machines: set --token (or "
                               "$TENURE_DASHBOARD_TOKEN) so pages and actions need it")
    try:
        import uvicorn

        from ..dashboard import create_app
    except ImportError as exc:
        _fail(f"the dashboard needs its extra: pip install 'tenure[dashboard]' ({exc})")
    store = open_store(url)
    app = create_app(store, auth_token=token or None, read_only=read_only, allowed_hosts=names)
    click.echo(f"tenure dashboard for {redact_url(store.engine.describe())} on http://{host}:{port}/"
               + (" (token required)" if token else ""), err=True)
    try:
        uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)
    finally:
        _close(store)
