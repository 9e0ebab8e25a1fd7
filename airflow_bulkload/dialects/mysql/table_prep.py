"""MySQL table preparation (the TablePrep role).

The per-table claim and saved state, dropping and rebuilding secondary keys and foreign keys,
and ANALYZE; InnoDB has no autovacuum, reloptions or CHECKPOINT, so those are documented no-ops.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from airflow_bulkload.catalog import TableRef, TableState
from airflow_bulkload.dialects.mysql.quoting import quote_identifier, quote_table
from airflow_bulkload.dialects.mysql.session import (
    MySqlSession,
    _cursor,
    _execute,
    _fetch_one,
)
from airflow_bulkload.dialects.requests import IndexBuild
from airflow_bulkload.exceptions import (
    BulkLoadError,
    BulkModeRefusedError,
    ForeignKeyViolationError,
)

_QUOTED = re.compile(r"`(?:[^`]|``)*`")
#: ``REFERENCES `db`.`parent` (`id`, ...)`` in a foreign key's SHOW CREATE TABLE line
_REFERENCES = re.compile(
    r"REFERENCES\s+(?P<table>`(?:[^`]|``)*`(?:\.`(?:[^`]|``)*`)?)\s*\((?P<columns>[^)]*)\)"
)


def _unquote(name: str) -> str:
    return name[1:-1].replace("``", "`")


class MySqlTablePrep(MySqlSession):
    """Claims and saved state in ``bulkload_*`` tables; key DDL as ``SHOW CREATE TABLE`` wrote it."""

    def claim_table(self, conn: Any, table: TableRef, load_id: str, holder: str) -> str | None:
        claims = self._state_table(conn, "bulkload_table_claims")
        table_id = hashlib.sha256(str(table).encode("utf-8")).digest()
        _execute(
            conn,
            f"INSERT INTO {claims} (`table_id`, `table_name`, `load_id`, `holder`) "  # noqa: S608 (quoted)
            "VALUES (%s, %s, %s, %s) ON DUPLICATE KEY UPDATE "
            "`holder` = IF(`load_id` = VALUES(`load_id`), VALUES(`holder`), `holder`), "
            "`claimed_at` = IF(`load_id` = VALUES(`load_id`), CURRENT_TIMESTAMP(6), "
            "`claimed_at`)",
            (table_id, str(table), load_id, holder[:512]),
        )
        row = _fetch_one(
            conn,
            f"SELECT `load_id`, `holder`, `claimed_at` FROM {claims} "  # noqa: S608 (quoted)
            "WHERE `table_id` = %s",
            (table_id,),
        )
        if row is None or row[0] == load_id:
            return None
        return f"load {row[0]} ({row[1]}, since {row[2]:%Y-%m-%d %H:%M:%S})"

    def release_table_claim(self, conn: Any, table: TableRef, load_id: str) -> None:
        _execute(
            conn,
            f"DELETE FROM {self._state_table(conn, 'bulkload_table_claims')} "  # noqa: S608 (quoted)
            "WHERE `table_id` = %s AND `load_id` = %s",
            (hashlib.sha256(str(table).encode("utf-8")).digest(), load_id),
        )

    @staticmethod
    def _state_id(table: TableRef, load_id: str) -> bytes:
        return hashlib.sha256(f"{table}\0{load_id}".encode()).digest()

    def unfinished_table_saved_state(self, conn: Any, table: TableRef) -> dict[str, Any] | None:
        row = _fetch_one(
            conn,
            "SELECT `saved` "  # noqa: S608 (quoted)
            f"FROM {self._state_table(conn, 'bulkload_table_state')} "
            "WHERE `table_name` = %s AND `status` <> 'done' ORDER BY `updated_at` DESC LIMIT 1",
            (str(table),),
        )
        conn.commit()  # end the read's snapshot
        return None if row is None else dict(json.loads(row[0]))

    def read_table_state(self, conn: Any, table: TableRef, load_id: str) -> TableState | None:
        row = _fetch_one(
            conn,
            "SELECT `status`, `saved`, `dropped`, `decision` "  # noqa: S608 (quoted)
            f"FROM {self._state_table(conn, 'bulkload_table_state')} WHERE `state_id` = %s",
            (self._state_id(table, load_id),),
        )
        if row is None:
            return None
        return TableState(
            status=str(row[0]),
            saved=json.loads(row[1]),
            dropped=json.loads(row[2]),
            decision=json.loads(row[3]),
        )

    def write_table_state(
        self, conn: Any, table: TableRef, load_id: str, state: TableState
    ) -> None:
        _execute(
            conn,
            f"REPLACE INTO {self._state_table(conn, 'bulkload_table_state')} "  # noqa: S608 (quoted)
            "(`state_id`, `table_name`, `load_id`, `status`, `saved`, `dropped`, `decision`) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s)",
            (
                self._state_id(table, load_id),
                str(table),
                load_id,
                state["status"],
                json.dumps(state["saved"]),
                json.dumps(state["dropped"]),
                json.dumps(state["decision"]),
            ),
        )

    def set_table_state_status(
        self, conn: Any, table: TableRef, load_id: str, status: str, dropped: list[str] | None
    ) -> None:
        _execute(
            conn,
            f"UPDATE {self._state_table(conn, 'bulkload_table_state')} "  # noqa: S608 (quoted)
            "SET `status` = %s, `dropped` = COALESCE(%s, `dropped`), "
            "`updated_at` = CURRENT_TIMESTAMP(6) WHERE `state_id` = %s",
            (
                status,
                None if dropped is None else json.dumps(dropped),
                self._state_id(table, load_id),
            ),
        )

    def disable_autovacuum(self, conn: Any, table: TableRef) -> None:
        """InnoDB has no autovacuum (purge runs regardless): nothing to do."""

    def restore_reloptions(self, conn: Any, table: TableRef, saved: dict[str, Any]) -> list[str]:
        """MySQL tables have no reloptions: nothing to restore."""
        return []

    def drop_index(self, conn: Any, table: TableRef, index: dict[str, Any]) -> None:
        if index["is_primary"]:
            raise BulkModeRefusedError(
                f"{table}: the primary key is InnoDB's clustered index; it is never dropped"
            )
        _execute(
            conn,
            f"ALTER TABLE {quote_table(table)} "
            f"DROP INDEX {quote_identifier(index['name'], 'index name')}",
        )

    def drop_foreign_key(self, conn: Any, fk: dict[str, Any]) -> None:
        owner = TableRef(name=fk["table"], schema=fk["schema"])
        _execute(
            conn,
            f"ALTER TABLE {quote_table(owner)} "
            f"DROP FOREIGN KEY {quote_identifier(fk['name'], 'constraint name')}",
        )

    def create_indexes(self, conn: Any, table: TableRef, build: IndexBuild) -> None:
        """One ``ALTER TABLE ... ADD KEY ..., ADD KEY ...`` for all; FULLTEXT/SPATIAL keys one each.

        InnoDB reads and sorts the table once for the combined statement, and builds
        FULLTEXT/SPATIAL keys alone. The key lines are the server's own ``SHOW CREATE TABLE`` text,
        replayed as captured. ``maintenance_work_mem`` has no MySQL counterpart settable per session
        (``innodb_sort_buffer_size`` is read-only); it is ignored, as are the concurrent sessions.
        """
        prefix = f"ALTER TABLE {quote_table(table)} ADD "
        lines: list[str] = []
        alone: list[str] = []
        for index in build.indexes:
            definition = index["definition"]
            if not definition.startswith(prefix):
                raise BulkLoadError(f"saved index {index['name']} is not for {table}: {definition}")
            line = definition[len(prefix) :]
            (alone if re.match(r"(FULLTEXT|SPATIAL) ", line) else lines).append(line)
        statements = []
        if lines:
            statements.append(prefix + ", ADD ".join(lines))
        statements += [prefix + line for line in alone]
        with _cursor(conn) as cur:
            for statement in statements:
                cur.execute(statement)

    def attach_constraint(self, conn: Any, table: TableRef, index: dict[str, Any]) -> None:
        """MySQL unique keys and the primary key are indexes themselves: nothing to attach."""

    def add_foreign_key(self, conn: Any, fk: dict[str, Any]) -> None:
        """Re-add the foreign key with ``foreign_key_checks = 0``, after checking its rows.

        InnoDB then adds it in place without a table copy, and without re-checking existing
        rows; so the rows are checked first, with one anti-join: a row whose key has no parent
        refuses the key (:class:`ForeignKeyViolationError`, naming up to five keys) and the
        table stays without it until the orphans are gone. The setting holds for the statement
        alone.
        """
        orphans = self._orphans(conn, fk)
        if orphans:
            raise ForeignKeyViolationError(
                f"foreign key {fk['name']} on {fk['schema']}.{fk['table']} cannot be re-added: "
                f"loaded rows reference missing parents, e.g. ({', '.join(fk['columns'])}) = "
                f"{'; '.join(orphans)}. Load the parents first, or remove the orphan rows, then "
                "run finalize (or restore) again"
            )
        with _cursor(conn) as cur:
            cur.execute("SELECT @@SESSION.foreign_key_checks")
            checks = int(cur.fetchone()[0])
            cur.execute("SET SESSION foreign_key_checks = 0")
            try:
                cur.execute(fk["definition"])
            finally:
                cur.execute("SET SESSION foreign_key_checks = %s", (checks,))

    def _orphans(self, conn: Any, fk: dict[str, Any], limit: int = 5) -> list[str]:
        """Keys of the foreign key's table with no parent row (NULL parts never need one)."""
        match = _REFERENCES.search(fk["definition"])
        columns = list(fk.get("columns") or [])
        if match is None or not columns:
            return []
        names = [_unquote(n) for n in _QUOTED.findall(match["table"])]
        parent = TableRef(name=names[-1], schema=names[0] if len(names) > 1 else fk["schema"])
        referenced = [_unquote(n) for n in _QUOTED.findall(match["columns"])]
        if len(referenced) != len(columns):
            return []
        owner = TableRef(name=fk["table"], schema=fk["schema"])
        child = [f"c.{quote_identifier(c, 'column')}" for c in columns]
        joined = " AND ".join(
            f"p.{quote_identifier(r, 'column')} = {c}"
            for r, c in zip(referenced, child, strict=True)
        )
        with _cursor(conn) as cur:
            cur.execute(
                f"SELECT {', '.join(child)} FROM {quote_table(owner)} AS c "  # noqa: S608 (quoted)
                f"WHERE {' AND '.join(f'{c} IS NOT NULL' for c in child)} AND NOT EXISTS "
                f"(SELECT 1 FROM {quote_table(parent)} AS p WHERE {joined}) LIMIT {int(limit)}"
            )
            rows = cur.fetchall()
        return ["(" + ", ".join(str(v) for v in row) + ")" for row in rows]

    def analyze(self, conn: Any, table: TableRef) -> None:
        with _cursor(conn) as cur:
            cur.execute(f"ANALYZE TABLE {quote_table(table)}")
            cur.fetchall()
        conn.commit()

    def checkpoint(self, conn: Any) -> str:
        """A documented no-op: InnoDB has no statement that forces a full checkpoint.

        InnoDB checkpoints continuously (fuzzy checkpointing); the redo log keeps committed loads
        durable.
        """
        return "no-op: InnoDB checkpoints continuously and has no CHECKPOINT statement"

    def empty_table(self, conn: Any, table: TableRef) -> None:
        _execute(conn, f"TRUNCATE TABLE {quote_table(table)}")
