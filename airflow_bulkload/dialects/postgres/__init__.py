"""PostgreSQL: every piece of PostgreSQL SQL text this provider sends lives in this package.

Identifiers and literals are composed with :mod:`psycopg.sql` (``Identifier``/``Literal``), never
pasted into strings. Connections are psycopg 3 connections.

One module per role of :class:`~airflow_bulkload.dialects.roles.Dialect`: :mod:`.session`
(names, transactions, the state schema of :mod:`.migrations`), :mod:`.ledger` (chunk ledger and
load records), :mod:`.load` (COPY, ``aws_s3`` and load slots; the load methods are described
there), :mod:`.catalog` (catalog reads), :mod:`.table_prep` (claims, saved state and the
drop/rebuild DDL) and :mod:`.settings` (bulk mode's server settings), :mod:`.work_tables` (the replace and upsert modes); :mod:`.errors` translates
load errors.
"""

from __future__ import annotations

from airflow_bulkload.dialects.postgres.catalog import PostgresCatalog
from airflow_bulkload.dialects.postgres.ledger import PostgresLedger
from airflow_bulkload.dialects.postgres.load import PostgresLoader
from airflow_bulkload.dialects.postgres.session import PostgresSession
from airflow_bulkload.dialects.postgres.settings import PostgresSettings
from airflow_bulkload.dialects.postgres.table_prep import PostgresTablePrep
from airflow_bulkload.dialects.postgres.work_tables import PostgresWorkTables


class PostgresDialect(
    PostgresLedger,
    PostgresLoader,
    PostgresCatalog,
    PostgresWorkTables,
    PostgresTablePrep,
    PostgresSettings,
    PostgresSession,
):
    """PostgreSQL 12+ (RDS, Aurora and self-managed), over psycopg 3 connections."""


__all__ = ["PostgresDialect"]
