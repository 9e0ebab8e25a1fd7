"""One module per engine holds all of that engine's SQL text."""

from __future__ import annotations

from airflow_bulkload.dialects.roles import Dialect


def dialect_for(conn_type: str, *, state_schema: str | None = None) -> Dialect:
    """The dialect for an Airflow connection type (``postgres``/``mysql`` and their aliases).

    ``state_schema``: where the ``bulkload_*`` state tables live (MySQL: a database; default the
    connection's).
    """
    kind = conn_type.lower()
    if kind in ("postgres", "postgresql", "aurora-postgresql"):
        from airflow_bulkload.dialects.postgres import PostgresDialect

        return PostgresDialect()
    if kind in ("mysql", "mariadb", "aurora-mysql"):
        from airflow_bulkload.dialects.mysql import MySqlDialect

        return MySqlDialect(state_database=state_schema)
    raise ValueError(f"no bulk-load dialect for connection type {conn_type!r} (postgres or mysql)")


__all__ = ["Dialect", "dialect_for"]
