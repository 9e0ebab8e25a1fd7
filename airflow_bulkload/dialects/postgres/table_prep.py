"""PostgreSQL table preparation (the TablePrep role).

The per-table claim and saved state, autovacuum and storage options, dropping and rebuilding
indexes, constraints and foreign keys, ANALYZE and CHECKPOINT.
"""

from __future__ import annotations

from typing import Any

from psycopg import errors as pg_errors
from psycopg import sql
from psycopg.types.json import Jsonb

from airflow_bulkload.catalog import TableRef, TableState
from airflow_bulkload.dialects.postgres.migrations import _S
from airflow_bulkload.dialects.postgres.session import PostgresSession, table_identifier
from airflow_bulkload.dialects.requests import IndexBuild
from airflow_bulkload.exceptions import (
    BulkLoadError,
    ForeignKeyViolationError,
    InsufficientPrivilegeError,
)
from airflow_bulkload.table_state import normalise_ddl, reloption_changes


class PostgresTablePrep(PostgresSession):
    """Claims and saved state in schema ``bulkload``; DDL from the saved catalog text."""

    def claim_table(self, conn: Any, table: TableRef, load_id: str, holder: str) -> str | None:
        row = conn.execute(
            sql.SQL(
                "INSERT INTO {s}.table_claims AS c (table_name, load_id, holder)"
                " VALUES (%s, %s, %s) ON CONFLICT (table_name) DO UPDATE"
                " SET holder = EXCLUDED.holder, claimed_at = now()"
                " WHERE c.load_id = EXCLUDED.load_id RETURNING c.load_id"
            ).format(s=_S),
            (str(table), load_id, holder),
        ).fetchone()
        if row is not None:
            return None
        other = conn.execute(
            sql.SQL(
                "SELECT load_id, holder, claimed_at FROM {s}.table_claims WHERE table_name = %s"
            ).format(s=_S),
            (str(table),),
        ).fetchone()
        if other is None:  # released between the two statements
            return self.claim_table(conn, table, load_id, holder)
        return f"load {other[0]} ({other[1]}, since {other[2]:%Y-%m-%d %H:%M:%S %Z})"

    def release_table_claim(self, conn: Any, table: TableRef, load_id: str) -> None:
        conn.execute(
            sql.SQL("DELETE FROM {s}.table_claims WHERE table_name = %s AND load_id = %s").format(
                s=_S
            ),
            (str(table), load_id),
        )

    def unfinished_table_saved_state(self, conn: Any, table: TableRef) -> dict[str, Any] | None:
        with self._read(conn) as cur:
            cur.execute(
                sql.SQL(
                    "SELECT saved FROM {s}.table_state WHERE table_name = %s AND status <> 'done'"
                    " ORDER BY updated_at DESC LIMIT 1"
                ).format(s=_S),
                (str(table),),
            )
            row = cur.fetchone()
        return None if row is None else dict(row[0])

    def read_table_state(self, conn: Any, table: TableRef, load_id: str) -> TableState | None:
        row = conn.execute(
            sql.SQL(
                "SELECT status, saved, dropped, decision FROM {s}.table_state"
                " WHERE table_name = %s AND load_id = %s"
            ).format(s=_S),
            (str(table), load_id),
        ).fetchone()
        if row is None:
            return None
        return TableState(status=row[0], saved=row[1], dropped=row[2], decision=row[3])

    def write_table_state(
        self, conn: Any, table: TableRef, load_id: str, state: TableState
    ) -> None:
        conn.execute(
            sql.SQL(
                "INSERT INTO {s}.table_state (table_name, load_id, status, saved, dropped, decision)"
                " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (table_name, load_id) DO UPDATE"
                " SET status = EXCLUDED.status, saved = EXCLUDED.saved,"
                " dropped = EXCLUDED.dropped, decision = EXCLUDED.decision,"
                " created_at = now(), updated_at = now()"
            ).format(s=_S),
            (
                str(table),
                load_id,
                state["status"],
                Jsonb(state["saved"]),
                Jsonb(state["dropped"]),
                Jsonb(state["decision"]),
            ),
        )

    def set_table_state_status(
        self, conn: Any, table: TableRef, load_id: str, status: str, dropped: list[str] | None
    ) -> None:
        conn.execute(
            sql.SQL(
                "UPDATE {s}.table_state SET status = %s, dropped = coalesce(%s, dropped),"
                " updated_at = now() WHERE table_name = %s AND load_id = %s"
            ).format(s=_S),
            (status, None if dropped is None else Jsonb(dropped), str(table), load_id),
        )

    def disable_autovacuum(self, conn: Any, table: TableRef) -> None:
        """Autovacuum off for the table.

        For a partitioned table (which has no storage and refuses the option), for each of its leaf
        partitions.
        """
        for target in self._storage_tables(conn, table):
            conn.execute(
                sql.SQL("ALTER TABLE {} SET (autovacuum_enabled = false)").format(
                    table_identifier(target)
                )
            )

    def _storage_tables(self, conn: Any, table: TableRef) -> list[TableRef]:
        partitions = self.describe_table(conn, table).extra.get("partitions") or []
        if not partitions:
            return [table]
        return [TableRef(name=name, schema=schema) for schema, name, _ in partitions]

    def restore_reloptions(self, conn: Any, table: TableRef, saved: dict[str, Any]) -> list[str]:
        """Put the table's storage options back as saved.

        Its TOAST table's too, and for a partitioned table each leaf partition's that still exists.
        """
        current = self.table_snapshot(conn, table)
        changes: list[str] = []
        now_leaves = current.get("partition_reloptions") or {}
        for leaf, options in (saved.get("partition_reloptions") or {}).items():
            if leaf not in now_leaves:
                continue  # detached or dropped since: not ours to re-create
            schema, _, name = leaf.partition(".")
            leaf_changes = self._set_options(
                conn, TableRef(name=name, schema=schema), None, options, now_leaves[leaf]
            )
            changes += [f"{leaf}: {change}" for change in leaf_changes]
        for key, prefix in (("reloptions", None), ("toast_reloptions", "toast")):
            changes += self._set_options(
                conn, table, prefix, saved.get(key) or {}, current.get(key) or {}
            )
        return changes

    def _set_options(
        self,
        conn: Any,
        table: TableRef,
        prefix: str | None,
        saved: dict[str, str],
        current: dict[str, str],
    ) -> list[str]:
        to_set, to_reset = reloption_changes(saved, current)

        def name(option: str) -> sql.Identifier:
            return sql.Identifier(prefix, option) if prefix else sql.Identifier(option)

        if to_set:
            conn.execute(
                sql.SQL("ALTER TABLE {} SET ({})").format(
                    table_identifier(table),
                    sql.SQL(", ").join(
                        sql.SQL("{} = {}").format(name(k), sql.Literal(v))
                        for k, v in to_set.items()
                    ),
                )
            )
        if to_reset:
            conn.execute(
                sql.SQL("ALTER TABLE {} RESET ({})").format(
                    table_identifier(table), sql.SQL(", ").join(name(k) for k in to_reset)
                )
            )
        label = f"{prefix}." if prefix else ""
        return [f"SET {label}{k}={v}" for k, v in to_set.items()] + [
            f"RESET {label}{k}" for k in to_reset
        ]

    def drop_index(self, conn: Any, table: TableRef, index: dict[str, Any]) -> None:
        if index.get("constraint_name"):
            conn.execute(
                sql.SQL("ALTER TABLE {} DROP CONSTRAINT IF EXISTS {}").format(
                    table_identifier(table), sql.Identifier(index["constraint_name"])
                )
            )
        # the constraint took its index with it; a plain index (or a left-over) goes here
        if table.schema is None:
            raise BulkLoadError(f"drop_index needs a qualified table name, got {table}")
        conn.execute(
            sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(table.schema, index["name"]))
        )

    def drop_foreign_key(self, conn: Any, fk: dict[str, Any]) -> None:
        conn.execute(
            sql.SQL("ALTER TABLE {} DROP CONSTRAINT IF EXISTS {}").format(
                sql.Identifier(fk["schema"], fk["table"]), sql.Identifier(fk["name"])
            )
        )

    def create_indexes(self, conn: Any, table: TableRef, build: IndexBuild) -> None:
        """Run each saved ``pg_get_indexdef`` text as captured, ``maintenance_work_mem`` set.

        The texts are catalog output, schema-qualified; the setting holds for this session. When
        several sessions build at once, each builds without parallel workers: the sessions already
        keep the cores busy, and workers on top only oversubscribe them (measured on 2 cores,
        5 M rows, 3 indexes: 3 sessions with workers 6.3 s, without 4.4 s; one session with
        workers 4.9 s).
        """
        conn.execute(
            "SELECT pg_catalog.set_config('maintenance_work_mem', %s, false)",
            (build.maintenance_work_mem,),
        )
        if build.concurrent_sessions > 1:
            conn.execute(
                "SELECT pg_catalog.set_config('max_parallel_maintenance_workers', '0', false)"
            )
        for index in build.indexes:
            conn.execute(sql.SQL(index["definition"]))

    def restore_comments(self, conn: Any, table: TableRef, index: dict[str, Any]) -> None:
        """Put a rebuilt index's comment (and its constraint's) back as saved."""
        if index.get("comment") is not None:
            conn.execute(
                sql.SQL("COMMENT ON INDEX {} IS {}").format(
                    sql.Identifier(table.schema or "public", index["name"]),
                    sql.Literal(index["comment"]),
                )
            )
        if index.get("constraint_comment") is not None and index.get("constraint_name"):
            conn.execute(
                sql.SQL("COMMENT ON CONSTRAINT {} ON {} IS {}").format(
                    sql.Identifier(index["constraint_name"]),
                    table_identifier(table),
                    sql.Literal(index["constraint_comment"]),
                )
            )

    def attach_constraint(self, conn: Any, table: TableRef, index: dict[str, Any]) -> None:
        """``ADD CONSTRAINT ... PRIMARY KEY/UNIQUE USING INDEX``: no second build.

        Nor a lock that blocks other sessions' index builds for the length of a build.
        """
        kind = sql.SQL("PRIMARY KEY" if index["is_primary"] else "UNIQUE")
        definition = (index.get("constraint_definition") or "").upper()
        deferral = sql.SQL("")
        if "INITIALLY DEFERRED" in definition:
            deferral = sql.SQL(" DEFERRABLE INITIALLY DEFERRED")
        elif "DEFERRABLE" in definition and "NOT DEFERRABLE" not in definition:
            deferral = sql.SQL(" DEFERRABLE")
        conn.execute(
            sql.SQL("ALTER TABLE {} ADD CONSTRAINT {} {} USING INDEX {}{}").format(
                table_identifier(table),
                sql.Identifier(index["constraint_name"]),
                kind,
                sql.Identifier(index["name"]),
                deferral,
            )
        )

    def add_foreign_key(self, conn: Any, fk: dict[str, Any]) -> None:
        """``ADD CONSTRAINT ... NOT VALID`` (brief lock), then ``VALIDATE CONSTRAINT``.

        The validation checks the rows under a lock that lets writes through. A foreign key saved as
        NOT VALID stays so.
        """
        owner = sql.Identifier(fk["schema"], fk["table"])
        name = sql.Identifier(fk["name"])
        definition = normalise_ddl(fk["definition"])
        was_valid = not definition.upper().endswith("NOT VALID")
        try:
            # one transaction: a failed validation takes the constraint back out, never leaving
            # it NOT VALID where it was valid
            with conn.transaction():
                conn.execute(
                    sql.SQL("ALTER TABLE {} ADD CONSTRAINT {} ").format(owner, name)
                    + sql.SQL(definition)
                    + sql.SQL(" NOT VALID" if was_valid else "")
                )
                if was_valid:
                    conn.execute(
                        sql.SQL("ALTER TABLE {} VALIDATE CONSTRAINT {}").format(owner, name)
                    )
        except pg_errors.ForeignKeyViolation as exc:
            raise ForeignKeyViolationError(
                f"foreign key {fk['name']} on {fk['schema']}.{fk['table']} ({definition}) cannot "
                f"be re-added: loaded rows reference missing parents ({exc.diag.message_detail}). "
                "Load the parents first, or remove the orphan rows, then run finalize (or "
                "restore) again"
            ) from exc

    def analyze(self, conn: Any, table: TableRef) -> None:
        conn.execute(sql.SQL("ANALYZE {}").format(table_identifier(table)))

    def checkpoint(self, conn: Any) -> str:
        """``CHECKPOINT``: needs superuser, or the ``pg_checkpoint`` role on PostgreSQL 15+.

        On RDS the master user has ``rds_superuser``, which may run it.
        """
        try:
            conn.execute("CHECKPOINT")
        except pg_errors.InsufficientPrivilege as exc:
            raise InsufficientPrivilegeError(
                "CHECKPOINT needs a superuser or, on PostgreSQL 15+, membership in pg_checkpoint "
                "(GRANT pg_checkpoint TO <user>); on RDS use the master user (rds_superuser). "
                f"Server said: {exc.diag.message_primary}"
            ) from exc
        return "CHECKPOINT"

    def empty_table(self, conn: Any, table: TableRef) -> None:
        with self.transaction(conn):
            conn.execute(sql.SQL("TRUNCATE TABLE {}").format(table_identifier(table)))
