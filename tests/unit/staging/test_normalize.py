from __future__ import annotations

import csv
import gzip
import io
from pathlib import Path

import pytest

from airflow_bulkload.exceptions import InvalidFileFormatError
from airflow_bulkload.staging.manifest import FileFormat
from airflow_bulkload.staging.normalize import InputFormatError, normalize
from tests.support.staging import long_quoted_value_csv


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


@pytest.mark.timeout(60)
@pytest.mark.parametrize("attempt", range(4))
def test_a_read_duckdb_aborts_fails_and_never_hangs(tmp_path: Path, attempt: int) -> None:
    """DuckDB 2.0 deadlocked aborting such a read's COPY ... TO in about half the runs on two
    cores (AsyncFileWriter::AbortWrite) until staging turned its asynchronous I/O threads
    off: the task hung instead of failing."""
    source = tmp_path / "in.csv"
    source.write_bytes(long_quoted_value_csv()[1])
    with pytest.raises(InputFormatError, match="Parallel CSV Reader"):
        normalize([source], tmp_path / "out.csv", FileFormat(header=True), temp_dir=tmp_path)


@pytest.mark.xfail(
    strict=True,
    reason="known limit (DuckDB 2.0): its parallel CSV reader refuses a valid quoted value of "
    "many lines longer than a thread's share of the file; its single-threaded reader reads it "
    "but takes a quote that never closes for the end of the input without an error, so "
    "staging does not fall back to it (load such input staged per smaller file, or direct)",
)
def test_a_valid_quoted_value_of_many_lines_near_the_record_limit_stages(tmp_path: Path) -> None:
    source = tmp_path / "in.csv"
    source.write_bytes(long_quoted_value_csv()[1])
    result = normalize([source], tmp_path / "out.csv", FileFormat(header=True), temp_dir=tmp_path)
    assert result.rows == 1000


@pytest.mark.xfail(
    strict=True,
    reason="known limit (DuckDB 2.0): with max_errors its parallel CSV reader, which sets bad "
    "records aside, reads the lines of a quoted value longer than a thread's share of the file "
    "as records, without an error (1948 rows for 1000)",
)
def test_setting_records_aside_never_takes_a_quoted_values_lines_for_records(
    tmp_path: Path,
) -> None:
    source = tmp_path / "in.csv"
    source.write_bytes(long_quoted_value_csv()[1])
    result = normalize(
        [source],
        tmp_path / "out.csv",
        FileFormat(header=True),
        temp_dir=tmp_path,
        max_errors=10,
        rejects_path=tmp_path / "rejects.csv",
    )
    assert result.rows == 1000
