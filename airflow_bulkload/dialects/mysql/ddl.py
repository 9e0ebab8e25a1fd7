"""MySQL key and foreign-key DDL text: ``SHOW CREATE TABLE``'s own lines, replayed exactly."""

from __future__ import annotations

import re
from collections.abc import Sequence

from airflow_bulkload.catalog import TableRef
from airflow_bulkload.dialects.mysql.quoting import quote_identifier, quote_table


def foreign_key_sql(
    table: TableRef,
    name: str,
    columns: Sequence[str],
    referenced: TableRef,
    referenced_columns: Sequence[str],
    *,
    on_delete: str = "RESTRICT",
    on_update: str = "RESTRICT",
) -> str:
    """``ALTER TABLE ... ADD CONSTRAINT ... FOREIGN KEY ... REFERENCES db.t (...)``."""
    rules = {"RESTRICT", "CASCADE", "SET NULL", "NO ACTION", "SET DEFAULT"}
    for rule in (on_delete, on_update):
        if rule not in rules:
            raise ValueError(f"unknown foreign key rule {rule!r}")

    def cols(names: Sequence[str]) -> str:
        return ", ".join(quote_identifier(c, "column name") for c in names)

    return (
        f"ALTER TABLE {quote_table(table)} ADD CONSTRAINT {quote_identifier(name, 'constraint')} "
        f"FOREIGN KEY ({cols(columns)}) REFERENCES {quote_table(referenced)} "
        f"({cols(referenced_columns)}) ON DELETE {on_delete} ON UPDATE {on_update}"
    )


_KEY_LINE_RE = re.compile(
    r"^\s*(?P<line>(?:PRIMARY KEY|(?:UNIQUE |FULLTEXT |SPATIAL )?KEY (?P<name>`(?:[^`]|``)*`))"
    r" .*?),?$"
)


def parse_key_lines(create_sql: str) -> dict[str, str]:
    """Index name -> its key line from ``SHOW CREATE TABLE`` (without the trailing comma).

    The server writes one key per line, with backtick-quoted names and special characters in
    comments escaped, so a line is a complete, exact ``ADD``-able definition.
    """
    lines: dict[str, str] = {}
    for raw in create_sql.splitlines()[1:]:
        m = _KEY_LINE_RE.match(raw)
        if not m:
            continue
        name = m.group("name")
        index_name = "PRIMARY" if name is None else name[1:-1].replace("``", "`")
        lines[index_name] = m.group("line")
    return lines


_FOREIGN_KEY_LINE_RE = re.compile(
    r"^\s*(?P<line>CONSTRAINT (?P<name>`(?:[^`]|``)*`) FOREIGN KEY .*?),?$"
)


def parse_foreign_key_lines(create_sql: str) -> dict[str, str]:
    """Constraint name -> its ``CONSTRAINT ... FOREIGN KEY ...`` line from ``SHOW CREATE TABLE``.

    An unqualified referenced table is in the owner table's database, as MySQL reads it.
    """
    lines: dict[str, str] = {}
    for raw in create_sql.splitlines()[1:]:
        m = _FOREIGN_KEY_LINE_RE.match(raw)
        if m:
            lines[m.group("name")[1:-1].replace("``", "`")] = m.group("line")
    return lines
