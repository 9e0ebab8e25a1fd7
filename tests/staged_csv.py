"""Test-side reader and writer for CSV, independent of the code under test.

``parse_staged`` reads the staged format (unquoted ``NULL`` = None, quoted ``"NULL"`` = text);
``write_csv`` writes input files where None is an unquoted empty field and every value is quoted.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterable, Sequence
from pathlib import Path

Row = tuple[str | None, ...]


def parse_staged(text: str, *, null: str = "NULL", delimiter: str = ",") -> list[Row]:
    rows: list[Row] = []
    fields: list[str | None] = []
    buf: list[str] = []
    quoted = was_quoted = False
    i = 0

    def end_field() -> None:
        value = "".join(buf)
        fields.append(None if not was_quoted and value == null else value)
        buf.clear()

    while i < len(text):
        char = text[i]
        if quoted:
            if char == '"':
                if text[i + 1 : i + 2] == '"':
                    buf.append('"')
                    i += 2
                    continue
                quoted = False
            else:
                buf.append(char)
        elif char == '"':
            quoted = was_quoted = True
        elif char == delimiter:
            end_field()
            was_quoted = False
        elif char == "\n":
            end_field()
            rows.append(tuple(fields))
            fields = []
            was_quoted = False
        else:
            buf.append(char)
        i += 1
    assert not buf and not fields and not quoted, "staged text does not end with a record end"
    return rows


def csv_text(
    rows: Iterable[Sequence[str | None]],
    *,
    header: Sequence[str] | None = None,
    line_end: str = "\r\n",
    delimiter: str = ",",
) -> str:
    def cell(value: str | None) -> str:
        return "" if value is None else '"' + value.replace('"', '""') + '"'

    lines = [delimiter.join(header)] if header else []
    lines += [delimiter.join(cell(v) for v in row) for row in rows]
    return "".join(line + line_end for line in lines)


def write_csv(path: Path, rows: Iterable[Sequence[str | None]], **options: object) -> Path:
    data = csv_text(rows, **options).encode("utf-8")  # type: ignore[arg-type]
    path.write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)
    return path
