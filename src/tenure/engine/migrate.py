"""Numbered SQL migrations, shared by every dialect: ``NNNN_name.sql`` files in a folder."""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def load_migrations(package: str) -> list[Migration]:
    """Every migration in ``package``'s ``migrations`` folder, in version order."""
    folder = resources.files(package) / "migrations"
    found = []
    for entry in folder.iterdir():
        m = _NAME.match(entry.name)
        if m:
            found.append(Migration(int(m.group(1)), m.group(2), entry.read_text(encoding="utf-8")))
    found.sort(key=lambda mig: mig.version)
    return found


def split_statements(sql: str) -> list[str]:
    """Split a migration into statements on ``;`` at line ends, dropping ``--`` comment lines.
    (Migrations keep ``;`` out of string literals; PostgreSQL ``$$`` bodies and SQLite trigger
    ``BEGIN``/``END;`` bodies are kept whole.)"""
    statements, current, in_dollar, in_block = [], [], False, False
    for line in sql.splitlines():
        stripped = line.strip()
        if not in_dollar and (not stripped or stripped.startswith("--")):
            continue
        current.append(line)
        if stripped.count("$$") % 2 == 1:
            in_dollar = not in_dollar
        if stripped.upper() == "BEGIN":  # a SQLite trigger body: keep it whole
            in_block = True
        elif in_block and stripped.upper() == "END;":
            in_block = False
        if not in_dollar and not in_block and stripped.endswith(";"):
            statements.append("\n".join(current).rstrip().rstrip(";"))
            current = []
    if current and "".join(current).strip():
        statements.append("\n".join(current))
    return statements


LATEST_VERSION_HINT = "upgrade tenure, or point it at a database of its own version"
