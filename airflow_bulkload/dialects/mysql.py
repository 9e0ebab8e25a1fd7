"""MySQL / Aurora MySQL: every piece of MySQL SQL text this package sends lives in this module.

Written for MySQL 8.0 and Aurora MySQL 3 and tested on MariaDB 10.11 (our stand-in). Where the two
differ, the docstring of the function concerned says so.

Safety rules:

* Identifiers go through :func:`quote_identifier` only (backticks, checked).
* Values the driver can bind are ``%s`` parameters. Clauses MySQL only accepts literals in
  (``LOAD DATA ... INFILE '...'``, ``FIELDS TERMINATED BY ...``, ``COMMENT '...'``) use
  :func:`string_literal` or :func:`bytes_literal`, which follow a strict rule of their own that is
  correct whatever the session's ``sql_mode`` (``NO_BACKSLASH_ESCAPES``, ``ANSI_QUOTES``).

Loading (one transaction per chunk, see :class:`~airflow_bulkload.hooks.bulk_load.BulkLoadHook`):

* ``client``: ``LOAD DATA LOCAL INFILE`` reading a FIFO that a thread fills from the S3 stream, so
  the chunk never sits in memory or on disk. ``LOCAL`` makes MySQL downgrade every data error to a
  warning and carry on (it cannot stop the client mid-file), so after the load we read
  ``SHOW WARNINGS``: any warning rolls the chunk back and raises :class:`ChunkLoadError` naming the
  S3 URI, the row, the column and MySQL's reason. Affected rows are checked against the manifest.
* ``aurora_s3``: Aurora MySQL's server-side ``LOAD DATA FROM S3``. Aurora setup: an IAM role that
  may read the bucket, attached to the cluster and named in the cluster parameter
  ``aws_default_s3_role`` (Aurora 3; ``aurora_load_from_s3_role`` on Aurora 2); the loading user
  needs ``GRANT AWS_LOAD_S3_ACCESS TO 'user'@'%'`` (Aurora 3; the ``LOAD FROM S3`` privilege on
  Aurora 2); loads are recorded in ``mysql.aurora_s3_load_history``. Aurora cannot read gzip
  objects: stage uncompressed chunks (``compression="none"``) for this method.

Session tuning: ``unique_checks = 0`` lets InnoDB skip uniqueness checks of *secondary* unique
indexes on some paths (change buffering, the bulk path into an empty table), so duplicates there
could go unnoticed. We choose the simple safe rule: when the target has a secondary UNIQUE index,
the load keeps ``unique_checks = 1``; otherwise it is 0 (the primary key is always checked).
``foreign_key_checks = 0`` would let a row whose parent does not exist commit, and InnoDB never
re-checks existing rows: so the load turns foreign key checks back on for a table that has foreign
keys (an orphan row fails its chunk, naming it), and off only for tables without any.
The session settings are restored when the transaction ends, so a pooled connection is never left
weakened.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from airflow_bulkload.catalog import (
    ColumnInfo,
    ConstraintInfo,
    IndexInfo,
    KeyProbe,
    LedgerEntry,
    LoadRecord,
    SavedSetting,
    ServerFacts,
    TableInfo,
    TableRef,
    check_withdrawn,
)
from airflow_bulkload.dialects.roles import Dialect
from airflow_bulkload.exceptions import (
    BulkLoadError,
    BulkModeRefusedError,
    BulkModeStateError,
    ChunkLoadError,
    InvalidFileFormatError,
    InvalidIdentifierError,
)
from airflow_bulkload.s3io import parse_s3_uri
from airflow_bulkload.staging.manifest import ChunkSpec, FileFormat
from airflow_bulkload.table_state import snapshot_from_info

if TYPE_CHECKING:
    from airflow_bulkload.s3io import ChunkStream

log = logging.getLogger(__name__)

MAX_IDENTIFIER_LENGTH = 64

#: the session sql_mode for loads: strict, and nothing that changes how our SQL text is read
#: (no ANSI_QUOTES, no NO_BACKSLASH_ESCAPES). NO_AUTO_VALUE_ON_ZERO stores a 0 in an
#: AUTO_INCREMENT column as 0, as the file says, instead of generating a new id.
STRICT_SQL_MODE = (
    "STRICT_ALL_TABLES,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,"
    "ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION,NO_AUTO_VALUE_ON_ZERO"
)

#: the marker the too-few-fields guard puts into MySQL's warning text (see load_data_sql)
TOO_FEW_FIELDS_MARKER = "bulkload: row has too few fields"

#: seconds a loader waits for another loader of the same chunk before giving up
DEFAULT_CHUNK_LOCK_TIMEOUT = 6 * 3600

_SUPPLEMENTARY = re.compile("[\U00010000-\U0010ffff]")
_CONTROL = re.compile("[\x00-\x1f\x7f]")


# -- quoting --------------------------------------------------------------------------------------
def quote_identifier(name: str, what: str = "identifier") -> str:
    """The one way a MySQL identifier enters SQL text: checked, then quoted with backticks.

    Refused (MySQL cannot hold them, or they only ever come from an attack): empty names, NUL and
    other control characters, characters outside the BMP (MySQL identifiers are limited to it),
    names over 64 characters or ending in a space. Embedded backticks are doubled.
    """
    if not isinstance(name, str) or not name:
        raise InvalidIdentifierError(f"{what} must be a non-empty string, got {name!r}")
    if _CONTROL.search(name):
        raise InvalidIdentifierError(f"{what} {name!r} contains a control character or NUL")
    if _SUPPLEMENTARY.search(name):
        raise InvalidIdentifierError(
            f"{what} {name!r} contains a character outside the Unicode BMP, which MySQL "
            "identifiers cannot hold"
        )
    if len(name) > MAX_IDENTIFIER_LENGTH:
        raise InvalidIdentifierError(
            f"{what} {name!r} is longer than MySQL's {MAX_IDENTIFIER_LENGTH} characters"
        )
    if name.endswith(" "):
        raise InvalidIdentifierError(f"{what} {name!r} ends with a space, which MySQL refuses")
    return "`" + name.replace("`", "``") + "`"


def quote_table(table: TableRef) -> str:
    """```db`.`table``` (or just ```table``` when the database is not known)."""
    name = quote_identifier(table.name, "table name")
    if table.schema is None:
        return name
    return f"{quote_identifier(table.schema, 'database name')}.{name}"


def string_literal(value: str, what: str = "value") -> str:
    """A single-quoted SQL string for clauses that take no parameters (file names, S3 URIs).

    Strict rule, right under any sql_mode: quotes are doubled (``''`` means ``'`` with and
    without ``NO_BACKSLASH_ESCAPES``); backslashes and control characters, whose meaning depends
    on the mode, are refused.
    """
    if not isinstance(value, str):
        raise InvalidFileFormatError(f"{what} must be a string, got {value!r}")
    if "\\" in value or _CONTROL.search(value):
        raise InvalidFileFormatError(
            f"{what} {value!r} holds a backslash or control character, which cannot be written "
            "safely as a MySQL string literal under every sql_mode"
        )
    return "'" + value.replace("'", "''") + "'"


def bytes_literal(value: str, encoding: str = "utf-8") -> str:
    """A literal for ``FIELDS TERMINATED BY`` / ``ENCLOSED BY`` / ``ESCAPED BY`` / ``NULLIF``.

    Plain ``'x'`` when every character is printable ASCII other than ``'`` and ``\\`` (readable,
    the same in every sql_mode), else a hex literal ``X'09'`` of the bytes in the file's encoding,
    which no sql_mode or character can turn into anything else.
    """
    if all(0x20 <= ord(c) < 0x7F and c not in "'\\" for c in value):
        return f"'{value}'"
    return "X'" + value.encode(encoding).hex().upper() + "'"


_CHARSETS = {"utf8": "utf8mb4", "utf8mb4": "utf8mb4", "latin1": "latin1", "ascii": "ascii"}


def mysql_charset(encoding: str) -> str:
    """The MySQL character set name for a :class:`FileFormat` encoding (``UTF8`` -> ``utf8mb4``).

    ``utf8`` is ``utf8mb3`` in MySQL (3-byte, no emoji); we always mean real UTF-8.
    """
    key = encoding.lower().replace("-", "").replace("_", "")
    charset = _CHARSETS.get(key, key)
    if not re.fullmatch(r"[a-z0-9]{1,32}", charset):
        raise InvalidFileFormatError(f"encoding {encoding!r} is not a MySQL character set name")
    return charset


# -- SQL builders (pure) ----------------------------------------------------------------------------
@dataclass(frozen=True)
class LoadColumns:
    """The column list and SET clause of a ``LOAD DATA`` statement."""

    column_list: str
    set_clause: str


def load_columns_sql(columns: Sequence[str], fmt: FileFormat) -> LoadColumns:
    """Column list (and SET clause when NULL markers need mapping) for ``columns`` in file order.

    MySQL reads ``\\N`` as NULL when ``ESCAPED BY '\\'``; any other NULL marker (the csv default is
    the empty field) is read into a user variable and mapped with ``NULLIF``. MySQL silently sets
    a *missing* user variable to NULL (no "too few fields" warning as for real columns), so the
    last variable is guarded: if it is NULL the row was short, and the guard raises a warning whose
    text carries :data:`TOO_FEW_FIELDS_MARKER` (that warning has no row number, so the error
    names the chunk but no line). With ``null="NULL"`` (staging's marker) csv loads need no
    variables: MySQL reads an unquoted NULL field as SQL NULL itself.
    """
    if not columns:
        raise InvalidFileFormatError("no columns to load")
    escape = _escape_char(fmt)
    null = fmt.effective_null
    # Two markers MySQL reads as SQL NULL by itself: \\N when backslash escapes, and an unquoted
    # NULL when fields may be enclosed (a quoted "NULL" stays text) -- staging's marker. Loading
    # straight into the columns keeps MySQL's own "doesn't contain data for all columns" warning,
    # with its row number, for short rows.
    native_null = (escape == "\\" and null == "\\N") or (fmt.format == "csv" and null == "NULL")
    if native_null:
        return LoadColumns(
            "(" + ", ".join(quote_identifier(c, "column name") for c in columns) + ")", ""
        )
    variables = [f"@bl{i}" for i in range(1, len(columns) + 1)]
    null_sql = bytes_literal(null, fmt.python_encoding)
    assignments = []
    for position, (column, variable) in enumerate(zip(columns, variables, strict=True)):
        value = f"NULLIF({variable}, {null_sql})"
        if position == len(columns) - 1:
            value = f"IF({variable} IS NULL, CAST('{TOO_FEW_FIELDS_MARKER}' AS SIGNED), {value})"
        assignments.append(f"{quote_identifier(column, 'column name')} = {value}")
    return LoadColumns("(" + ", ".join(variables) + ")", "SET " + ", ".join(assignments))


def _escape_char(fmt: FileFormat) -> str:
    if fmt.format == "csv":
        # csv doubles the quote inside quoted fields; MySQL reads "" that way when ESCAPED BY ''.
        return fmt.escape if fmt.escape is not None and fmt.escape != fmt.quote else ""
    return fmt.escape if fmt.escape is not None else "\\"


def format_clauses_sql(fmt: FileFormat) -> str:
    """``CHARACTER SET ... FIELDS ... LINES ... [IGNORE 1 LINES]`` for a :class:`FileFormat`.

    Lines end in LF (staging writes LF). ``IGNORE 1 LINES`` counts physical lines, so a header
    must not hold a quoted newline.
    """
    enc = fmt.python_encoding
    parts = [
        f"CHARACTER SET {mysql_charset(fmt.encoding)}",
        f"FIELDS TERMINATED BY {bytes_literal(fmt.delimiter, enc)}",
    ]
    if fmt.format == "csv":
        parts.append(f"OPTIONALLY ENCLOSED BY {bytes_literal(fmt.quote, enc)}")
    parts.append(f"ESCAPED BY {bytes_literal(_escape_char(fmt), enc)}")
    parts.append("LINES TERMINATED BY X'0A'")
    if fmt.header:
        parts.append("IGNORE 1 LINES")
    return " ".join(parts)


def load_data_sql(head: str, table: TableRef, columns: Sequence[str], fmt: FileFormat) -> str:
    """A complete ``LOAD DATA`` statement after ``head`` (``LOAD DATA LOCAL INFILE '...'`` or
    ``LOAD DATA FROM S3 FILE '...'``)."""
    cols = load_columns_sql(columns, fmt)
    sql = f"{head} INTO TABLE {quote_table(table)} {format_clauses_sql(fmt)} {cols.column_list}"
    return f"{sql} {cols.set_clause}" if cols.set_clause else sql


def local_infile_sql(path: str, table: TableRef, columns: Sequence[str], fmt: FileFormat) -> str:
    """``LOAD DATA LOCAL INFILE`` from a client-side path (our FIFO)."""
    return load_data_sql(
        f"LOAD DATA LOCAL INFILE {string_literal(path, 'file name')}", table, columns, fmt
    )


AuroraSource = Literal["FILE", "PREFIX", "MANIFEST"]


def aurora_s3_uri(uri: str, region: str | None = None) -> str:
    """``s3://bucket/key`` in Aurora's form, ``s3-<region>://bucket/key`` when the region is given
    (Aurora then reads a bucket in another region too)."""
    bucket, key = parse_s3_uri(uri)
    if region:
        if not re.fullmatch(r"[a-z]{2}(-[a-z0-9]+)+-\d+", region):
            raise InvalidFileFormatError(f"not an AWS region name: {region!r}")
        return f"s3-{region}://{bucket}/{key}"
    return f"s3://{bucket}/{key}"


def aurora_load_sql(
    source: AuroraSource,
    uri: str,
    table: TableRef,
    columns: Sequence[str],
    fmt: FileFormat,
    *,
    region: str | None = None,
) -> str:
    """Aurora MySQL ``LOAD DATA FROM S3 {FILE | PREFIX | MANIFEST} 's3-region://...'``.

    ``FILE`` loads one object, ``PREFIX`` every object under a key prefix, ``MANIFEST`` the
    objects listed in an Aurora manifest (see :func:`aurora_manifest_json`). Aurora cannot read
    gzip: a ``.gz`` key is refused here. Does not run on MariaDB or community MySQL.
    """
    if source not in ("FILE", "PREFIX", "MANIFEST"):
        raise ValueError(f"source must be FILE, PREFIX or MANIFEST, got {source!r}")
    if source != "PREFIX" and parse_s3_uri(uri)[1].lower().endswith(".gz"):
        raise ChunkLoadError(
            uri,
            "Aurora MySQL LOAD DATA FROM S3 cannot read gzip objects",
            expected="an uncompressed chunk: stage with compression='none' for method aurora_s3",
        )
    target = string_literal(aurora_s3_uri(uri, region), "S3 URI")
    return load_data_sql(f"LOAD DATA FROM S3 {source} {target}", table, columns, fmt)


def aurora_manifest_json(uris: Sequence[str], *, mandatory: bool = True) -> str:
    """The body of an Aurora ``LOAD DATA FROM S3 MANIFEST`` file for these objects."""
    return json.dumps({"entries": [{"url": u, "mandatory": mandatory} for u in uris]}, indent=1)


# -- warnings -------------------------------------------------------------------------------------
_QUOTED_NAME = r"(?:`(?:[^`]|``)*`|'(?:[^']|'')*')"
_COLUMN_RE = re.compile(rf"for column ((?:{_QUOTED_NAME}\.)*{_QUOTED_NAME})")
_AT_ROW_RE = re.compile(r"at row (\d+)")
_ROW_PREFIX_RE = re.compile(r"^Row (\d+) ")
_CANNOT_BE_NULL_RE = re.compile(rf"^Column ({_QUOTED_NAME}) cannot be null")


@dataclass(frozen=True)
class LoadWarning:
    """One MySQL warning from a load, parsed: ``row`` counts data rows from 1 (header excluded)."""

    code: int
    message: str
    row: int | None = None
    column: str | None = None

    @property
    def reason(self) -> str:
        if TOO_FEW_FIELDS_MARKER in self.message:
            return "the row has fewer fields than the columns loaded"
        if self.code == 1261:
            return "the row has fewer fields than the columns loaded"
        if self.code == 1262:
            return "the row has more fields than the columns loaded"
        return f"{self.message} (MySQL {self.code})"


def _unquote_last(name: str) -> str:
    parts = re.findall(_QUOTED_NAME, name)
    last = parts[-1] if parts else name
    quote = last[0]
    return last[1:-1].replace(quote * 2, quote)


def parse_warning(code: int, message: str) -> LoadWarning:
    """Pull the row and column out of MySQL's and MariaDB's warning texts.

    MySQL 8 writes ``for column 'x' at row 3``; MariaDB ``for column `db`.`t`.`x` at row 3``.
    """
    row: int | None = None
    column: str | None = None
    if (m := _AT_ROW_RE.search(message)) or (m := _ROW_PREFIX_RE.match(message)):
        row = int(m.group(1))
    if (m := _COLUMN_RE.search(message)) or (m := _CANNOT_BE_NULL_RE.match(message)):
        column = _unquote_last(m.group(1))
    return LoadWarning(code, message, row, column)


def warnings_error(
    source: str,
    warnings: Sequence[tuple[Any, ...]],
    total: int,
    *,
    header_lines: int = 0,
    column_types: dict[str, str] | None = None,
) -> ChunkLoadError:
    """The :class:`ChunkLoadError` for the first warning of a load (``SHOW WARNINGS`` rows)."""
    parsed = [parse_warning(int(w[1]), str(w[2])) for w in warnings]
    first = parsed[0] if parsed else LoadWarning(0, f"{total} warnings")
    reason = first.reason
    if total > 1:
        reason += f" (and {total - 1} more warning{'s' if total > 2 else ''})"
    expected = None
    if first.column and column_types and first.column in column_types:
        expected = f"a value that fits {first.column} {column_types[first.column]}"
    return ChunkLoadError(
        source,
        reason,
        line=first.row + header_lines if first.row is not None else None,
        column=first.column,
        expected=expected,
    )


# -- state tables ---------------------------------------------------------------------------------
#: the durable state tables, created in order by ensure_state_schema; later features append here.
#: ``{db}`` is the quoted state database. Hash columns keep keys under InnoDB's key size limit.
STATE_TABLES: dict[str, str] = {
    "bulkload_chunk_ledger": """
        CREATE TABLE IF NOT EXISTS {db}.`bulkload_chunk_ledger` (
            `chunk_id` BINARY(32) NOT NULL
                COMMENT 'SHA-256 of table name, NUL, chunk key',
            `checksum` VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
            `table_name` VARCHAR(160) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
            `chunk_key` VARCHAR(1024) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
            `row_count` BIGINT NOT NULL,
            `byte_count` BIGINT NOT NULL,
            `load_id` VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
            `loaded_at` DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
            `probe` LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL
                COMMENT 'JSON: the chunk''s first and last key, looked up before a skip',
            `generation` VARCHAR(64) CHARACTER SET ascii NULL
                COMMENT 'InnoDB table id when the chunk loaded (changes on re-create, TRUNCATE, OPTIMIZE)',
            PRIMARY KEY (`chunk_id`, `checksum`),
            KEY `bulkload_chunk_ledger_table` (`table_name`, `loaded_at`)
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
          COMMENT='airflow_bulkload: chunks committed into each table'
    """,
    "bulkload_bulk_mode_leases": """
        CREATE TABLE IF NOT EXISTS {db}.`bulkload_bulk_mode_leases` (
            `token` VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
            `holder` VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
            `expires_at` DOUBLE NOT NULL COMMENT 'epoch seconds',
            PRIMARY KEY (`token`)
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
          COMMENT='airflow_bulkload: holders of bulk mode on this server (dag/table/logical date)'
    """,
    "bulkload_bulk_mode_settings": """
        CREATE TABLE IF NOT EXISTS {db}.`bulkload_bulk_mode_settings` (
            `name` VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
            `original` TEXT NULL COMMENT 'the global value before bulk mode',
            `position` INT NOT NULL,
            `saved_at` DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
            PRIMARY KEY (`name`)
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
          COMMENT='airflow_bulkload: server settings bulk mode changed, to restore at exit'
    """,
    "bulkload_table_state": """
        CREATE TABLE IF NOT EXISTS {db}.`bulkload_table_state` (
            `state_id` BINARY(32) NOT NULL COMMENT 'SHA-256 of table name, NUL, load id',
            `table_name` VARCHAR(160) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
            `load_id` VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
            `status` VARCHAR(16) CHARACTER SET ascii NOT NULL,
            `saved` LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'JSON',
            `dropped` LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'JSON',
            `decision` LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL COMMENT 'JSON',
            `created_at` DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
            `updated_at` DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
            PRIMARY KEY (`state_id`),
            CONSTRAINT `bulkload_table_state_status`
                CHECK (`status` IN ('saved', 'prepared', 'done'))
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
          COMMENT='airflow_bulkload: index/constraint DDL saved before prepare_table dropped any'
    """,
    "bulkload_table_claims": """
        CREATE TABLE IF NOT EXISTS {db}.`bulkload_table_claims` (
            `table_id` BINARY(32) NOT NULL COMMENT 'SHA-256 of table name',
            `table_name` VARCHAR(160) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
            `load_id` VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
            `holder` VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
            `claimed_at` DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
            PRIMARY KEY (`table_id`)
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
          COMMENT='airflow_bulkload: the load holding a table between prepare and finalize'
    """,
    "bulkload_loads": """
        CREATE TABLE IF NOT EXISTS {db}.`bulkload_loads` (
            `load_key` BINARY(32) NOT NULL COMMENT 'SHA-256 of table name, NUL, staging prefix',
            `table_name` VARCHAR(160) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
            `staging_prefix` VARCHAR(1024) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
            `load_id` VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
            `empty_before` TINYINT(1) NOT NULL,
            `verified` TINYINT(1) NOT NULL DEFAULT 0,
            `updated_at` DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
            PRIMARY KEY (`load_key`),
            KEY `bulkload_loads_table` (`table_name`)
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
          COMMENT='airflow_bulkload: staged inputs loaded into each table, and whether verified'
    """,
}

#: columns added to state tables after they first shipped: (table, column, definition), added by
#: ensure_state_schema where missing
STATE_COLUMNS: tuple[tuple[str, str, str], ...] = (
    (
        "bulkload_chunk_ledger",
        "probe",
        "LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL",
    ),
    ("bulkload_chunk_ledger", "generation", "VARCHAR(64) CHARACTER SET ascii NULL"),
)
_ER_DUP_FIELDNAME = 1060

#: GET_LOCK name serialising bulk-mode enter/exit on a server
BULK_MODE_LOCK = "bulkload_bulk_mode"
_SYSTEM_VARIABLE = re.compile(r"^[a-z_][a-z0-9_]{0,63}$")
_INTEGER_VALUE = re.compile(r"^-?\d+$")
_ER_UNKNOWN_SYSTEM_VARIABLE = 1193
_ER_READ_ONLY_VARIABLE = 1238


def system_variable(name: str) -> str:
    """A global system variable name, checked (lower-case word) and quoted."""
    if not isinstance(name, str) or not _SYSTEM_VARIABLE.match(name):
        raise BulkModeRefusedError(f"{name!r} is not a MySQL system variable name")
    return quote_identifier(name, "system variable")


def system_variable_value(value: str) -> int | str:
    """Numeric variables refuse a quoted string ("Incorrect argument type"): pass ints as ints."""
    return int(value) if _INTEGER_VALUE.match(value) else value


_LEDGER_COLUMNS = (
    "`table_name`, `chunk_key`, `checksum`, `row_count`, `byte_count`, `load_id`, `probe`, "
    "`generation`"
)


def _ledger_entry(row: Sequence[Any]) -> LedgerEntry:
    return LedgerEntry(
        table=row[0],
        chunk_key=row[1],
        checksum=str(row[2]),
        rows=int(row[3]),
        bytes=int(row[4]),
        load_id=row[5],
        probe=KeyProbe.from_json(row[6]),
        generation=None if row[7] is None else str(row[7]),
    )


def innodb_table_name(table: TableRef) -> str:
    """``db/table`` as InnoDB's dictionary names it: letters, digits and ``_`` as they are, any
    other character as ``@`` and its code point in four hex digits (MySQL's filename encoding)."""

    def encode(name: str) -> str:
        return "".join(
            c if c.isascii() and (c.isalnum() or c == "_") else f"@{ord(c):04x}" for c in name
        )

    return f"{encode(table.schema or '')}/{encode(table.name)}"


def chunk_id(table: str, chunk_key: str) -> bytes:
    """The ledger's key for (table, chunk key): fixed size whatever the lengths."""
    return hashlib.sha256(table.encode("utf-8") + b"\0" + chunk_key.encode("utf-8")).digest()


def chunk_lock_name(table: str, chunk_key: str) -> str:
    """A GET_LOCK name (MySQL allows 64 characters) for loaders of one (table, chunk key)."""
    return "bulkload_chunk_" + chunk_id(table, chunk_key).hex()[:40]


def load_slot_name(table: str, slot: int) -> str:
    """A GET_LOCK name (at most 64 characters) for one of a table's load slots."""
    digest = hashlib.sha256(f"bulkload-slots\0{table}".encode()).hexdigest()[:32]
    return f"bulkload_slot_{digest}_{slot}"


@dataclass
class _SessionState:
    """What a transaction changed on the session, undone when it ends."""

    saved_settings: tuple[Any, ...] | None = None
    locks: list[str] = field(default_factory=list)


# -- the dialect ------------------------------------------------------------------------------------
class MySqlDialect(Dialect):
    """MySQL 8.0 / Aurora MySQL 3 (and MariaDB 10.6+) over a MySQLdb connection.

    :param state_database: the database holding the ``bulkload_*`` state tables; default the
        connection's database. Created if missing when given explicitly.
    :param chunk_lock_timeout: seconds to wait for another loader of the same chunk.
    """

    name: ClassVar[str] = "mysql"
    max_identifier_length: ClassVar[int] = MAX_IDENTIFIER_LENGTH
    server_side_methods: ClassVar[tuple[str, ...]] = ("aurora_s3",)

    def __init__(
        self,
        state_database: str | None = None,
        *,
        chunk_lock_timeout: int = DEFAULT_CHUNK_LOCK_TIMEOUT,
    ) -> None:
        if state_database is not None:
            quote_identifier(state_database, "state database")
        self.state_database = state_database
        self.chunk_lock_timeout = chunk_lock_timeout
        self._sessions: weakref.WeakKeyDictionary[Any, _SessionState] = weakref.WeakKeyDictionary()

    # -- names --------------------------------------------------------------------------------
    def table_ref(self, table: str | TableRef) -> TableRef:
        ref = super().table_ref(table)
        quote_table(ref)  # MySQL's own rules on top of the generic ones
        return ref

    def qualified_name(self, conn: Any, table: TableRef) -> TableRef:
        """Fill in the connection's current database (``DATABASE()``) when none is given."""
        if table.schema is not None:
            return table
        database = _scalar(conn, "SELECT DATABASE()")
        if not database:
            raise InvalidIdentifierError(
                f"table {table.name!r} has no database and the connection has none selected: "
                "use 'database.table' or set the connection's schema"
            )
        return TableRef(name=table.name, schema=str(database))

    # -- transactions and state ---------------------------------------------------------------
    @contextmanager
    def transaction(self, conn: Any) -> Iterator[None]:
        """Commit on success, roll back on any exception; then restore the session settings
        :meth:`tune_load_session` changed and release the chunk locks :meth:`claim_chunk` took
        (after the commit, so a waiting loader sees the committed ledger row)."""
        try:
            yield
        except BaseException:
            try:
                conn.rollback()
            except Exception:  # the connection may be gone; the server rolls back then
                log.warning("rollback failed; the server rolls back when the session ends")
            raise
        else:
            conn.commit()
        finally:
            self._end_transaction(conn)

    def _session(self, conn: Any) -> _SessionState:
        state = self._sessions.get(conn)
        if state is None:
            state = self._sessions[conn] = _SessionState()
        return state

    def _end_transaction(self, conn: Any) -> None:
        state = self._sessions.pop(conn, None)
        if state is None:
            return
        try:
            with _cursor(conn) as cur:
                if state.saved_settings is not None:
                    cur.execute(
                        "SET SESSION unique_checks = %s, foreign_key_checks = %s, sql_mode = %s",
                        state.saved_settings,
                    )
                for lock in state.locks:
                    cur.execute("SELECT RELEASE_LOCK(%s)", (lock,))
                    cur.fetchall()
        except Exception:  # a dead session loses its settings and locks by itself
            log.warning("could not restore the MySQL session after the load", exc_info=True)

    def state_database_name(self, conn: Any) -> str:
        """The configured state database, else the connection's current database."""
        if self.state_database:
            return self.state_database
        database = _scalar(conn, "SELECT DATABASE()")
        if not database:
            raise BulkLoadError(
                "the MySQL connection has no database selected: set its schema or configure "
                "a state database for the bulkload_* tables"
            )
        return str(database)

    def _state_table(self, conn: Any, name: str) -> str:
        return f"{quote_identifier(self.state_database_name(conn), 'state database')}.`{name}`"

    def ensure_state_schema(self, conn: Any) -> None:
        """Create the missing ``bulkload_*`` tables. Existing ones are only looked up (an
        information_schema read takes no metadata lock), so a busy ledger never blocks this.
        ``CREATE ... IF NOT EXISTS`` makes concurrent first use safe. Commits (DDL does)."""
        database = self.state_database_name(conn)
        quoted = quote_identifier(database, "state database")
        with _cursor(conn) as cur:
            names = list(STATE_TABLES)
            cur.execute(
                "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s "  # noqa: S608 (placeholders only)
                f"AND TABLE_NAME IN ({', '.join(['%s'] * len(names))})",
                (database, *names),
            )
            existing = {str(r[0]) for r in cur.fetchall()}
            missing = [name for name in STATE_TABLES if name not in existing]
            if missing and self.state_database:
                cur.execute(f"CREATE DATABASE IF NOT EXISTS {quoted} CHARACTER SET utf8mb4")
            for name in missing:
                cur.execute(STATE_TABLES[name].format(db=quoted))
            self._add_missing_state_columns(cur, database, quoted)
        conn.commit()

    @staticmethod
    def _add_missing_state_columns(cur: Any, database: str, quoted: str) -> None:
        tables = sorted({table for table, _, _ in STATE_COLUMNS})
        cur.execute(
            "SELECT TABLE_NAME, COLUMN_NAME FROM information_schema.COLUMNS "  # noqa: S608 (placeholders only)
            f"WHERE TABLE_SCHEMA = %s AND TABLE_NAME IN ({', '.join(['%s'] * len(tables))})",
            (database, *tables),
        )
        present = {(str(t), str(c)) for t, c in cur.fetchall()}
        for table, column, definition in STATE_COLUMNS:
            if (table, column) in present:
                continue
            try:
                cur.execute(f"ALTER TABLE {quoted}.`{table}` ADD COLUMN `{column}` {definition}")
            except Exception as exc:  # a concurrent first user added it
                if not (exc.args and exc.args[0] == _ER_DUP_FIELDNAME):
                    raise

    # -- chunk ledger ---------------------------------------------------------------------------
    def claim_chunk(self, conn: Any, table: TableRef, chunk: ChunkSpec) -> LedgerEntry | None:
        """Take the chunk's named lock (``GET_LOCK``), then read the ledger.

        ``GET_LOCK`` is session-scoped: :meth:`transaction` releases it after the commit or
        rollback, and the server releases it when a killed worker's session ends. Row locks on
        the ledger would not do: a missing row can only be gap-locked, and two loaders of
        different chunks then deadlock on their inserts. Call this first in the transaction:
        the ledger read is a consistent read whose snapshot starts here, after the lock, so it
        sees the entry of a loader that committed before releasing. The ledger's primary key
        (always checked, even with ``unique_checks = 0``) backs this up.
        """
        table_name = str(table)
        lock = chunk_lock_name(table_name, chunk.key)
        got = _scalar(conn, "SELECT GET_LOCK(%s, %s)", (lock, self.chunk_lock_timeout))
        if got != 1:
            raise BulkLoadError(
                f"{chunk.uri}: another task has been loading this chunk into {table_name} for "
                f"over {self.chunk_lock_timeout} s (lock {lock}); try again later"
            )
        self._session(conn).locks.append(lock)
        with _cursor(conn) as cur:
            cur.execute(
                f"SELECT {_LEDGER_COLUMNS} "  # noqa: S608 (quoted)
                f"FROM {self._state_table(conn, 'bulkload_chunk_ledger')} "
                "WHERE `chunk_id` = %s ORDER BY `loaded_at` LIMIT 1",
                (chunk_id(table_name, chunk.key),),
            )
            row = cur.fetchone()
        return _ledger_entry(row) if row is not None else None

    def record_chunk(self, conn: Any, entry: LedgerEntry) -> None:
        with _cursor(conn) as cur:
            cur.execute(
                f"INSERT INTO {self._state_table(conn, 'bulkload_chunk_ledger')} "  # noqa: S608 (quoted)
                "(`chunk_id`, `checksum`, `table_name`, `chunk_key`, `row_count`, `byte_count`, "
                "`load_id`, `probe`, `generation`) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (
                    chunk_id(entry.table, entry.chunk_key),
                    entry.checksum,
                    entry.table,
                    entry.chunk_key,
                    entry.rows,
                    entry.bytes,
                    entry.load_id,
                    entry.probe.to_json() if entry.probe else None,
                    entry.generation,
                ),
            )

    def ledger_entries(self, conn: Any, table: TableRef, key_prefix: str) -> list[LedgerEntry]:
        with _cursor(conn) as cur:
            cur.execute(
                f"SELECT {_LEDGER_COLUMNS} "  # noqa: S608 (quoted)
                f"FROM {self._state_table(conn, 'bulkload_chunk_ledger')} "
                "WHERE `table_name` = %s AND LEFT(`chunk_key`, CHAR_LENGTH(%s)) = %s "
                "ORDER BY `chunk_key`, `loaded_at`",
                (str(table), key_prefix, key_prefix),
            )
            rows = cur.fetchall()
        conn.commit()  # end the read's snapshot
        return [_ledger_entry(r) for r in rows]

    def forget_chunk(self, conn: Any, entry: LedgerEntry) -> None:
        with _cursor(conn) as cur:
            cur.execute(
                f"DELETE FROM {self._state_table(conn, 'bulkload_chunk_ledger')} "  # noqa: S608 (quoted)
                "WHERE `chunk_id` = %s AND `checksum` = %s",
                (chunk_id(entry.table, entry.chunk_key), entry.checksum),
            )

    def set_chunk_generation(self, conn: Any, entry: LedgerEntry, generation: str) -> None:
        with _cursor(conn) as cur:
            cur.execute(
                f"UPDATE {self._state_table(conn, 'bulkload_chunk_ledger')} "  # noqa: S608 (quoted)
                "SET `generation` = %s WHERE `chunk_id` = %s AND `checksum` = %s",
                (generation, chunk_id(entry.table, entry.chunk_key), entry.checksum),
            )

    # -- the table as the truth -----------------------------------------------------------------
    def table_generation(self, conn: Any, table: TableRef) -> str | None:
        """InnoDB's table id: a new one on DROP/CREATE, TRUNCATE and any rebuild (OPTIMIZE
        TABLE, ALTER ... FORCE); MariaDB's ``INNODB_SYS_TABLES``, MySQL 8's ``INNODB_TABLES``.
        ``None`` without the PROCESS privilege those views need."""
        name = innodb_table_name(table)
        for view in ("INNODB_SYS_TABLES", "INNODB_TABLES"):
            try:
                value = _scalar(
                    conn,
                    f"SELECT `TABLE_ID` FROM information_schema.`{view}` WHERE `NAME` = %s",  # noqa: S608 (constant)
                    (name,),
                )
            except Exception as exc:  # the view does not exist here, or no PROCESS privilege
                log.debug("information_schema.%s: %s", view, exc)
                continue
            return None if value is None else str(value)
        return None

    def keys_present(
        self, conn: Any, table: TableRef, columns: list[str], keys: list[list[Any]]
    ) -> list[bool]:
        if not keys:
            return []
        match = " AND ".join(f"{quote_identifier(c, 'column')} = %s" for c in columns)
        probe = f"EXISTS (SELECT 1 FROM {quote_table(table)} WHERE {match})"  # noqa: S608 (quoted)
        with _cursor(conn) as cur:
            cur.execute(
                "SELECT " + ", ".join([probe] * len(keys)),
                [None if v is None else str(v) for key in keys for v in key],
            )
            row = cur.fetchone()
        return [bool(v) for v in (row or [])]

    def table_is_empty(self, conn: Any, table: TableRef) -> bool:
        return not _scalar(conn, f"SELECT EXISTS (SELECT 1 FROM {quote_table(table)})")  # noqa: S608 (quoted)

    def count_rows(self, conn: Any, table: TableRef) -> int:
        return int(_scalar(conn, f"SELECT COUNT(*) FROM {quote_table(table)}") or 0)  # noqa: S608 (quoted)

    def ledger_rows(self, conn: Any, table: TableRef) -> int:
        total = _scalar(
            conn,
            f"SELECT COALESCE(SUM(`row_count`), 0) FROM {self._state_table(conn, 'bulkload_chunk_ledger')} "  # noqa: S608 (quoted)
            "WHERE `table_name` = %s",
            (str(table),),
        )
        conn.commit()  # end the read's snapshot
        return int(total or 0)

    def empty_table(self, conn: Any, table: TableRef) -> None:
        with _cursor(conn) as cur:
            cur.execute(f"TRUNCATE TABLE {quote_table(table)}")

    def read_load_record(
        self, conn: Any, table: TableRef, staging_prefix: str
    ) -> LoadRecord | None:
        with _cursor(conn) as cur:
            cur.execute(
                "SELECT `load_id`, `empty_before`, `verified` "  # noqa: S608 (quoted)
                f"FROM {self._state_table(conn, 'bulkload_loads')} WHERE `load_key` = %s",
                (chunk_id(str(table), staging_prefix),),
            )
            row = cur.fetchone()
        if row is None:
            return None
        return LoadRecord(str(table), staging_prefix, row[0], bool(row[1]), bool(row[2]))

    def write_load_record(self, conn: Any, record: LoadRecord) -> None:
        with _cursor(conn) as cur:
            cur.execute(
                f"INSERT INTO {self._state_table(conn, 'bulkload_loads')} "  # noqa: S608 (quoted)
                "(`load_key`, `table_name`, `staging_prefix`, `load_id`, `empty_before`, "
                "`verified`) VALUES (%s, %s, %s, %s, %s, %s) ON DUPLICATE KEY UPDATE "
                "`load_id` = VALUES(`load_id`), `empty_before` = VALUES(`empty_before`), "
                "`verified` = VALUES(`verified`), `updated_at` = CURRENT_TIMESTAMP(6)",
                (
                    chunk_id(record.table, record.staging_prefix),
                    record.table,
                    record.staging_prefix,
                    record.load_id,
                    int(record.empty_before),
                    int(record.verified),
                ),
            )

    def delete_load_records(self, conn: Any, table: TableRef, prefix: str) -> None:
        with _cursor(conn) as cur:
            cur.execute(
                f"DELETE FROM {self._state_table(conn, 'bulkload_loads')} "  # noqa: S608 (quoted)
                "WHERE `table_name` = %s AND LEFT(`staging_prefix`, CHAR_LENGTH(%s)) = %s",
                (str(table), prefix, prefix),
            )

    def withdraw_chunk(
        self,
        conn: Any,
        table: TableRef,
        entry: LedgerEntry,
        chunk: ChunkSpec,
        key_columns: list[str],
        stream: ChunkStream,
        *,
        exact: bool = True,
    ) -> int:
        """LOAD the chunk into a scratch table beside the target, delete the rows whose key
        matches and the ledger entry in one transaction under the chunk's lock, then drop the
        scratch table. MySQL's DDL commits, so the scratch table is a regular table made and
        dropped outside that transaction (a killed run's leftover is replaced next time)."""
        name = "bulkload_withdraw_" + chunk_id(entry.table, entry.chunk_key).hex()[:16]
        scratch = TableRef(name=name, schema=table.schema)
        columns = chunk.columns or [column for column, _ in self.load_columns(conn, table)]
        selected = ", ".join(quote_identifier(c, "column") for c in columns)
        match = " AND ".join(
            f"t.{quote_identifier(c, 'column')} = w.{quote_identifier(c, 'column')}"
            for c in key_columns
        )
        with _cursor(conn) as cur:
            cur.execute(f"DROP TABLE IF EXISTS {quote_table(scratch)}")
            cur.execute(
                f"CREATE TABLE {quote_table(scratch)} ENGINE=InnoDB "  # noqa: S608 (quoted)
                f"SELECT {selected} FROM {quote_table(table)} LIMIT 0"
            )
        try:
            with self.transaction(conn):
                self.claim_chunk(conn, table, chunk)
                self.load_stream(conn, scratch, columns, chunk.format, stream, chunk.uri)
                with _cursor(conn) as cur:
                    deleted = int(
                        cur.execute(
                            f"DELETE t FROM {quote_table(table)} AS t "
                            f"JOIN {quote_table(scratch)} AS w ON {match}"
                        )
                    )
                check_withdrawn(entry, chunk.uri, table, deleted, exact=exact)
                self.forget_chunk(conn, entry)
        finally:
            with _cursor(conn) as cur:
                cur.execute(f"DROP TABLE IF EXISTS {quote_table(scratch)}")
        return deleted

    # -- load slots -------------------------------------------------------------------------------
    def try_acquire_load_slot(self, conn: Any, table: TableRef, slot: int) -> bool:
        return _scalar(conn, "SELECT GET_LOCK(%s, 0)", (load_slot_name(str(table), slot),)) == 1

    def release_load_slot(self, conn: Any, table: TableRef, slot: int) -> None:
        _scalar(conn, "SELECT RELEASE_LOCK(%s)", (load_slot_name(str(table), slot),))

    # -- loading ----------------------------------------------------------------------------------
    def tune_load_session(self, conn: Any) -> None:
        """``unique_checks = 0``, ``foreign_key_checks = 0``, strict ``sql_mode`` for this
        session until the transaction ends (the originals are saved and put back then).
        The load itself turns unique checks back on for tables with a secondary UNIQUE index."""
        state = self._session(conn)
        with _cursor(conn) as cur:
            if state.saved_settings is None:
                cur.execute(
                    "SELECT @@SESSION.unique_checks, @@SESSION.foreign_key_checks, "
                    "@@SESSION.sql_mode"
                )
                state.saved_settings = tuple(cur.fetchone())
            cur.execute(
                "SET SESSION unique_checks = 0, foreign_key_checks = 0, sql_mode = %s",
                (STRICT_SQL_MODE,),
            )

    def _keep_unique_checks_if_needed(self, conn: Any, table: TableRef) -> None:
        """Checks that guard the rows stay on: unique checks for a secondary UNIQUE index, and
        foreign key checks for a table with foreign keys (with them off, a row whose parent does
        not exist would commit, and nothing re-checks it: InnoDB never validates existing rows)."""
        with _cursor(conn) as cur:
            if self.has_secondary_unique_index(conn, table):
                cur.execute("SET SESSION unique_checks = 1")
            if self.has_foreign_keys(conn, table):
                cur.execute("SET SESSION foreign_key_checks = 1")

    def has_foreign_keys(self, conn: Any, table: TableRef) -> bool:
        return (
            _scalar(
                conn,
                "SELECT COUNT(*) FROM information_schema.REFERENTIAL_CONSTRAINTS "
                "WHERE CONSTRAINT_SCHEMA = %s AND TABLE_NAME = %s",
                (table.schema, table.name),
            )
            or 0
        ) > 0

    def has_secondary_unique_index(self, conn: Any, table: TableRef) -> bool:
        return (
            _scalar(
                conn,
                "SELECT COUNT(*) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = %s "
                "AND TABLE_NAME = %s AND NON_UNIQUE = 0 AND INDEX_NAME <> 'PRIMARY'",
                (table.schema, table.name),
            )
            or 0
        ) > 0

    def load_columns(self, conn: Any, table: TableRef) -> list[tuple[str, str]]:
        """(name, type) of the columns a load writes by default: all but generated ones."""
        with _cursor(conn) as cur:
            cur.execute(
                "SELECT COLUMN_NAME, COLUMN_TYPE, EXTRA FROM information_schema.COLUMNS "
                "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
                (table.schema, table.name),
            )
            rows = cur.fetchall()
        if not rows:
            raise BulkLoadError(f"table {table} does not exist or has no columns")
        return [(str(n), str(t)) for n, t, extra in rows if "GENERATED" not in str(extra).upper()]

    def load_stream(
        self,
        conn: Any,
        table: TableRef,
        columns: list[str] | None,
        file_format: FileFormat,
        stream: ChunkStream,
        source: str,
    ) -> int:
        """``LOAD DATA LOCAL INFILE`` from a FIFO a thread fills with ``stream``'s blocks.

        The writer's errors (a corrupt gzip, S3 failing) win over whatever the load saw and
        roll the chunk back. If the load fails first, the writer is released (we open and close
        the FIFO's read end, so its open or write returns) and joined. Any warning fails the load.
        """
        column_types = dict(self.load_columns(conn, table))
        columns = list(columns) if columns else list(column_types)
        self._keep_unique_checks_if_needed(conn, table)
        workdir = tempfile.mkdtemp(prefix="bulkload-mysql-")
        fifo = os.path.join(workdir, "chunk.fifo")
        os.mkfifo(fifo, 0o600)
        writer = _FifoWriter(fifo, stream)
        writer.start()
        try:
            sql = local_infile_sql(fifo, table, columns, file_format)
            load_error: Exception | None = None
            rows = 0
            try:
                with _cursor(conn) as cur:
                    rows = int(cur.execute(sql))
            except Exception as exc:
                load_error = exc
            writer.finish()
            if writer.error is not None:
                raise writer.error
            if load_error is not None:
                raise _driver_error(source, load_error, file_format) from load_error
            self._raise_on_warnings(conn, source, file_format, column_types)
            return rows
        finally:
            writer.finish()
            shutil.rmtree(workdir, ignore_errors=True)

    def _raise_on_warnings(
        self, conn: Any, source: str, fmt: FileFormat, column_types: dict[str, str]
    ) -> None:
        with _cursor(conn) as cur:
            cur.execute("SHOW COUNT(*) WARNINGS")
            total = int(cur.fetchone()[0])
            if total == 0:
                return
            cur.execute("SHOW WARNINGS LIMIT 5")
            rows = list(cur.fetchall())
        raise warnings_error(
            source,
            rows,
            total,
            header_lines=1 if fmt.header else 0,
            column_types=column_types,
        )

    def load_server_side(
        self,
        conn: Any,
        method: str,
        table: TableRef,
        columns: list[str] | None,
        chunk: ChunkSpec,
        region: str,
    ) -> int:
        """Aurora MySQL ``LOAD DATA FROM S3 FILE`` (``aurora_s3``). Refuses gzip chunks."""
        if method != "aurora_s3":
            return super().load_server_side(conn, method, table, columns, chunk, region)
        if chunk.compression == "gzip" or chunk.key.lower().endswith(".gz"):
            raise ChunkLoadError(
                chunk.uri,
                "Aurora MySQL LOAD DATA FROM S3 cannot read gzip objects",
                expected="an uncompressed chunk: stage with compression='none' for method "
                "aurora_s3",
            )
        column_types = dict(self.load_columns(conn, table))
        columns = list(columns) if columns else list(column_types)
        self._keep_unique_checks_if_needed(conn, table)
        sql = aurora_load_sql("FILE", chunk.uri, table, columns, chunk.format, region=region)
        try:
            with _cursor(conn) as cur:
                rows = int(cur.execute(sql))
        except Exception as exc:
            raise _driver_error(chunk.uri, exc, chunk.format) from exc
        self._raise_on_warnings(conn, chunk.uri, chunk.format, column_types)
        return rows

    # -- introspection ----------------------------------------------------------------------------
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
            cur.execute(
                "SELECT ENGINE, TABLE_ROWS, DATA_LENGTH, INDEX_LENGTH, AUTO_INCREMENT, "
                "ROW_FORMAT, TABLE_COLLATION, CREATE_OPTIONS, TABLE_COMMENT "
                "FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
                (table.schema, table.name),
            )
            meta = cur.fetchone()
            if meta is None:
                raise BulkLoadError(f"table {table} does not exist")
            cur.execute(
                "SELECT COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COLUMN_DEFAULT, EXTRA "
                "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
                "ORDER BY ORDINAL_POSITION",
                (table.schema, table.name),
            )
            column_rows = cur.fetchall()
            columns = [
                ColumnInfo(str(n), str(t), nullable == "YES", None if d is None else str(d))
                for n, t, nullable, d, _extra in column_rows
            ]
            filled_by_server = {
                "identity_columns": [
                    str(r[0]) for r in column_rows if "auto_increment" in str(r[4] or "").lower()
                ],
                "generated_columns": [
                    str(r[0]) for r in column_rows if "generated" in str(r[4] or "").lower()
                ],
            }
            cur.execute("SHOW CREATE TABLE " + qt)
            create_sql = str(cur.fetchone()[1])
            statistics = _dict_rows(
                cur,
                "SELECT * FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = %s "
                "AND TABLE_NAME = %s ORDER BY INDEX_NAME, SEQ_IN_INDEX",
                (table.schema, table.name),
            )
            outgoing = self._foreign_keys(
                cur, "kcu.TABLE_SCHEMA = %s AND kcu.TABLE_NAME = %s", table
            )
            incoming = self._foreign_keys(
                cur,
                "kcu.REFERENCED_TABLE_SCHEMA = %s AND kcu.REFERENCED_TABLE_NAME = %s",
                table,
            )
            triggers = _dict_rows(
                cur,
                "SELECT TRIGGER_NAME, ACTION_TIMING, EVENT_MANIPULATION, ACTION_ORDER "
                "FROM information_schema.TRIGGERS WHERE EVENT_OBJECT_SCHEMA = %s "
                "AND EVENT_OBJECT_TABLE = %s ORDER BY ACTION_TIMING, EVENT_MANIPULATION, "
                "ACTION_ORDER",
                (table.schema, table.name),
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
        data_length = int(meta[2] or 0)
        index_length = int(meta[3] or 0)
        return TableInfo(
            table=table,
            columns=columns,
            primary_key=index_columns.get("PRIMARY", []) if "PRIMARY" in key_lines else [],
            indexes=indexes,
            constraints=constraints,
            referencing_foreign_keys=incoming,
            triggers=[str(t["TRIGGER_NAME"]) for t in triggers],
            reloptions={},
            estimated_rows=int(meta[1] or 0),
            size_bytes=data_length + index_length,
            extra={
                **filled_by_server,
                "engine": meta[0],
                "data_length": data_length,
                "index_length": index_length,
                "auto_increment": meta[4],
                "row_format": meta[5],
                "collation": meta[6],
                "create_options": meta[7],
                "comment": meta[8],
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

    def _foreign_keys(self, cur: Any, where: str, table: TableRef) -> list[ConstraintInfo]:
        rows = _dict_rows(
            cur,
            "SELECT kcu.CONSTRAINT_NAME, kcu.TABLE_SCHEMA, kcu.TABLE_NAME, kcu.COLUMN_NAME, "  # noqa: S608 (fixed text)
            "kcu.REFERENCED_TABLE_SCHEMA, kcu.REFERENCED_TABLE_NAME, kcu.REFERENCED_COLUMN_NAME, "
            "rc.UPDATE_RULE, rc.DELETE_RULE "
            "FROM information_schema.KEY_COLUMN_USAGE kcu "
            "JOIN information_schema.REFERENTIAL_CONSTRAINTS rc "
            "ON rc.CONSTRAINT_SCHEMA = kcu.CONSTRAINT_SCHEMA "
            "AND rc.CONSTRAINT_NAME = kcu.CONSTRAINT_NAME AND rc.TABLE_NAME = kcu.TABLE_NAME "
            f"WHERE {where} AND kcu.REFERENCED_TABLE_NAME IS NOT NULL "
            "ORDER BY kcu.TABLE_SCHEMA, kcu.TABLE_NAME, kcu.CONSTRAINT_NAME, kcu.ORDINAL_POSITION",
            (table.schema, table.name),
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
        """Table CHECK constraints (MySQL 8.0.16+, MariaDB 10.2+; MariaDB also lists column
        checks, which live in the column definition and are skipped here)."""
        try:
            rows = _dict_rows(
                cur,
                "SELECT tc.CONSTRAINT_NAME, cc.CHECK_CLAUSE, tc.CONSTRAINT_TYPE "
                "FROM information_schema.TABLE_CONSTRAINTS tc "
                "JOIN information_schema.CHECK_CONSTRAINTS cc "
                "ON cc.CONSTRAINT_SCHEMA = tc.CONSTRAINT_SCHEMA "
                "AND cc.CONSTRAINT_NAME = tc.CONSTRAINT_NAME "
                "WHERE tc.TABLE_SCHEMA = %s AND tc.TABLE_NAME = %s "
                "AND tc.CONSTRAINT_TYPE = 'CHECK' ORDER BY tc.CONSTRAINT_NAME",
                (table.schema, table.name),
            )
        except Exception:  # servers without CHECK_CONSTRAINTS
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

    # -- table preparation ------------------------------------------------------------------------
    def table_snapshot(self, conn: Any, table: TableRef) -> dict[str, Any]:
        """:meth:`describe_table` as a saved state. InnoDB needs an index whose leading columns
        are a foreign key's columns (on both tables of the key): those are marked ``needed_by_fk``."""
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

    def claim_table(self, conn: Any, table: TableRef, load_id: str, holder: str) -> str | None:
        claims = self._state_table(conn, "bulkload_table_claims")
        table_id = hashlib.sha256(str(table).encode("utf-8")).digest()
        with _cursor(conn) as cur:
            cur.execute(
                f"INSERT INTO {claims} (`table_id`, `table_name`, `load_id`, `holder`) "  # noqa: S608 (quoted)
                "VALUES (%s, %s, %s, %s) ON DUPLICATE KEY UPDATE "
                "`holder` = IF(`load_id` = VALUES(`load_id`), VALUES(`holder`), `holder`), "
                "`claimed_at` = IF(`load_id` = VALUES(`load_id`), CURRENT_TIMESTAMP(6), "
                "`claimed_at`)",
                (table_id, str(table), load_id, holder[:512]),
            )
            cur.execute(
                f"SELECT `load_id`, `holder`, `claimed_at` FROM {claims} "  # noqa: S608 (quoted)
                "WHERE `table_id` = %s",
                (table_id,),
            )
            row = cur.fetchone()
        if row is None or row[0] == load_id:
            return None
        return f"load {row[0]} ({row[1]}, since {row[2]:%Y-%m-%d %H:%M:%S})"

    def release_table_claim(self, conn: Any, table: TableRef, load_id: str) -> None:
        with _cursor(conn) as cur:
            cur.execute(
                f"DELETE FROM {self._state_table(conn, 'bulkload_table_claims')} "  # noqa: S608 (quoted)
                "WHERE `table_id` = %s AND `load_id` = %s",
                (hashlib.sha256(str(table).encode("utf-8")).digest(), load_id),
            )

    @staticmethod
    def _state_id(table: TableRef, load_id: str) -> bytes:
        return hashlib.sha256(f"{table}\0{load_id}".encode()).digest()

    def unfinished_table_saved_state(self, conn: Any, table: TableRef) -> dict[str, Any] | None:
        with _cursor(conn) as cur:
            cur.execute(
                "SELECT `saved` "  # noqa: S608 (quoted)
                f"FROM {self._state_table(conn, 'bulkload_table_state')} "
                "WHERE `table_name` = %s AND `status` <> 'done' ORDER BY `updated_at` DESC LIMIT 1",
                (str(table),),
            )
            row = cur.fetchone()
        conn.commit()  # end the read's snapshot
        return None if row is None else dict(json.loads(row[0]))

    def read_table_state(self, conn: Any, table: TableRef, load_id: str) -> dict[str, Any] | None:
        with _cursor(conn) as cur:
            cur.execute(
                "SELECT `status`, `saved`, `dropped`, `decision` "  # noqa: S608 (quoted)
                f"FROM {self._state_table(conn, 'bulkload_table_state')} WHERE `state_id` = %s",
                (self._state_id(table, load_id),),
            )
            row = cur.fetchone()
        if row is None:
            return None
        return {
            "status": str(row[0]),
            "saved": json.loads(row[1]),
            "dropped": json.loads(row[2]),
            "decision": json.loads(row[3]),
        }

    def write_table_state(
        self,
        conn: Any,
        table: TableRef,
        load_id: str,
        *,
        status: str,
        saved: dict[str, Any],
        dropped: list[str],
        decision: dict[str, Any],
    ) -> None:
        with _cursor(conn) as cur:
            cur.execute(
                f"REPLACE INTO {self._state_table(conn, 'bulkload_table_state')} "  # noqa: S608 (quoted)
                "(`state_id`, `table_name`, `load_id`, `status`, `saved`, `dropped`, `decision`) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s)",
                (
                    self._state_id(table, load_id),
                    str(table),
                    load_id,
                    status,
                    json.dumps(saved),
                    json.dumps(dropped),
                    json.dumps(decision),
                ),
            )

    def set_table_state_status(
        self, conn: Any, table: TableRef, load_id: str, status: str, dropped: list[str] | None
    ) -> None:
        with _cursor(conn) as cur:
            cur.execute(
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
        with _cursor(conn) as cur:
            cur.execute(
                f"ALTER TABLE {quote_table(table)} "
                f"DROP INDEX {quote_identifier(index['name'], 'index name')}"
            )

    def drop_foreign_key(self, conn: Any, fk: dict[str, Any]) -> None:
        owner = TableRef(name=fk["table"], schema=fk["schema"])
        with _cursor(conn) as cur:
            cur.execute(
                f"ALTER TABLE {quote_table(owner)} "
                f"DROP FOREIGN KEY {quote_identifier(fk['name'], 'constraint name')}"
            )

    def create_indexes(
        self,
        conn: Any,
        table: TableRef,
        indexes: list[dict[str, Any]],
        maintenance_work_mem: str,
        *,
        concurrent_sessions: int = 1,
    ) -> None:
        """One ``ALTER TABLE ... ADD KEY ..., ADD KEY ...`` for all (InnoDB reads and sorts the
        table once), FULLTEXT/SPATIAL keys one statement each (InnoDB builds those alone).
        The key lines are the server's own ``SHOW CREATE TABLE`` text, replayed as captured.
        ``maintenance_work_mem`` has no MySQL counterpart settable per session
        (``innodb_sort_buffer_size`` is read-only); it is ignored."""
        prefix = f"ALTER TABLE {quote_table(table)} ADD "
        lines: list[str] = []
        alone: list[str] = []
        for index in indexes:
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
        """Re-added with ``foreign_key_checks = 0`` for the statement, as the load ran: InnoDB then
        adds it in place without a table copy, and without re-checking existing rows."""
        with _cursor(conn) as cur:
            cur.execute("SELECT @@SESSION.foreign_key_checks")
            checks = int(cur.fetchone()[0])
            cur.execute("SET SESSION foreign_key_checks = 0")
            try:
                cur.execute(fk["definition"])
            finally:
                cur.execute("SET SESSION foreign_key_checks = %s", (checks,))

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
            with _cursor(conn) as cur:
                cur.execute(
                    f"SELECT {cols}, COUNT(*) FROM {quote_table(table)} "  # noqa: S608 (quoted)
                    f"GROUP BY {cols} HAVING COUNT(*) > 1 LIMIT {int(limit)}"
                )
                rows = cur.fetchall()
            conn.commit()
            sample += [
                f"({', '.join(columns)})=({', '.join(map(str, r[:-1]))}) x{r[-1]}" for r in rows
            ]
        return sample

    def analyze(self, conn: Any, table: TableRef) -> None:
        with _cursor(conn) as cur:
            cur.execute(f"ANALYZE TABLE {quote_table(table)}")
            cur.fetchall()
        conn.commit()

    def checkpoint(self, conn: Any) -> str:
        """A documented no-op: InnoDB checkpoints continuously (fuzzy checkpointing) and has no
        statement that forces a full one; the redo log keeps committed loads durable."""
        return "no-op: InnoDB checkpoints continuously and has no CHECKPOINT statement"

    # -- pre-flight reads ---------------------------------------------------------------------------
    def server_facts(self, conn: Any) -> ServerFacts:
        """Version, ``local_infile``, doublewrite and, on Aurora MySQL, the role ``LOAD DATA FROM
        S3`` uses (``None`` when the server has no such variables, i.e. is not Aurora)."""
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

    # -- server settings and bulk-mode leases ---------------------------------------------------
    # SET GLOBAL is not persisted: a server restart also brings the configured values back.
    @contextmanager
    def bulk_mode_lock(self, conn: Any) -> Iterator[None]:
        if _scalar(conn, "SELECT GET_LOCK(%s, 60)", (BULK_MODE_LOCK,)) != 1:
            raise BulkModeStateError("another bulk-mode enter/exit held the server lock for 60 s")
        try:
            yield
        finally:
            _scalar(conn, "SELECT RELEASE_LOCK(%s)", (BULK_MODE_LOCK,))

    def bulk_mode_leases(self, conn: Any) -> list[tuple[str, str, float]]:
        with _cursor(conn) as cur:
            cur.execute(
                "SELECT `token`, `holder`, `expires_at` "  # noqa: S608 (quoted)
                f"FROM {self._state_table(conn, 'bulkload_bulk_mode_leases')}"
            )
            return [(str(r[0]), str(r[1]), float(r[2])) for r in cur.fetchall()]

    def put_bulk_mode_lease(self, conn: Any, token: str, holder: str, expires_at: float) -> None:
        with _cursor(conn) as cur:
            cur.execute(
                f"INSERT INTO {self._state_table(conn, 'bulkload_bulk_mode_leases')} "  # noqa: S608 (quoted)
                "(`token`, `holder`, `expires_at`) VALUES (%s, %s, %s) "
                "ON DUPLICATE KEY UPDATE `expires_at` = VALUES(`expires_at`)",
                (token, holder[:512], expires_at),
            )

    def delete_bulk_mode_leases(self, conn: Any, tokens: list[str]) -> None:
        with _cursor(conn) as cur:
            for token in tokens:
                cur.execute(
                    f"DELETE FROM {self._state_table(conn, 'bulkload_bulk_mode_leases')} "  # noqa: S608 (quoted)
                    "WHERE `token` = %s",
                    (token,),
                )

    def saved_server_settings(self, conn: Any) -> list[SavedSetting]:
        with _cursor(conn) as cur:
            cur.execute(
                "SELECT `name`, `original`, `position` "  # noqa: S608 (quoted)
                f"FROM {self._state_table(conn, 'bulkload_bulk_mode_settings')} "
                "ORDER BY `position`"
            )
            return [
                SavedSetting(str(r[0]), None if r[1] is None else str(r[1]), int(r[2]))
                for r in cur.fetchall()
            ]

    def save_server_setting(self, conn: Any, name: str, position: int) -> None:
        original = self.show_server_setting(conn, name)
        with _cursor(conn) as cur:
            cur.execute(
                f"INSERT IGNORE INTO {self._state_table(conn, 'bulkload_bulk_mode_settings')} "  # noqa: S608 (quoted)
                "(`name`, `original`, `position`) VALUES (%s, %s, %s)",
                (name, original, position),
            )

    def forget_saved_server_settings(self, conn: Any) -> None:
        with _cursor(conn) as cur:
            cur.execute(f"DELETE FROM {self._state_table(conn, 'bulkload_bulk_mode_settings')}")  # noqa: S608 (quoted)

    def check_server_setting(self, conn: Any, name: str) -> None:
        import MySQLdb

        variable = system_variable(name)
        try:
            _scalar(conn, f"SELECT @@GLOBAL.{variable}")
        except MySQLdb.OperationalError as exc:
            if exc.args and exc.args[0] == _ER_UNKNOWN_SYSTEM_VARIABLE:
                raise BulkModeRefusedError(f"MySQL has no system variable {name!r}") from exc
            raise
        try:  # a read-only variable is refused on SET; probe by setting it to its own value
            _scalar(conn, f"SET GLOBAL {variable} = @@GLOBAL.{variable}")
        except MySQLdb.OperationalError as exc:
            if exc.args and exc.args[0] == _ER_READ_ONLY_VARIABLE:
                raise BulkModeRefusedError(
                    f"MySQL variable {name} is read-only: it changes only with a restart, which "
                    "bulk mode never does on a self-managed server"
                ) from exc
            raise

    def set_server_setting(self, conn: Any, name: str, value: str) -> None:
        _scalar(conn, f"SET GLOBAL {system_variable(name)} = %s", (system_variable_value(value),))

    def restore_server_setting(self, conn: Any, saved: SavedSetting) -> None:
        if saved.original is not None:
            self.set_server_setting(conn, saved.name, saved.original)

    def apply_server_settings(self, conn: Any) -> None:
        """SET GLOBAL takes effect at once for new sessions; nothing to wait for."""

    def show_server_setting(self, conn: Any, name: str) -> str:
        return str(_scalar(conn, f"SELECT @@GLOBAL.{system_variable(name)}"))


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
    """Constraint name -> its ``CONSTRAINT ... FOREIGN KEY ...`` line from ``SHOW CREATE TABLE``
    (an unqualified referenced table is in the owner table's database, as MySQL reads it)."""
    lines: dict[str, str] = {}
    for raw in create_sql.splitlines()[1:]:
        m = _FOREIGN_KEY_LINE_RE.match(raw)
        if m:
            lines[m.group("name")[1:-1].replace("``", "`")] = m.group("line")
    return lines


# -- the FIFO writer ---------------------------------------------------------------------------------
class _FifoWriter(threading.Thread):
    """Copies a :class:`ChunkStream` into a FIFO that ``LOAD DATA LOCAL INFILE`` reads.

    Memory: one read buffer. Errors are kept in :attr:`error` for the loading thread.
    """

    def __init__(self, path: str, stream: ChunkStream) -> None:
        super().__init__(name="bulkload-fifo-writer", daemon=True)
        self.path = path
        self.stream = stream
        self.error: BaseException | None = None
        self._stop_event = threading.Event()

    def run(self) -> None:
        try:
            fd = os.open(self.path, os.O_WRONLY)  # blocks until the reader (or finish()) opens
        except OSError as exc:
            if not self._stop_event.is_set():
                self.error = exc
            return
        try:
            for block in self.stream:
                if self._stop_event.is_set():
                    return
                view = memoryview(block)
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
        except BrokenPipeError:
            if not self._stop_event.is_set():
                self.error = ChunkLoadError(
                    self.stream.source, "the database client stopped reading the chunk"
                )
        except BaseException as exc:  # kept for the loading thread, which re-raises it
            self.error = exc
        finally:
            os.close(fd)

    def finish(self, timeout: float = 60.0) -> None:
        """Make sure the thread ends, whatever the reader did.

        Opening the FIFO's read end releases a writer blocked in ``open``; draining it releases
        one blocked in ``write`` (if the client library stopped reading but kept the file open).
        The writer sees the stop flag before its next block and returns.
        """
        if not self.is_alive():
            return
        self._stop_event.set()
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            self.join(timeout)
            return
        deadline = time.monotonic() + timeout
        try:
            while self.is_alive() and time.monotonic() < deadline:
                with suppress(BlockingIOError):
                    os.read(fd, 1 << 16)
                self.join(0.02)
        finally:
            os.close(fd)
        if self.is_alive():
            log.error("the FIFO writer for %s did not stop; leaving it behind", self.path)


# -- pre-flight reads -------------------------------------------------------------------------------
#: the global variables pre-flight advice reads; the Aurora ones exist only on Aurora MySQL
PREFLIGHT_VARIABLES = (
    "local_infile",
    "innodb_doublewrite",
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
    extra = {"aurora_version": variables["aurora_version"]} if "aurora_version" in variables else {}
    return ServerFacts(
        engine=engine,
        version=version,
        local_infile=_flag(variables.get("local_infile")),
        s3_role=s3_role,
        innodb_doublewrite=_flag(variables.get("innodb_doublewrite")),
        extra=extra,
    )


# -- small helpers -----------------------------------------------------------------------------------
@contextmanager
def _cursor(conn: Any) -> Iterator[Any]:
    cur = conn.cursor()
    try:
        yield cur
    finally:
        cur.close()


def _scalar(conn: Any, sql: str, params: Sequence[Any] | None = None) -> Any:
    with _cursor(conn) as cur:
        cur.execute(sql, params)
        row = cur.fetchone()
    return None if row is None else row[0]


def _dict_rows(cur: Any, sql: str, params: Sequence[Any]) -> list[dict[str, Any]]:
    cur.execute(sql, params)
    names = [d[0].upper() for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def _driver_error(source: str, exc: Exception, fmt: FileFormat) -> ChunkLoadError:
    if isinstance(exc, ChunkLoadError):
        return exc
    args: tuple[Any, ...] = tuple(getattr(exc, "args", ()))
    if len(args) >= 2 and isinstance(args[0], int):
        warning = parse_warning(args[0], str(args[1]))
        return ChunkLoadError(
            source,
            f"the server refused the load: {warning.reason}",
            line=None if warning.row is None else warning.row + (1 if fmt.header else 0),
            column=warning.column,
        )
    return ChunkLoadError(source, f"the load failed: {exc}")
