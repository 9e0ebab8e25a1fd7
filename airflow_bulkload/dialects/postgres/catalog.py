"""PostgreSQL catalog reads (the Catalog role).

A table's definition with its exact DDL, its saved-state snapshot, row counts, duplicate keys,
and the server facts pre-flight reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import errors as pg_errors
from psycopg import sql
from psycopg.pq import TransactionStatus

from airflow_bulkload.catalog import (
    ColumnInfo,
    ConstraintInfo,
    IndexInfo,
    ServerFacts,
    TableInfo,
    TableRef,
)
from airflow_bulkload.dialects.checks import describe_duplicate_keys
from airflow_bulkload.dialects.postgres.session import PostgresSession, table_identifier
from airflow_bulkload.exceptions import TableNotFoundError
from airflow_bulkload.table_state import snapshot_from_info


class PostgresCatalog(PostgresSession):
    """Reads of ``pg_catalog``: a table with its indexes, constraints and triggers, and the server."""

    def describe_table(self, conn: Any, table: TableRef) -> TableInfo:
        """Read the table from the catalogs.

        Definitions come from ``pg_get_indexdef``/``pg_get_constraintdef``/``pg_get_triggerdef``
        with ``search_path`` emptied for the read, so every name in them is schema-qualified and
        the DDL recreates the same objects from any session.
        """
        if table.schema is None:
            table = self.qualified_name(conn, table)
        with self._read(conn) as cur:
            cur.execute("SELECT pg_catalog.current_setting('search_path')")
            saved_path = cur.fetchone()[0]
            cur.execute("SELECT pg_catalog.set_config('search_path', 'pg_catalog', false)")
            try:
                return self._describe(cur, table)
            finally:
                if conn.info.transaction_status != TransactionStatus.INERROR:
                    cur.execute(
                        "SELECT pg_catalog.set_config('search_path', %s, false)", (saved_path,)
                    )

    def _describe(self, cur: Any, table: TableRef) -> TableInfo:
        cur.execute(
            "SELECT c.oid, c.relkind, c.relpersistence, c.reltuples,"
            " pg_total_relation_size(c.oid), c.reloptions, t.reloptions"
            " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " LEFT JOIN pg_class t ON t.oid = c.reltoastrelid"
            " WHERE n.nspname = %s AND c.relname = %s AND c.relkind IN ('r', 'p')",
            (table.schema, table.name),
        )
        rel = cur.fetchone()
        if rel is None:
            cur.execute(
                "SELECT n.nspname, c.relname FROM pg_class c"
                " JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE lower(n.nspname) = lower(%s) AND lower(c.relname) = lower(%s)"
                " AND c.relkind IN ('r', 'p') LIMIT 3",
                (table.schema, table.name),
            )
            other_case = [TableRef(name=str(r[1]), schema=str(r[0])) for r in cur.fetchall()]
            hint = (
                f"; names are taken as written, not folded to lower case: did you mean "
                f"{' or '.join(map(str, other_case))}?"
                if other_case
                else ""
            )
            raise TableNotFoundError(
                f"table {table} does not exist (or is not visible to this user){hint}"
            )
        oid, relkind, persistence, reltuples, size, reloptions, toast_reloptions = rel
        partitions: list[list[Any]] = []
        if relkind == "p":
            # the leaves hold the rows: their size and row estimate are the table's
            cur.execute(
                "SELECT n.nspname, c.relname, c.reloptions, c.reltuples,"
                " pg_total_relation_size(c.oid)"
                " FROM pg_catalog.pg_partition_tree(%s) t"
                " JOIN pg_catalog.pg_class c ON c.oid = t.relid"
                " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
                " WHERE t.isleaf ORDER BY 1, 2",
                (oid,),
            )
            leaves = cur.fetchall()
            partitions = [[leaf[0], leaf[1], _options_dict(leaf[2])] for leaf in leaves]
            reltuples = sum(max(float(leaf[3]), 0) for leaf in leaves) if leaves else reltuples
            size = sum(int(leaf[4]) for leaf in leaves)

        cur.execute(
            "SELECT a.attname, format_type(a.atttypid, a.atttypmod), NOT a.attnotnull,"
            " pg_get_expr(d.adbin, d.adrelid), a.attidentity, a.attgenerated"
            " FROM pg_attribute a"
            " LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum"
            " WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped"
            " ORDER BY a.attnum",
            (oid,),
        )
        columns: list[ColumnInfo] = []
        identity: dict[str, str] = {}
        generated: list[str] = []
        for name, data_type, nullable, default, attidentity, attgenerated in cur.fetchall():
            columns.append(ColumnInfo(name, data_type, bool(nullable), default))
            if attidentity:
                identity[name] = "always" if attidentity == "a" else "by default"
            if attgenerated:
                generated.append(name)

        # key columns by name, expressions as the server prints them (INCLUDE columns left out)
        cur.execute(
            "SELECT ic.relname, pg_get_indexdef(i.indexrelid), i.indisunique, i.indisprimary,"
            " i.indisvalid, am.amname, pg_get_expr(i.indpred, i.indrelid), con.conname,"
            " ARRAY(SELECT CASE WHEN i.indkey[k - 1] <> 0"
            "   THEN (SELECT a.attname FROM pg_attribute a"
            "         WHERE a.attrelid = i.indrelid AND a.attnum = i.indkey[k - 1])"
            "   ELSE pg_get_indexdef(i.indexrelid, k, true) END"
            "   FROM generate_series(1, i.indnkeyatts) AS k ORDER BY k),"
            " pg_catalog.obj_description(i.indexrelid, 'pg_class'),"
            " pg_catalog.obj_description(con.oid, 'pg_constraint')"
            " FROM pg_index i"
            " JOIN pg_class ic ON ic.oid = i.indexrelid"
            " JOIN pg_am am ON am.oid = ic.relam"
            " LEFT JOIN pg_constraint con ON con.conindid = i.indexrelid"
            "  AND con.conrelid = i.indrelid AND con.contype IN ('p', 'u', 'x')"
            " WHERE i.indrelid = %s ORDER BY ic.relname",
            (oid,),
        )
        indexes = [
            IndexInfo(
                name=name,
                definition=definition,
                columns=list(index_columns),
                is_unique=bool(unique),
                is_primary=bool(primary),
                constraint_name=constraint,
                method=method,
                predicate=predicate,
                is_valid=bool(valid),
                comment=comment,
                constraint_comment=constraint_comment,
            )
            for (
                name,
                definition,
                unique,
                primary,
                valid,
                method,
                predicate,
                constraint,
                index_columns,
                comment,
                constraint_comment,
            ) in cur.fetchall()
        ]

        constraint_query = (
            "SELECT con.conname, con.contype, pg_get_constraintdef(con.oid), cn.nspname,"
            " cc.relname, ARRAY(SELECT a.attname FROM unnest(con.conkey)"
            "   WITH ORDINALITY AS k(attnum, ord)"
            "   JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.attnum"
            "   ORDER BY k.ord)"
            " FROM pg_constraint con"
            " JOIN pg_class cc ON cc.oid = con.conrelid"
            " JOIN pg_namespace cn ON cn.oid = cc.relnamespace"
        )
        cur.execute(constraint_query + " WHERE con.conrelid = %s ORDER BY con.conname", (oid,))
        constraints = [_constraint(row) for row in cur.fetchall()]
        cur.execute(
            constraint_query + " WHERE con.confrelid = %s AND con.contype = 'f'"
            " ORDER BY cn.nspname, cc.relname, con.conname",
            (oid,),
        )
        referencing = [_constraint(row) for row in cur.fetchall()]

        cur.execute(
            "SELECT tgname, pg_get_triggerdef(oid), tgenabled FROM pg_trigger"
            " WHERE tgrelid = %s AND NOT tgisinternal ORDER BY tgname",
            (oid,),
        )
        trigger_rows = cur.fetchall()

        primary = next((ix for ix in indexes if ix.is_primary), None)
        return TableInfo(
            table=table,
            columns=columns,
            primary_key=list(primary.columns) if primary else [],
            indexes=indexes,
            constraints=constraints,
            referencing_foreign_keys=referencing,
            triggers=[row[0] for row in trigger_rows],
            reloptions=_options_dict(reloptions),
            estimated_rows=max(int(reltuples), 0),
            size_bytes=int(size),
            extra={
                "oid": int(oid),
                "relkind": relkind,
                "persistence": {"p": "permanent", "u": "unlogged", "t": "temporary"}.get(
                    persistence, persistence
                ),
                # reltuples is -1 until the first VACUUM/ANALYZE (PostgreSQL 14+)
                "analyzed": reltuples >= 0,
                "toast_reloptions": _options_dict(toast_reloptions),
                "partitions": partitions,
                "identity_columns": identity,
                "generated_columns": generated,
                "trigger_definitions": {row[0]: row[1] for row in trigger_rows},
                "disabled_triggers": [row[0] for row in trigger_rows if row[2] == "D"],
            },
        )

    def table_snapshot(self, conn: Any, table: TableRef) -> dict[str, Any]:
        """:meth:`describe_table` as a saved state, plus the indexes incoming FKs depend on."""
        info = self.describe_table(conn, table)
        with self._read(conn) as cur:
            cur.execute(
                "SELECT DISTINCT ic.relname FROM pg_catalog.pg_constraint con"
                " JOIN pg_catalog.pg_class ic ON ic.oid = con.conindid"
                " WHERE con.confrelid = %s AND con.contype = 'f'",
                (info.extra["oid"],),
            )
            needed = [r[0] for r in cur.fetchall()]
        return snapshot_from_info(self.name, info, needed_by_fk=needed)

    def table_is_empty(self, conn: Any, table: TableRef) -> bool:
        with self._read(conn) as cur:
            cur.execute(
                sql.SQL("SELECT NOT EXISTS (SELECT 1 FROM {})").format(table_identifier(table))
            )
            row = cur.fetchone()
        return bool(row and row[0])

    def count_rows(self, conn: Any, table: TableRef) -> int:
        with self._read(conn) as cur:
            cur.execute(sql.SQL("SELECT count(*) FROM {}").format(table_identifier(table)))
            row = cur.fetchone()
        return int(row[0]) if row else 0

    def duplicate_key_sample(
        self, conn: Any, table: TableRef, index: dict[str, Any], exc: Exception, limit: int = 5
    ) -> list[str] | None:
        if not isinstance(exc, pg_errors.UniqueViolation):
            return None
        sample: list[str] = []
        if exc.diag.message_detail:
            sample.append(exc.diag.message_detail)
        columns = index.get("columns") or []
        plain = {c.name for c in self.describe_table(conn, table).columns}
        if columns and all(c in plain for c in columns) and index.get("method") == "btree":
            cols = sql.SQL(", ").join(sql.Identifier(c) for c in columns)
            rows = conn.execute(
                sql.SQL(
                    "SELECT {cols}, count(*) FROM {t} WHERE ({not_null})"
                    " GROUP BY {cols} HAVING count(*) > 1 LIMIT {n}"
                ).format(
                    cols=cols,
                    t=table_identifier(table),
                    not_null=sql.SQL(" AND ").join(
                        sql.SQL("{} IS NOT NULL").format(sql.Identifier(c)) for c in columns
                    ),
                    n=sql.Literal(limit),
                )
            ).fetchall()
            sample += describe_duplicate_keys(columns, rows)
        return sample

    def server_facts(self, conn: Any) -> ServerFacts:
        """Version, and whether the ``aws_s3`` extension is installed here or could be.

        Installed means ``aws_s3.table_import_from_s3`` (the ``rds_s3`` method's function) is
        callable.
        """
        with self._read(conn) as cur:
            cur.execute(
                "SELECT pg_catalog.current_setting('server_version'),"
                " pg_catalog.to_regprocedure(%s) IS NOT NULL,"
                " EXISTS (SELECT 1 FROM pg_catalog.pg_available_extensions WHERE name = %s)",
                ("aws_s3.table_import_from_s3(text,text,text,text,text,text)", "aws_s3"),
            )
            version, import_function, available = cur.fetchone()
            cur.execute(_CAN_CHECKPOINT)
            row = cur.fetchone()
        return ServerFacts(
            engine=self.name,
            version=str(version),
            aws_s3_installed=bool(import_function),
            aws_s3_available=bool(available) or bool(import_function),
            can_checkpoint=bool(row and row[0]),
        )


#: superuser, or a member of pg_checkpoint (PostgreSQL 15+) or rds_superuser (RDS's master user)
_CAN_CHECKPOINT = (
    "SELECT r.rolsuper OR EXISTS ("
    " SELECT 1 FROM pg_catalog.pg_roles g"
    " WHERE g.rolname IN ('pg_checkpoint', 'rds_superuser')"
    " AND pg_catalog.pg_has_role(r.oid, g.oid, 'MEMBER'))"
    " FROM pg_catalog.pg_roles r WHERE r.rolname = current_user"
)


def _constraint(row: Sequence[Any]) -> ConstraintInfo:
    name, kind, definition, schema, relname, columns = row
    return ConstraintInfo(
        name=name,
        kind=kind,
        definition=definition,
        table=TableRef(name=relname, schema=schema),
        columns=list(columns),
    )


def _options_dict(options: Sequence[str] | None) -> dict[str, str]:
    """``['fillfactor=70', 'autovacuum_enabled=false']`` -> ``{'fillfactor': '70', ...}``."""
    result: dict[str, str] = {}
    for option in options or ():
        key, _, value = option.partition("=")
        result[key] = value
    return result
