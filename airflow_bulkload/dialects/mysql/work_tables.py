"""MySQL work tables for the ``replace`` and ``upsert`` modes (the WorkTables role).

``CREATE TABLE ... LIKE`` copies columns, keys, partitioning and options; the swap is one
``RENAME TABLE`` of both tables (atomic: a reader sees the old table or the new one), then the old
table is dropped. Grants and views name tables, so they follow the name to the new table;
triggers and foreign keys follow the renamed old table, so tables with them are refused. The
upsert merges ``INSERT ... SELECT ... ON DUPLICATE KEY UPDATE`` in batches along the work table's
primary key.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from airflow_bulkload.catalog import TableRef
from airflow_bulkload.dialects.checks import describe_duplicate_keys
from airflow_bulkload.dialects.mysql.ledger import _row_bytes, float_columns
from airflow_bulkload.dialects.mysql.quoting import (
    quote_identifier,
    quote_table,
    with_parameters,
)
from airflow_bulkload.dialects.mysql.session import (
    MySqlSession,
    _count,
    _execute,
    _fetch_all,
    _fetch_one,
)
from airflow_bulkload.dialects.work_tables import WorkTables
from airflow_bulkload.exceptions import LoadModeError
from airflow_bulkload.modes import REPLACE, UPSERT, MergeSpec, old_table


def _cols(names: Sequence[str], alias: str | None = None) -> str:
    prefix = f"{alias}." if alias else ""
    return ", ".join(prefix + quote_identifier(name, "column name") for name in names)


def _after(key: Sequence[str], alias: str) -> str:
    """``key > (%s, ...)`` in lexicographic order, as ORs an index range can use."""
    terms = []
    for i, column in enumerate(key):
        equal = [
            f"{alias}.{with_parameters(quote_identifier(c, 'column name'))} = %s" for c in key[:i]
        ]
        last = f"{alias}.{with_parameters(quote_identifier(column, 'column name'))} > %s"
        terms.append("(" + " AND ".join([*equal, last]) + ")")
    return "(" + " OR ".join(terms) + ")"


def _after_params(values: Sequence[Any]) -> list[Any]:
    params: list[Any] = []
    for i in range(len(values)):
        params += [*values[:i], values[i]]
    return params


class MySqlWorkTables(MySqlSession, WorkTables):
    """Work tables: ``CREATE TABLE ... LIKE``, ``RENAME TABLE`` and the keyset-batched merge."""

    def _where(self, conn: Any, table: TableRef) -> tuple[str, str]:
        return (table.schema or self.qualified_name(conn, table).schema or "", table.name)

    def mode_blockers(
        self, conn: Any, table: TableRef, mode: str, keys: Sequence[str] | None
    ) -> list[str]:
        schema, name = self._where(conn, table)
        blockers: list[str] = []
        if mode == REPLACE:
            triggers = _fetch_all(
                conn,
                "SELECT TRIGGER_NAME FROM information_schema.TRIGGERS"
                " WHERE EVENT_OBJECT_SCHEMA = %s AND EVENT_OBJECT_TABLE = %s",
                (schema, name),
            )
            if triggers:
                blockers.append(
                    "triggers (they stay with the old table): "
                    + ", ".join(sorted(str(r[0]) for r in triggers))
                )
            fks = _fetch_all(
                conn,
                "SELECT DISTINCT CONSTRAINT_NAME, TABLE_NAME FROM information_schema.KEY_COLUMN_USAGE"
                " WHERE REFERENCED_TABLE_NAME IS NOT NULL AND ((TABLE_SCHEMA = %s AND TABLE_NAME = %s)"
                " OR (REFERENCED_TABLE_SCHEMA = %s AND REFERENCED_TABLE_NAME = %s))",
                (schema, name, schema, name),
            )
            if fks:
                blockers.append(
                    "foreign keys from or to it: "
                    + ", ".join(sorted(f"{r[0]} on {r[1]}" for r in fks))
                )
            old = old_table(TableRef(name, schema), self.max_identifier_length)
            if self.table_exists(conn, old):
                blockers.append(
                    f"a table named {old.name} beside it, the name the swap renames it to for a "
                    "moment (drop it if it is left from an earlier swap)"
                )
        elif mode == UPSERT:
            rows = _fetch_all(
                conn,
                "SELECT s.INDEX_NAME, s.COLUMN_NAME, c.IS_NULLABLE FROM information_schema.STATISTICS s"
                " JOIN information_schema.COLUMNS c ON c.TABLE_SCHEMA = s.TABLE_SCHEMA"
                "  AND c.TABLE_NAME = s.TABLE_NAME AND c.COLUMN_NAME = s.COLUMN_NAME"
                " WHERE s.TABLE_SCHEMA = %s AND s.TABLE_NAME = %s AND s.NON_UNIQUE = 0"
                " AND s.SUB_PART IS NULL",
                (schema, name),
            )
            uniques: dict[str, list[tuple[str, str]]] = {}
            for index, column, nullable in rows:
                uniques.setdefault(str(index), []).append((str(column), str(nullable)))
            wanted = sorted(keys) if keys else None
            match = [
                cols
                for index, cols in uniques.items()
                if (index == "PRIMARY" if wanted is None else sorted(c for c, _ in cols) == wanted)
            ]
            if not match:
                blockers.append(
                    "no primary key to merge on (name a unique key with upsert_keys)"
                    if wanted is None
                    else f"no unique key on exactly ({', '.join(keys or [])})"
                )
            elif all(any(n == "YES" for _, n in cols) for cols in match):
                blockers.append(
                    f"the key ({', '.join(keys or [])}) allows NULL, which never conflicts"
                )
        return blockers

    def table_exists(self, conn: Any, table: TableRef) -> bool:
        return self.work_table_marker(conn, table) is not None

    def work_table_marker(self, conn: Any, work: TableRef) -> str | None:
        row = _fetch_one(
            conn,
            "SELECT TABLE_COMMENT FROM information_schema.TABLES"
            " WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
            self._where(conn, work),
        )
        conn.commit()  # no snapshot kept open: a later read must see a table created since
        return None if row is None else str(row[0] or "")

    def create_work_table(self, conn: Any, table: TableRef, work: TableRef, mode: str) -> None:
        _execute(conn, f"CREATE TABLE {quote_table(work)} LIKE {quote_table(table)}")

    def mark_work_table(self, conn: Any, work: TableRef, marker: str) -> None:
        _execute(
            conn, with_parameters(f"ALTER TABLE {quote_table(work)} COMMENT = ") + "%s", (marker,)
        )

    def drop_table_if_exists(self, conn: Any, table: TableRef) -> None:
        _execute(conn, f"DROP TABLE IF EXISTS {quote_table(table)}")

    def swap_in(self, conn: Any, table: TableRef, work: TableRef, old: TableRef) -> list[str]:
        if self.table_exists(conn, old):
            raise LoadModeError(
                f"{old} exists: the swap renames {table} to that name for a moment; drop it if it "
                "is left from an earlier swap, or rename it (the target is unchanged)"
            )
        comment = self.work_table_marker(conn, table) or ""
        # the new table carries the old one's comment (in place of the work table's marker)
        _execute(
            conn, with_parameters(f"ALTER TABLE {quote_table(work)} COMMENT = ") + "%s", (comment,)
        )
        _execute(
            conn,
            f"RENAME TABLE {quote_table(table)} TO {quote_table(old)},"
            f" {quote_table(work)} TO {quote_table(table)}",
        )
        _execute(conn, f"DROP TABLE {quote_table(old)}")
        return ["grants and views follow the name", "AUTO_INCREMENT continues after the new rows"]

    def merge_batches(self, conn: Any, merge: MergeSpec, batch_rows: int) -> Iterator[int]:
        table, work = merge.table, merge.work
        columns, update, keys = merge.columns, merge.update, merge.keys
        target = quote_table(table)
        pk = list(self.describe_table(conn, work).primary_key)
        assignments = (
            ", ".join(
                f"{target}.{quote_identifier(c, 'column name')} = src.{quote_identifier(c, 'column name')}"
                for c in update
            )
            if update
            else f"{target}.{quote_identifier(keys[0], 'column name')} = "
            f"{target}.{quote_identifier(keys[0], 'column name')}"
        )
        # identifiers may hold "%": every statement here binds parameters, so it is doubled
        head = with_parameters(
            f"INSERT INTO {target} ({_cols(columns)}) SELECT {_cols(columns, 'src')}"  # noqa: S608 (quoted)
            f" FROM {quote_table(work)} AS src WHERE "
        )
        tail = with_parameters(
            (f" ORDER BY {_cols(pk, 'src')}" if pk else "")
            + f" ON DUPLICATE KEY UPDATE {assignments}"
        )
        # the next batch's last key: the key batch_rows rows on
        bound_head = with_parameters(
            f"SELECT {_cols(pk, 'src')} FROM {quote_table(work)} AS src WHERE "  # noqa: S608 (quoted)
        )
        bound_tail = with_parameters(f" ORDER BY {_cols(pk, 'src')}") + (
            f" LIMIT 1 OFFSET {max(int(batch_rows), 1) - 1}"
        )
        low: list[Any] | None = None
        while True:
            where, params = "1 = 1", []
            if low is not None:
                where, params = _after(pk, "src"), _after_params(low)
            high = None
            if pk:
                high = _fetch_one(conn, bound_head + where + bound_tail, tuple(params))
            if high is not None:
                where = f"{where} AND NOT {_after(pk, 'src')}"
                params = [*params, *_after_params(list(high))]
            rows = _execute(conn, head + where + tail, tuple(params))
            yield rows
            if high is None:
                return
            low = list(high)

    def merge_differences(self, conn: Any, merge: MergeSpec) -> int:
        table, work, columns, keys = merge.table, merge.work, merge.update, merge.keys
        join = " AND ".join(
            f"t.{quote_identifier(k, 'column name')} = w.{quote_identifier(k, 'column name')}"
            for k in keys
        )
        floats = float_columns(conn, table)  # compared as DOUBLEs: a FLOAT's text has 6 digits
        differ = f"{_row_bytes('t', columns, floats)} <> {_row_bytes('w', columns, floats)}"
        count = _count(
            conn,
            f"SELECT COUNT(*) FROM {quote_table(work)} w LEFT JOIN {quote_table(table)} t"  # noqa: S608 (quoted)
            f" ON {join} WHERE t.{quote_identifier(keys[0], 'column name')} IS NULL"
            + (f" OR {differ}" if columns else ""),
        )
        return count

    def duplicate_keys(
        self, conn: Any, table: TableRef, keys: Sequence[str], limit: int = 5
    ) -> list[str]:
        rows = _fetch_all(
            conn,
            f"SELECT {_cols(keys)}, COUNT(*) FROM {quote_table(table)}"  # noqa: S608 (quoted)
            f" GROUP BY {_cols(keys)} HAVING COUNT(*) > 1 LIMIT {int(limit)}",
        )
        conn.commit()
        return describe_duplicate_keys(list(keys), rows)
