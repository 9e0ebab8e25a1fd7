"""Finding an error's record in a chunk by the line the engine names."""

from __future__ import annotations

import io

import pytest

from airflow_bulkload.staging.manifest import FileFormat
from airflow_bulkload.staging.origin import read_record

CSV = FileFormat()


def record_at(text: str, line: int, fmt: FileFormat = CSV) -> list[str] | None:
    return read_record(io.BytesIO(text.encode()), fmt, line, counts_lines=True)


@pytest.mark.parametrize(
    ("text", "line", "expected"),
    [
        # COPY learns the line end where the first line ends: a line feed inside the first
        # record of an LF stream is not counted, a carriage return is
        ('1,"a\nb"\n2,b\nz,c\n', 2, ["2", "b"]),
        ('1,"a\nb"\n2,b\nz,c\n', 3, ["z", "c"]),
        ('1,"a\r\nb"\r\n2,b\r\nz,c\r\n', 4, ["z", "c"]),
        # after the first line, the stream's own line end inside quotes is counted
        ('1,a\n2,"x\ny"\nz,c\n', 4, ["z", "c"]),
        ('1,a\n2,"x\ny"\nz,c\n', 3, ["2", "x\ny"]),
        ('1,a\r\n2,"x\r\ny"\r\nz,c\r\n', 4, ["z", "c"]),
        ("1,a\n2,b\n", 5, None),
    ],
)
def test_the_record_on_copys_line(text: str, line: int, expected: list[str] | None) -> None:
    assert record_at(text, line) == expected


def test_a_header_teaches_copy_the_line_end_before_the_first_record() -> None:
    text = 'id,note\n1,"a\nb"\n2,b\nz,c\n'
    assert record_at(text, 5, FileFormat(header=True)) == ["z", "c"]


def test_record_numbers_count_records_not_lines() -> None:
    text = '1,"a\nb"\n2,b\nz,c\n'
    assert read_record(io.BytesIO(text.encode()), CSV, 3, counts_lines=False) == ["z", "c"]
