"""MySQL catalog reads (the Catalog role).

A table's definition with the server's own key DDL, its saved-state snapshot, row counts, duplicate
keys, and the server facts pre-flight reads.
"""

from __future__ import annotations

from contextlib import suppress
from typing import Any

from airflow_bulkload.catalog import (
    ColumnInfo,
    ConstraintInfo,
    IndexInfo,
    ServerFacts,
    TableInfo,
    TableRef,
)
from airflow_bulkload.dialects.checks import describe_duplicate_keys
from airflow_bulkload.dialects.mysql.ddl import (
    foreign_key_sql,
    parse_foreign_key_lines,
    parse_key_lines,
)
from airflow_bulkload.dialects.mysql.quoting import quote_identifier, quote_table
from airflow_bulkload.dialects.mysql.session import (
    MySqlSession,
    _count,
    _cursor,
    _dict_rows,
    _fetch_all,
    _scalar,
)
from airflow_bulkload.exceptions import BulkLoadError, InvalidIdentifierError
from airflow_bulkload.table_state import snapshot_from_info

#: the server's "unknown column" (1054) and "unknown table" (1109) errors
_ER_UNKNOWN_COLUMN_OR_TABLE = (1054, 1109)


def _table_rows(
    cur: Any,
    query: str,
    table: TableRef,
    *,
    schema_column: str = "TABLE_SCHEMA",
    name_column: str = "TABLE_NAME",
) -> list[dict[str, Any]]:
    """The rows of an ``information_schema`` query about one table, as dicts.

    ``{of_table}`` in ``query`` becomes the condition on the two (fixed) columns that name a
    table there; the table's schema and name are bound as parameters, never pasted.
    """
    of_table = f"{schema_column} = %s AND {name_column} = %s"
    return _dict_rows(cur, query.format(of_table=of_table), (table.schema, table.name))


class MySqlCatalog(MySqlSession):
    """Reads of ``information_schema`` and ``SHOW CREATE TABLE``, and of the server's variables."""

    def describe_table(self, conn: Any, table: TableRef) -> TableInfo:
        """Columns, keys, indexes with exact DDL, foreign keys both ways, triggers and size.

        Index definitions are the server's own key lines from ``SHOW CREATE TABLE`` (exact:
        prefix lengths, column order and direction, FULLTEXT/SPATIAL, parsers, comments,
        ``/*!80000 INVISIBLE */`` on MySQL 8, ``IGNORED`` on MariaDB) turned into
        ``ALTER TABLE ... ADD ...``. Foreign keys are rebuilt from information_schema with both
        tables fully qualified, so their DDL means the same from any current database.
        """
        if table.schema is None:
            raise InvalidIdentifierError("describe_table needs a qualified name")
        qt = quote_table(table)
        with _cursor(conn) as cur:
            found = _table_rows(
                cur,
                "SELECT ENGINE, TABLE_ROWS, DATA_LENGTH, INDEX_LENGTH, AUTO_INCREMENT, ROW_FORMAT,"
                " TABLE_COLLATION, CREATE_OPTIONS, TABLE_COMMENT FROM information_schema.TABLES"
                " WHERE {of_table}",
                table,
            )
            if not found:
                raise BulkLoadError(f"table {table} does not exist")
            meta = found[0]
            column_rows = _table_rows(
                cur,
                "SELECT COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COLUMN_DEFAULT, EXTRA"
                " FROM information_schema.COLUMNS WHERE {of_table} ORDER BY ORDINAL_POSITION",
                table,
            )
            columns = [
                ColumnInfo(
                    str(r["COLUMN_NAME"]),
                    str(r["COLUMN_TYPE"]),
                    r["IS_NULLABLE"] == "YES",
                    None if r["COLUMN_DEFAULT"] is None else str(r["COLUMN_DEFAULT"]),
                )
                for r in column_rows
            ]
            filled_by_server = {
                f"{kind}_columns": [
                    str(r["COLUMN_NAME"])
                    for r in column_rows
                    if marker in str(r["EXTRA"] or "").lower()
                ]
                for kind, marker in (("identity", "auto_increment"), ("generated", "generated"))
            }
            cur.execute("SHOW CREATE TABLE " + qt)
            create_sql = str(cur.fetchone()[1])
            statistics = _table_rows(
                cur,
                "SELECT * FROM information_schema.STATISTICS WHERE {of_table}"
                " ORDER BY INDEX_NAME, SEQ_IN_INDEX",
                table,
            )
            outgoing = self._foreign_keys(cur, table, referencing=False)
            incoming = self._foreign_keys(cur, table, referencing=True)
            triggers = _table_rows(
                cur,
                "SELECT TRIGGER_NAME, ACTION_TIMING, EVENT_MANIPULATION, ACTION_ORDER"
                " FROM information_schema.TRIGGERS WHERE {of_table}"
                " ORDER BY ACTION_TIMING, EVENT_MANIPULATION, ACTION_ORDER",
                table,
                schema_column="EVENT_OBJECT_SCHEMA",
                name_column="EVENT_OBJECT_TABLE",
            )
            checks = self._check_constraints(cur, table)

        key_lines = parse_key_lines(create_sql)
        index_columns: dict[str, list[str]] = {}
        index_unique: dict[str, bool] = {}
        for stat in statistics:
            index_name = str(stat["INDEX_NAME"])
            column = stat.get("COLUMN_NAME") or stat.get("EXPRESSION")
            index_columns.setdefault(index_name, []).append(str(column))
            index_unique[index_name] = int(stat["NON_UNIQUE"]) == 0
        indexes: list[IndexInfo] = []
        constraints: list[ConstraintInfo] = []
        for index_name, line in key_lines.items():
            is_primary = index_name == "PRIMARY"
            is_unique = is_primary or index_unique.get(index_name, False)
            definition = f"ALTER TABLE {qt} ADD {line}"
            indexes.append(
                IndexInfo(
                    name=index_name,
                    definition=definition,
                    columns=index_columns.get(index_name, []),
                    is_unique=is_unique,
                    is_primary=is_primary,
                    constraint_name=index_name if is_unique else None,
                )
            )
            if is_unique:
                constraints.append(
                    ConstraintInfo(
                        index_name,
                        "p" if is_primary else "u",
                        definition,
                        table,
                        index_columns.get(index_name, []),
                    )
                )
        constraints.extend(outgoing)
        constraints.extend(checks)
        data_length = int(meta["DATA_LENGTH"] or 0)
        index_length = int(meta["INDEX_LENGTH"] or 0)
        return TableInfo(
            table=table,
            columns=columns,
            primary_key=index_columns.get("PRIMARY", []) if "PRIMARY" in key_lines else [],
            indexes=indexes,
            constraints=constraints,
            referencing_foreign_keys=incoming,
            triggers=[str(t["TRIGGER_NAME"]) for t in triggers],
            reloptions={},
            estimated_rows=int(meta["TABLE_ROWS"] or 0),
            size_bytes=data_length + index_length,
            extra={
                **filled_by_server,
                "engine": meta["ENGINE"],
                "data_length": data_length,
                "index_length": index_length,
                "auto_increment": meta["AUTO_INCREMENT"],
                "row_format": meta["ROW_FORMAT"],
                "collation": meta["TABLE_COLLATION"],
                "create_options": meta["CREATE_OPTIONS"],
                "comment": meta["TABLE_COMMENT"],
                "triggers": [
                    {
                        "name": str(t["TRIGGER_NAME"]),
                        "timing": str(t["ACTION_TIMING"]),
                        "event": str(t["EVENT_MANIPULATION"]),
                    }
                    for t in triggers
                ],
                "create_table": create_sql,
            },
        )

    def _foreign_keys(
        self, cur: Any, table: TableRef, *, referencing: bool
    ) -> list[ConstraintInfo]:
        """The foreign keys of ``table`` (or, ``referencing``, those of other tables to it)."""
        side = "kcu.REFERENCED_" if referencing else "kcu."
        rows = _table_rows(
            cur,
            "SELECT kcu.CONSTRAINT_NAME, kcu.TABLE_SCHEMA, kcu.TABLE_NAME, kcu.COLUMN_NAME, "
            "kcu.REFERENCED_TABLE_SCHEMA, kcu.REFERENCED_TABLE_NAME, kcu.REFERENCED_COLUMN_NAME, "
            "rc.UPDATE_RULE, rc.DELETE_RULE "
            "FROM information_schema.KEY_COLUMN_USAGE kcu "
            "JOIN information_schema.REFERENTIAL_CONSTRAINTS rc "
            "ON rc.CONSTRAINT_SCHEMA = kcu.CONSTRAINT_SCHEMA "
            "AND rc.CONSTRAINT_NAME = kcu.CONSTRAINT_NAME AND rc.TABLE_NAME = kcu.TABLE_NAME "
            "WHERE {of_table} AND kcu.REFERENCED_TABLE_NAME IS NOT NULL "
            "ORDER BY kcu.TABLE_SCHEMA, kcu.TABLE_NAME, kcu.CONSTRAINT_NAME, kcu.ORDINAL_POSITION",
            table,
            schema_column=f"{side}TABLE_SCHEMA",
            name_column=f"{side}TABLE_NAME",
        )
        grouped: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
        for row in rows:
            key = (str(row["TABLE_SCHEMA"]), str(row["TABLE_NAME"]), str(row["CONSTRAINT_NAME"]))
            grouped.setdefault(key, []).append(row)
        result = []
        for (schema, name, constraint), parts in grouped.items():
            owner = TableRef(name=name, schema=schema)
            first = parts[0]
            referenced = TableRef(
                name=str(first["REFERENCED_TABLE_NAME"]),
                schema=str(first["REFERENCED_TABLE_SCHEMA"]),
            )
            cols = [str(p["COLUMN_NAME"]) for p in parts]
            ref_cols = [str(p["REFERENCED_COLUMN_NAME"]) for p in parts]
            result.append(
                ConstraintInfo(
                    name=constraint,
                    kind="f",
                    definition=foreign_key_sql(
                        owner,
                        constraint,
                        cols,
                        referenced,
                        ref_cols,
                        on_delete=str(first["DELETE_RULE"]),
                        on_update=str(first["UPDATE_RULE"]),
                    ),
                    table=owner,
                    columns=cols,
                )
            )
        return result

    def _check_constraints(self, cur: Any, table: TableRef) -> list[ConstraintInfo]:
        """Table CHECK constraints (MySQL 8.0.16+, MariaDB 10.2+).

        MariaDB also lists column checks, which live in the column definition and are skipped here
        where the server says which is which (``LEVEL``, MariaDB 10.5.10+; before it they are
        listed with the table's).
        """
        # MariaDB names a check per table and lists column checks too (LEVEL 'Column'); MySQL 8
        # names checks per schema and has neither column: the first query the server takes wins
        import MySQLdb

        for same_table in (
            "AND cc.TABLE_NAME = tc.TABLE_NAME AND cc.LEVEL = 'Table' ",
            "AND cc.TABLE_NAME = tc.TABLE_NAME ",
            "",
        ):
            try:
                rows = _table_rows(
                    cur,
                    "SELECT tc.CONSTRAINT_NAME, cc.CHECK_CLAUSE, tc.CONSTRAINT_TYPE "  # noqa: S608 (fixed text)
                    "FROM information_schema.TABLE_CONSTRAINTS tc "
                    "JOIN information_schema.CHECK_CONSTRAINTS cc "
                    "ON cc.CONSTRAINT_SCHEMA = tc.CONSTRAINT_SCHEMA "
                    f"AND cc.CONSTRAINT_NAME = tc.CONSTRAINT_NAME {same_table}"
                    "WHERE {of_table} AND tc.CONSTRAINT_TYPE = 'CHECK' ORDER BY tc.CONSTRAINT_NAME",
                    table,
                    schema_column="tc.TABLE_SCHEMA",
                    name_column="tc.TABLE_NAME",
                )
                break
            except MySQLdb.Error as exc:
                # only a server without these columns (or without CHECK_CONSTRAINTS) tries the
                # next query; a lost session or a missing privilege is an error to see
                if not (exc.args and exc.args[0] in _ER_UNKNOWN_COLUMN_OR_TABLE):
                    raise
        else:
            return []
        qt = quote_table(table)
        return [
            ConstraintInfo(
                name=str(r["CONSTRAINT_NAME"]),
                kind="c",
                definition=f"ALTER TABLE {qt} ADD CONSTRAINT "
                f"{quote_identifier(str(r['CONSTRAINT_NAME']), 'constraint name')} "
                f"CHECK ({r['CHECK_CLAUSE']})",
                table=table,
            )
            for r in rows
        ]

    def table_snapshot(self, conn: Any, table: TableRef) -> dict[str, Any]:
        """:meth:`describe_table` as a saved state, marking the indexes foreign keys need.

        InnoDB needs an index whose leading columns are a foreign key's columns (on both tables of
        the key): those are marked ``needed_by_fk``.
        """
        conn.commit()  # a fresh view of the data dictionary after DDL in this session
        info = self.describe_table(conn, table)
        with _cursor(conn) as cur:
            cur.execute(
                "SELECT CONSTRAINT_SCHEMA, TABLE_NAME, CONSTRAINT_NAME, REFERENCED_COLUMN_NAME "
                "FROM information_schema.KEY_COLUMN_USAGE WHERE REFERENCED_TABLE_SCHEMA = %s "
                "AND REFERENCED_TABLE_NAME = %s ORDER BY CONSTRAINT_SCHEMA, TABLE_NAME, "
                "CONSTRAINT_NAME, POSITION_IN_UNIQUE_CONSTRAINT",
                (table.schema, table.name),
            )
            referenced: dict[tuple[str, str, str], list[str]] = {}
            for schema, name, constraint, column in cur.fetchall():
                referenced.setdefault((schema, name, constraint), []).append(str(column))
        conn.commit()
        key_columns = [fk.columns for fk in info.foreign_keys] + list(referenced.values())
        needed = [
            ix.name
            for ix in info.indexes
            if any(cols and ix.columns[: len(cols)] == cols for cols in key_columns)
        ]
        snapshot = snapshot_from_info(self.name, info, needed_by_fk=needed)
        # Foreign keys as the server prints them: information_schema cannot tell an explicit
        # RESTRICT from the default (MariaDB shows both as RESTRICT and then NO ACTION once
        # re-added), the CONSTRAINT line of SHOW CREATE TABLE can.
        lines: dict[tuple[str, str], dict[str, str]] = {}
        with _cursor(conn) as cur:
            for fk in snapshot["foreign_keys"]:
                owner = TableRef(name=fk["table"], schema=fk["schema"])
                key = (str(owner.schema), owner.name)
                if key not in lines:
                    cur.execute("SHOW CREATE TABLE " + quote_table(owner))
                    lines[key] = parse_foreign_key_lines(str(cur.fetchone()[1]))
                line = lines[key].get(fk["name"])
                if line is not None:
                    fk["definition"] = f"ALTER TABLE {quote_table(owner)} ADD {line}"
        conn.commit()
        return snapshot

    def table_is_empty(self, conn: Any, table: TableRef) -> bool:
        return not _scalar(conn, f"SELECT EXISTS (SELECT 1 FROM {quote_table(table)})")  # noqa: S608 (quoted)

    def count_rows(self, conn: Any, table: TableRef) -> int:
        return _count(conn, f"SELECT COUNT(*) FROM {quote_table(table)}")  # noqa: S608 (quoted)

    def duplicate_key_sample(
        self, conn: Any, table: TableRef, index: dict[str, Any], exc: Exception, limit: int = 5
    ) -> list[str] | None:
        args = getattr(exc, "args", ())
        if not (args and args[0] == 1062):
            return None
        sample = [str(args[1])] if len(args) > 1 else []
        columns = [c for c in index.get("columns") or [] if c]
        if columns:
            cols = ", ".join(quote_identifier(c, "column name") for c in columns)
            rows = _fetch_all(
                conn,
                f"SELECT {cols}, COUNT(*) FROM {quote_table(table)} "  # noqa: S608 (quoted)
                f"GROUP BY {cols} HAVING COUNT(*) > 1 LIMIT {int(limit)}",
            )
            conn.commit()
            sample += describe_duplicate_keys(columns, rows)
        return sample

    def server_facts(self, conn: Any) -> ServerFacts:
        """Version, ``local_infile``, doublewrite and Aurora's ``LOAD DATA FROM S3`` role.

        The role is ``None`` when the server has no such variables, i.e. is not Aurora.
        """
        placeholders = ", ".join(["%s"] * len(PREFLIGHT_VARIABLES))
        with _cursor(conn) as cur:
            cur.execute("SELECT VERSION()")
            version = str(cur.fetchone()[0])
            cur.execute(
                f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({placeholders})",
                PREFLIGHT_VARIABLES,
            )
            variables = {str(name).lower(): str(value) for name, value in cur.fetchall()}
        return server_facts_from_variables(version, variables, engine=self.name)


#: the global variables pre-flight advice reads; the Aurora ones exist only on Aurora MySQL
PREFLIGHT_VARIABLES = (
    "local_infile",
    "innodb_doublewrite",
    "innodb_autoinc_lock_mode",
    "aurora_load_from_s3_role",
    "aws_default_s3_role",
    "aurora_version",
)

_TRUE = ("on", "1", "true", "detect_and_recover")

# DETECT_ONLY (MySQL 8.0.30+) writes only metadata to the doublewrite buffer: no page recovery
_FALSE = ("off", "0", "false", "detect_only")


def _flag(value: str | None) -> bool | None:
    if value is None:
        return None
    lowered = value.strip().lower()
    return True if lowered in _TRUE else False if lowered in _FALSE else None


def server_facts_from_variables(
    version: str, variables: dict[str, str], *, engine: str = "mysql"
) -> ServerFacts:
    """Interpret ``SHOW GLOBAL VARIABLES`` values (names lower-cased) for pre-flight advice."""
    s3_role: str | None = None
    if "aurora_load_from_s3_role" in variables or "aws_default_s3_role" in variables:
        s3_role = (
            variables.get("aurora_load_from_s3_role") or variables.get("aws_default_s3_role") or ""
        )
    extra: dict[str, Any] = (
        {"aurora_version": variables["aurora_version"]} if "aurora_version" in variables else {}
    )
    with suppress(ValueError):
        extra["innodb_autoinc_lock_mode"] = int(variables.get("innodb_autoinc_lock_mode", ""))
    return ServerFacts(
        engine=engine,
        version=version,
        local_infile=_flag(variables.get("local_infile")),
        s3_role=s3_role,
        innodb_doublewrite=_flag(variables.get("innodb_doublewrite")),
        extra=extra,
    )
