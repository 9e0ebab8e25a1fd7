from __future__ import annotations

import csv
import gzip
import io
from pathlib import Path

import pytest

from airflow_bulkload.exceptions import InvalidFileFormatError
from airflow_bulkload.staging.manifest import FileFormat
from airflow_bulkload.staging.normalize import InputFormatError, normalize


def _read_staged(path: Path) -> list[list[str | None]]:
    """Rows of a staged file; an unquoted NULL becomes None (csv can't tell, so parse by hand)."""
    rows: list[list[str | None]] = []
    for fields, raw in zip(
        csv.reader(io.StringIO(path.read_text("utf-8"), newline="")),
        _raw_fields(path.read_text("utf-8")),
        strict=True,
    ):
        rows.append([None if r == "NULL" else f for f, r in zip(fields, raw, strict=True)])
    return rows


def _raw_fields(text: str) -> list[list[str]]:
    """Fields as written (quotes kept), to tell "NULL" (text) from NULL."""
    records: list[list[str]] = []
    fields: list[str] = []
    current = ""
    quoted = False
    for char in text:
        if char == '"':
            quoted = not quoted
            current += char
        elif char == "," and not quoted:
            fields.append(current)
            current = ""
        elif char == "\n" and not quoted:
            fields.append(current)
            records.append(fields)
            fields, current = [], ""
        else:
            current += char
    return records


def test_values_survive_as_text_and_null_is_distinct_from_empty(tmp_path: Path) -> None:
    source = tmp_path / "in.csv"
    source.write_bytes(
        b"id,v,w\r\n"
        b'007,"a,b",\r\n'  # leading zeros kept: no type inference
        b'2,"",x\r\n'  # quoted empty = empty string, unquoted empty = NULL
        b'3,"multi\nline","NULL"\r\n'  # the text NULL
        b'4,\xc3\xa9t\xc3\xa9,"q""uote"\r\n'
    )
    out = tmp_path / "out.csv"
    result = normalize([source], out, FileFormat(header=True), temp_dir=tmp_path)
    assert result.columns == ["id", "v", "w"]
    assert result.rows == 4
    assert _read_staged(out) == [
        ["007", "a,b", None],
        ["2", "", "x"],
        ["3", "multi\nline", "NULL"],
        ["4", "été", 'q"uote'],
    ]


def test_sort_by_typed_composite_key_across_files(tmp_path: Path) -> None:
    first = tmp_path / "a.csv.gz"
    first.write_bytes(gzip.compress(b"10\tb\tx\n9\ta\ty\n"))
    second = tmp_path / "b.csv"
    second.write_bytes(b"10\ta\tz\n100\ta\tw\n")
    out = tmp_path / "out.csv"
    normalize(
        [first, second],
        out,
        FileFormat(delimiter="\t"),
        columns=["n", "s", "v"],
        sort_key=["n", "s"],
        sort_types=["BIGINT", "VARCHAR"],
        temp_dir=tmp_path,
    )
    assert [r[:2] for r in _read_staged(out)] == [
        ["9", "a"],
        ["10", "a"],
        ["10", "b"],
        ["100", "a"],
    ]


def test_a_key_that_is_not_its_type_is_reported_with_its_file(tmp_path: Path) -> None:
    source = tmp_path / "in.csv"
    source.write_bytes(b"id\n1\nabc\n")
    with pytest.raises(InputFormatError, match=r"in\.csv.*'id' holds 'abc'.*BIGINT"):
        normalize(
            [source],
            tmp_path / "out.csv",
            FileFormat(header=True),
            sort_key=["id"],
            sort_types=["BIGINT"],
            temp_dir=tmp_path,
            path_names={str(source): "in.csv"},
        )


def test_ragged_rows_are_an_error_not_silently_padded(tmp_path: Path) -> None:
    source = tmp_path / "in.csv"
    source.write_bytes(b"1,2,3\n4,5\n")
    with pytest.raises(InputFormatError, match="cannot read"):
        normalize([source], tmp_path / "out.csv", FileFormat(), temp_dir=tmp_path)


def test_unsupported_input_options_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidFileFormatError, match=r"not format 'text'"):
        normalize([tmp_path], tmp_path / "o", FileFormat(format="text"), temp_dir=tmp_path)
    with pytest.raises(InvalidFileFormatError, match="encoding"):
        normalize([tmp_path], tmp_path / "o", FileFormat(encoding="SJIS"), temp_dir=tmp_path)


def test_latin1_input_is_written_as_utf8(tmp_path: Path) -> None:
    source = tmp_path / "in.csv"
    source.write_bytes("1,caf\u00e9\n".encode("latin-1"))
    out = tmp_path / "out.csv"
    normalize([source], out, FileFormat(encoding="LATIN1"), temp_dir=tmp_path)
    assert out.read_text("utf-8") == "1,caf\u00e9\n"
