"""PostgreSQL work tables for the ``replace`` and ``upsert`` modes (the WorkTables role).

``replace`` swaps in one transaction: the serial sequences the old table owns pass to the new
one, the old table is dropped, the new one takes its name, its indexes their names, its identity
sequences their names and positions, and the old table's owner, grants and comment. A view or a
foreign key bound to the old table would follow it (PostgreSQL binds them by oid, not name), so
such tables are refused up front rather than swapped half-way.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from psycopg import sql

from airflow_bulkload.catalog import TableRef
from airflow_bulkload.dialects.checks import describe_duplicate_keys
from airflow_bulkload.dialects.postgres.ledger import _row_text
from airflow_bulkload.dialects.postgres.session import table_identifier
from airflow_bulkload.dialects.postgres.swap import swap_tables
from airflow_bulkload.dialects.postgres.table_prep import PostgresTablePrep
from airflow_bulkload.dialects.work_tables import WorkTables
from airflow_bulkload.modes import REPLACE, UPSERT, MergeSpec, batch_bounds

_BLOCKERS = (
    (
        "views that read it (they would keep reading the old table)",
        "SELECT DISTINCT v.oid::regclass::text FROM pg_catalog.pg_depend d"
        " JOIN pg_catalog.pg_rewrite r ON r.oid = d.objid"
        " JOIN pg_catalog.pg_class v ON v.oid = r.ev_class"
        " WHERE d.classid = 'pg_catalog.pg_rewrite'::regclass AND d.refobjid = %(t)s::regclass"
        " AND v.oid <> %(t)s::regclass",
    ),
    (
        "foreign keys from or to it",
        "SELECT conname || ' on ' || conrelid::regclass::text FROM pg_catalog.pg_constraint"
        " WHERE contype = 'f' AND (conrelid = %(t)s::regclass OR confrelid = %(t)s::regclass)",
    ),
    (
        "triggers (not copied to the new table)",
        "SELECT tgname FROM pg_catalog.pg_trigger"
        " WHERE tgrelid = %(t)s::regclass AND NOT tgisinternal",
    ),
    (
        "rules",
        "SELECT rulename FROM pg_catalog.pg_rules WHERE schemaname || '.' || tablename = %(n)s",
    ),
    (
        "row-level security policies",
        "SELECT polname FROM pg_catalog.pg_policy WHERE polrelid = %(t)s::regclass",
    ),
    (
        "publications it is listed in",
        "SELECT p.pubname FROM pg_catalog.pg_publication_rel r"
        " JOIN pg_catalog.pg_publication p ON p.oid = r.prpubid"
        " WHERE r.prrelid = %(t)s::regclass",
    ),
    (
        "partitions or inheritance",
        "SELECT 'partitioned table' FROM pg_catalog.pg_class WHERE oid = %(t)s::regclass"
        " AND (relkind = 'p' OR relispartition)"
        " UNION ALL SELECT 'inheritance' FROM pg_catalog.pg_inherits"
        " WHERE inhrelid = %(t)s::regclass OR inhparent = %(t)s::regclass",
    ),
)


def _columns(names: Sequence[str], alias: str | None = None) -> sql.Composed:
    return sql.SQL(", ").join(
        sql.Identifier(alias, name) if alias else sql.Identifier(name) for name in names
    )


class PostgresWorkTables(PostgresTablePrep, WorkTables):
    """Work tables: ``LIKE`` copies, the one-transaction swap and the ``ON CONFLICT`` merge."""

    def mode_blockers(
        self, conn: Any, table: TableRef, mode: str, keys: Sequence[str] | None
    ) -> list[str]:
        regclass = table_identifier(table).as_string(conn)
        blockers: list[str] = []
        with self._read(conn) as cur:
            if mode == REPLACE:
                for what, query in _BLOCKERS:
                    cur.execute(query, {"t": regclass, "n": str(table)})
                    found = sorted({str(row[0]) for row in cur.fetchall()})
                    if found:
                        blockers.append(f"{what}: {', '.join(found)}")
            elif mode == UPSERT:
                cur.execute(
                    "SELECT x.indisprimary, array_agg(a.attname ORDER BY a.attname),"
                    " bool_and(a.attnotnull), bool_and(k.coll = a.attcollation),"
                    " coalesce(bool_or(con.condeferrable), false)"
                    " FROM pg_catalog.pg_index x"
                    " CROSS JOIN LATERAL unnest(x.indkey::int2[], x.indcollation::oid[])"
                    "  WITH ORDINALITY AS k(attnum, coll, position)"
                    " JOIN pg_catalog.pg_attribute a"
                    "  ON a.attrelid = x.indrelid AND a.attnum = k.attnum"
                    " LEFT JOIN pg_catalog.pg_constraint con ON con.conindid = x.indexrelid"
                    " WHERE x.indrelid = %s::regclass AND x.indisunique AND x.indisvalid"
                    " AND x.indpred IS NULL AND x.indexprs IS NULL AND k.position <= x.indnkeyatts"
                    " GROUP BY x.indexrelid, x.indisprimary",
                    (regclass,),
                )
                uniques = cur.fetchall()
                wanted = sorted(keys) if keys else None
                match = [
                    row
                    for row in uniques
                    if (row[0] if wanted is None else sorted(row[1]) == wanted)
                ]
                named = ", ".join(keys or [])
                usable = [row for row in match if row[2] and row[3] and not row[4]]
                if not match:
                    blockers.append(
                        "no primary key to merge on (name a unique key with upsert_keys)"
                        if wanted is None
                        else f"no unique index on exactly ({named}), which ON CONFLICT needs"
                    )
                elif not usable:
                    row = match[0]
                    blockers.append(
                        f"the key ({named or ', '.join(row[1])}) "
                        + (
                            "allows NULL, which never conflicts"
                            if not row[2]
                            else "is DEFERRABLE, which ON CONFLICT does not take"
                            if row[4]
                            else "has a unique index in another collation than its columns "
                            "(the merge would match keys the check does not)"
                        )
                    )
        return blockers

    def table_exists(self, conn: Any, table: TableRef) -> bool:
        with self._read(conn) as cur:
            cur.execute(
                "SELECT pg_catalog.to_regclass(%s) IS NOT NULL",
                (table_identifier(table).as_string(conn),),
            )
            row = cur.fetchone()
        return bool(row and row[0])

    def work_table_marker(self, conn: Any, work: TableRef) -> str | None:
        if not self.table_exists(conn, work):
            return None
        with self._read(conn) as cur:
            cur.execute(
                "SELECT coalesce(pg_catalog.obj_description(%s::regclass, 'pg_class'), '')",
                (table_identifier(work).as_string(conn),),
            )
            row = cur.fetchone()
        return str(row[0]) if row else ""

    def create_work_table(self, conn: Any, table: TableRef, work: TableRef, mode: str) -> None:
        target, new = table_identifier(table), table_identifier(work)
        if mode == UPSERT:
            conn.execute(
                sql.SQL(
                    "CREATE UNLOGGED TABLE {} (LIKE {} INCLUDING DEFAULTS INCLUDING IDENTITY"
                    " INCLUDING GENERATED)"
                ).format(new, target)
            )
            return
        with self._read(conn) as cur:
            cur.execute(
                "SELECT t.spcname, c.relpersistence = 'u' FROM pg_catalog.pg_class c"
                " LEFT JOIN pg_catalog.pg_tablespace t ON t.oid = c.reltablespace"
                " WHERE c.oid = %s::regclass",
                (target.as_string(conn),),
            )
            tablespace, unlogged = cur.fetchone()
        conn.execute(
            sql.SQL("CREATE {}TABLE {} (LIKE {} INCLUDING ALL){}").format(
                sql.SQL("UNLOGGED " if unlogged else ""),
                new,
                target,
                sql.SQL(" TABLESPACE {}").format(sql.Identifier(tablespace))
                if tablespace
                else sql.SQL(""),
            )
        )
        # storage options (fillfactor, autovacuum_*) are not part of LIKE
        saved = self.table_snapshot(conn, table)
        for key, prefix in (("reloptions", None), ("toast_reloptions", "toast")):
            if saved.get(key):
                self._set_options(conn, work, prefix, saved[key], {})

    def mark_work_table(self, conn: Any, work: TableRef, marker: str) -> None:
        conn.execute(
            sql.SQL("COMMENT ON TABLE {} IS {}").format(table_identifier(work), sql.Literal(marker))
        )

    def drop_table_if_exists(self, conn: Any, table: TableRef) -> None:
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(table_identifier(table)))

    def swap_in(self, conn: Any, table: TableRef, work: TableRef, old: TableRef) -> list[str]:
        return swap_tables(conn, table, work)

    def merge_batches(self, conn: Any, merge: MergeSpec, batch_rows: int) -> Iterator[int]:
        target, source = table_identifier(merge.table), table_identifier(merge.work)
        columns, update, keys = merge.columns, merge.update, merge.keys
        with self._read(conn) as cur:
            cur.execute(
                sql.SQL(
                    "SELECT pg_catalog.pg_relation_size({}::regclass)"
                    " / current_setting('block_size')::int, (SELECT count(*) FROM {})"
                ).format(sql.Literal(source.as_string(conn)), source)
            )
            pages, rows = cur.fetchone()
        per_page = max(1.0, rows / max(pages, 1))
        on_conflict = (
            sql.SQL("DO UPDATE SET {} WHERE {} IS DISTINCT FROM {}").format(
                sql.SQL(", ").join(
                    sql.SQL("{} = EXCLUDED.{}").format(sql.Identifier(c), sql.Identifier(c))
                    for c in update
                ),
                _row_text("dst", update),
                _row_text("excluded", update),
            )
            if update
            else sql.SQL("DO NOTHING")
        )
        for start, end in batch_bounds(int(pages), max(1, int(batch_rows / per_page))):
            where = sql.SQL("ctid >= {}::tid").format(sql.Literal(f"({start},0)"))
            if end >= 0:
                where = sql.SQL("{} AND ctid < {}::tid").format(where, sql.Literal(f"({end},0)"))
            cur = conn.execute(
                sql.SQL(
                    "INSERT INTO {} AS dst ({}) OVERRIDING SYSTEM VALUE"
                    " SELECT {} FROM {} WHERE {} ON CONFLICT ({}) {}"
                ).format(
                    target,
                    _columns(columns),
                    _columns(columns),
                    source,
                    where,
                    _columns(keys),
                    on_conflict,
                )
            )
            yield max(cur.rowcount, 0)

    def merge_differences(self, conn: Any, merge: MergeSpec) -> int:
        table, work, columns, keys = merge.table, merge.work, merge.update, merge.keys
        join = sql.SQL(" AND ").join(
            sql.SQL("t.{} = w.{}").format(sql.Identifier(k), sql.Identifier(k)) for k in keys
        )
        with self._read(conn) as cur:
            cur.execute(
                sql.SQL(
                    "SELECT count(*) FROM {} w LEFT JOIN {} t ON {} WHERE t.ctid IS NULL{}"
                ).format(
                    table_identifier(work),
                    table_identifier(table),
                    join,
                    sql.SQL(" OR {} IS DISTINCT FROM {}").format(
                        _row_text("t", columns), _row_text("w", columns)
                    )
                    if columns
                    else sql.SQL(""),
                )
            )
            row = cur.fetchone()
        return int(row[0]) if row else 0

    def duplicate_keys(
        self, conn: Any, table: TableRef, keys: Sequence[str], limit: int = 5
    ) -> list[str]:
        with self._read(conn) as cur:
            cur.execute(
                sql.SQL(
                    "SELECT {k}, count(*) FROM {t} GROUP BY {k} HAVING count(*) > 1 LIMIT {n}"
                ).format(k=_columns(keys), t=table_identifier(table), n=sql.Literal(limit))
            )
            rows = cur.fetchall()
        return describe_duplicate_keys(list(keys), rows)
