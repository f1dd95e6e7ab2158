"""The dashboard answers only to its own host names: the defence against DNS rebinding.

A page on an attacker's site can make its own host name resolve to 127.0.0.1 (DNS rebinding) and
then talk to a dashboard on this machine as a *same-origin* site: the browser sends the
attacker's name as ``Host`` and as ``Origin``. So the dashboard never trusts either to describe
itself. It keeps an allow-list of its own names:

- the address the request arrived on (the socket's own address, from the ASGI scope) and the
  address ``tenure dashboard --host`` bound;
- ``localhost`` and the loopback addresses (``127.0.0.1``, ``[::1]``, any ``127.x.y.z``);
- the names the operator configures (``tenure dashboard --allowed-host NAME``,
  ``create_app(store, allowed_hosts=[...])``) — needed for a reverse proxy's public name, or a
  Prometheus target addressed by name.

A request whose ``Host`` is not on it is refused with **421 Misdirected Request** (400 when the
header is malformed or repeated), before authentication and before any route. A POST action also
needs a present ``Origin`` to name a host on the allow-list, on the port the request was sent to;
it is never compared with ``Host``, which the attacker's page controls as much as ``Origin``.
``/healthz`` (which shows nothing) answers any host, for load balancers; a request with no
``Host`` at all (HTTP/1.0 — never a browser) is answered. IP literals and
``localhost`` cannot be rebound, which is why they are always accepted: DNS rebinding needs a
name that a resolver answers. docs/operations.md ("Host names") describes it for operators; the
tests are ``tests/dashboard/test_hosts.py`` (HTTP) and ``tests/dashboard/test_rebinding_browser.py``
(Chromium mapping an attacker's name to 127.0.0.1).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from ..errors import InvalidArgument

__all__ = ["HostAllowList", "HostVerdict", "normalize_host", "parse_host"]

#: Names that always mean this machine (``*.localhost`` is not on it: resolvers may answer it).
LOOPBACK_NAMES = frozenset({"localhost"})
_LABEL = r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?"
_HOSTNAME = re.compile(rf"^{_LABEL}(?:\.{_LABEL})*$")
_PORT = re.compile(r"^[0-9]{1,5}$")


def normalize_host(name: str) -> str | None:
    """``name`` as one spelling (lower case, no trailing dot, an IP address in its compressed
    form without brackets), or None when it is not a host name or an IP address."""
    if not isinstance(name, str):
        return None
    text = name.strip().lower()
    if text.startswith("[") and text.endswith("]"):
        try:
            return str(ipaddress.IPv6Address(text[1:-1]))
        except ValueError:
            return None
    if text.endswith("."):
        text = text[:-1]
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        pass
    if len(text) > 253 or not _HOSTNAME.match(text):
        return None
    return text


def parse_host(value: str) -> tuple[str, int | None] | None:
    """A ``Host`` header (``name``, ``name:port``, ``[v6]``, ``[v6]:port``) as its normalized
    host and port (None when absent), or None when the header is malformed."""
    text = value.strip()
    if not text:
        return None
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            return None
        host, rest = text[: end + 1], text[end + 1 :]
        if rest and not rest.startswith(":"):
            return None
        port_text = rest[1:] if rest else None
    else:
        host, sep, port_text = text.partition(":")
        if not sep:
            port_text = None
        elif ":" in port_text:
            return None  # an IPv6 address must be bracketed in a Host header
    name = normalize_host(host)
    if name is None or (":" in name and not host.startswith("[")):
        return None
    if port_text is None or port_text == "":
        return name, None
    if not _PORT.match(port_text) or int(port_text) > 65535:
        return None
    return name, int(port_text)


@dataclass(frozen=True)
class HostVerdict:
    """The answer for one request: ``status`` None to go on, else 400 or 421 with ``message``."""

    status: int | None
    message: str = ""


class HostAllowList:
    """The names one dashboard answers to (see the module docstring)."""

    def __init__(self, names: Iterable[str] = ()) -> None:
        if isinstance(names, str):
            names = [names]
        allowed: set[str] = set()
        for raw in names:
            name = normalize_host(raw)
            if name is None:
                raise InvalidArgument(
                    f"allowed_hosts: {raw!r} is not a host name or an IP address (give names without "
                    "scheme or port, e.g. 'tenure.example.com')"
                )
            allowed.add(name)
        self.names = frozenset(allowed)

    def allows(self, name: str, server_host: str | None = None) -> bool:
        """Whether the normalized ``name`` is this dashboard's: a configured name, ``localhost``, a
        loopback address, or ``server_host`` (the address the request arrived on)."""
        if name in self.names or name in LOOPBACK_NAMES:
            return True
        try:
            ip = ipaddress.ip_address(name)
        except ValueError:
            return False
        if ip.is_loopback:
            return True
        if server_host is None:
            return False
        server = normalize_host(server_host)
        if server is None:
            return False
        try:
            server_ip = ipaddress.ip_address(server)
        except ValueError:
            return False
        return _unmapped(ip) == _unmapped(server_ip)

    def check_host(self, values: list[str], server_host: str | None) -> HostVerdict:
        """The verdict on a request's ``Host`` header values (none: not a browser, accepted)."""
        if not values:
            return HostVerdict(None)
        if len(values) > 1:
            return HostVerdict(400, "more than one Host header")
        parsed = parse_host(values[0])
        if parsed is None:
            return HostVerdict(400, f"malformed Host header {values[0][:100]!r}")
        if not self.allows(parsed[0], server_host):
            return HostVerdict(
                421,
                f"this dashboard does not answer to the host name {parsed[0][:100]!r} (a DNS-rebinding "
                "defence); add it with tenure dashboard --allowed-host NAME or create_app(allowed_hosts=[...])",
            )
        return HostVerdict(None)

    def origin_allowed(self, origin: str, host_values: list[str], server: tuple[str, int] | None) -> bool:
        """Whether a present ``Origin`` is this dashboard's: ``http(s)``, a host on the allow-list,
        and the port the request was sent to (the ``Host`` header's port, else the socket's)."""
        try:
            parts = urlsplit(origin)
            port = parts.port
        except ValueError:
            return False
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.path or parts.query:
            return False
        name = normalize_host(parts.hostname)
        server_host = server[0] if server else None
        if name is None or not self.allows(name, server_host):
            return False
        if host_values:
            parsed = parse_host(host_values[0])
            return parsed is not None and parsed[1] == port
        return port is None or (server is not None and port == server[1])


def _unmapped(
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address,
) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip
