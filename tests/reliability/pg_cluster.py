"""A private, throw-away PostgreSQL cluster for tests that stop, kill or restart the server.

:class:`PrivateCluster` runs ``initdb`` into a new temporary directory and starts ``postgres`` on a
free port of 127.0.0.1 (its socket directory inside that directory too), with the binaries of the
newest ``/usr/lib/postgresql/<version>/bin``. Restarting or killing it never touches the shared
test server that every other run uses. :meth:`PrivateCluster.remove` stops it and deletes the
directory; it is safe to call more than once (the fixture calls it on failure as well).

PostgreSQL refuses to run as root: under root every server binary runs as the ``postgres`` OS
user (``runuser -u postgres --``), in a directory that user owns.

Only for tests.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

#: Settings of a cluster that only lives for one test module: small, no durability waits.
_CONF = """
listen_addresses = '127.0.0.1'
port = {port}
unix_socket_directories = '{sockets}'
max_connections = 60
shared_buffers = 32MB
fsync = off
synchronous_commit = off
full_page_writes = off
autovacuum = off
logging_collector = off
"""


def bin_dir() -> Path | None:
    """The newest installed ``/usr/lib/postgresql/<version>/bin`` holding initdb, or None."""
    found = [p for p in Path("/usr/lib/postgresql").glob("*/bin") if (p / "initdb").exists()]
    return max(found, key=lambda p: int(p.parent.name)) if found else None


def unavailable() -> str | None:
    """None when a private cluster can be made here, else why not."""
    if bin_dir() is None:
        return "no PostgreSQL server binaries under /usr/lib/postgresql/<version>/bin"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root, and there is no postgres OS user to run the server as"
        if shutil.which("runuser") is None:
            return "running as root without runuser to run the server as postgres"
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PrivateCluster:
    """``PrivateCluster().start()``: a new cluster; ``url`` connects to its ``postgres`` database."""

    def __init__(self) -> None:
        found = bin_dir()
        if found is None:
            raise RuntimeError(unavailable())
        self.bin = found
        self.dir = Path(tempfile.mkdtemp(prefix="tenure-pgcluster-"))
        self.data = self.dir / "data"
        self.log = self.dir / "server.log"
        self.port = _free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self._as: list[str] = []
        if os.geteuid() == 0:
            pg = pwd.getpwnam("postgres")
            os.chown(self.dir, pg.pw_uid, pg.pw_gid)
            self._as = ["runuser", "-u", "postgres", "--"]

    def _run(self, *argv: str, timeout: float = 120) -> None:
        proc = subprocess.run([*self._as, *argv], capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stderr}{proc.stdout}\n"
                               f"{self.log_tail()}")

    def _pg_ctl(self, *args: str) -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", *args)

    def start(self) -> PrivateCluster:
        """initdb (trust authentication, user ``postgres``) and start; answers once it accepts
        connections."""
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust",
                  "-E", "UTF8", "--no-sync", "--no-instructions")
        with open(self.data / "postgresql.conf", "a", encoding="utf-8") as conf:
            conf.write(_CONF.format(port=self.port, sockets=self.dir))
        self._pg_ctl("start")
        return self

    def restart(self, mode: str) -> None:
        """Stop the server in ``mode`` (``smart``, ``fast`` or ``immediate``: a crash, no
        checkpoint) and start it again on the same port; answers once it accepts connections."""
        self._pg_ctl("-m", mode, "restart")

    def started_at(self) -> datetime.datetime:
        """When the running server started (``pg_postmaster_start_time()``): a restart moves it."""
        import psycopg

        with psycopg.connect(self.url, connect_timeout=10) as conn:
            row = conn.execute("SELECT pg_postmaster_start_time()").fetchone()
        assert row is not None
        return row[0]

    def log_tail(self, chars: int = 2000) -> str:
        with contextlib.suppress(OSError):
            return self.log.read_text(errors="replace")[-chars:]
        return ""

    def remove(self) -> None:
        """Stop the server at once (if it runs) and delete its directory."""
        if self.data.exists():
            subprocess.run([*self._as, str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate",
                            "-w", "-t", "60", "stop"], capture_output=True, timeout=120)
        shutil.rmtree(self.dir, ignore_errors=True)
