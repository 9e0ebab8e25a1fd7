"""The engine layer: all SQL text, one package per engine, one module per role.

:mod:`.roles` declares the roles every engine implements and :class:`Dialect`, their union;
``postgres/`` and ``mysql/`` implement them. Nothing above this layer imports more than
:func:`dialect_for`, :class:`Dialect` and the request values of :mod:`.requests`.
"""

from __future__ import annotations

from airflow_bulkload.dialects.requests import IndexBuild, LoadInto, Withdrawal, WithdrawScratch
from airflow_bulkload.dialects.roles import Dialect


def dialect_for(conn_type: str, *, state_schema: str | None = None) -> Dialect:
    """The dialect for an Airflow connection type (``postgres``/``mysql`` and their aliases).

    ``state_schema``: where the ``bulkload_*`` state tables live (MySQL: a database; default the
    connection's).
    """
    kind = conn_type.lower().replace("_", "-")  # Airflow writes aurora-mysql as aurora_mysql
    if kind in ("postgres", "postgresql", "aurora-postgresql"):
        from airflow_bulkload.dialects.postgres import PostgresDialect

        return PostgresDialect()
    if kind in ("mysql", "mariadb", "aurora-mysql"):
        from airflow_bulkload.dialects.mysql import MySqlDialect

        return MySqlDialect(state_database=state_schema)
    raise ValueError(f"no bulk-load dialect for connection type {conn_type!r} (postgres or mysql)")


__all__ = ["Dialect", "IndexBuild", "LoadInto", "WithdrawScratch", "Withdrawal", "dialect_for"]
