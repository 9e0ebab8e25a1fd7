"""MySQL quoting: the one way identifiers and literals enter SQL text.

Safety rules:

* Identifiers go through :func:`quote_identifier` only (backticks, checked).
* Values the driver can bind are ``%s`` parameters. Clauses MySQL only accepts literals in
  (``LOAD DATA ... INFILE '...'``, ``FIELDS TERMINATED BY ...``, ``COMMENT '...'``) use
  :func:`string_literal` or :func:`bytes_literal`, which follow a strict rule of their own that is
  correct whatever the session's ``sql_mode`` (``NO_BACKSLASH_ESCAPES``, ``ANSI_QUOTES``).
"""

from __future__ import annotations

import re

from airflow_bulkload.catalog import TableRef
from airflow_bulkload.exceptions import InvalidFileFormatError, InvalidIdentifierError

MAX_IDENTIFIER_LENGTH = 64

_SUPPLEMENTARY = re.compile("[\U00010000-\U0010ffff]")

_CONTROL = re.compile("[\x00-\x1f\x7f]")


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


def with_parameters(text: str) -> str:
    """SQL text (quoted names included) for a statement that also binds ``%s`` parameters.

    The driver formats such a statement with ``%``: a ``%`` a quoted name holds is doubled.
    """
    return text.replace("%", "%%")


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
    r"""A literal for ``FIELDS TERMINATED BY`` / ``ENCLOSED BY`` / ``ESCAPED BY`` / ``NULLIF``.

    Plain ``'x'`` when every character is printable ASCII other than ``'`` and ``\`` (readable,
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
