"""Find the driver connection inside a framework's connection object (the outbox ``conn=`` form).

Accepted: a raw ``sqlite3.Connection`` / ``psycopg.Connection``; a SQLAlchemy ``Session`` or
``Connection`` (the transaction stays SQLAlchemy's: tenure writes on the same DBAPI connection and
never commits it); a Django database wrapper (``django.db.connection`` or ``connections[alias]``).
Nothing is imported: objects are recognised by their module.
"""

from __future__ import annotations

from typing import Any


def driver_connection(obj: Any) -> Any:
    """The DBAPI connection behind ``obj`` (``obj`` itself when it already is one)."""
    module = type(obj).__module__ or ""
    if module.startswith("sqlalchemy"):
        if callable(getattr(obj, "connection", None)) and not hasattr(obj, "dialect"):
            obj = obj.connection()  # Session -> its Connection (begins the session's transaction)
        proxied = obj.connection  # Connection -> pool-proxied DBAPI connection
        return getattr(proxied, "dbapi_connection", None) or getattr(proxied, "driver_connection", proxied)
    if module.startswith("django.db"):
        obj.ensure_connection()
        return obj.connection
    return obj
